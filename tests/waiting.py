"""The suite's one wait: poll a condition until it holds (a readiness check, never a fixed sleep)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout: float = 120.0, interval: float = 0.05,
               what: str = "") -> T:
    """Poll until condition() is truthy and return that value; fail naming `what` and the last value."""
    deadline = time.monotonic() + timeout
    value = condition()
    while not value:
        assert time.monotonic() < deadline, f"not within {timeout:g}s: {what or 'condition'} (last {value!r})"
        time.sleep(interval)
        value = condition()
    return value
