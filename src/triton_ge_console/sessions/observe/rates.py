"""Counter deltas between two polls turned into rates and per-request averages, never negative."""

from __future__ import annotations

import math
from typing import NamedTuple

US_PER_MS = 1000.0


class ModelCounters(NamedTuple):
    """Triton's cumulative per-model counters at one instant (durations in microseconds); a tuple, because
    a poll builds hundreds of them."""

    success: float = 0.0
    failure: float = 0.0
    inference: float = 0.0
    execution: float = 0.0
    request_us: float = 0.0
    queue_us: float = 0.0
    compute_input_us: float = 0.0
    compute_infer_us: float = 0.0
    compute_output_us: float = 0.0

    @property
    def compute_us(self) -> float:
        """Input + infer + output compute time."""
        return self.compute_input_us + self.compute_infer_us + self.compute_output_us


class ModelRates(NamedTuple):
    """Figures over one interval between polls; None where the interval gives no basis."""

    request_rate: float | None = None
    failure_rate: float | None = None  # failed requests per second
    inference_rate: float | None = None
    execution_rate: float | None = None
    avg_batch: float | None = None
    avg_latency_ms: float | None = None
    queue_ms: float | None = None
    compute_ms: float | None = None
    reset: bool = False  # the counters went backwards (model reloaded): deltas count from zero


IDLE = ModelRates(request_rate=0.0, failure_rate=0.0, inference_rate=0.0, execution_rate=0.0)


def counters_reset(previous: ModelCounters, current: ModelCounters) -> bool:
    """Whether any counter went backwards, i.e. Triton started counting afresh (a reload)."""
    return any(now < before for now, before in zip(current, previous, strict=True))


def hold_success(previous: ModelCounters | None, current: ModelCounters) -> ModelCounters:
    """The glue counts an error response before Triton counts it as a success, and figures subtract the
    one from the other: in between, success reads lower while nothing else went back. Hold it there
    rather than read a reset (a reload takes every counter back)."""
    if previous is None or current.success >= previous.success:
        return current
    if counters_reset(ModelCounters(0.0, *previous[1:]), ModelCounters(0.0, *current[1:])):
        return current
    return current._replace(success=previous.success)


def deltas(previous: ModelCounters | None, current: ModelCounters) -> tuple[ModelCounters, bool]:
    """Per-counter increase since the previous poll; after a reset the current values are the increase."""
    if previous is None:
        return ModelCounters(), False
    if counters_reset(previous, current):
        return current, True
    return ModelCounters(*(now - before for now, before in zip(current, previous, strict=True))), False


def compute_rates(previous: ModelCounters | None, current: ModelCounters, elapsed_s: float) -> ModelRates:
    """Rates per second and averages per request over the interval; the first poll has no rates."""
    if previous is None or elapsed_s <= 0:
        return ModelRates()
    if previous == current and math.isfinite(sum(current)):
        return IDLE  # what the arithmetic below gives for all-zero deltas, without it (most models idle)
    delta, reset = deltas(previous, current)
    return ModelRates(
        request_rate=delta.success / elapsed_s,
        failure_rate=delta.failure / elapsed_s,
        inference_rate=delta.inference / elapsed_s,
        execution_rate=delta.execution / elapsed_s,
        avg_batch=_ratio(delta.inference, delta.execution),
        avg_latency_ms=_per_request_ms(delta.request_us, delta.success),
        queue_ms=_per_request_ms(delta.queue_us, delta.success),
        compute_ms=_per_request_ms(delta.compute_us, delta.success),
        reset=reset,
    )


def _ratio(numerator: float, denominator: float) -> float | None:
    """numerator / denominator, None when nothing happened."""
    return numerator / denominator if denominator > 0 else None


def _per_request_ms(total_us: float, requests: float) -> float | None:
    """Average milliseconds per request, None with no requests (or no time reported, as with npu_ge)."""
    if requests <= 0 or total_us <= 0:
        return None
    return total_us / requests / US_PER_MS


def rate(before: float | None, now: float | None, elapsed_s: float) -> float | None:
    """A counter's per-second rate over an interval (None without two readings; a counter gone back, a
    restarted server, counts from zero as `deltas` does)."""
    if before is None or now is None or elapsed_s <= 0:
        return None
    return (now - before if now >= before else now) / elapsed_s
