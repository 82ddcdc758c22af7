"""SVG snapshots of the fleet screen (servers, models across servers) over the recorded fleet."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.pilot import Pilot

from .test_fleet_screen import SIZE, fleet_app, replayed

SnapCompare = Callable[..., bool]


def _then(*keys: str) -> Callable[[Pilot[None]], Any]:
    async def run(pilot: Pilot[None]) -> None:
        await replayed(pilot)
        await pilot.press(*keys)
        await pilot.pause(0.2)
        await pilot.wait_for_scheduled_animations()

    return run


def test_fleet_servers(snap_compare: SnapCompare) -> None:
    assert snap_compare(fleet_app(), terminal_size=SIZE, run_before=_then())


def test_fleet_models(snap_compare: SnapCompare) -> None:
    assert snap_compare(fleet_app(), terminal_size=SIZE, run_before=_then("m", "down"))
