"""Terminal-only cells: percentages, sparklines, bars, host:port and paths (the rules both UIs share are in
`display`)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path

from triton_ge_console.display import MISSING
from triton_ge_console.triton_terms import host_port

SPARK_BLOCKS = "▁▂▃▄▅▆▇█"


def percent_cell(fraction: float | None) -> str:
    """A 0..1 fraction as a whole percentage, padded so columns line up."""
    return MISSING if fraction is None else f"{fraction * 100:3.0f}%"


def sparkline(values: Sequence[float | None], width: int, top: float | None = None) -> str:
    """The last `width` values as block characters (a gap where a value is missing)."""
    recent = list(values)[-width:]
    known = [v for v in recent if v is not None]
    ceiling = top if top is not None else (max(known) if known else 0.0)
    cells = []
    for value in recent:
        if value is None:
            cells.append(" ")
        elif ceiling <= 0:
            cells.append(SPARK_BLOCKS[0])
        else:
            index = round(min(max(value / ceiling, 0.0), 1.0) * (len(SPARK_BLOCKS) - 1))
            cells.append(SPARK_BLOCKS[index])
    return "".join(cells).rjust(width)


def bar(used: float | None, total: float | None, width: int) -> str:
    """A filled/empty bar for used/total, or spaces when either is unknown."""
    if used is None or not total:
        return "·" * width
    filled = round(min(max(used / total, 0.0), 1.0) * width)
    return "█" * filled + "░" * (width - filled)


def url_hostport(url: str | None) -> str:
    """host:port of a URL, for compact headers."""
    if not url:
        return MISSING
    return host_port(url)


def short_path(path: str | os.PathLike[str]) -> str:
    """A path as an operator reads it: relative to the working folder when inside it, else with ~."""
    absolute = Path(path).expanduser().absolute()
    with contextlib.suppress(ValueError):
        return str(absolute.relative_to(Path.cwd()))
    with contextlib.suppress(ValueError):
        return str(Path("~") / absolute.relative_to(Path.home()))
    return str(absolute)
