"""Repainting as little as a change needs: changed lines, a run at a time; titles and selections only when
they change."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from textual.geometry import Region
from textual.widget import Widget


def line_runs(lines: Iterable[int]) -> list[tuple[int, int]]:
    """(first line, count) for each run of consecutive line numbers, in order."""
    runs: list[tuple[int, int]] = []
    for line in sorted(set(lines)):
        if runs and runs[-1][0] + runs[-1][1] == line:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((line, 1))
    return runs


def changed_lines(before: Sequence[object], after: Sequence[object]) -> list[int]:
    """The indices where two equally long sequences of lines differ."""
    return [y for y, (old, new) in enumerate(zip(before, after, strict=True)) if old != new]


def repaint_lines(widget: Widget, lines: Iterable[int]) -> None:
    """Mark these content lines of a widget for repaint (not its border or padding), a region per run."""
    width = widget.size.width
    for first, count in line_runs(lines):
        widget.refresh(Region(0, first, width, count))


def retitle(widget: Widget, title: str) -> None:
    """Set a border title if it differs: every set repaints the widget's whole area, its children's too."""
    if widget.border_title != title:
        widget.border_title = title


def forget_selection(widget: Widget) -> None:
    """Drop the screen's selection in this widget (its lines would point past text that has fewer)."""
    screen = widget.screen
    if widget in screen.selections:
        screen.selections = {owner: span for owner, span in screen.selections.items() if owner is not widget}
