"""A generate model's token-level figures in Triton's /metrics (Python-backend custom metrics).

The scheduler's thread only appends to plain lists under a lock; a background thread hands them to Triton
(`flusher.MetricFlusher`, as for `telemetry`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from triton_ge_console.backend_glue.flusher import MetricFlusher
from triton_ge_console.backend_glue.generate_scheduler import ENDINGS

TTFT = "ge_generate_time_to_first_token_seconds"
ITL = "ge_generate_inter_token_latency_seconds"
TTFT_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0]
ITL_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0]
HISTOGRAMS = {
    TTFT: ("Time from a request's arrival to its first token (seconds)", TTFT_BUCKETS),
    ITL: ("Time between two tokens of one sequence (seconds)", ITL_BUCKETS),
}
COUNTERS = {
    "ge_generate_prompt_tokens_total": "Prompt tokens of the sequences that ended",
    "ge_generate_generation_tokens_total": "Tokens generated and streamed",
    "ge_generate_sequences_ended_total": "Sequences ended, by reason (length, stop, cancel, error)",
    "ge_generate_requests_rejected_total": "Requests refused before they ran (bad fields, beyond the "
                                           "context or the KV capacity, a full queue): not model failures",
}
GAUGES = {  # per instance: each sets its own
    "ge_generate_running_sequences": "Sequences decoding together now",
    "ge_generate_waiting_sequences": "Requests queued for room to run",
    "ge_generate_kv_cache_bytes": "KV-cache bytes the running sequences hold",
    "ge_generate_kv_cache_capacity_bytes": "KV-cache capacity of the instance (generate.kv_cache_mib)",
}


@dataclass
class _PendingTokens:
    """What happened since the last flush."""

    ttft: list[float] = field(default_factory=list)
    itl: list[float] = field(default_factory=list)
    prompt_tokens: int = 0
    generated: int = 0
    ended: dict[str, int] = field(default_factory=dict)
    occupancy: tuple[int, int, int] | None = None
    rejected: int = 0


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
        self._flusher = MetricFlusher(self._pb.Logger, "generate metrics", self.flush, self.flush,
                                      "ge-generate-metrics")

    def first_token(self, seconds: float) -> None:
        """A sequence's first token went out."""
        with self._lock:
            self._pending.ttft.append(seconds)
            self._pending.generated += 1

    def next_token(self, seconds: float) -> None:
        """Another token of a sequence went out."""
        with self._lock:
            self._pending.itl.append(seconds)
            self._pending.generated += 1

    def ended(self, reason: str, prompt_tokens: int, generated: int) -> None:
        """A sequence left the batch."""
        with self._lock:
            self._pending.prompt_tokens += prompt_tokens
            self._pending.ended[reason] = self._pending.ended.get(reason, 0) + 1

    def rejected(self) -> None:
        """A request was refused before it ran."""
        with self._lock:
            self._pending.rejected += 1

    def occupancy(self, running: int, waiting: int, kv_bytes: int) -> None:
        """Where the instance stands after a step."""
        with self._lock:
            self._pending.occupancy = (running, waiting, kv_bytes)

    def flush(self) -> None:
        """Hand what happened to Triton."""
        with self._lock:
            pending, self._pending = self._pending, _PendingTokens(occupancy=self._pending.occupancy)
        for name, values in ((TTFT, pending.ttft), (ITL, pending.itl)):
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
            running, waiting, kv_bytes = pending.occupancy
            self._gauges["ge_generate_running_sequences"].set(float(running))
            self._gauges["ge_generate_waiting_sequences"].set(float(waiting))
            self._gauges["ge_generate_kv_cache_bytes"].set(float(kv_bytes))

    def close(self) -> None:
        """Stop after a last flush."""
        self._flusher.close()
