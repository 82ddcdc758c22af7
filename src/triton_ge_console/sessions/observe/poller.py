"""Poll one Triton server into immutable ServerSnapshots, never raising (follow.py repeats it)."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from triton_ge_console.sessions.observe.figures import (
    MetricViews,
    ModelInputs,
    PollReadings,
    build_model,
    counters_from_metrics,
    model_counters,
    model_inputs,
)
from triton_ge_console.sessions.observe.generation import GenerationFigures, over_window, with_token_rate
from triton_ge_console.sessions.observe.glue_failures import GlueFailures
from triton_ge_console.sessions.observe.health import InstanceWatch
from triton_ge_console.sessions.observe.metrics import MetricTable, ModelKey, PlainLines, scrape_metrics
from triton_ge_console.sessions.observe.moved_stats import MovedStatistics
from triton_ge_console.sessions.observe.rates import ModelCounters, ModelRates, compute_rates, hold_success
from triton_ge_console.sessions.observe.snapshot import (
    DeviceSnapshot,
    Endpoints,
    Latency,
    ModelSnapshot,
    ServerSnapshot,
    guarded_poll,
)
from triton_ge_console.sessions.observe.stats import (
    EndpointError,
    HttpEndpoint,
    IndexEntry,
    IndexReader,
    ServerMetadata,
    fetch_health,
    fetch_metadata,
    fetch_model_config,
)
from triton_ge_console.sessions.observe.telemetry.devices import DeviceTelemetry, devices_from_glue
from triton_ge_console.sessions.observe.trace import TraceCollector, enable_tracing
from triton_ge_console.sessions.observe.trace_sampling import TraceSampler
from triton_ge_console.sessions.server.events import read_events, restarts
from triton_ge_console.triton_terms import MODEL_READY

# Families a snapshot never shows: per-stage latency summaries (5x the text when on), host and GPU figures.
UNUSED_METRICS = (
    "nv_inference_queue_summary_us", "nv_inference_compute_input_summary_us",
    "nv_inference_compute_infer_summary_us", "nv_inference_compute_output_summary_us",
    "nv_gpu_", "nv_energy_", "nv_cpu_", "nv_pinned_memory_", "nv_cache_",
)
# Backends that report no statistics to Triton: traced even where the server keeps latency summaries.
TRACE_BACKENDS = ("npu_ge",)
T = TypeVar("T")

WINDOW_S = 30.0  # a generate model's percentiles cover about the last this many seconds of polls


class Poller:
    """Reads health, metadata, repository index, statistics and /metrics of one server per `poll()`."""

    def __init__(
        self,
        name: str,
        endpoints: Endpoints,
        *,
        started_at: float | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = 2.0,
        trace: TraceCollector | None = None,
        telemetry: DeviceTelemetry | None = None,
        instances: InstanceWatch | None = None,
        moved_statistics: bool = True,
        sample_traces: bool = True,
        events_dir: Path | None = None,
    ) -> None:
        self.name = name
        self.events_dir = events_dir  # a launched session's folder: its supervisor's crashes and restarts
        self.statistics = MovedStatistics(moved_statistics)  # statistics only for models whose counters moved
        self.endpoints = endpoints
        self.started_at = started_at
        self.trace = trace
        self.telemetry = telemetry
        self.instances = instances
        # sampled tracing per model, when there is a trace file to read; a one-shot look reads, arms nothing
        self.sampler = TraceSampler() if sample_traces else None
        self.http = HttpEndpoint(endpoints.http_url, timeout, headers) if endpoints.http_url else None
        self.metrics = HttpEndpoint(endpoints.metrics_url, timeout) if endpoints.metrics_url else None
        self._metadata: ServerMetadata | None = None
        self._first_seen: float | None = None
        self._previous: dict[ModelKey, ModelCounters] = {}
        self._previous_at: float | None = None
        self._lines = PlainLines()  # /metrics lines of the previous poll, parsed
        self._glue = GlueFailures()
        self._glue_failures: dict[ModelKey, float] = {}  # the last known (see figures.model_counters)
        self._index = IndexReader()  # the previous poll's index, decoded
        self._built: dict[ModelKey, tuple[ModelInputs, ModelSnapshot]] = {}
        # per generate model, its figures as read over the last WINDOW_S (percentiles over what changed)
        self._recent: dict[ModelKey, collections.deque[tuple[float, GenerationFigures]]] = {}
        self._backends: dict[ModelKey, str] = {}
        self._lock = threading.Lock()

    def poll(self) -> ServerSnapshot:
        """One snapshot now; an unreachable or broken server gives `live=False` and `error`, never raises."""
        return guarded_poll(self._lock, self._poll_and_close, self._down)

    def _poll_and_close(self, taken_at: float) -> ServerSnapshot:
        """_poll, its HTTP connection closed after it whatever happened (see _hang_up)."""
        try:
            return self._poll(taken_at)
        finally:
            if self.http is not None:
                self.http.close()

    def _hang_up(self) -> None:
        """Close every connection. The HTTP port's is closed after each poll too (reused within a poll): an
        idle kept-alive connection there holds up Triton's shutdown to its exit timeout (30 s, measured);
        the metrics port's is kept between polls, as one there does not (measured: exit as quick as none)."""
        for endpoint in (self.http, self.metrics):
            if endpoint is not None:
                endpoint.close()

    def _down(self, taken_at: float, error: str, no_reply: bool = False) -> ServerSnapshot:
        """The snapshot of a server that could not be read (a restarted one counts afresh: no glue failures
        carried over)."""
        self._glue_failures = {}
        devices = self.telemetry.devices(None) if self.telemetry is not None else ()
        return ServerSnapshot(taken_at=taken_at, session=self.name, live=False, ready=False,
                              version=self._metadata.version if self._metadata else None,
                              endpoints=self.endpoints, devices=devices, error=error, no_reply=no_reply,
                              **self._events())

    def _events(self) -> dict[str, Any]:
        """The snapshot's restart count and newest session event (none for a server not launched here)."""
        if self.events_dir is None:
            return {}
        events = read_events(self.events_dir)
        return {"restarts": len(restarts(events)), "last_event": events[-1].message if events else None}

    def _poll(self, taken_at: float) -> ServerSnapshot:
        """The body of poll: each missing reading degrades to None figures plus a note in `error`."""
        if self.http is None:
            return self._down(taken_at, "no HTTP endpoint configured")
        try:
            live, ready = fetch_health(self.http)
        except EndpointError as exc:
            return self._down(taken_at, str(exc), exc.timed_out)
        problems: list[str] = []
        http = self.http
        if self._metadata is None:
            self._metadata = _attempt(lambda: fetch_metadata(http), problems)
        if self._first_seen is None:
            self._first_seen = taken_at
        readings = self._read(http, problems)
        models = self._models(readings, time.monotonic())
        self._sample(http, readings, models, problems)
        return ServerSnapshot(
            taken_at=taken_at,
            session=self.name,
            live=live,
            ready=ready,
            version=self._metadata.version if self._metadata else None,
            uptime_s=max(0.0, taken_at - (self.started_at or self._first_seen)),
            endpoints=self.endpoints,
            models=models,
            devices=self._devices(readings.metrics),
            error="; ".join(problems) or None,
            **self._events(),
        )

    def _read(self, http: HttpEndpoint, problems: list[str]) -> PollReadings:
        """Index, statistics, metrics and traces for this poll, one after another on this thread: a helper
        thread for /metrics shortened the poll by a millisecond or two but cost more CPU in handing over."""
        metrics = self.metrics
        index = _attempt(lambda: self._index.read(http), problems) or []
        table: MetricTable | None = None
        if metrics is not None:
            table = _attempt(lambda: scrape_metrics(metrics, "", UNUSED_METRICS, self._lines), problems)
        counters = counters_from_metrics(table) if table is not None else None  # read once, used twice
        if table is not None and counters is not None:  # else the last known: kept over a poll without it
            version = self._metadata.version if self._metadata else None
            self._glue_failures = self._glue.update(table, version, counters)
        statistics = _attempt(lambda: self.statistics.read(http, index, counters), problems) or {}
        self._learn_backends(http, index, problems)
        dead = self._dead_instances(http, index, problems)
        return PollReadings(index, statistics, table, dict(self._backends), self._trace_latencies(index),
                            MetricViews.of(table, self._glue_failures), dead, counters, self._glue_failures)

    def _dead_instances(self, http: HttpEndpoint, index: list[IndexEntry],
                        problems: list[str]) -> dict[ModelKey, str]:
        """READY model versions whose instance process died (only where the server's processes are seen)."""
        if self.instances is None:
            return {}
        ready = [(e.name, e.version) for e in index if e.state == MODEL_READY]
        return self.instances.dead(
            ready, lambda model: _attempt(lambda: fetch_model_config(http, model), problems))

    def _learn_backends(self, http: HttpEndpoint, index: list[IndexEntry], problems: list[str]) -> None:
        """Fetch the config of newly READY models once (their backend name)."""
        ready = {(e.name, e.version) for e in index if e.state == MODEL_READY}
        for key in list(self._backends):
            if key not in ready:
                del self._backends[key]
        for name, version in sorted(ready - self._backends.keys()):
            config = _attempt(lambda n=name: fetch_model_config(http, n), problems)  # type: ignore[misc]
            if config is not None:
                self._backends[(name, version)] = str(config.get("backend") or config.get("platform") or "")

    def _sample(self, http: HttpEndpoint, readings: PollReadings, models: tuple[ModelSnapshot, ...],
                problems: list[str]) -> None:
        """Keep sampled tracing on, at a rate fitting each model's load, for every READY model whose
        percentiles have no other source (no summary quantiles on the server, or an npu_ge backend)."""
        unsure = readings.metrics is None and self.metrics is not None  # are summaries on? not this poll
        if self.sampler is None or self.trace is None or unsure:
            return  # not asked to (a one-shot look), no trace file to read, or unsure
        load: dict[str, float | None] = {}
        for model in models:
            summarised = (model.name, model.version) in readings.views.quantiles
            if model.state != MODEL_READY or (summarised and model.backend not in TRACE_BACKENDS):
                continue
            known = [rate for rate in (load.get(model.name), model.request_rate) if rate is not None]
            load[model.name] = sum(known) if known else None  # the setting is per model, for all versions
        now = time.monotonic()
        for name, sampling in self.sampler.due(load, now).items():
            sent = _attempt(lambda n=name, s=sampling: enable_tracing(  # type: ignore[misc]
                http, n, s.rate, s.log_frequency, s.count), problems)
            if sent is None:
                self.sampler.refused(name, now)
            else:
                self.sampler.armed(name, sampling)

    def _trace_latencies(self, index: list[IndexEntry]) -> dict[ModelKey, Latency]:
        """Trace-based latency per model version, when a trace collector is attached."""
        if self.trace is None:
            return {}
        self.trace.update()
        found = {}
        for entry in index:
            latency = self.trace.latency(entry.name, entry.version)
            if latency is not None:
                found[(entry.name, entry.version)] = latency
        return found

    def _models(self, readings: PollReadings, now: float) -> tuple[ModelSnapshot, ...]:
        """Model snapshots with rates from the counter deltas since the previous poll; a model whose
        inputs did not change keeps its previous snapshot object (cheaper here and for the console)."""
        counters = model_counters(readings)
        elapsed = now - self._previous_at if self._previous_at is not None else 0.0
        built: dict[ModelKey, tuple[ModelInputs, ModelSnapshot]] = {}
        models = []
        for entry in readings.index:
            key = (entry.name, entry.version)
            current = counters.get(key)
            if current is not None:
                current = counters[key] = hold_success(self._previous.get(key), current)
            rates = compute_rates(self._previous.get(key), current, elapsed) if current else ModelRates()
            inputs = model_inputs(entry, readings, current, rates)
            if inputs.generation is not None:
                known_figures = self._built.get(key)
                before = known_figures[1].generation if known_figures is not None else None
                figures = with_token_rate(inputs.generation, before, elapsed)
                inputs = inputs._replace(generation=self._windowed(key, figures, now))
            known = self._built.get(key)
            model = known[1] if known is not None and known[0] == inputs else build_model(inputs)
            built[key] = (inputs, model)
            models.append(model)
        self._previous, self._previous_at, self._built = counters, now, built
        return tuple(models)

    def _windowed(self, key: ModelKey, figures: GenerationFigures, now: float) -> GenerationFigures:
        """The figures' percentiles over the last WINDOW_S seconds of readings (since load at first)."""
        recent = self._recent.setdefault(key, collections.deque())
        while recent and now - recent[0][0] > WINDOW_S:
            recent.popleft()
        windowed = over_window(figures, recent[0][1], now - recent[0][0]) if recent else figures
        recent.append((now, figures))
        return windowed

    def _devices(self, table: MetricTable | None) -> tuple[DeviceSnapshot, ...]:
        """Merged device telemetry (glue metrics only, when no telemetry object is attached)."""
        if self.telemetry is not None:
            return self.telemetry.devices(table)
        return tuple(devices_from_glue(table))

    def close(self) -> None:
        """Close connections; never touches the server itself."""
        self._hang_up()
        if self.telemetry is not None:
            self.telemetry.close()


def _attempt(read: Callable[[], T], problems: list[str]) -> T | None:
    """Run one reading; on failure note why and give None."""
    try:
        return read()
    except (EndpointError, RuntimeError, ValueError, KeyError, TypeError) as exc:
        problems.append(str(exc))
        return None
