"""Number formatting shared by the widgets: a missing figure shows as an em dash, never raises."""

from __future__ import annotations

import math

MISSING = "—"
GIB = 1024**3


def number(value: float | int | None, digits: int = 1) -> str:
    """A figure with fixed decimals, or the missing mark."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}f}"


def percent(ratio: float | None) -> str:
    """A 0..1 ratio as a whole percentage."""
    return MISSING if ratio is None else f"{ratio * 100:.0f}%"


def gib(used: int | None, total: int | None) -> str:
    """Memory as used/total GiB."""
    if used is None and total is None:
        return MISSING
    used_gib = None if used is None else used / GIB
    total_gib = None if total is None else total / GIB
    return f"{number(used_gib)}/{number(total_gib)} GiB"


def duration(seconds: float | None) -> str:
    """An uptime as HH:MM:SS."""
    if seconds is None:
        return MISSING
    whole = int(seconds)
    return f"{whole // 3600:02d}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


def as_float(value: float | int | None) -> float:
    """A figure for plotting: NaN where missing, so the line shows a gap."""
    return math.nan if value is None else float(value)
