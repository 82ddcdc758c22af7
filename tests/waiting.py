"""The suite's one wait: poll a condition until it holds (a readiness check, never a fixed sleep)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from textual.pilot import Pilot

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout: float = 120.0, interval: float = 0.05,
               what: str = "", pause: Callable[[], object] | None = None) -> T:
    """Poll until condition() is truthy and return that value; fail naming `what` and the last value.
    `pause` replaces the sleep between polls (a browser page's own wait, so its events keep arriving)."""
    deadline = time.monotonic() + timeout
    value = condition()
    while not value:
        assert time.monotonic() < deadline, _late(timeout, what, value)
        pause() if pause is not None else time.sleep(interval)
        value = condition()
    return value


async def until(pilot: Pilot[None], check: Callable[[], object], timeout: float = 20.0, what: str = "",
                step: float = 0.05) -> None:
    """wait_until for a Textual app under test: the app runs (pilot.pause) between checks, and `timeout`
    counts those pauses, so a loaded host slows the app and its deadline alike."""
    waited = 0.0
    value = check()
    while not value:
        assert waited < timeout, _late(timeout, what, value)
        await pilot.pause(step)
        waited += step
        value = check()


def _late(timeout: float, what: str, value: object) -> str:
    """The one failure line of a wait."""
    return f"not within {timeout:g}s: {what or 'condition'} (last {value!r})"
