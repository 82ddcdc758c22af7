"""Figures derived once on the snapshot, for the console and the notebooks alike."""

from __future__ import annotations

import pytest

from triton_ge_console.sessions.observe.snapshot import ModelSnapshot, ServerSnapshot


@pytest.mark.parametrize(("ready", "live", "health"), [(True, True, "ready"), (False, True, "live"),
                                                       (False, False, "down")])
def test_server_health(ready: bool, live: bool, health: str) -> None:
    assert ServerSnapshot(taken_at=0.0, session="s", ready=ready, live=live).health == health


@pytest.mark.parametrize(("queue", "compute", "share"), [(1.0, 3.0, 0.25), (0.0, 2.0, 0.0), (None, 2.0, None),
                                                         (1.0, None, None), (0.0, 0.0, None)])
def test_queue_share(queue: float | None, compute: float | None, share: float | None) -> None:
    model = ModelSnapshot(name="m", version="1", state="READY", queue_ms=queue, compute_ms=compute)
    assert model.queue_share == share
