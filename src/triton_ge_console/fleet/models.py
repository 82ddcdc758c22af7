"""Each model across the fleet: on how many servers it serves, its total load, its worst p99, its token
figures where a server gives them (a generate model, vLLM, MindIE), and the versions each server runs when
they are not all the same."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from triton_ge_console.display import MISSING, number, percent
from triton_ge_console.sessions.observe.snapshot import ModelSnapshot, ServerSnapshot, version_key
from triton_ge_console.triton_terms import MODEL_READY

T = TypeVar("T", int, float)


@dataclass(frozen=True)
class FleetModelRow:
    """One model over every server that lists it."""

    name: str
    replicas: int  # servers where a version of it is READY and not FAILING
    servers: int  # servers whose repository lists it
    requests_per_s: float | None = None  # summed over the servers that gave a rate
    worst_p99_ms: float | None = None
    versions: tuple[tuple[str, tuple[str, ...]], ...] = field(default=())  # (server, versions READY there)
    running: int | None = None  # sequences or requests running, summed over the servers that gave it
    waiting: int | None = None
    worst_ttft_p99_ms: float | None = None
    worst_itl_p99_ms: float | None = None
    tokens_per_s: float | None = None  # generated tokens per second, summed
    worst_kv_share: float | None = None  # the fullest KV cache among its servers (0..1)

    @property
    def versions_differ(self) -> bool:
        """Whether the servers serving it do not all run the same versions."""
        return len({ready for _server, ready in self.versions if ready}) > 1


def model_rows(snapshots: Mapping[str, ServerSnapshot]) -> list[FleetModelRow]:
    """One row per model name, by name, from each server's latest snapshot (servers not answering count
    for nothing: their models are unknown, not absent)."""
    by_model: dict[str, dict[str, list[ModelSnapshot]]] = {}
    for server, snapshot in sorted(snapshots.items()):
        if snapshot.error is not None:
            continue
        for model in snapshot.models:
            by_model.setdefault(model.name, {}).setdefault(server, []).append(model)
    return [_row(name, servers) for name, servers in sorted(by_model.items())]


def _serving(model: ModelSnapshot) -> bool:
    """READY in Triton's index and not found failing."""
    return model.state == MODEL_READY and not model.failing


def _row(name: str, servers: Mapping[str, list[ModelSnapshot]]) -> FleetModelRow:
    """The row of one model from its versions on each server."""
    every = [m for versions in servers.values() for m in versions]
    rates = [m.request_rate for m in every if m.request_rate is not None]
    p99s = [m.latency.p99_ms for m in every if m.latency.p99_ms is not None]
    ready = tuple((server, tuple(sorted((m.version for m in versions if _serving(m)), key=version_key)))
                  for server, versions in servers.items())
    tokens = [m.generation for m in every if m.generation is not None]
    return FleetModelRow(
        name=name,
        replicas=sum(1 for _server, versions in ready if versions),
        servers=len(servers),
        requests_per_s=sum(rates) if rates else None,
        worst_p99_ms=max(p99s) if p99s else None,
        versions=ready,
        running=_total([g.running for g in tokens]),
        waiting=_total([g.waiting for g in tokens]),
        worst_ttft_p99_ms=_worst([g.ttft_p99_ms for g in tokens]),
        worst_itl_p99_ms=_worst([g.itl_p99_ms for g in tokens]),
        tokens_per_s=_total([g.output_tokens_per_s for g in tokens]),
        worst_kv_share=_worst([g.kv_cache_share for g in tokens]),
    )


def _total(values: list[T | None]) -> T | None:
    """The sum of the figures given (None when no server gave one)."""
    known = [v for v in values if v is not None]
    return sum(known[1:], known[0]) if known else None


def _worst(values: list[float | None]) -> float | None:
    """The largest figure given (None when no server gave one)."""
    known = [v for v in values if v is not None]
    return max(known) if known else None


def token_texts(row: FleetModelRow) -> tuple[str, str, str, str]:
    """RUN/WAIT, TTFT/ITL p99 ms, TOK/S and KV as text (— where no server gave the figure)."""
    run_wait = MISSING if row.running is None and row.waiting is None else \
        f"{number(row.running)}/{number(row.waiting)}"
    latency = MISSING if row.worst_ttft_p99_ms is None and row.worst_itl_p99_ms is None else \
        f"{number(row.worst_ttft_p99_ms, 1)}/{number(row.worst_itl_p99_ms, 1)}"
    return run_wait, latency, number(row.tokens_per_s, 1), percent(row.worst_kv_share)


def versions_text(row: FleetModelRow) -> str:
    """"v1" when every server runs the same; else which servers run which ("v1: a, b · v2: c")."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for server, ready in row.versions:
        groups.setdefault(ready, []).append(server)
    if not row.versions_differ:
        same = next((ready for ready in groups if ready), ())
        return "/".join(f"v{v}" if v else MISSING for v in same) or "none READY"
    parts = []
    for ready, names in groups.items():
        label = "/".join(f"v{v}" if v else MISSING for v in ready) or "none READY"
        parts.append(f"{label}: {', '.join(names)}")
    return " · ".join(parts)
