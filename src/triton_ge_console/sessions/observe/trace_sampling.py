"""How often Triton traces each model, so the console gets p50/p90/p99 without `summary_latencies`.

Triton's `trace_rate` N traces every N-th request; the rate is chosen from the model's observed req/s
so about TARGET_TRACES_PER_S requests a second are traced whatever the load (a busy model pays for a
handful of traces, an idle one has every request traced). `trace_count` is a lease: Triton stops
tracing once that many were taken, so a console that goes away leaves at most one lease of traces
behind; the poller renews it when about half is used.

The lease is short (LEASE_S of traces at the rate in force) because Triton 2.51 crashes (SIGSEGV) when
it traces at a high rate: triton-inference-server/server#7795, reproduced here with every request of a
2,600 req/s model traced (the server died after 12,000-50,000 traces). A model whose load jumps between
two polls (an idle one has every request traced) can so trace at most one short lease at the old rate
before the next poll fits the rate to the new load. A setting is re-sent only when the wanted rate
or flush size is a factor HYSTERESIS away from the one in force (a noisy req/s sends nothing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# Traced requests per second per model (benchmarks/console_overhead.py --trace-ab measures the cost).
TARGET_TRACES_PER_S = 10.0
FLUSH_S = 2.0  # Triton writes a trace file every `log_frequency` traces: about this often
LEASE_S = 10.0  # seconds of traces one lease holds at the rate in force (see the docstring: kept short)
MIN_COUNT = 10  # an idle model's lease: a burst on it traces no more before the next poll re-fits
MAX_LOG_FREQUENCY = 100
HYSTERESIS = 2.0
RETRY_S = 60.0  # after Triton refused a setting


@dataclass(frozen=True)
class Sampling:
    """One model's trace setting: every `rate`-th request, a file per `log_frequency`, `count` in all."""

    rate: int
    log_frequency: int
    count: int


def sampling_for(request_rate: float | None) -> Sampling:
    """The setting for a model serving `request_rate` req/s (unknown or idle: trace every request)."""
    load = request_rate if request_rate is not None and request_rate > 0 else 0.0
    rate = max(1, math.floor(load / TARGET_TRACES_PER_S))
    traced_per_s = load / rate if load else 1.0
    log_frequency = max(1, min(MAX_LOG_FREQUENCY, round(traced_per_s * FLUSH_S)))
    return Sampling(rate, log_frequency, max(MIN_COUNT, round(traced_per_s * LEASE_S)))


def far_apart(a: int, b: int) -> bool:
    """Whether two settings differ by the hysteresis factor or more."""
    return max(a, b) >= HYSTERESIS * min(a, b)


@dataclass
class _Armed:
    """A setting in force and the traces it has used up (estimated from req/s)."""

    sampling: Sampling
    used: float = 0.0


class TraceSampler:
    """Which models need a (new) trace setting this poll; pure bookkeeping, the poller sends them."""

    def __init__(self) -> None:
        self._armed: dict[str, _Armed] = {}
        self._refused: dict[str, float] = {}
        self._last: float | None = None

    def due(self, load: dict[str, float | None], now: float) -> dict[str, Sampling]:
        """Settings to send, per model name, given each traced model's req/s (all versions) this poll; a
        model missing from `load` (unloaded) is forgotten, so it is armed afresh when it comes back."""
        elapsed = 0.0 if self._last is None else max(0.0, now - self._last)
        self._last = now
        for gone in self._armed.keys() - load.keys():
            del self._armed[gone]
        wanted = {}
        for model, request_rate in sorted(load.items()):
            if now < self._refused.get(model, -math.inf):
                continue
            armed = self._armed.get(model)
            if armed is None:
                wanted[model] = sampling_for(request_rate)
                continue
            armed.used += (request_rate or 0.0) * elapsed / armed.sampling.rate
            if self._changed(armed, request_rate):
                wanted[model] = sampling_for(request_rate)
        return wanted

    @staticmethod
    def _changed(armed: _Armed, request_rate: float | None) -> bool:
        """Renew a half-used lease; re-rate a model whose load moved (idle keeps what it has)."""
        if armed.used >= armed.sampling.count / 2:
            return True
        if not request_rate:
            return False
        new, old = sampling_for(request_rate), armed.sampling
        return far_apart(new.rate, old.rate) or far_apart(new.log_frequency, old.log_frequency)

    def armed(self, model: str, sampling: Sampling) -> None:
        """Triton accepted `sampling` for `model`: a fresh lease."""
        self._armed[model] = _Armed(sampling)
        self._refused.pop(model, None)

    def refused(self, model: str, now: float) -> None:
        """Triton refused: try again after RETRY_S rather than every poll."""
        self._refused[model] = now + RETRY_S

    def setting(self, model: str) -> Sampling | None:
        """The setting in force for `model`, None when the console never set one."""
        armed = self._armed.get(model)
        return None if armed is None else armed.sampling
