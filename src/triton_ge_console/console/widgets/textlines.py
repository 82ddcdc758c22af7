"""A Static for short text that changes every refresh, drawn without Textual's Content conversion."""

from __future__ import annotations

from typing import Any

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.cache import LRUCache
from textual.selection import Selection
from textual.strip import Strip
from textual.visual import Visual, visualize
from textual.widgets import Static

from triton_ge_console.console.widgets.paint import forget_selection, repaint_lines

LINES_KEPT = 64  # strips kept: more than the header's and the detail facts' lines


def _look(text: Text) -> tuple[object, ...]:
    """What a Text shows: its characters, its spans and its own style."""
    return text.plain, text.spans, text.style


class TextLines(Static):
    """Lines that fit are strips built straight from the Text, and only a changed line is redrawn;
    wider text, or text under a mouse selection, is drawn as a Static would draw it."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._text: Text | None = None
        self._lines: list[Text] = []
        # line -> its strip, for the size and style in _built_for
        self._strips: LRUCache[int, Strip] = LRUCache(LINES_KEPT)
        self._built_for: tuple[int, int, Style, Selection | None] | None = None

    @property
    def plain(self) -> str:
        """The text shown, unstyled (what copying all of it gives)."""
        return self._text.plain if self._text is not None else ""

    def show(self, text: Text) -> None:
        """Show this text (no re-layout: the box keeps its size); the same text again repaints nothing."""
        # Text.__eq__ compares plain text and spans only: a change of the whole text's style must repaint.
        if self._text is not None and _look(text) == _look(self._text):
            return
        lines = list(text.split("\n", allow_blank=True))
        if len(lines) != len(self._lines) and self.is_mounted:
            forget_selection(self)
        changed = self._changed_lines(text, lines)
        self._text, self._lines = text, lines
        if changed is None or (self.is_mounted and self.text_selection is not None):  # drawn over every line
            self._strips.clear()
            self.refresh()
            return
        for y in changed:
            self._strips.discard(y)
        repaint_lines(self, changed)

    def _changed_lines(self, text: Text, lines: list[Text]) -> list[int] | None:
        """The lines that differ from those shown, or None when everything must be redrawn."""
        width = self.size.width
        if self._text is None or len(lines) != len(self._lines) or text.style != self._text.style:
            return None
        if any(line.cell_len > width for line in (*lines, *self._lines)):  # wrapped: lines move
            return None
        pairs = enumerate(zip(self._lines, lines, strict=True))
        return [y for y, (old, new) in pairs if _look(old) != _look(new)]

    def render_line(self, y: int) -> Strip:
        """A line of the text, from a strip rebuilt only when that line, the size or the style changed."""
        if self._text is None:
            return super().render_line(y)
        width, height = self.size
        selection = self.text_selection
        built_for = (width, height, self.rich_style, selection)
        if built_for != self._built_for:
            self._strips.clear()
            self._built_for = built_for
        if len(self._strips) == 0 and (
                selection is not None or any(line.cell_len > width for line in self._lines)):
            wrapped = Visual.to_strips(self, visualize(self, self._text), width, height, self.visual_style)
            self._strips.grow(len(wrapped))  # every wrapped line kept: none could be rebuilt on its own
            for index, line in enumerate(wrapped):
                self._strips.set(index, line)
        strip = self._strips.get(y)
        if strip is None:
            strip = self._line_strip(y, built_for[2])
            self._strips.set(y, strip)
        return strip

    def _line_strip(self, y: int, base: Style) -> Strip:
        """One line that fits as a strip over the widget's style (a blank one below the text)."""
        if y >= len(self._lines):
            return Strip.blank(self.size.width, base)
        line = self._lines[y]
        console = self.app.console
        # Text.render leaves out the Text's own style when it has no spans: apply it under the spans
        strip = Strip(Segment.apply_style(line.render(console), base + _own_style(console, line)))
        return strip.apply_offsets(0, y)  # where each cell is in the text, so the mouse can select it

    def get_selection(self, selection: Selection) -> tuple[str, str] | None:
        """The selected part of the text shown (a Static would look in what it was last updated with)."""
        if self._text is None:
            return super().get_selection(selection)
        return selection.extract(self._text.plain), "\n"


def _own_style(console: Any, text: Text) -> Style:
    """The style of the Text as a whole (a name or a Style), as a Static would draw it."""
    return console.get_style(text.style, default=Style.null()) if text.style else Style.null()
