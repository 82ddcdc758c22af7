"""A Kubernetes API server stand-in on 127.0.0.1 that replays recorded pod list and watch responses, in
order, to the real `kubernetes` client; and a kubeconfig pointing at it."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import yaml

RECORDED = Path(__file__).resolve().parent / "recorded"
TOKEN = "recorded-test-token"


@dataclass
class Script:
    """The responses still to serve, and every request seen (path, query, Authorization header)."""

    lists: list[str]
    watches: list[str]
    requests: list[tuple[str, dict[str, list[str]], str | None]] = field(default_factory=list)
    closed: threading.Event = field(default_factory=threading.Event)
    idle_watch: threading.Event = field(default_factory=threading.Event)  # a watch waits with nothing to send


def _handler(script: Script) -> type[BaseHTTPRequestHandler]:
    """A request handler serving script's next list or watch response."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # bodies chunked, as the API server sends a watch

        def do_GET(self) -> None:
            url = urlparse(self.path)
            query = parse_qs(url.query)
            script.requests.append((url.path, query, self.headers.get("Authorization")))
            watching = query.get("watch") == ["true"]
            queue = script.watches if watching else script.lists
            if not queue and not watching:
                self.send_error(500, "no recorded response left")
                return
            self.send_response(200)  # a watch's headers come at once, its events as they happen
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.close_connection = True
            if not queue:
                self.wfile.flush()
                script.idle_watch.set()
                script.closed.wait(30)  # an idle watch: nothing happens until the client hangs up
                return
            body = (RECORDED / queue.pop(0)).read_bytes()
            for line in body.splitlines(keepends=True) if watching else [body]:
                self._chunk(line)
            self._chunk(b"")  # the end: a list is complete, a watch timed out

        def _chunk(self, data: bytes) -> None:
            """One chunk of a chunked body (an empty one ends it)."""
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def log_message(self, format: str, *args: object) -> None:
            """Quiet."""

    return Handler


@contextlib.contextmanager
def recorded_api(tmp_path: Path, lists: list[str], watches: list[str]) -> Iterator[tuple[Script, Path]]:
    """Serve the named recordings; yields the script and a kubeconfig for the server. Always shut down."""
    script = Script(list(lists), list(watches))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(script))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(_kubeconfig(f"http://127.0.0.1:{server.server_port}")))
    try:
        yield script, kubeconfig
    finally:
        script.closed.set()
        server.shutdown()
        server.server_close()
        thread.join(10)


def _kubeconfig(server: str) -> dict[str, object]:
    """A kubeconfig with one cluster, one token user and a current context."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "recorded", "cluster": {"server": server}}],
        "users": [{"name": "viewer", "user": {"token": TOKEN}}],
        "contexts": [{"name": "recorded", "context": {"cluster": "recorded", "user": "viewer"}}],
        "current-context": "recorded",
    }


def event_count(name: str) -> int:
    """Events in a recorded watch response."""
    return sum(1 for line in (RECORDED / name).read_text().splitlines() if json.loads(line))
