"""Stand-ins for a vLLM (vllm-ascend) OpenAI server and a MindIE Server, on free 127.0.0.1 ports: each
serves the endpoints ge-console reads, in the engine's own words, with the recorded /metrics texts in
tests/data/ (each recording's header cites the source file it was built from).

- vLLM (plain HTTP, as `vllm serve` runs by default): GET /health answers 200 with no body and GET
  /v1/models an OpenAI model list (vllm/entrypoints/openai/api_server.py: `health`, `show_available_models`
  → ModelList of ModelCard id/object/created/owned_by "vllm"/root/parent/max_model_len/permission); /metrics
  on the same port (vLLM mounts the Prometheus app there). With its engine dead, /health answers 503 with no
  body (fastapi Response(status_code=503), no content type: `health` catches EngineDeadError from
  check_health; vllm/entrypoints/serve/instrumentator/health.py at vllm-project/vllm@98b137c6) while
  /v1/models and /metrics, which do not ask the engine, still answer 200; the server exits about 5 s later
  (vllm/entrypoints/launcher.py watchdog_loop, terminate_if_errored, at 02828a12) unless started with
  VLLM_KEEP_ALIVE_ON_ENGINE_DEATH=1, when it stays so.
- MindIE (HTTPS, its default httpsEnabled=true, with a self-signed certificate made for the test): the
  business port answers GET /v1/models (MindIE-LLM http_handler.cpp InitializeManagerResourceV1: id,
  object, root, owned_by "MindIE Server", parent); the metrics port GET /metrics, or, with its monitoring
  switch off, HTTP 500 and {"error": "Environment variable MIES_SERVICE_MONITOR_MODE is not set.",
  "error_type": "Incomplete Generation"} (http_handler.cpp GetPrometheusMetrics, WrapperJson).

A server under load: each scrape adds GENERATED_PER_SCRAPE to the generation token counter and one
request to the success counter, so tokens/s and requests/s have deltas to be computed from.
"""

from __future__ import annotations

import contextlib
import json
import re
import ssl
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

DATA = Path(__file__).parent / "data"
VLLM_METRICS = DATA / "vllm_metrics.txt"
VLLM_METRICS_GPU_CACHE = DATA / "vllm_metrics_gpu_cache.txt"
VLLM_METRICS_CURRENT = DATA / "vllm_metrics_itl.txt"  # 0.12 on: ITL only as vllm:inter_token_latency_seconds
VLLM_ASCEND_METRICS = DATA / "vllm_ascend_metrics.txt"  # vllm-ascend with ms_service_metric: engine:memory:*
MINDIE_METRICS = DATA / "mindie_metrics.txt"
GENERATED_PER_SCRAPE = 500
_COUNTER = re.compile(r"^((?:vllm:)?(?:generation_tokens|request_success)_total\{[^}]*\}) (\S+)$", re.M)
Answer = tuple[int, str, bytes]  # status, content type, body
UNAUTHORIZED: Answer = (401, "application/json", b'{"error":"Unauthorized"}')  # vLLM's api_server middleware


def advanced(text: str, scrapes: int) -> str:
    """A recording with its token and request counters moved on by `scrapes` scrapes' worth of load
    (vLLM's success counter per finished_reason: only its stop series moves)."""
    def bump(match: re.Match[str]) -> str:
        series, value = match.group(1), float(match.group(2))
        if "request_success" in series:
            step = 1 if ("finished_reason" not in series or 'finished_reason="stop"' in series) else 0
        else:
            step = GENERATED_PER_SCRAPE
        moved = value + step * scrapes
        return f"{series} {moved if '.' in match.group(2) else int(moved)}"
    return _COUNTER.sub(bump, text)


class _Server(ThreadingHTTPServer):
    """Request threads that close() waits for, and a client that hangs up is no error: else a thread of a
    closed stand-in could print a BrokenPipe traceback into a later test's captured stderr (seen once)."""

    daemon_threads = False  # server_close joins them

    def handle_error(self, request: object, client_address: object) -> None:
        """Quiet when the client went away; any other error as socketserver prints it."""
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


@dataclass
class StandIn:
    """One stand-in HTTP(S) server: a route table, served on a thread until closed."""

    routes: dict[str, Callable[[], Answer]]
    context: ssl.SSLContext | None = None
    api_key: str | None = None  # vLLM's --api-key: /v1 routes want "Authorization: Bearer KEY"
    server: ThreadingHTTPServer = field(init=False)
    thread: threading.Thread = field(init=False)

    def __post_init__(self) -> None:
        routes, api_key = self.routes, self.api_key

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                route = routes.get(path)
                missing = (404, "application/json", b'{"detail":"Not Found"}')
                status, kind, body = route() if route else missing
                if api_key and path.startswith("/v1") and \
                        self.headers.get("Authorization") != f"Bearer {api_key}":
                    status, kind, body = UNAUTHORIZED
                self.send_response(status)
                if kind:  # fastapi's bare Response (vLLM's /health) sends none
                    self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                """Quiet."""

        self.server = _Server(("127.0.0.1", 0), Handler)
        if self.context is not None:
            self.server.socket = self.context.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        """scheme://127.0.0.1:PORT."""
        scheme = "https" if self.context is not None else "http"
        return f"{scheme}://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        """Stop serving and free the port."""
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


VLLM_TEXT = "text/plain; version=0.0.4; charset=utf-8"  # prometheus_client's CONTENT_TYPE_LATEST
MINDIE_TEXT = "text/plain; charset=utf-8"  # MindIE-LLM http_handler.cpp GetPrometheusMetrics


class Metrics:
    """A recording served as a loaded server's /metrics: counters move with each scrape."""

    def __init__(self, recording: Path, content_type: str = VLLM_TEXT) -> None:
        self.text = recording.read_text(encoding="utf-8")
        self.content_type = content_type
        self.scrapes = 0
        self.lock = threading.Lock()

    def __call__(self) -> Answer:
        with self.lock:
            text, self.scrapes = advanced(self.text, self.scrapes), self.scrapes + 1
        return 200, self.content_type, text.encode()


def _models(ids: list[str], owner: str) -> Callable[[], Answer]:
    """GET /v1/models as the engine answers it."""
    if owner == "vllm":
        data = [{"id": m, "object": "model", "created": 1765100000, "owned_by": "vllm",
                 "root": f"/models/{m}", "parent": None, "max_model_len": 32768, "permission": []}
                for m in ids]
    else:
        data = [{"id": m, "object": "model", "root": f"/models/{m}", "owned_by": "MindIE Server",
                 "parent": ids[0]} for m in ids]
    body = json.dumps({"object": "list", "data": data}).encode()
    return lambda: (200, "application/json", body)


def vllm_healthy() -> Answer:
    """vLLM's GET /health while its engine runs: 200, no body, no content type."""
    return 200, "", b""


def vllm_engine_dead() -> Answer:
    """vLLM's GET /health once check_health raised EngineDeadError: 503, no body, no content type (a
    running stand-in's engine dies with `server.routes["/health"] = vllm_engine_dead`)."""
    return 503, "", b""


@contextlib.contextmanager
def vllm_standin(recording: Path = VLLM_METRICS, model: str = "qwen2.5-7b-instruct",
                 api_key: str | None = None, engine_dead: bool = False) -> Iterator[StandIn]:
    """A vLLM OpenAI server serving `model`, its /metrics the recording (with `api_key`, as `vllm serve
    --api-key KEY`: its /v1 routes answer 401 {"error": "Unauthorized"} without the key; with `engine_dead`,
    as one whose engine died, kept alive by VLLM_KEEP_ALIVE_ON_ENGINE_DEATH=1: /health answers 503)."""
    server = StandIn({"/health": vllm_engine_dead if engine_dead else vllm_healthy,
                      "/v1/models": _models([model], "vllm"), "/metrics": Metrics(recording)},
                     api_key=api_key)
    try:
        yield server
    finally:
        server.close()


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 signed by itself (so it is its own CA) and its key, made now."""
    cert, key = folder / "mindie-cert.pem", folder / "mindie-key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec",
                    "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


@dataclass
class MindIE:
    """A MindIE Server stand-in: its business port and its metrics port, both HTTPS."""

    business: StandIn
    metrics: StandIn
    ca: Path

    @property
    def metrics_url(self) -> str:
        """Its /metrics URL."""
        return f"{self.metrics.url}/metrics"


MONITOR_OFF = json.dumps({"error": "Environment variable MIES_SERVICE_MONITOR_MODE is not set.",
                          "error_type": "Incomplete Generation"}).encode()


@contextlib.contextmanager
def mindie_standin(folder: Path, monitoring: bool = True, model: str = "llama3-8b") -> Iterator[MindIE]:
    """A MindIE Server over HTTPS (a certificate made in `folder`), its metrics the recording, or with
    MIES_SERVICE_MONITOR_MODE unset."""
    cert, key = self_signed(folder)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    metrics: Callable[[], Answer] = Metrics(MINDIE_METRICS, MINDIE_TEXT) if monitoring else (
        lambda: (500, "application/json", MONITOR_OFF))
    business = StandIn({"/v1/models": _models([model], "mindie")}, context)
    metrics_server = StandIn({"/metrics": metrics}, context)
    try:
        yield MindIE(business, metrics_server, cert)
    finally:
        business.close()
        metrics_server.close()
