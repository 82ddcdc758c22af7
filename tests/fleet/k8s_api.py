"""A Kubernetes API server stand-in on 127.0.0.1 that replays recorded pod list and watch responses, in
order, to the real `kubernetes` client, and answers pod port-forwards (`k8s_portforward`) by relaying to
real servers on 127.0.0.1; and a kubeconfig pointing at it."""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import yaml

from tests.fleet.k8s_portforward import ForwardSession, refuse, upgrade

PORTFORWARD = re.compile(r"/api/v1/namespaces/(?P<namespace>[^/]+)/pods/(?P<pod>[^/]+)/portforward")
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
    release: threading.Event = field(default_factory=threading.Event)  # recorded watches wait for it
    upstream: dict[str, dict[int, int]] = field(default_factory=dict)  # pod: its port: 127.0.0.1 port
    forbidden: set[str] = field(default_factory=set)  # pods whose port-forward the user may not create
    # Pods whose port-forward upgrade is accepted and never answered, as behind a load balancer that lost
    # its backend or a network dropping packets: what a deadline on opening a forward is for.
    stalled: set[str] = field(default_factory=set)
    stalls: list[str] = field(default_factory=list)  # the pod of every upgrade left unanswered
    upgrades: list[tuple[str, list[int], str | None, str]] = field(default_factory=list)  # pod, ports, auth
    refusals: list[str] = field(default_factory=list)  # the pod of every port-forward refused (403 / 404)
    forwards: list[ForwardSession] = field(default_factory=list)  # every port-forward connection, in order


def _handler(script: Script) -> type[BaseHTTPRequestHandler]:
    """A request handler serving script's next list or watch response."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # bodies chunked, as the API server sends a watch

        def do_GET(self) -> None:
            url = urlparse(self.path)
            query = parse_qs(url.query)
            forward = PORTFORWARD.fullmatch(url.path)
            if forward:
                self._portforward(forward["namespace"], forward["pod"], query)
                return
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
            if watching:
                script.release.wait(30)
            body = (RECORDED / queue.pop(0)).read_bytes()
            for line in body.splitlines(keepends=True) if watching else [body]:
                self._chunk(line)
            self._chunk(b"")  # the end: a list is complete, a watch timed out

        def _portforward(self, namespace: str, pod: str, query: dict[str, list[str]]) -> None:
            """The port-forward upgrade (see k8s_portforward), relaying to the pod's upstream ports."""
            self.close_connection = True
            if pod in script.stalled:
                script.stalls.append(pod)
                script.closed.wait(30)
                return
            if pod in script.forbidden or pod not in script.upstream:
                script.refusals.append(pod)
                refuse(self, namespace, pod, pod in script.forbidden)
                return
            protocol = upgrade(self)
            if protocol is None:
                return
            ports = [int(p) for value in query.get("ports", []) for p in value.split(",")]
            script.upgrades.append((pod, ports, self.headers.get("Authorization"), protocol))
            session = ForwardSession(self, pod, ports, script.upstream[pod])
            script.forwards.append(session)
            session.run()

        def _chunk(self, data: bytes) -> None:
            """One chunk of a chunked body (an empty one ends it)."""
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def log_message(self, format: str, *args: object) -> None:
            """Quiet."""

    return Handler


@contextlib.contextmanager
def recorded_api(tmp_path: Path, lists: list[str], watches: list[str], hold_watches: bool = False,
                 upstream: dict[str, dict[int, int]] | None = None,
                 forbidden: tuple[str, ...] = ()) -> Iterator[tuple[Script, Path]]:
    """Serve the named recordings (the watches only once `script.release` is set, with hold_watches) and
    port-forwards to the pods' upstream ports; yields the script and a kubeconfig. Always shut down."""
    script = Script(list(lists), list(watches), upstream=dict(upstream or {}), forbidden=set(forbidden))
    if not hold_watches:
        script.release.set()
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
        script.release.set()
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
