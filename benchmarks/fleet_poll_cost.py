"""What polling a fleet costs the console per server, at 1, 4 and 16 servers (the fleet row of
console_overhead.py): the console's CPU per server poll, and each poll's wall time, polled the way the
fleet screen polls (fleet.follow.FleetFollower, 8 workers, each server every second).

Two kinds of server: real tritonservers (1 and 4; 16 do not fit this 2-core machine), and replayed ones:
HTTP endpoints in a separate process answering every request with the response a real tritonserver gave
to the same request (recorded through a proxy from one of the real servers), at 1, 4 and 16. A replayed
server costs the console what a real one does (same bodies, same /metrics, kept-alive connections); its
counters do not move, so its rates read 0.
"""

from __future__ import annotations

import base64
import http.client
import http.server
import json
import statistics
import subprocess
import sys
import textwrap
import threading
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

from triton_ge_console.fleet.follow import FleetFollower
from triton_ge_console.sessions.observe.poller import Poller
from triton_ge_console.sessions.observe.snapshot import Endpoints, ServerSnapshot

Recording = dict[str, dict[str, Any]]  # "role METHOD path body" -> {"status", "headers", "body" (base64)}
WORKERS = 8
INTERVAL_S = 1.0


def _key(role: str, method: str, path: str, body: bytes) -> str:
    """How a request is looked up in a recording."""
    return f"{role} {method} {path} {body.decode(errors='replace')}"


class _Proxy(http.server.BaseHTTPRequestHandler):
    """Forwards to the real server and keeps each answer (record mode) or answers from a recording."""

    protocol_version = "HTTP/1.1"  # kept-alive connections, as the poller uses them
    disable_nagle_algorithm = True  # headers and body go in two writes: no delayed-ACK stall between them
    role = ""
    upstream: str | None = None  # host:port in record mode
    recording: ClassVar[Recording] = {}

    def _answer(self) -> None:
        """Any request: forwarded and kept, or answered from the recording (404 when never seen)."""
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        key = _key(self.role, self.command, self.path, body)
        if self.upstream is not None:
            self.recording[key] = _forward(self.upstream, self.command, self.path, body)
        kept = self.recording.get(key)
        status, payload = (kept["status"], base64.b64decode(kept["body"])) if kept else (404, b"{}")
        self.send_response(status)
        self.send_header("Content-Type", kept["type"] if kept else "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = _answer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


def _forward(upstream: str, method: str, path: str, body: bytes) -> dict[str, Any]:
    """One request to the real server; its answer as kept in a recording."""
    host, port = upstream.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request(method, path, body=body or None, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        payload = response.read()
        return {"status": response.status, "type": response.getheader("Content-Type") or "text/plain",
                "body": base64.b64encode(payload).decode()}
    finally:
        conn.close()


def _serve(role: str, upstream: str | None, recording: Recording) -> http.server.ThreadingHTTPServer:
    """A proxy or replay endpoint on a free loopback port, served by a daemon thread."""
    handler = type(f"Proxy_{role}", (_Proxy,), {"role": role, "upstream": upstream, "recording": recording})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def record(http_url: str, metrics_url: str, polls: int = 3) -> Recording:
    """Every request a poller makes to a real server, with the server's answer (the last one kept)."""
    recording: Recording = {}
    http_proxy = _serve("http", urllib.parse.urlsplit(http_url).netloc, recording)
    metrics_proxy = _serve("metrics", urllib.parse.urlsplit(metrics_url).netloc, recording)
    try:
        poller = Poller("record", Endpoints(_url(http_proxy), None, _url(metrics_proxy) + "/metrics"))
        for _ in range(polls):
            snapshot = poller.poll()
            assert snapshot.error is None, snapshot.error
        poller.close()
    finally:
        for server in (http_proxy, metrics_proxy):
            server.shutdown()
            server.server_close()
    return recording


def _url(server: http.server.ThreadingHTTPServer) -> str:
    """http://127.0.0.1:PORT of a served endpoint."""
    return f"http://127.0.0.1:{server.server_address[1]}"


REPLAY_PROCESS = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, sys.argv[3])
    from fleet_poll_cost import _serve, _url
    recording = json.load(open(sys.argv[1]))
    servers = [(_serve("http", None, recording), _serve("metrics", None, recording))
               for _ in range(int(sys.argv[2]))]
    print(json.dumps([[_url(h), _url(m) + "/metrics"] for h, m in servers]), flush=True)
    sys.stdin.read()
""")


@contextmanager
def replayed_servers(recording_path: str, count: int, here: str) -> Iterator[list[tuple[str, str]]]:
    """`count` replayed servers in one child process (their CPU is not the console's); stopped after."""
    process = subprocess.Popen([sys.executable, "-c", REPLAY_PROCESS, recording_path, str(count), here],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        yield [(h, m) for h, m in json.loads(process.stdout.readline())]
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=30)


class _Timed:
    """A poller whose every poll's wall time is kept."""

    def __init__(self, name: str, http_url: str, metrics_url: str) -> None:
        self.name = name
        self.poller = Poller(name, Endpoints(http_url, None, metrics_url))
        self.walls_ms: list[float] = []

    def poll(self) -> ServerSnapshot:
        """The poller's poll, timed."""
        began = time.perf_counter()
        snapshot = self.poller.poll()
        self.walls_ms.append((time.perf_counter() - began) * 1000)
        return snapshot


def measure(endpoints: Sequence[tuple[str, str]], polls: int) -> dict[str, Any]:
    """Poll every server `polls` times, 1 s apart, as the fleet screen does: the console's CPU per server
    poll (this process: pollers, parsing, the follower) and the polls' wall times."""
    timed = [_Timed(f"s{i}", h, m) for i, (h, m) in enumerate(endpoints)]
    errors: list[str] = []

    def deliver(name: str, snapshot: ServerSnapshot) -> None:
        """A failed poll would make the figures meaningless: keep why."""
        if snapshot.error is not None:
            errors.append(f"{name}: {snapshot.error}")

    FleetFollower(timed, interval_s=0.0, max_workers=WORKERS, max_polls=2).run(deliver, threading.Event())
    for t in timed:  # warm-up polls learned the configs; only the measured ones count
        t.walls_ms.clear()
    cpu, wall = time.process_time(), time.perf_counter()
    FleetFollower(timed, interval_s=INTERVAL_S, max_workers=WORKERS, max_polls=polls).run(
        deliver, threading.Event())
    cpu_ms, wall_s = (time.process_time() - cpu) * 1000, time.perf_counter() - wall
    for t in timed:
        t.poller.close()
    if errors:
        raise RuntimeError(f"polls failed: {errors[:3]}")
    walls = sorted(w for t in timed for w in t.walls_ms)
    return {"servers": len(timed), "polls_each": polls,
            "cpu_ms_per_server_poll": cpu_ms / (len(timed) * polls),
            "poll_wall_ms_p50": statistics.median(walls),
            "poll_wall_ms_p95": walls[int(0.95 * (len(walls) - 1))], "elapsed_s": wall_s}


def fleet_rounds(real: Sequence[tuple[str, str]], replayed: Sequence[tuple[str, str]], rounds: int,
                 polls: int) -> dict[str, list[dict[str, Any]]]:
    """Each configuration measured once per round, the order rotating each round so drift on the shared
    machine hits them alike: real 1 and len(real), replayed 1, 4 and len(replayed)."""
    configs = [(f"real {n}", list(real[:n])) for n in sorted({1, len(real)})]
    configs += [(f"replayed {n}", list(replayed[:n])) for n in sorted({1, 4, len(replayed)})]
    results: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in configs}
    for index in range(rounds):
        shift = index % len(configs)
        for name, endpoints in configs[shift:] + configs[:shift]:
            results[name].append(measure(endpoints, polls))
    return results


def fleet_rows(results: dict[str, list[dict[str, Any]]]) -> list[tuple[str, str, str]]:
    """Table rows: per configuration, the console's CPU per server poll (median, range over rounds) and
    the polls' wall time (median of the rounds' p50 and p95)."""
    rows = []
    for name, measured in results.items():
        cpu = [m["cpu_ms_per_server_poll"] for m in measured]
        p50 = statistics.median(m["poll_wall_ms_p50"] for m in measured)
        p95 = statistics.median(m["poll_wall_ms_p95"] for m in measured)
        rows.append((f"fleet poll, {name} server(s): console CPU per server poll (median, range); "
                     "poll wall p50 / p95",
                     f"{statistics.median(cpu):.2f} ms ({min(cpu):.2f}-{max(cpu):.2f}); "
                     f"{p50:.0f} / {p95:.0f} ms",
                     "flat per server"))
    return rows
