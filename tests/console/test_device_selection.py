"""The devices box can be selected with the mouse and copied, as the header and the detail facts can."""

from __future__ import annotations

from rich.style import Style
from textual.pilot import Pilot

from triton_ge_console.console.widgets.devices import DevicesPanel

from .conftest import recorded_app, replayed

Cell = tuple[str, str]


def _cells(panel: DevicesPanel, y: int) -> list[Cell]:
    """Each character of a device line as drawn now, with how it looks (its style less the offsets)."""
    strip = panel.render_line(y)
    return [(char, str(segment.style or Style.null())) for segment in strip for char in segment.text]


async def _drag(pilot: Pilot[None], start: tuple[int, int], end: tuple[int, int]) -> None:
    """Press on one cell of the devices box, move to another and let go there."""
    await pilot.mouse_down("#devices", offset=start)
    await pilot.hover("#devices", offset=end)  # the cell under the pointer is selected too
    await pilot.mouse_up("#devices", offset=end)
    await pilot.pause()


async def test_device_lines_can_be_selected_across_lines_and_copied() -> None:
    app = recorded_app("healthy")  # a recorded session with two devices
    async with app.run_test(size=(160, 45)) as pilot:
        await replayed(pilot)
        panel = app.screen.query_one(DevicesPanel)
        first, second = panel.render_line(0).text, panel.render_line(1).text
        # inside the border and the padding: the first line's first cell to the second line's fourth
        await _drag(pilot, (2, 1), (5, 2))
        assert app.screen.get_selected_text() == f"{first}\n{second[:4]}"
        await pilot.press("ctrl+c")  # the screen's copy binding
        assert app.clipboard == f"{first}\n{second[:4]}"


async def test_a_selection_is_drawn_over_the_selected_characters_only() -> None:
    app = recorded_app("healthy")
    async with app.run_test(size=(160, 45)) as pilot:
        await replayed(pilot)
        panel = app.screen.query_one(DevicesPanel)
        before = _cells(panel, 1)  # the first device (line 0: the column labels)
        await _drag(pilot, (2, 2), (5, 2))
        assert app.screen.get_selected_text() == "NPU0"
        after = _cells(panel, 1)
        assert [char for char, _ in after] == [char for char, _ in before]
        restyled = "".join(char for (char, old), (_, new) in zip(before, after, strict=True) if old != new)
        assert restyled == "NPU0"


async def test_the_mouse_finds_the_right_characters_in_a_line_the_selection_cut() -> None:
    app = recorded_app("healthy")
    async with app.run_test(size=(160, 45)) as pilot:
        await replayed(pilot)
        line = app.screen.query_one(DevicesPanel).render_line(1).text  # the first device, under the labels
        await _drag(pilot, (2, 2), (5, 2))  # "NPU0": its piece is now drawn in two parts
        await _drag(pilot, (7, 2), (11, 2))  # from inside the second part
        assert app.screen.get_selected_text() == line[5:10]
