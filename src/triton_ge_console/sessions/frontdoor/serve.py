"""Running the front door for a session: in the foreground (`ge-console openai`) or on a thread of its own
(a notebook's `start_openai`), with uvicorn on a loopback address unless the session is token-locked."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triton_ge_console.errors import GeConsoleError
from triton_ge_console.sessions.frontdoor.catalog import Catalog
from triton_ge_console.sessions.frontdoor.engine import Engine
from triton_ge_console.sessions.server.access import session_reach
from triton_ge_console.sessions.server.process import free_port
from triton_ge_console.sessions.server.registry import SessionRecord, require_running
from triton_ge_console.triton_terms import host_port, is_loopback


class DoorError(GeConsoleError, ValueError):
    """A front door that cannot be opened as asked (no gRPC endpoint, an exposed address without a token)."""


@dataclass(frozen=True)
class DoorPlan:
    """Where the front door listens and what it serves."""

    session: str
    host: str
    port: int
    http_url: str
    grpc_url: str
    token: str | None  # the session's: clients send it as Authorization: Bearer, Triton as its header
    http_headers: dict[str, str]
    grpc_headers: dict[str, str]
    repository: Path | None
    chat_template: Path | None = None

    @property
    def url(self) -> str:
        """The API's base URL, as OpenAI clients take it."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{'127.0.0.1' if self.host in ('0.0.0.0', '::') else host}:{self.port}/v1"


def plan_door(record: SessionRecord, host: str = "127.0.0.1", port: int | None = None,
              chat_template: Path | None = None) -> DoorPlan:
    """The plan for a running session; DoorError when it cannot serve as asked."""
    require_running(record)
    reach = session_reach(record)
    if not record.grpc_url:
        raise DoorError(f"session {record.name!r} has no gRPC endpoint (attach it again with --grpc-url)")
    if not is_loopback(host) and not reach.token:
        raise DoorError(f"--host {host}: an address off loopback needs a token-locked session "
                        f"(ge-console up ... --token), whose token the front door then asks of every client")
    return DoorPlan(record.name, host, port or free_port(host),
                    record.http_url, host_port(record.grpc_url), reach.token, reach.headers("http"),
                    reach.headers("grpc"), record.repository if reach.local else None, chat_template)


def _server(plan: DoorPlan) -> tuple[Any, Catalog, Engine]:
    """The uvicorn server over the app, and what it holds open."""
    import uvicorn

    from triton_ge_console.sessions.frontdoor.app import build_app

    catalog = Catalog(plan.http_url, plan.http_headers, plan.repository, plan.chat_template)
    engine = Engine(plan.grpc_url, plan.grpc_headers)
    config = uvicorn.Config(build_app(catalog, engine, plan.token), host=plan.host, port=plan.port,
                            log_level="warning", access_log=False, lifespan="off")
    return uvicorn.Server(config), catalog, engine


def serve_door(plan: DoorPlan) -> None:
    """Serve in the foreground until interrupted (uvicorn's own Ctrl-C handling)."""
    server, catalog, engine = _server(plan)
    try:
        server.run()
    finally:
        engine.close()
        catalog.close()


class RunningDoor:
    """A front door serving on a thread of its own; stop() ends it."""

    def __init__(self, plan: DoorPlan) -> None:
        self.plan = plan
        self.url = plan.url
        self._server, self._catalog, self._engine = _server(plan)
        self._server.config.install_signal_handlers = False  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._server.run, name="frontdoor", daemon=True)

    def start(self, timeout: float = 30.0) -> RunningDoor:
        """Start it and wait until it listens."""
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        if not self._server.started:
            self.stop()
            raise DoorError(f"the front door could not listen on {self.plan.host}:{self.plan.port}")
        return self

    def stop(self) -> None:
        """Stop serving, cancel what still generates, close the connections."""
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._engine.close()
        self._catalog.close()


def start_openai(record: SessionRecord, host: str = "127.0.0.1", port: int | None = None,
                 chat_template: Path | None = None) -> RunningDoor:
    """The front door for a session, serving on its own thread (for notebooks): `.url` is the base URL
    OpenAI clients take, `.stop()` ends it."""
    return RunningDoor(plan_door(record, host, port, chat_template)).start()
