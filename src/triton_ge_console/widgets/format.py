"""Number formatting for the notebook widgets (the shared rules are in `display`); never raises."""

from __future__ import annotations

import math

from triton_ge_console.display import GIB as GIB
from triton_ge_console.display import MISSING as MISSING
from triton_ge_console.display import duration as duration
from triton_ge_console.display import memory as memory
from triton_ge_console.display import number as number
from triton_ge_console.display import percent as percent


def as_float(value: float | int | None) -> float:
    """A figure for plotting: NaN where missing, so the line shows a gap."""
    return math.nan if value is None else float(value)
