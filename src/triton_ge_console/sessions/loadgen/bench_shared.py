"""What the bench verbs' handlers share (plain, generate and --vs-direct): the usage error, the endpoint a
session or --url names, and Ctrl-C as a stop. Only the standard library at import: the CLI starts fast."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

from triton_ge_console.arg_types import UsageError

__all__ = ["UsageError", "resolve_endpoint", "stop_on_interrupt"]


@contextlib.contextmanager
def stop_on_interrupt(stop: threading.Event) -> Iterator[None]:
    """Ctrl-C ends the run within ~0.1 s, keeping (and printing) the steps already measured."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def resolve_endpoint(session: str | None, url: str | None, protocol: str,
                     model: str | None = None) -> tuple[str, dict[str, str]]:
    """(host:port, headers) for the protocol: --url as given, else the session's (the one serving model, of
    several running) address and token."""
    if url:
        return url, {}
    from triton_ge_console.sessions.server import registry
    from triton_ge_console.sessions.server.access import token_headers

    try:
        record = registry.require_running(registry.Registry().resolve(session, running=True, model=model))
    except registry.SessionStopped:
        raise
    except (registry.SessionNotFound, registry.RegistryError) as exc:
        raise UsageError(f"{exc}; or give --url HOST:PORT") from None
    address = record.grpc_url if protocol == "grpc" else record.http_url
    if not address:
        raise UsageError(f"session {record.name!r} has no {protocol} address; try --protocol http")
    return address, token_headers(record, protocol)
