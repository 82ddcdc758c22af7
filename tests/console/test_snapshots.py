"""SVG snapshots of every screen and the error states, replayed from recordings (deterministic)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from textual.pilot import Pilot

from .conftest import SIZE, recorded_app, replayed

SnapCompare = Callable[..., bool]


async def _settle(pilot: Pilot[None]) -> None:
    await replayed(pilot)
    await pilot.pause(0.2)


def _then(*keys: str) -> Callable[[Pilot[None]], Any]:
    async def run(pilot: Pilot[None]) -> None:
        await _settle(pilot)
        await pilot.press(*keys)
        await pilot.pause(0.5)
        await pilot.wait_for_scheduled_animations()

    return run


@pytest.mark.parametrize("size", [SIZE, (100, 30)], ids=["160x45", "100x30"])
def test_dashboard(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    assert snap_compare(recorded_app("healthy"), terminal_size=size, run_before=_settle)


def test_dashboard_disconnected(snap_compare: SnapCompare) -> None:
    assert snap_compare(recorded_app("disconnected"), terminal_size=SIZE, run_before=_settle)


def test_dashboard_model_unavailable(snap_compare: SnapCompare) -> None:
    assert snap_compare(recorded_app("unavailable"), terminal_size=SIZE, run_before=_settle)


def test_repository_screen(snap_compare: SnapCompare) -> None:
    assert snap_compare(recorded_app("healthy"), terminal_size=SIZE, run_before=_then("g"))


def test_logs_screen(snap_compare: SnapCompare) -> None:
    assert snap_compare(recorded_app("healthy"), terminal_size=SIZE, run_before=_then("o"))


def test_help_screen(snap_compare: SnapCompare) -> None:
    assert snap_compare(recorded_app("healthy"), terminal_size=SIZE, run_before=_then("question_mark"))
