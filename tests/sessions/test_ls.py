"""`ls` against servers that take connections and never reply: each asked at once, rows aligned."""

from __future__ import annotations

import selectors
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest

from tests.engine_standins import StandIn, _models
from triton_ge_console.cli import main
from triton_ge_console.session_states import READY
from triton_ge_console.sessions.lifecycle import attached_gone
from triton_ge_console.sessions.server.registry import Registry, SessionRecord


@dataclass
class Hung:
    """A server that takes every connection and never replies (a stopped process keeps its port so), and
    counts how many of its connections were open at once."""

    listener: socket.socket
    most_open: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    @property
    def url(self) -> str:
        """http://127.0.0.1:PORT."""
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def serve(self) -> None:
        """Accept, read and hold connections; forget one when its client closes it."""
        selector = selectors.DefaultSelector()
        selector.register(self.listener, selectors.EVENT_READ)
        open_ones = 0
        while not self.stop.is_set():
            for key, _ in selector.select(0.05):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                if sock is self.listener:
                    selector.register(self.listener.accept()[0], selectors.EVENT_READ)
                    open_ones += 1
                    self.most_open = max(self.most_open, open_ones)
                elif not sock.recv(65536):
                    selector.unregister(sock)
                    sock.close()
                    open_ones -= 1
        for key in list(selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]


@contextmanager
def hung_server() -> Iterator[Hung]:
    """A Hung server on a free loopback port, served on a thread until the block ends."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    hung = Hung(listener)
    thread = threading.Thread(target=hung.serve, daemon=True)
    thread.start()
    try:
        yield hung
    finally:
        hung.stop.set()
        thread.join(5)


def _attached(name: str, url: str, engine: str = "triton") -> SessionRecord:
    """An attached session's record, saved as `attach` saves one."""
    record = SessionRecord(name=name, pid=None, started_at=time.time(), http_url=url, grpc_url=None,
                           metrics_url=None, repository=None, spec=None, backend_dir=None, log_path=None,
                           token_ref=None, attached=True, session_dir=None, state=READY, engine=engine,
                           token_header="Authorization" if engine != "triton" else "x-ge-console-token")
    Registry().save(record)
    return record


def test_ls_asks_hung_servers_at_once_and_aligns_not_answering(capsys: pytest.CaptureFixture[str]) -> None:
    with hung_server() as hung:
        for name in ("a", "b", "c"):
            _attached(name, hung.url)
        _attached("v", hung.url, engine="vllm")
        assert main(["ls"]) == 0
        assert hung.most_open == 4  # all four asked at once: N hung servers cost one timeout, not N
    header, *rows = capsys.readouterr().out.splitlines()
    states = {row.split()[0]: row.split()[1] for row in rows}
    assert states == {"a": "not", "b": "not", "c": "not", "v": "dead"}
    assert {row.index("http://") for row in rows} == {header.index("HTTP")}, rows


def test_attached_gone_waits_an_engine_as_long_as_it_is_told() -> None:
    """A vLLM answering in 2.5 s is there when given 5 s, gone when given 0.5 s."""
    release = threading.Event()

    def slow() -> tuple[int, str, bytes]:
        release.wait(2.5)  # the server's own slowness
        return _models(["m"], "vllm")()

    server = StandIn({"/health": lambda: (200, "application/json", b""), "/v1/models": slow})
    try:
        record = _attached("slow", server.url, engine="vllm")
        assert not attached_gone(record, timeout=5.0)
        assert attached_gone(record, timeout=0.5)
    finally:
        release.set()
        server.close()
