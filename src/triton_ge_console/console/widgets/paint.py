"""Repainting as little as a change needs: changed lines, a run at a time; titles and selections only when
they change."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Generic, TypeVar

from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

PassT = TypeVar("PassT")


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


class RenderPassLookups(Generic[PassT]):
    """Mixed in before a Line API widget class whose lines share lookups (styles, size, selection: each
    walks the DOM): made once per render pass by `look_up_pass`, read by `render_line` through
    `render_pass`. Not a Widget itself, so Textual's per-class settings (focus, CSS) stay the widget's."""

    _pass: PassT | None = None

    def render_lines(self, crop: Region) -> list[Strip]:
        """Look up what the pass shares once, not once per line."""
        self._pass = self.look_up_pass()
        try:
            return super().render_lines(crop)  # type: ignore[misc]  # the widget's, next in the MRO
        finally:
            self._pass = None

    def look_up_pass(self) -> PassT:
        """What every line of a render pass shares."""
        raise NotImplementedError

    def render_pass(self) -> PassT:
        """The pass under way's lookups (made now when a line is rendered outside a pass)."""
        return self._pass if self._pass is not None else self.look_up_pass()
