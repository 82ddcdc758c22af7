"""One row per running session: health, version, models, load, latency, NPUs; what `status --all` prints.

Every figure a server did not give is None (`—` in the table), never a guess.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from triton_ge_console.session_states import NOT_ANSWERING, READY, STARTING
from triton_ge_console.sessions.live import LiveSource
from triton_ge_console.sessions.observe.follow import sample
from triton_ge_console.sessions.observe.snapshot import ModelSnapshot, ServerSnapshot
from triton_ge_console.sessions.observe.source import SessionSource
from triton_ge_console.sessions.server.engines import label
from triton_ge_console.sessions.server.registry import Registry, SessionRecord, effective_state
from triton_ge_console.triton_terms import (
    MODEL_READY,
    SERVER_LIVE,
    SERVER_READY,
    SERVER_UNREACHABLE,
    parse_endpoint,
)

# Triton's reason for a model unloaded on purpose: not a failure.
UNLOADED_REASON = "unloaded"
NO_ANSWER = "no answer"
SourceFactory = Callable[[SessionRecord], SessionSource]


@dataclass(frozen=True)
class FleetRow:
    """One server of the fleet, from its latest snapshot."""

    name: str
    where: str  # host:port of its HTTP endpoint (and where it was discovered)
    health: str  # ready | live | unreachable | not answering (no reply in time) | no answer (no snapshot)
    version: str | None = None
    models_ready: int | None = None
    models_failing: int | None = None
    models_total: int | None = None
    requests_per_s: float | None = None
    worst_p99_ms: float | None = None
    npu_util_mean: float | None = None  # 0..1
    npu_util_max: float | None = None
    npu_memory_used_bytes: int | None = None
    npu_memory_total_bytes: int | None = None
    error: str | None = None
    engine: str | None = None  # None: Triton; vllm | mindie (sessions.server.engines)

    @property
    def server(self) -> str | None:
        """What serves there: "Triton 2.51.0", "vLLM", "MindIE" (None: not known)."""
        if self.engine is not None:
            return label(self.engine)
        return f"Triton {self.version}" if self.version else None

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON."""
        return dataclasses.asdict(self)


def running_records(registry: Registry) -> list[SessionRecord]:
    """Sessions whose server should be answering (starting or ready), by name."""
    records, _ = registry.scan()
    return [r for r in records if effective_state(r) in (STARTING, READY)]


def fleet_rows(records: Sequence[SessionRecord], *, interval_s: float = 1.0, timeout_s: float = 2.0,
               max_workers: int = 8, source_for: SourceFactory | None = None) -> list[FleetRow]:
    """Poll every record twice (rates need two readings), concurrently; one row each, in record order."""
    make = source_for or (lambda record: LiveSource.from_record(record, sample_traces=False))  # a look
    sources = [make(record) for record in records]
    try:
        taken = sample(sources, polls=2, interval_s=interval_s, deadline_s=interval_s + 2 * timeout_s + 1,
                       max_workers=max_workers)
    finally:
        for source in sources:
            source.close()
    return [row_for(record, taken.get(record.name) or []) for record in records]


def row_for(record: SessionRecord, snapshots: Sequence[ServerSnapshot]) -> FleetRow:
    """The row of one session from its snapshots (the newest counts)."""
    return row_from(record.name, where_of(record), snapshots)


def row_from(name: str, where: str, snapshots: Sequence[ServerSnapshot]) -> FleetRow:
    """The row of one server from its snapshots (the newest counts); the fleet screen's rows too."""
    if not snapshots:
        return FleetRow(name, where, NO_ANSWER, error="no snapshot before the deadline")
    snapshot = snapshots[-1]
    if not snapshot.live:
        health = NOT_ANSWERING if snapshot.no_reply else SERVER_UNREACHABLE
        return FleetRow(name, where, health, version=snapshot.version, error=snapshot.error,
                        engine=snapshot.engine)
    return FleetRow(
        name, where, SERVER_READY if snapshot.ready else SERVER_LIVE, version=snapshot.version,
        engine=snapshot.engine,
        **_model_figures(snapshot.models), **_device_figures(snapshot),
        error=snapshot.error,
    )


def where_of(record: SessionRecord) -> str:
    """host:port, plus the Kubernetes target a pod came from."""
    netloc = parse_endpoint(record.http_url, strict=False).netloc or record.http_url
    return f"{netloc} ({record.discovered_by})" if record.discovered_by else netloc


def is_failed_load(model: ModelSnapshot) -> bool:
    """Not READY for a reason other than an unload on purpose (a load that failed)."""
    return model.state != MODEL_READY and bool(model.reason) and model.reason != UNLOADED_REASON


def _model_figures(models: Sequence[ModelSnapshot]) -> dict[str, Any]:
    """Counts by state, total request rate (None after a single poll: rates need two), the worst p99."""
    failing = [m for m in models if m.failing or is_failed_load(m)]
    rates = [m.request_rate for m in models if m.request_rate is not None]
    p99s = [m.latency.p99_ms for m in models if m.latency.p99_ms is not None]
    return {
        "models_ready": sum(1 for m in models if m.state == MODEL_READY),
        "models_failing": len(failing),
        "models_total": len(models),
        "requests_per_s": sum(rates) if rates else None,
        "worst_p99_ms": max(p99s) if p99s else None,
    }


def _device_figures(snapshot: ServerSnapshot) -> dict[str, Any]:
    """NPU utilization mean and max, memory used and total over the devices that report them."""
    utils = [d.utilization for d in snapshot.devices if d.utilization is not None]
    used = [d.memory_used_bytes for d in snapshot.devices if d.memory_used_bytes is not None]
    total = [d.memory_total_bytes for d in snapshot.devices if d.memory_total_bytes is not None]
    return {
        "npu_util_mean": sum(utils) / len(utils) if utils else None,
        "npu_util_max": max(utils) if utils else None,
        "npu_memory_used_bytes": sum(used) if used else None,
        "npu_memory_total_bytes": sum(total) if total else None,
    }
