"""SVG snapshots of every screen and the error states, replayed from recordings (deterministic)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from .conftest import SIZE, recorded_app, replayed

SnapCompare = Callable[..., bool]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _paths_relative_to_the_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    """Screens show paths relative to the working folder: the same SVG wherever the checkout lives."""
    monkeypatch.chdir(ROOT)


async def _settle(pilot: Pilot[None]) -> None:
    await replayed(pilot)
    await pilot.pause(0.2)


def _then(*keys: str) -> Callable[[Pilot[None]], Any]:
    async def run(pilot: Pilot[None]) -> None:
        await _settle(pilot)
        before = pilot.app.screen
        await pilot.press(*keys)
        for _ in range(1500):  # the key opens a screen: wait for it (30 s at most)
            if pilot.app.screen is not before:
                break
            await pilot.pause(0.02)
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.wait_for_scheduled_animations()

    return run


@pytest.mark.parametrize("size", [SIZE, (100, 30)], ids=["160x45", "100x30"])
def test_dashboard(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    assert snap_compare(recorded_app("healthy"), terminal_size=size, run_before=_settle)


def test_dashboard_disconnected(snap_compare: SnapCompare) -> None:
    assert snap_compare(recorded_app("disconnected"), terminal_size=SIZE, run_before=_settle)


def test_dashboard_model_unavailable(snap_compare: SnapCompare) -> None:
    assert snap_compare(recorded_app("unavailable"), terminal_size=SIZE, run_before=_settle)


def test_dashboard_model_failing(snap_compare: SnapCompare) -> None:
    assert snap_compare(recorded_app("failing"), terminal_size=SIZE, run_before=_settle)


def test_repository_screen(snap_compare: SnapCompare) -> None:
    assert snap_compare(recorded_app("healthy"), terminal_size=SIZE, run_before=_then("g"))


def test_logs_screen(snap_compare: SnapCompare) -> None:
    assert snap_compare(recorded_app("healthy"), terminal_size=SIZE, run_before=_then("o"))


def test_help_screen(snap_compare: SnapCompare) -> None:
    assert snap_compare(recorded_app("healthy"), terminal_size=SIZE, run_before=_then("question_mark"))
