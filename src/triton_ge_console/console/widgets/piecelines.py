"""Lines of styled pieces drawn a line at a time: a refresh rebuilds and repaints only the lines that
changed, and the mouse selects and copies them as it does a Static's text."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any, NamedTuple

from rich.segment import Segment
from rich.style import Style
from textual.cache import LRUCache
from textual.geometry import Size
from textual.selection import Selection
from textual.strip import Strip
from textual.widget import Widget

from triton_ge_console.console.widgets.paint import (
    RenderPassLookups,
    changed_lines,
    forget_selection,
    repaint_lines,
)

Piece = tuple[str, str]  # text and its style ("" for none)
Line = tuple[Piece, ...]
Span = tuple[int, int]  # the selected characters of one line: start, end (-1: to the line's end)
LINES_KEPT = 64  # strips kept: a box's lines, under a selection too
PLACED_STYLES = 4096  # styles kept with their cell's place: a few hundred in use


class PaintPass(NamedTuple):
    """What every line of one render pass shares (each is a walk up the DOM to look up)."""

    base: Style  # the widget's own style
    selection: Selection | None  # the mouse selection in the widget
    selected: Style  # how selected characters look
    width: int  # the widget's content width


class PieceLines(RenderPassLookups[PaintPass], Widget):
    """A box of lines, each a tuple of (text, style) pieces; a line's strip is kept for as long as the
    line, its place and its selected span stay the same."""

    DEFAULT_CSS = "PieceLines { height: auto; }"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._lines: list[Line] = []
        self._strips: LRUCache[tuple[int, Line, Span | None], Strip] = LRUCache(LINES_KEPT)
        self._built_with: tuple[Style, Style, int] | None = None  # the looks and width the strips had

    def show_lines(self, lines: Sequence[Line]) -> None:
        """Repaint only the lines that changed; lay the box out again only when their number changes."""
        new = list(lines)
        if new == self._lines:
            return
        old, self._lines = self._lines, new
        if len(new) != len(old):
            if self.is_mounted:
                forget_selection(self)  # its lines would point past text that has fewer
            self.refresh(layout=True)
            return
        repaint_lines(self, changed_lines(old, new))

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """One line per line shown (at least one)."""
        return max(1, len(self._lines))

    def look_up_pass(self) -> PaintPass:
        """The widget's style, the selection in it, the selection's style and the width."""
        return PaintPass(self.rich_style, self.text_selection, self.selection_style, self.size.width)

    def render_line(self, y: int) -> Strip:
        """A line's strip, built again only when the line, its selected span, the styles or the width
        changed."""
        looks = self.render_pass()
        if self._built_with != (looks.base, looks.selected, looks.width):  # a theme change or a resize
            self._strips.clear()
            self._built_with = (looks.base, looks.selected, looks.width)
        if y >= len(self._lines):
            return Strip.blank(looks.width, looks.base)
        line = self._lines[y]
        span = looks.selection.get_span(y) if looks.selection is not None else None
        key = (y, line, span)
        strip = self._strips.get(key)
        if strip is None:
            strip = line_strip(self.app.console, line, span, y, looks)
            self._strips.set(key, strip)
        return strip

    def get_selection(self, selection: Selection) -> tuple[str, str] | None:
        """The selected part of the lines (nothing when fewer lines left it past the end)."""
        if selection.start is not None and selection.start.y >= len(self._lines):
            return None
        text = "\n".join("".join(text for text, _ in line) for line in self._lines)
        return selection.extract(text), "\n"


def line_strip(console: Any, line: Line, span: Span | None, y: int, looks: PaintPass) -> Strip:
    """Line y as a strip cut at the widget's width (the box pads a shorter one): a segment per piece (cut
    where the selection starts and ends) in its style over the widget's, the selection's style over the
    selected characters, and where its text is in the lines, so the mouse can select it."""
    segments, x = [], 0
    for text, style, chosen in split_at_span(line, span):
        if x >= looks.width:  # wholly past the edge (a character is at least one cell wide)
            break
        own = looks.base + console.get_style(style) if style else looks.base
        segments.append(Segment(text, placed(own + looks.selected if chosen else own, x, y)))
        x += len(text)
    strip = Strip(segments)
    return strip.crop(0, looks.width) if strip.cell_length > looks.width else strip


@lru_cache(maxsize=PLACED_STYLES)
def placed(style: Style, x: int, y: int) -> Style:
    """A style that also says at which character of which line its text starts (Textual's mouse selection
    reads it); kept, as a line's pieces keep their places from one refresh to the next."""
    return style + Style.from_meta({"offset": (x, y)})


def split_at_span(line: Line, span: Span | None) -> list[tuple[str, str, bool]]:
    """The pieces cut where the span starts and ends, each marked as inside it or not."""
    if span is None:
        return [(text, style, False) for text, style in line]
    start, end = span
    cut: list[tuple[str, str, bool]] = []
    x = 0
    for text, style in line:
        first, last = max(start - x, 0), len(text) if end == -1 else min(end - x, len(text))
        if first < last:
            parts = ((text[:first], False), (text[first:last], True), (text[last:], False))
            cut += [(part, style, inside) for part, inside in parts if part]
        else:
            cut.append((text, style, False))
        x += len(text)
    return cut
