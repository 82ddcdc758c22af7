"""Per-model figures from one poll's raw readings (metrics, statistics, index, traces): pure functions."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

from triton_ge_console.sessions.observe.generation import GenerationFigures, generation_figures
from triton_ge_console.sessions.observe.health import model_health
from triton_ge_console.sessions.observe.metrics import MetricTable, ModelKey
from triton_ge_console.sessions.observe.rates import ModelCounters, ModelRates
from triton_ge_console.sessions.observe.snapshot import Latency, ModelSnapshot
from triton_ge_console.sessions.observe.stats import IndexEntry, ModelStatistics
from triton_ge_console.triton_terms import HELD_STATES

US_PER_MS = 1000.0
COUNTER_METRICS = {  # in ModelCounters' order, failures aside
    "success": "nv_inference_request_success",
    "inference": "nv_inference_count",
    "execution": "nv_inference_exec_count",
    "request_us": "nv_inference_request_duration_us",
    "queue_us": "nv_inference_queue_duration_us",
    "compute_input_us": "nv_inference_compute_input_duration_us",
    "compute_infer_us": "nv_inference_compute_infer_duration_us",
    "compute_output_us": "nv_inference_compute_output_duration_us",
}
FAILURES = "nv_inference_request_failure"
GLUE_FAILURE_REASON = "BACKEND"  # Triton's reason for a backend's failed request (see glue_failures)
QUEUE_TIMEOUT_REASON = "REJECTED"  # what Triton calls a request its queue policy rejected at its timeout
PENDING = "nv_inference_pending_request_count"
SUMMARY = "nv_inference_request_summary_us"
GLUE_PREFIX = "ge_"
GLUE_MEMORY = "ge_model_memory_bytes"
MODE_LABELS = ("execution_mode", "kind")  # ge_model_info has execution_mode; per-model counters kind


@dataclass(frozen=True)
class MetricViews:
    """The per-model lookups of one metrics table, computed once per poll (not once per model)."""

    pending: dict[ModelKey, float] = field(default_factory=dict)
    quantiles: dict[ModelKey, dict[str, float]] = field(default_factory=dict)
    reasons: dict[ModelKey, dict[str, float]] = field(default_factory=dict)
    glue: dict[str, tuple[tuple[str, ...], str | None]] = field(default_factory=dict)
    memory: dict[str, tuple[tuple[str, int], ...]] = field(default_factory=dict)
    generation: dict[ModelKey, GenerationFigures] = field(default_factory=dict)

    @classmethod
    def of(cls, table: MetricTable | None, glue: dict[ModelKey, float] | None = None) -> MetricViews:
        """Index a metrics table (None gives empty views); glue: the glue's failures (`model_counters`)."""
        if table is None:
            return cls()
        return cls(table.by_model(PENDING), table.by_model_and(SUMMARY, "quantile"),
                   failure_reasons(table, glue or {}), glue_labels(table), glue_memory(table),
                   generation_figures(table))


@dataclass(frozen=True)
class PollReadings:
    """Everything one poll read that per-model figures are derived from."""

    index: list[IndexEntry]
    statistics: dict[ModelKey, ModelStatistics]
    metrics: MetricTable | None
    backends: dict[ModelKey, str] = field(default_factory=dict)
    traced: dict[ModelKey, Latency] = field(default_factory=dict)
    views: MetricViews = field(default_factory=MetricViews)
    dead: dict[ModelKey, str] = field(default_factory=dict)  # READY versions whose instance died: why
    metric_counters: dict[ModelKey, ModelCounters] | None = None  # from /metrics, once per poll
    # the glue's error responses Triton counted as successes (the last known, should /metrics fail a poll)
    glue_failures: dict[ModelKey, float] = field(default_factory=dict)


def counters_from_metrics(table: MetricTable) -> dict[ModelKey, ModelCounters]:
    """Cumulative counters per model version from Triton's /metrics, as Triton counted them."""
    success, *rest = (table.by_model(metric) for metric in COUNTER_METRICS.values())
    failures = table.by_model(FAILURES)
    return {key: ModelCounters(success.get(key, 0.0), failures.get(key, 0.0),
                               *[column.get(key, 0.0) for column in rest])
            for key in success.keys() | failures.keys()}


def failure_reasons(table: MetricTable, glue: dict[ModelKey, float]) -> dict[ModelKey, dict[str, float]]:
    """Failed requests per model version and Triton's reason, the glue's error responses under BACKEND."""
    reasons = table.by_model_and(FAILURES, "reason")
    for key, count in glue.items():
        split = reasons.setdefault(key, {})
        split[GLUE_FAILURE_REASON] = split.get(GLUE_FAILURE_REASON, 0.0) + count
    return reasons


def model_counters(readings: PollReadings) -> dict[ModelKey, ModelCounters]:
    """Counters per model version: /metrics where it has the model, else the statistics API; the glue's
    error responses moved from success to failure (whichever source: neither counts them as failures)."""
    found = {key: stats.counters for key, stats in readings.statistics.items()}
    found.update(readings.metric_counters or {})
    for key, count in readings.glue_failures.items():
        counters = found.get(key)
        if counters is not None:
            found[key] = counters._replace(success=max(0.0, counters.success - count),
                                           failure=counters.failure + count)
    return found


def summary_quantiles(raw: dict[str, float] | None) -> dict[str, float]:
    """Request latency quantiles in ms from the summary metric (empty when summaries are off or NaN)."""
    return {q: v / US_PER_MS for q, v in (raw or {}).items() if not math.isnan(v)}


def choose_latency(rates: ModelRates, quantiles: dict[str, float], traced: Latency | None) -> Latency:
    """Summary quantiles when on, else traced requests (percentiles: npu_ge, or a model traced on
    purpose), else the statistics average; one source per Latency, named in it."""
    if "0.5" in quantiles:
        return Latency(avg_ms=rates.avg_latency_ms, p50_ms=quantiles.get("0.5"), p90_ms=quantiles.get("0.9"),
                       p99_ms=quantiles.get("0.99"), source="summary")
    if traced is not None:
        return traced
    if rates.avg_latency_ms is not None:
        return Latency(avg_ms=rates.avg_latency_ms, source="statistics")
    return Latency()


def failures_by_reason(reasons: dict[str, float] | None) -> tuple[tuple[str, int], ...]:
    """Non-zero failure counts by Triton's reason label, sorted by reason."""
    return tuple(sorted((reason, int(count)) for reason, count in (reasons or {}).items() if count > 0))


def timed_out(reasons: dict[str, float] | None) -> int | None:
    """Requests rejected at their queue timeout, None when the server has no failure counter by reason."""
    count = (reasons or {}).get(QUEUE_TIMEOUT_REASON)
    return None if count is None else int(count)


def glue_memory(table: MetricTable) -> dict[str, tuple[tuple[str, int], ...]]:
    """Per model name, the device memory its instances hold on each NPU (the glue's ge_model_memory_bytes)."""
    held: dict[str, dict[str, float]] = {}
    for sample in table.samples(GLUE_MEMORY):
        model, device = sample.label("model"), sample.label("device")
        if model is not None and device is not None and not math.isnan(sample.value):
            per_device = held.setdefault(model, {})
            per_device[device] = per_device.get(device, 0.0) + sample.value
    return {model: tuple(sorted((d, int(v)) for d, v in devices.items())) for model, devices in held.items()}


def glue_labels(table: MetricTable) -> dict[str, tuple[tuple[str, ...], str | None]]:
    """Per model name: devices and execution mode the GE glue's per-model `ge_*` metrics are labelled with."""
    devices: dict[str, set[str]] = {}
    modes: dict[str, str] = {}
    for name in table.names():
        if not name.startswith(GLUE_PREFIX):
            continue
        for sample in table.samples(name):
            model = sample.label("model")
            if model is None:
                continue
            device = sample.label("device")
            if device is not None:
                devices.setdefault(model, set()).add(device)
            mode = next((sample.label(m) for m in MODE_LABELS if sample.label(m)), None)
            if mode:
                modes.setdefault(model, mode)
    return {m: (tuple(sorted(devices.get(m, ()))), modes.get(m)) for m in devices.keys() | modes.keys()}


class ModelInputs(NamedTuple):
    """Everything one model version's snapshot is built from: equal inputs give an equal snapshot, so a
    poller may keep the previous one (an idle model's figures repeat poll after poll)."""

    entry: IndexEntry
    backend: str | None
    pending: float | None
    quantiles: dict[str, float] | None
    reasons: dict[str, float] | None
    glue: tuple[tuple[str, ...], str | None] | None
    traced: Latency | None
    last_inference: float | None
    counters: ModelCounters | None
    rates: ModelRates
    dead: str | None = None
    memory: tuple[tuple[str, int], ...] = ()
    generation: GenerationFigures | None = None


def model_inputs(entry: IndexEntry, readings: PollReadings, counters: ModelCounters | None,
                 rates: ModelRates) -> ModelInputs:
    """The readings one model version's snapshot depends on."""
    key = (entry.name, entry.version)
    views = readings.views
    stats = readings.statistics.get(key)
    return ModelInputs(entry, readings.backends.get(key), views.pending.get(key), views.quantiles.get(key),
                       views.reasons.get(key), views.glue.get(entry.name), readings.traced.get(key),
                       stats.last_inference_s if stats is not None else None, counters, rates,
                       readings.dead.get(key), views.memory.get(entry.name, ()),
                       views.generation.get(key))


def build_model(inputs: ModelInputs) -> ModelSnapshot:
    """One model version's snapshot from its readings and interval rates."""
    entry, rates, counters, pending = inputs.entry, inputs.rates, inputs.counters, inputs.pending
    devices, mode = inputs.glue or ((), None)
    health, failing = model_health(entry.state, inputs.dead, rates.request_rate, rates.failure_rate)
    return ModelSnapshot(
        name=entry.name,
        version=entry.version,
        state=entry.state,
        health=health,
        reason=failing or entry.reason,
        backend=inputs.backend,
        queue_depth=None if pending is None else int(pending),
        request_rate=rates.request_rate,
        inference_rate=rates.inference_rate,
        execution_rate=rates.execution_rate,
        avg_batch=rates.avg_batch,
        latency=choose_latency(rates, summary_quantiles(inputs.quantiles), inputs.traced),
        queue_ms=rates.queue_ms,
        compute_ms=rates.compute_ms,
        success_total=None if counters is None else int(counters.success),
        failure_total=None if counters is None else int(counters.failure),
        failures_by_reason=failures_by_reason(inputs.reasons),
        timed_out_total=timed_out(inputs.reasons),
        last_inference=inputs.last_inference,
        devices=devices,
        execution_mode=mode,
        # a model Triton no longer holds holds no memory, whatever series an ended stub left behind
        memory_by_device=inputs.memory if entry.state in HELD_STATES else (),
        generation=inputs.generation,
    )
