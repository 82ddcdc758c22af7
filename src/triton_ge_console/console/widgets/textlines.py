"""A Static for short text that changes every refresh, drawn without Textual's Content conversion."""

from __future__ import annotations

from typing import Any

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.strip import Strip
from textual.visual import Visual, visualize
from textual.widgets import Static


def _look(text: Text) -> tuple[object, ...]:
    """What a Text shows: its characters, its spans and its own style."""
    return text.plain, text.spans, text.style


class TextLines(Static):
    """Lines that fit are strips built straight from the Text; wider text wraps as a Static would."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._text: Text | None = None
        self._strips: tuple[tuple[int, int, Style], list[Strip]] | None = None  # key: width, height, style

    def show(self, text: Text) -> None:
        """Show this text (no re-layout: the box keeps its size); the same text again repaints nothing."""
        # Text.__eq__ compares plain text and spans only: a change of the whole text's style must repaint.
        if self._text is not None and _look(text) == _look(self._text):
            return
        self._text = text
        self._strips = None
        self.refresh()

    def render_line(self, y: int) -> Strip:
        """A line of the text, from strips rebuilt only when the text, the size or the style changed."""
        if self._text is None:
            return super().render_line(y)
        width, height = self.size
        key = (width, height, self.rich_style)
        if self._strips is None or self._strips[0] != key:
            self._strips = (key, self._build(self._text, *key))
        lines = self._strips[1]
        return lines[y] if y < len(lines) else Strip.blank(width, key[2])

    def _build(self, text: Text, width: int, height: int, base: Style) -> list[Strip]:
        """Each line as a strip over the widget's style; Textual's own wrapping when a line is too wide."""
        lines = text.split("\n", allow_blank=True)
        if any(line.cell_len > width for line in lines):
            return Visual.to_strips(self, visualize(self, text), width, height, self.visual_style)
        console = self.app.console
        # Text.render leaves out the Text's own style when it has no spans: apply it under the spans
        return [Strip(Segment.apply_style(line.render(console), base + _own_style(console, line)))
                for line in lines]


def _own_style(console: Any, text: Text) -> Style:
    """The style of the Text as a whole (a name or a Style), as a Static would draw it."""
    return console.get_style(text.style, default=Style.null()) if text.style else Style.null()
