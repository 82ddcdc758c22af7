"""The Prometheus text of a vLLM (vllm-ascend) or MindIE Server as per-model figures: Triton's reader is
metrics.py + figures.py, this is the one beside it for the engines ge-console only watches.

Names, labels and buckets as the engines define them (docs/engines.md has the table with its sources):
vLLM's vllm/v1/metrics/loggers.py (PrometheusStatLogger, labels model_name and engine) and MindIE-LLM's
src/server/endpoint/http_wrapper/prometheus_metrics.cpp (label model_name: every model of its config.json
joined with " & "). A figure the text does not carry stays None.

vllm-ascend with MS Service Metric on adds its NPU memory per worker (engine_memory): the gauges its
vllm_ascend/observability/config/base_metrics.yaml names engine:memory:*, which ms_service_metric exposes
as vllm_profiling_engine:memory:* in GiB, labelled dp, role and phase (no model_name: one per
data-parallel rank).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from triton_ge_console.sessions.observe.generation import GenerationFigures, count_of, quantile_ms
from triton_ge_console.sessions.observe.metrics import MetricTable
from triton_ge_console.sessions.observe.snapshot import EngineMemory
from triton_ge_console.sessions.server.engines import MINDIE, VLLM

MODEL_LABEL = "model_name"
MEMORY_PREFIX = "vllm_profiling_engine:memory:"  # ms_service_metric's vllm_profiling_ + vllm-ascend's name
MEMORY_FIELDS = {  # the gauge's last part (GiB, though named _gb: _format_gib_value) -> EngineMemory field
    "total_gb": "total_gib", "utilization_ratio": "utilization", "reserved_gb": "reserved_gib",
    "weights_gb": "weights_gib", "kvcache_gb": "kv_cache_gib", "non_torch_gb": "non_torch_gib",
    "activation_gb": "activation_gib", "graph_gb": "graph_gib"}


@dataclass(frozen=True)
class EngineNames:
    """The metric names one engine gives each figure (the first present of several wins)."""

    running: str
    waiting: str
    kv_usage: tuple[str, ...]  # a 0..1 gauge
    ttft: str  # histograms in seconds
    itl: tuple[str, ...]
    e2e: str
    prompt_tokens: str
    generation_tokens: str
    success: str
    failure: str | None = None  # None: the engine counts no failed requests
    ended_label: str | None = None  # the success counter's label saying how a request ended


NAMES = {
    # vllm:kv_cache_usage_perc since 0.9; vllm:gpu_cache_usage_perc before it (kept, deprecated);
    # vllm:inter_token_latency_seconds since 0.11; vllm:time_per_output_token_seconds before (hidden in 0.12)
    VLLM: EngineNames(
        running="vllm:num_requests_running", waiting="vllm:num_requests_waiting",
        kv_usage=("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        ttft="vllm:time_to_first_token_seconds",
        itl=("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
        e2e="vllm:e2e_request_latency_seconds",
        prompt_tokens="vllm:prompt_tokens_total", generation_tokens="vllm:generation_tokens_total",
        success="vllm:request_success_total", ended_label="finished_reason"),
    MINDIE: EngineNames(
        running="num_requests_running", waiting="num_requests_waiting", kv_usage=("npu_cache_usage_perc",),
        ttft="time_to_first_token_seconds", itl=("time_per_output_token_seconds",),
        e2e="e2e_request_latency_seconds",
        prompt_tokens="prompt_tokens_total", generation_tokens="generation_tokens_total",
        success="request_success_total", failure="request_failed_total"),
}


@dataclass(frozen=True)
class EngineModelFigures:
    """One served model's figures from an engine's metrics."""

    generation: GenerationFigures
    success_total: int | None = None
    failure_total: int | None = None
    e2e_p50_ms: float | None = None
    e2e_p99_ms: float | None = None
    names_read: tuple[str, ...] = field(default=())  # which metric gave each figure that was read


def _per_model(table: MetricTable, name: str) -> dict[str, float]:
    """Per model_name, a metric summed over its other labels (vLLM's engine: data-parallel cores)."""
    values: dict[str, float] = {}
    for sample in table.samples(name):
        model = sample.label(MODEL_LABEL)
        if model is not None and sample.value == sample.value:  # not NaN
            values[model] = values.get(model, 0.0) + sample.value
    return values


def _mean_per_model(table: MetricTable, names: tuple[str, ...]) -> tuple[dict[str, float], str | None]:
    """Per model_name, the mean of a gauge over its cores, from the first of `names` present."""
    for name in names:
        sums: dict[str, list[float]] = {}
        for sample in table.samples(name):
            model = sample.label(MODEL_LABEL)
            if model is not None and sample.value == sample.value:
                sums.setdefault(model, []).append(sample.value)
        if sums:
            return {model: sum(v) / len(v) for model, v in sums.items()}, name
    return {}, None


Buckets = dict[str, list[tuple[float, float]]]  # per model_name, cumulative (upper bound, count)


def _buckets(table: MetricTable, names: tuple[str, ...]) -> tuple[Buckets, str | None]:
    """Per model_name, a histogram's cumulative buckets summed over cores, from the first of `names`."""
    for name in names:
        sums: dict[str, dict[float, float]] = {}
        for sample in table.samples(f"{name}_bucket"):
            model, bound = sample.label(MODEL_LABEL), sample.label("le")
            if model is None or bound is None:
                continue
            per_bound = sums.setdefault(model, {})
            per_bound[float(bound)] = per_bound.get(float(bound), 0.0) + sample.value
        if sums:
            return {model: list(bounds.items()) for model, bounds in sums.items()}, name
    return {}, None


def _ended(table: MetricTable, names: EngineNames) -> dict[str, dict[str, int]]:
    """Per model_name, finished requests by how they ended (vLLM's finished_reason: stop, length, abort)."""
    ended: dict[str, dict[str, int]] = {}
    if names.ended_label is None:
        return ended
    for sample in table.samples(names.success):
        model, reason = sample.label(MODEL_LABEL), sample.label(names.ended_label)
        if model is not None and reason is not None:
            split = ended.setdefault(model, {})
            split[reason] = split.get(reason, 0) + int(sample.value)
    return ended


def engine_figures(engine: str, table: MetricTable) -> dict[str, EngineModelFigures]:
    """Per model_name label, the figures one scrape of an engine's /metrics carries."""
    names = NAMES[engine]
    running, waiting = _per_model(table, names.running), _per_model(table, names.waiting)
    kv, kv_name = _mean_per_model(table, names.kv_usage)
    ttft, ttft_name = _buckets(table, (names.ttft,))
    itl, itl_name = _buckets(table, names.itl)
    e2e, _ = _buckets(table, (names.e2e,))
    prompt, generated = _per_model(table, names.prompt_tokens), _per_model(table, names.generation_tokens)
    success = _per_model(table, names.success)
    failure = _per_model(table, names.failure) if names.failure else {}
    ended = _ended(table, names)
    read = tuple(name for name in (kv_name, ttft_name, itl_name) if name)
    models = set(running) | set(waiting) | set(kv) | set(ttft) | set(success) | set(generated)
    return {model: EngineModelFigures(
        generation=GenerationFigures(
            ttft_p50_ms=quantile_ms(ttft.get(model), 0.5), ttft_p99_ms=quantile_ms(ttft.get(model), 0.99),
            itl_p50_ms=quantile_ms(itl.get(model), 0.5), itl_p99_ms=quantile_ms(itl.get(model), 0.99),
            prompt_tokens_total=count_of(prompt, model), generated_tokens_total=count_of(generated, model),
            running=count_of(running, model), waiting=count_of(waiting, model),
            ended_by_reason=tuple(sorted(ended.get(model, {}).items())),
            kv_cache_usage=kv.get(model),
        ),
        success_total=count_of(success, model),
        failure_total=count_of(failure, model) if names.failure else None,
        e2e_p50_ms=quantile_ms(e2e.get(model), 0.5), e2e_p99_ms=quantile_ms(e2e.get(model), 0.99),
        names_read=read,
    ) for model in sorted(models)}


def engine_memory(table: MetricTable) -> tuple[EngineMemory, ...]:
    """vllm-ascend's NPU memory per data-parallel rank (ms_service_metric's engine:memory:* gauges); ()
    when the server reports none."""
    ranks: dict[str, dict[str, float]] = {}
    for suffix, name in MEMORY_FIELDS.items():
        for sample in table.samples(f"{MEMORY_PREFIX}{suffix}"):
            if sample.value == sample.value:  # not NaN
                ranks.setdefault(sample.label("dp") or "0", {})[name] = sample.value
    return tuple(EngineMemory(dp=dp, **figures) for dp, figures in sorted(ranks.items()))
