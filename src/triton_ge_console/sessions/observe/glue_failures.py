"""The ge glue's error responses that Triton counted as successes, per model version, in Triton's count.

From python_backend r24.06 (Triton 2.47) on, its PbMetricReporter reports every request of an execute that
returned as a success, error responses included (r24.05 and earlier: a failure). Read in
triton-inference-server/python_backend `src/python_be.cc` and `src/pb_metric_reporter.cc`, r24.05 to r26.07,
and measured on 2.51. The glue counts them itself (`ge_request_failures_total`) so figures can move them
from success to failure.

The two counts live on different clocks: an unload and load starts Triton's counters from zero while the
glue's series carries on (measured on 2.51). So the glue's count is taken from where it stood when the
model was loaded (`ge_request_failures_at_load`, set by the glue), or, from a glue without that gauge, when
this poller saw Triton's counters start afresh; and never above Triton's successes, which include every
one of them.
"""

from __future__ import annotations

from triton_ge_console.sessions.observe.metrics import MetricTable, ModelKey
from triton_ge_console.sessions.observe.rates import ModelCounters, counters_reset

GLUE_FAILURES = "ge_request_failures_total"
GLUE_FAILURES_AT_LOAD = "ge_request_failures_at_load"
ERRORS_COUNTED_AS_SUCCESS_SINCE = (2, 47)


def counts_errors_as_success(version: str | None) -> bool:
    """Whether this Triton reports a Python backend's error responses as successes (unknown: no)."""
    try:
        major, minor = (int(part) for part in (version or "").split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= ERRORS_COUNTED_AS_SUCCESS_SINCE


class GlueFailures:
    """One poller's view of the glue's failures: where each model's count stood when Triton's restarted."""

    def __init__(self) -> None:
        self._seen: dict[ModelKey, float] = {}  # the glue's totals at the previous poll
        self._base: dict[ModelKey, float] = {}  # the glue's total when Triton's counters last restarted
        self._triton: dict[ModelKey, ModelCounters] = {}  # Triton's counters at the previous poll

    def update(self, table: MetricTable, version: str | None,
               triton: dict[ModelKey, ModelCounters]) -> dict[ModelKey, float]:
        """This poll's glue failures within Triton's current counts (empty where Triton counts them)."""
        if not counts_errors_as_success(version):
            return {}
        totals, at_load = table.by_model(GLUE_FAILURES), table.by_model(GLUE_FAILURES_AT_LOAD)
        counts = {}
        for key, total in totals.items():
            seen, before, now = self._seen.get(key), self._triton.get(key), triton.get(key)
            if seen is not None and total < seen:  # the glue's series started afresh as well
                self._base[key] = 0.0
            elif now is None:  # Triton counts nothing for it (unloaded): what follows starts from here
                self._base[key] = total
            elif seen is not None and before is not None and counters_reset(before, now):
                self._base[key] = seen
            successes = now.success if now is not None else 0.0
            base = at_load[key] if key in at_load else self._base.get(key, 0.0)
            counts[key] = min(max(0.0, total - base), successes)
        self._seen, self._triton = totals, triton
        self._base = {key: base for key, base in self._base.items() if key in totals}  # gone: start afresh
        return counts
