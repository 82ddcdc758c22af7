"""Poll a vLLM (vllm-ascend) or MindIE Server into ServerSnapshots, as poller.py does for Triton: its
health, the models it serves (/v1/models) and its /metrics, read by engine_metrics; NPUs from npu-smi on
the host, as for Triton (neither engine reports NPU utilization). A poll never raises."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from triton_ge_console.sessions.observe.engine_metrics import (
    EngineModelFigures,
    engine_figures,
    engine_memory,
)
from triton_ge_console.sessions.observe.generation import GenerationFigures, with_token_rate
from triton_ge_console.sessions.observe.metrics import PlainLines, parse_metrics
from triton_ge_console.sessions.observe.rates import rate
from triton_ge_console.sessions.observe.snapshot import (
    Endpoints,
    EngineMemory,
    Latency,
    ModelSnapshot,
    ServerSnapshot,
    guarded_poll,
)
from triton_ge_console.sessions.observe.stats import EndpointError, HttpEndpoint, fetch_metadata
from triton_ge_console.sessions.observe.telemetry.devices import DeviceTelemetry
from triton_ge_console.sessions.server.engines import MINDIE, MINDIE_MONITOR_SWITCH, VLLM, label
from triton_ge_console.triton_terms import MODEL_READY

HEALTH_PATH = {VLLM: "/health"}  # MindIE's /health is on its management port: /v1/models answering is it
MODELS_PATH = "/v1/models"
# what an engine means by a health answer other than 200: vLLM's /health answers 503 when check_health
# raises EngineDeadError (vllm-project/vllm@98b137c6 vllm/entrypoints/serve/instrumentator/health.py), its
# other routes still answering
UNHEALTHY_MEANS = {(VLLM, 503): "vLLM answers 503 once its engine has died"}


def monitoring_off(engine: str, status: int, body: bytes) -> str | None:
    """The plain words for a MindIE whose monitoring switch is off (its /metrics answers HTTP 500 naming
    MIES_SERVICE_MONITOR_MODE, or nothing at all), else None."""
    text = body.decode("utf-8", errors="replace").strip()
    if engine == MINDIE and (not text or (status != 200 and "MIES_SERVICE_MONITOR_MODE" in text)):
        return (f"MindIE monitoring is off: its /metrics answers no figures (start MindIE Server with "
                f"{MINDIE_MONITOR_SWITCH})")
    return None


def unhealthy(engine: str, status: int) -> str:
    """Why a health answer other than 200 reads not healthy, with what the engine means by it where known."""
    meaning = UNHEALTHY_MEANS.get((engine, status))
    return "not healthy" if meaning is None else f"not healthy: {meaning}"


NOTHING_AT = "nothing at "  # how an absent-engine error begins: attach says it alone, unwrapped


class EngineAbsent(EndpointError):
    """Nothing at the URL answers the engine's health route (HTTP 404): another server, or no such engine."""


def absent(engine: str, api: HttpEndpoint, path: str) -> str:
    """Why a 404 at the engine's health route means no such engine answers there (not a sick one), naming a
    Triton server when its /v2 metadata says it is one (KServe v2 server metadata; Triton names itself
    "triton"), so the operator knows to attach it without --engine."""
    said = f"{NOTHING_AT}{api.base_url} answers {label(engine)}'s {path} (HTTP 404)"
    version = triton_version(api)
    if version is None:
        return said
    return (f"{said}; it looks like a Triton server (its /v2 names it triton {version}): attach it "
            "without --engine")


def triton_version(api: HttpEndpoint) -> str | None:
    """Triton's version when the server's GET /v2 names it triton (None for anything else, or no answer)."""
    try:
        metadata = fetch_metadata(api)
    except (EndpointError, ValueError, AttributeError):  # no /v2, not JSON, not a JSON object
        return None
    return (metadata.version or "—") if metadata.name == "triton" else None


def served_models(answer: object) -> tuple[str, ...]:
    """The model ids of an OpenAI /v1/models answer ({"object": "list", "data": [{"id": ...}]})."""
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list):
        raise ValueError("/v1/models: not an OpenAI model list (no 'data' list)")
    return tuple(dict.fromkeys(str(item["id"]) for item in data if isinstance(item, dict) and "id" in item))


class EnginePoller:
    """Reads one vLLM or MindIE server per `poll()`; the same face as poller.Poller to LiveSource."""

    trace = None  # no trace file: these engines are not traced
    http = None  # no Triton HTTP API to arm tracing on

    def __init__(self, name: str, engine: str, endpoints: Endpoints, *,
                 headers: dict[str, str] | None = None, ca_file: Path | None = None, timeout: float = 2.0,
                 telemetry: DeviceTelemetry | None = None, started_at: float | None = None) -> None:
        self.name = name
        self.engine = engine
        self.endpoints = endpoints
        self.telemetry = telemetry
        self.started_at = started_at
        self._api = HttpEndpoint(endpoints.http_url, timeout, headers, ca_file) \
            if endpoints.http_url else None
        self._metrics = HttpEndpoint(endpoints.metrics_url, timeout, ca_file=ca_file) \
            if endpoints.metrics_url else None
        self._lines = PlainLines()
        self._previous: dict[str, tuple[float, ModelSnapshot]] = {}
        self._first_seen: float | None = None
        self._lock = threading.Lock()

    def poll(self) -> ServerSnapshot:
        """One snapshot now; an unreachable or broken server gives `live=False` and `error`."""
        return guarded_poll(self._lock, self._poll, self._down)

    def _down(self, taken_at: float, error: str) -> ServerSnapshot:
        """The snapshot of a server that could not be read."""
        devices = self.telemetry.devices(None) if self.telemetry is not None else ()
        return ServerSnapshot(taken_at=taken_at, session=self.name, endpoints=self.endpoints, devices=devices,
                              error=error, engine=self.engine)

    def _poll(self, taken_at: float) -> ServerSnapshot:
        """The body of poll: models and health from the API port, figures from /metrics."""
        if self._api is None:
            return self._down(taken_at, "no HTTP endpoint configured")
        try:
            models = self._models()
        except EngineAbsent as exc:  # its own words name the URL and the engine
            return self._down(taken_at, str(exc))
        except (EndpointError, ValueError) as exc:
            return self._down(taken_at, f"{label(self.engine)}: {exc}")
        problems: list[str] = []
        notes: list[str] = []
        figures, memory = self._figures(problems, notes)
        self._first_seen = self._first_seen or taken_at
        now = time.monotonic()
        snapshots = tuple(self._model(name, figures.get(name), now) for name in self._names(models, figures))
        devices = self.telemetry.devices(None) if self.telemetry is not None else ()
        return ServerSnapshot(
            taken_at=taken_at, session=self.name, live=True, ready=True, version=None,
            uptime_s=max(0.0, taken_at - (self.started_at or self._first_seen)), endpoints=self.endpoints,
            models=snapshots, devices=devices, error="; ".join(problems) or None, engine=self.engine,
            note="; ".join(notes) or None, engine_memory=memory)

    def _models(self) -> tuple[str, ...]:
        """The served models; EndpointError when the server is not healthy or not there."""
        assert self._api is not None
        health = HEALTH_PATH.get(self.engine)
        if health is not None:
            status, _ = self._api.request("GET", health)
            if status == 404:
                raise EngineAbsent(absent(self.engine, self._api, health))
            if status != 200:
                why = unhealthy(self.engine, status)
                raise EndpointError(f"{self._api.base_url}{health}: HTTP {status} ({why})")
        status, body = self._api.request("GET", MODELS_PATH)
        answer = self._api.decoded(MODELS_PATH, status, body)
        return served_models(answer)

    def _figures(self, problems: list[str],
                 notes: list[str]) -> tuple[dict[str, EngineModelFigures], tuple[EngineMemory, ...]]:
        """Per model_name, what /metrics carries, and the server's NPU memory per worker if it reports it
        (nothing, with the reason in `problems` when reading it failed, in `notes` when the server gives
        none: no metrics URL, MindIE's monitoring off)."""
        if self._metrics is None:
            notes.append(f"{label(self.engine)} metrics not given (attach again with --metrics-url URL)")
            return {}, ()
        try:
            status, body = self._metrics.request("GET", "")
        except EndpointError as exc:
            problems.append(str(exc))
            return {}, ()
        off = monitoring_off(self.engine, status, body)
        if off is not None:
            notes.append(off)
            return {}, ()
        if status != 200:
            problems.append(f"{self._metrics.base_url}: HTTP {status}")
            return {}, ()
        try:
            table = parse_metrics(body.decode("utf-8", errors="replace"), (), self._lines)
        except ValueError as exc:
            problems.append(f"{self._metrics.base_url}: not Prometheus text ({exc})")
            return {}, ()
        return engine_figures(self.engine, table), engine_memory(table)

    @staticmethod
    def _names(models: tuple[str, ...], figures: dict[str, EngineModelFigures]) -> tuple[str, ...]:
        """The models to show: those served, and any a metric names that none of them is (MindIE labels
        its figures with all its models joined by " & "; one served model takes a lone label's figures)."""
        extra = [name for name in figures if name not in models]
        if len(models) == 1 and len(extra) == 1 and models[0] not in figures:
            figures[models[0]] = figures.pop(extra[0])
            return models
        return (*models, *extra)

    def _model(self, name: str, figures: EngineModelFigures | None, now: float) -> ModelSnapshot:
        """One served model's snapshot, its rates over the interval since the previous poll."""
        before = self._previous.get(name)
        elapsed = now - before[0] if before is not None else 0.0
        generation = figures.generation if figures is not None else GenerationFigures()
        if before is not None:
            generation = with_token_rate(generation, before[1].generation, elapsed)
        success = figures.success_total if figures is not None else None
        previous_success = before[1].success_total if before is not None else None
        model = ModelSnapshot(
            name=name, version="", state=MODEL_READY, backend=self.engine, health=None,
            queue_depth=generation.waiting,
            request_rate=rate(previous_success, success, elapsed),
            latency=_latency(figures),
            success_total=success,
            failure_total=figures.failure_total if figures is not None else None,
            generation=generation if figures is not None else None,
        )
        self._previous[name] = (now, model)
        return model

    def close(self) -> None:
        """Close connections; never touches the server itself."""
        for endpoint in (self._api, self._metrics):
            if endpoint is not None:
                endpoint.close()
        if self.telemetry is not None:
            self.telemetry.close()


def _latency(figures: EngineModelFigures | None) -> Latency:
    """A request's end-to-end latency percentiles from the engine's histogram."""
    if figures is None or figures.e2e_p50_ms is None:
        return Latency()
    return Latency(p50_ms=figures.e2e_p50_ms, p99_ms=figures.e2e_p99_ms, source="histogram")

