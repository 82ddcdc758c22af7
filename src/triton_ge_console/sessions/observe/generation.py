"""A generate model's token-level figures from the glue's `ge_generate_*` metrics (backend_glue's
generate_metrics): time to first token, between tokens and end to end (percentiles of the histograms
since load, or of what they gained over a recent window: `over_window`), tokens, running and waiting
sequences, KV-cache use, and how sequences ended."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # snapshots import this module, and `--help` must not load the metrics parser's imports
    from triton_ge_console.sessions.observe.metrics import MetricTable, ModelKey

PREFIX = "ge_generate_"
TTFT = "ge_generate_time_to_first_token_seconds"
ITL = "ge_generate_inter_token_latency_seconds"
E2E = "ge_generate_e2e_request_latency_seconds"
MS_PER_S = 1000.0
Buckets = tuple[tuple[float, float], ...]  # cumulative (upper bound, count)
K = TypeVar("K")  # a model's key: Triton's (name, version), an engine's model name


@dataclass(frozen=True, slots=True)
class GenerationFigures:
    """One generate model's figures; None where the server did not report one."""

    ttft_p50_ms: float | None = None
    ttft_p99_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p99_ms: float | None = None
    prompt_tokens_total: int | None = None
    generated_tokens_total: int | None = None
    running: int | None = None
    waiting: int | None = None
    kv_cache_bytes: int | None = None
    kv_cache_capacity_bytes: int | None = None
    ended_by_reason: tuple[tuple[str, int], ...] = ()  # (length | stop | cancel | error, count)
    output_tokens_per_s: float | None = None  # generated tokens per second since the previous poll
    kv_cache_usage: float | None = None  # the KV share (0..1) as a server reports it (vLLM, MindIE: no bytes)
    e2e_p50_ms: float | None = None
    e2e_p99_ms: float | None = None
    window_s: float | None = None  # the span the percentiles cover, up to now (None: since the model loaded)
    histograms: tuple[tuple[str, Buckets], ...] = ()  # the since-load buckets they come from (not shown)
    rejected_total: int | None = None  # requests refused before they ran: the client's, not failures

    @property
    def kv_cache_share(self) -> float | None:
        """The part of the KV capacity the running sequences hold (0..1)."""
        used, capacity = self.kv_cache_bytes, self.kv_cache_capacity_bytes
        if used is None or not capacity:
            return self.kv_cache_usage
        return used / capacity


def with_token_rate(figures: GenerationFigures, previous: GenerationFigures | None,
                    elapsed_s: float) -> GenerationFigures:
    """The figures with their output tokens/s over the interval since the previous poll's (None on the
    first poll or without a count; a count gone backwards, a reload, counts from zero as rates.deltas)."""
    now = figures.generated_tokens_total
    before = None if previous is None else previous.generated_tokens_total
    if now is None or before is None or elapsed_s <= 0:
        return figures
    delta = now - before if now >= before else now
    return dataclasses.replace(figures, output_tokens_per_s=delta / elapsed_s)


def over_window(figures: GenerationFigures, earlier: GenerationFigures | None,
                window_s: float) -> GenerationFigures:
    """The figures with their percentiles over what the histograms gained since `earlier` (window_s ago):
    what happened now, not since load; None where nothing was observed in the window. Without an earlier
    reading they stay since load (window_s None); a histogram that went backwards (a reload) counts from
    zero."""
    if earlier is None or not figures.histograms or window_s <= 0:
        return figures
    before = dict(earlier.histograms)
    now = {name: list(_gained(buckets, before.get(name, ()))) for name, buckets in figures.histograms}
    ttft, itl, e2e = now.get(TTFT), now.get(ITL), now.get(E2E)
    return dataclasses.replace(
        figures, window_s=window_s,
        ttft_p50_ms=quantile_ms(ttft, 0.5), ttft_p99_ms=quantile_ms(ttft, 0.99),
        itl_p50_ms=quantile_ms(itl, 0.5), itl_p99_ms=quantile_ms(itl, 0.99),
        e2e_p50_ms=quantile_ms(e2e, 0.5), e2e_p99_ms=quantile_ms(e2e, 0.99))


def _gained(buckets: Buckets, before: Buckets) -> Buckets:
    """Each bucket's count less its earlier one (all of it when any went backwards: a reload)."""
    earlier = dict(before)
    gained = tuple((bound, count - earlier.get(bound, 0.0)) for bound, count in buckets)
    return buckets if any(count < 0 for _, count in gained) else gained


def generation_row(figures: GenerationFigures | None) -> dict[str, Any] | None:
    """A generate model's token figures as plain data, its KV share included (None: not a generate model)."""
    if figures is None:
        return None
    row = dataclasses.asdict(figures)
    del row["histograms"]
    row["ended_by_reason"] = [list(pair) for pair in figures.ended_by_reason]
    row["kv_cache_share"] = figures.kv_cache_share
    return row


def histogram_quantile(buckets: list[tuple[float, float]], quantile: float) -> float | None:
    """Prometheus' histogram_quantile over cumulative (upper bound, count) buckets: linear within the
    bucket the rank falls in; the last finite bound when it falls in +Inf; None with no observations."""
    ordered = sorted(buckets)
    if not ordered or ordered[-1][1] <= 0:
        return None
    rank = quantile * ordered[-1][1]
    lower, below = 0.0, 0.0
    for bound, count in ordered:
        if count >= rank:
            if bound == float("inf"):
                return lower
            if count == below:
                return bound
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return lower


def _buckets(table: MetricTable, name: str) -> dict[ModelKey, list[tuple[float, float]]]:
    """Per model version, its histogram buckets summed over instances and devices."""
    sums: dict[ModelKey, dict[float, float]] = {}
    for sample in table.samples(f"{name}_bucket"):
        model, bound = sample.model, sample.label("le")
        if model is None or bound is None:
            continue
        per_bound = sums.setdefault(model, {})
        per_bound[float(bound)] = per_bound.get(float(bound), 0.0) + sample.value
    return {model: list(per_bound.items()) for model, per_bound in sums.items()}


def _sums(table: MetricTable, name: str) -> dict[ModelKey, float]:
    """Per model version, a metric summed over its other labels."""
    return table.by_model(name)


def quantile_ms(buckets: list[tuple[float, float]] | None, quantile: float) -> float | None:
    """A quantile of a seconds histogram, in milliseconds (None: no observations yet); Triton's and the
    engines' figures alike."""
    seconds = histogram_quantile(buckets, quantile) if buckets else None
    return None if seconds is None else seconds * MS_PER_S


def count_of(values: Mapping[K, float], model: K) -> int | None:
    """An integer figure of one model, None when absent; Triton's and the engines' figures alike."""
    value = values.get(model)
    return None if value is None else int(value)


def generation_figures(table: MetricTable | None) -> dict[ModelKey, GenerationFigures]:
    """Per generate model version (the glue labels each series with both, as Triton's own), its figures;
    models without `ge_generate_*` metrics are absent."""
    if table is None or not any(name.startswith(PREFIX) for name in table.names()):
        return {}
    ttft, itl, e2e = _buckets(table, TTFT), _buckets(table, ITL), _buckets(table, E2E)
    totals = {key: _sums(table, f"{PREFIX}{key}") for key in (
        "prompt_tokens_total", "generation_tokens_total", "running_sequences", "waiting_sequences",
        "kv_cache_bytes", "kv_cache_capacity_bytes", "requests_rejected_total")}
    ended: dict[ModelKey, dict[str, int]] = {}
    for sample in table.samples(f"{PREFIX}sequences_ended_total"):
        model, reason = sample.model, sample.label("reason")
        if model is not None and reason is not None:
            ended.setdefault(model, {})[reason] = ended.get(model, {}).get(reason, 0) + int(sample.value)
    models = set(ttft) | set(ended) | set().union(*(set(v) for v in totals.values()))
    return {model: GenerationFigures(
        ttft_p50_ms=quantile_ms(ttft.get(model), 0.5), ttft_p99_ms=quantile_ms(ttft.get(model), 0.99),
        itl_p50_ms=quantile_ms(itl.get(model), 0.5), itl_p99_ms=quantile_ms(itl.get(model), 0.99),
        prompt_tokens_total=count_of(totals["prompt_tokens_total"], model),
        generated_tokens_total=count_of(totals["generation_tokens_total"], model),
        running=count_of(totals["running_sequences"], model),
        waiting=count_of(totals["waiting_sequences"], model),
        kv_cache_bytes=count_of(totals["kv_cache_bytes"], model),
        kv_cache_capacity_bytes=count_of(totals["kv_cache_capacity_bytes"], model),
        ended_by_reason=tuple(sorted(ended.get(model, {}).items())),
        rejected_total=count_of(totals["requests_rejected_total"], model),
        e2e_p50_ms=quantile_ms(e2e.get(model), 0.5), e2e_p99_ms=quantile_ms(e2e.get(model), 0.99),
        histograms=tuple((name, tuple(sorted(found[model]))) for name, found in
                         ((TTFT, ttft), (ITL, itl), (E2E, e2e)) if model in found),
    ) for model in sorted(models)}
