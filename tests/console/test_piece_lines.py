"""Piece lines (the devices box) redraw only the lines that changed, look as a Static drawing the same text
looks, and keep the mouse selection across refreshes."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.strip import Strip
from textual.widgets import Static

from triton_ge_console.console.widgets import piecelines
from triton_ge_console.console.widgets.piecelines import Line, PieceLines

Cell = tuple[str, str]
LINES: list[Line] = [
    (("NPU   NAME", "bold"),),
    (("NPU0", "bold"), ("  ", ""), ("▁▂▃█", "green"), ("  42%", ""), ("  OK", "green")),
    (("NPU1", "bold"), ("  ", ""), ("▁▁▁▁", "green"), ("   —", ""), ("  Warning", "yellow"),
     ("  chip 0", "dim")),
]


class _Both(App[None]):
    """The same lines as piece lines and as the Static the devices box was, side by side."""

    CSS = """
    Static, PieceLines { height: auto; border: round $primary; padding: 0 1; }
    Static { text-wrap: nowrap; text-overflow: clip; }
    """

    def compose(self) -> ComposeResult:
        yield Static(id="static")
        yield PieceLines(id="lines")


def _cells(strip: Strip) -> list[Cell]:
    """Each cell's character and look (the selection offsets, which do not show, left out)."""
    return [(char, str(Style(color=s.style.color, bgcolor=s.style.bgcolor, bold=s.style.bold, dim=s.style.dim)
                       if s.style else Style.null())) for s in strip for char in s.text]


def _text(lines: list[Line]) -> Text:
    return Text("\n").join(Text.assemble(*line) for line in lines)


async def test_piece_lines_look_like_a_static_drawing_the_same_text() -> None:
    async with _Both().run_test(size=(30, 12)) as pilot:  # the last line is cut at the box's edge
        static, lines = pilot.app.query_one(Static), pilot.app.query_one(PieceLines)
        static.update(_text(LINES))
        lines.show_lines(LINES)
        await pilot.pause()
        assert lines.size == static.size
        area = Region(0, 0, *static.outer_size)  # the border and padding too
        ours, theirs = lines.render_lines(area), static.render_lines(area)
        assert [_cells(s) for s in ours] == [_cells(s) for s in theirs]


async def test_a_changed_line_alone_is_rebuilt_and_repainted() -> None:
    async with _Both().run_test(size=(60, 12)) as pilot:
        lines = pilot.app.query_one(PieceLines)
        lines.show_lines(LINES)
        await pilot.pause()
        built: list[Line] = []
        repainted: list[Region] = []
        build, refresh = piecelines.line_strip, lines.refresh

        def counted(console: object, line: Line, *rest: object) -> Strip:
            built.append(line)
            return build(console, line, *rest)  # type: ignore[arg-type]

        def recorded(*regions: Region, **options: bool) -> PieceLines:
            repainted.extend(regions or [Region(0, 0, *lines.outer_size)])
            return refresh(*regions, **options)

        piecelines.line_strip = counted  # type: ignore[assignment]
        lines.refresh = recorded  # type: ignore[method-assign,assignment]
        try:
            moved = [LINES[0], (("NPU0", "bold"), ("  ", ""), ("▂▃█▁", "green")), LINES[2]]
            lines.show_lines(moved)
            await pilot.pause()
            assert built == [moved[1]] and repainted == [Region(0, 1, lines.size.width, 1)]
            lines.show_lines(moved)  # the same lines again: nothing
            await pilot.pause()
            assert len(built) == 1 and len(repainted) == 1
        finally:
            piecelines.line_strip = build


async def test_a_selection_stays_over_a_line_that_changed_and_goes_when_lines_go() -> None:
    async with _Both().run_test(size=(60, 12)) as pilot:
        lines = pilot.app.query_one(PieceLines)
        lines.show_lines(LINES)
        await pilot.pause()
        await pilot.mouse_down("#lines", offset=(2, 2))  # inside the border and padding: NPU0's N
        await pilot.hover("#lines", offset=(5, 2))
        await pilot.mouse_up("#lines", offset=(5, 2))
        await pilot.pause()
        assert pilot.app.screen.get_selected_text() == "NPU0"
        lines.show_lines([LINES[0], (("NPU7", "bold"), *LINES[1][1:]), LINES[2]])
        await pilot.pause()
        assert pilot.app.screen.get_selected_text() == "NPU7"
        assert lines.render_line(1).text.startswith("NPU7")
        lines.show_lines(LINES[:1])  # fewer lines: the selection would point past them
        await pilot.pause()
        assert not pilot.app.screen.get_selected_text()
