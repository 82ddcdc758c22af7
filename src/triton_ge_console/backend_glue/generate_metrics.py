"""A generate model's token-level figures in Triton's /metrics (Python-backend custom metrics).

The scheduler's thread only appends to plain lists under a lock; a background thread hands them to Triton
(`flusher.MetricFlusher`, as for `telemetry`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from triton_ge_console.backend_glue.flusher import MetricFlusher
from triton_ge_console.backend_glue.generate_scheduler import ENDINGS, Lifetime

TTFT = "ge_generate_time_to_first_token_seconds"
ITL = "ge_generate_inter_token_latency_seconds"
E2E = "ge_generate_e2e_request_latency_seconds"
QUEUE = "ge_generate_request_queue_time_seconds"
PREFILL = "ge_generate_request_prefill_time_seconds"
DECODE = "ge_generate_request_decode_time_seconds"
TPOT = "ge_generate_time_per_output_token_seconds"
PROMPT_LENGTH = "ge_generate_request_prompt_tokens"
GENERATION_LENGTH = "ge_generate_request_generation_tokens"
# Request-level times to 80 s and beyond (a long prompt behind a queue takes tens of seconds; vLLM's go to
# 2,560 s), from 1 ms (a first token here can come that soon).
TTFT_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0,
                80.0, 160.0, 640.0]
ITL_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0]
LENGTH_BUCKETS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000]
HISTOGRAMS = {
    TTFT: ("Time from a request's arrival to its first token (seconds)", TTFT_BUCKETS),
    ITL: ("Time between two tokens of one sequence (seconds)", ITL_BUCKETS),
    E2E: ("Time from a request's arrival to its last token (seconds)", TTFT_BUCKETS),
    QUEUE: ("Time a request waited for room to run (seconds)", TTFT_BUCKETS),
    PREFILL: ("Time from a request's admission to its first token (seconds)", TTFT_BUCKETS),
    DECODE: ("Time from a request's first token to its last (seconds)", TTFT_BUCKETS),
    TPOT: ("A request's decode time over its tokens after the first (seconds)", ITL_BUCKETS),
    PROMPT_LENGTH: ("Prompt tokens of a request that ended", LENGTH_BUCKETS),
    GENERATION_LENGTH: ("Tokens a request that ended generated", LENGTH_BUCKETS),
}
COUNTERS = {
    "ge_generate_prompt_tokens_total": "Prompt tokens prefilled (counted as each prompt's first token goes)",
    "ge_generate_generation_tokens_total": "Tokens generated and streamed",
    "ge_generate_sequences_ended_total": "Sequences ended, by reason (length, stop, cancel, error)",
    "ge_generate_requests_rejected_total": "Requests refused before they ran (bad fields, beyond the "
                                           "context or the KV capacity, a full queue): not model failures",
}
GAUGES = {  # per instance: each sets its own
    "ge_generate_running_sequences": "Sequences decoding together now",
    "ge_generate_waiting_sequences": "Requests queued for room to run",
    "ge_generate_kv_cache_bytes": "KV-cache bytes the running sequences reserve (prompt + max_tokens each)",
    "ge_generate_kv_cache_used_bytes": "KV-cache bytes the running sequences' tokens take now",
    "ge_generate_kv_cache_usage_ratio": "KV-cache bytes used over the capacity (vLLM's kv_cache_usage_perc)",
    "ge_generate_kv_cache_capacity_bytes": "KV-cache capacity of the instance (generate.kv_cache_mib)",
}


@dataclass
class _PendingTokens:
    """What happened since the last flush."""

    observed: dict[str, list[float]] = field(default_factory=dict)  # histogram → values
    prompt_tokens: int = 0
    generated: int = 0
    ended: dict[str, int] = field(default_factory=dict)
    occupancy: tuple[int, int, int, int] | None = None

    def add(self, histogram: str, value: float) -> None:
        """One value for a histogram."""
        self.observed.setdefault(histogram, []).append(value)
    rejected: int = 0


def request_figures(lifetime: Lifetime) -> dict[str, float]:
    """A request's figures by histogram: those of the phases it went through (none for one ended while
    waiting but its lengths and end-to-end time, when it had a token)."""
    figures: dict[str, float] = {PROMPT_LENGTH: float(lifetime.prompt_tokens),
                                 GENERATION_LENGTH: float(lifetime.generated)}
    if lifetime.admitted is not None:
        figures[QUEUE] = lifetime.admitted - lifetime.arrived
    if lifetime.first_token is None or lifetime.last_token is None:
        return figures
    figures[E2E] = lifetime.last_token - lifetime.arrived
    if lifetime.admitted is not None:
        figures[PREFILL] = lifetime.first_token - lifetime.admitted
    figures[DECODE] = lifetime.last_token - lifetime.first_token
    if lifetime.generated > 1:
        figures[TPOT] = figures[DECODE] / (lifetime.generated - 1)
    return figures


class GenerateMetrics:
    """The scheduler's Events, kept for Triton's /metrics."""

    def __init__(self, pb_utils: Any, labels: dict[str, str], instance: str, kv_capacity: int) -> None:
        self._lock = threading.Lock()
        self._pending = _PendingTokens()
        self._pb = pb_utils
        family = pb_utils.MetricFamily
        self._families: dict[str, Any] = {}  # must outlive their metrics (Triton drops the series with them)
        self._histograms: dict[str, Any] = {}
        kind = getattr(family, "HISTOGRAM", None)
        if kind is not None:
            for name, (text, buckets) in HISTOGRAMS.items():
                self._families[name] = family(name=name, description=text, kind=kind)
                self._histograms[name] = self._families[name].Metric(labels=labels, buckets=buckets)
        for name, text in COUNTERS.items():
            self._families[name] = family(name=name, description=text, kind=family.COUNTER)
        self._prompt = self._families["ge_generate_prompt_tokens_total"].Metric(labels=labels)
        self._generated = self._families["ge_generate_generation_tokens_total"].Metric(labels=labels)
        self._rejected = self._families["ge_generate_requests_rejected_total"].Metric(labels=labels)
        ended = self._families["ge_generate_sequences_ended_total"]
        self._ended = {reason: ended.Metric(labels={**labels, "reason": reason}) for reason in ENDINGS}
        gauge_labels = {**labels, "instance": instance}
        self._gauges = {}
        for name, text in GAUGES.items():
            self._families[name] = family(name=name, description=text, kind=family.GAUGE)
            self._gauges[name] = self._families[name].Metric(labels=gauge_labels)
        self._gauges["ge_generate_kv_cache_capacity_bytes"].set(float(kv_capacity))
        self._capacity = kv_capacity
        self._flusher = MetricFlusher(self._pb.Logger, "generate metrics", self.flush, self.flush,
                                      "ge-generate-metrics")

    def first_token(self, seconds: float, prompt_tokens: int) -> None:
        """A sequence's first token went out: its prompt is prefilled."""
        with self._lock:
            self._pending.add(TTFT, seconds)
            self._pending.generated += 1
            self._pending.prompt_tokens += prompt_tokens

    def next_token(self, seconds: float) -> None:
        """Another token of a sequence went out."""
        with self._lock:
            self._pending.add(ITL, seconds)
            self._pending.generated += 1

    def ended(self, reason: str, lifetime: Lifetime) -> None:
        """A sequence left the batch: its request's figures, as vLLM keeps them."""
        with self._lock:
            pending = self._pending
            pending.ended[reason] = pending.ended.get(reason, 0) + 1
            for name, value in request_figures(lifetime).items():
                pending.add(name, value)

    def occupancy(self, running: int, waiting: int, kv_bytes: int, kv_used: int) -> None:
        """Where the instance stands after a step."""
        with self._lock:
            self._pending.occupancy = (running, waiting, kv_bytes, kv_used)

    def rejected(self) -> None:
        """A request was refused before it ran."""
        with self._lock:
            self._pending.rejected += 1

    def flush(self) -> None:
        """Hand what happened to Triton."""
        with self._lock:
            pending, self._pending = self._pending, _PendingTokens(occupancy=self._pending.occupancy)
        for name, values in pending.observed.items():
            if name in self._histograms:
                for value in values:
                    self._histograms[name].observe(value)
        if pending.prompt_tokens:
            self._prompt.increment(float(pending.prompt_tokens))
        if pending.generated:
            self._generated.increment(float(pending.generated))
        if pending.rejected:
            self._rejected.increment(float(pending.rejected))
        for reason, count in pending.ended.items():
            self._ended[reason].increment(float(count))
        if pending.occupancy is not None:
            running, waiting, kv_bytes, kv_used = pending.occupancy
            self._gauges["ge_generate_running_sequences"].set(float(running))
            self._gauges["ge_generate_waiting_sequences"].set(float(waiting))
            self._gauges["ge_generate_kv_cache_bytes"].set(float(kv_bytes))
            self._gauges["ge_generate_kv_cache_used_bytes"].set(float(kv_used))
            usage = kv_used / self._capacity if self._capacity else 0.0
            self._gauges["ge_generate_kv_cache_usage_ratio"].set(usage)

    def close(self) -> None:
        """Stop after a last flush."""
        self._flusher.close()
