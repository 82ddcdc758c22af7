"""Changed lines grouped into runs, so a widget marks one region per run instead of one per line."""

from __future__ import annotations

from collections.abc import Iterable


def line_runs(lines: Iterable[int]) -> list[tuple[int, int]]:
    """(first line, count) for each run of consecutive line numbers, in order."""
    runs: list[tuple[int, int]] = []
    for line in sorted(set(lines)):
        if runs and runs[-1][0] + runs[-1][1] == line:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((line, 1))
    return runs
