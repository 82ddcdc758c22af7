"""What a dashboard refresh may skip: unchanged titles, off-screen rows, history rescans, Text rendering."""

from __future__ import annotations

import dataclasses

from rich.style import Style
from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import Static

from triton_ge_console.console.app import create_app, next_connection
from triton_ge_console.console.screens.dashboard import utilization_series
from triton_ge_console.console.widgets.header import StatusHeader
from triton_ge_console.console.widgets.models import (
    COMPACT,
    FULL,
    WIDTHS,
    ModelsTable,
    fit,
    line_runs,
    model_fields,
    row_segments,
)
from triton_ge_console.console.widgets.titles import retitle
from triton_ge_console.sessions.observe.history import SnapshotHistory
from triton_ge_console.sessions.observe.recorded import RecordedSource
from triton_ge_console.sessions.observe.snapshot import (
    DeviceSnapshot,
    Endpoints,
    Latency,
    ModelSnapshot,
    ServerSnapshot,
)

from .conftest import rounded


def _snapshot(step: int, utilizations: dict[str, float | None], models: int = 0) -> ServerSnapshot:
    """A snapshot with these device utilizations and `models` READY models."""
    devices = tuple(DeviceSnapshot(device_id, "cpu-emulated", "910B", utilization=value)
                    for device_id, value in utilizations.items())
    rows = tuple(ModelSnapshot(name=f"m{i:03d}", version="1", state="READY", backend="ge", queue_depth=i,
                               latency=Latency(p50_ms=1.0, p99_ms=2.0)) for i in range(models))
    return ServerSnapshot(1_790_000_000.0 + step, "t", True, True, "2.51.0", 1.0 + step,
                          Endpoints("http://127.0.0.1:1", "127.0.0.1:2"), rows, devices)


def test_utilization_series_averages_each_device_per_cell() -> None:
    history = SnapshotHistory()
    readings: list[dict[str, float | None]] = [{"0": 0.2, "1": None}, {"0": 0.4}, {"0": 0.6, "1": 1.0}]
    for step, reading in enumerate(readings):
        history.append(_snapshot(step, reading))
    assert rounded(utilization_series(history, ["0", "1", "7"])) == {
        "0": [0.2, 0.4, 0.6], "1": [None, None, 1.0], "7": [None, None, None]}
    for step in range(3, 62):  # 62 snapshots: three per cell, cells aligned to the oldest
        history.append(_snapshot(step, {"0": float(step % 3), "1": None}))
    series = rounded(utilization_series(history, ["0", "1"]))
    assert len(series["0"]) == 21 and series["0"][-2:] == [1.0, 0.5] and series["1"][-1] is None


class _Titled(App[None]):
    def compose(self) -> ComposeResult:
        yield Static("x", id="box")


async def test_an_unchanged_border_title_repaints_nothing() -> None:
    app = _Titled()
    async with app.run_test() as pilot:
        box = app.query_one("#box", Static)
        retitle(box, "Devices (8)")
        await pilot.pause()
        refreshes: list[object] = []

        def counted(*regions: object, **options: object) -> Static:
            refreshes.append(regions)
            return box

        box.refresh = counted  # type: ignore[method-assign,assignment]
        retitle(box, "Devices (8)")
        assert refreshes == [] and box.border_title == "Devices (8)"
        retitle(box, "Devices (7)")
        assert len(refreshes) == 1


async def test_the_header_is_rebuilt_only_when_what_it_shows_changes() -> None:
    first = _snapshot(0, {"0": 0.5})  # up 1 s
    app = create_app(RecordedSource([first], name="t"), max_polls=1)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause(0.2)
        header = app.screen.query_one(StatusHeader)
        shown: list[str] = []
        show = header.update

        def recorded(text: Text, layout: bool = True) -> None:
            shown.append(text.plain)
            show(text, layout=layout)

        header.update = recorded  # type: ignore[method-assign]
        for uptime in (30.0, 59.0, 61.0):  # 30 s and 59 s read "up 30s"/"up 59s"; 61 s reads "up 1m"
            later = dataclasses.replace(first, taken_at=first.taken_at + uptime, uptime_s=uptime)
            app.connection = next_connection(app.connection, later, app.options)
        await pilot.pause()
        assert [line.split(" ─ ")[4] for line in shown] == ["up 30s", "up 59s", "up 1m"]
        again = dataclasses.replace(first, taken_at=first.taken_at + 62, uptime_s=61.5)  # still "up 1m"
        app.connection = next_connection(app.connection, again, app.options)
        await pilot.pause()
        assert len(shown) == 3


async def test_rows_changed_off_screen_show_their_new_figures_when_scrolled_to() -> None:
    first = _snapshot(0, {"0": 0.5}, models=60)
    source = RecordedSource([first], name="t")
    app = create_app(source, max_polls=1)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.pause(0.2)
        table = app.screen.query_one(ModelsTable)
        last = first.models[-1]
        moved = dataclasses.replace(last, queue_depth=12345)
        second = dataclasses.replace(first, taken_at=first.taken_at + 1, models=(*first.models[:-1], moved))
        app.connection = next_connection(app.connection, second, app.options)
        await pilot.pause()
        table.move_cursor(len(table.row_keys) - 1)
        await pilot.pause()
        rendered = [table.render_line(y).text for y in range(table.size.height)]
        assert any("m059" in line and "12345" in line for line in rendered)


def test_row_segments_are_fixed_width_columns_over_the_base_style() -> None:
    model = ModelSnapshot(name="llama_model", version="1", state="READY", backend="ge", queue_depth=5,
                          failure_total=0, latency=Latency(p50_ms=1.0, p99_ms=2.0))
    cells = model_fields(model, {"queue_depth": 4})
    base = Style(bgcolor="#101010")
    segments = row_segments(cells, base, Style.parse)
    columns = [fit(text, width, right) for (text, _, right), width in zip(cells, WIDTHS, strict=True)]
    assert "".join(s.text for s in segments) == " ".join(columns)
    styles = {s.text.strip(): s.style for s in segments}
    assert styles["llama_model"] == base + Style.parse("bold")
    assert styles["READY"] == base + Style.parse("green") and styles["5"] == base + Style.parse("bold red")
    assert all(s.style == base for s in segments if s.text.strip() not in ("llama_model", "READY", "5"))
    assert sum(len(s.text) for s in segments) == FULL.width


async def test_a_narrow_table_shows_the_compact_columns_without_scrolling_sideways() -> None:
    first = _snapshot(0, {"0": 0.5}, models=40)  # more rows than fit: the scrollbar takes its columns
    app = create_app(RecordedSource([first], name="t"), max_polls=1)
    async with app.run_test(size=(80, 30)) as pilot:
        await pilot.pause(0.2)
        table = app.screen.query_one(ModelsTable)
        header, row = (table.render_line(y).text for y in (0, 1))
        assert header.split() == ["MODEL", "▲", "VER", "STATE", "QUEUE", "REQ/S", "INF/S", "P50", "ms", "P99",
                                  "ms", "FAIL"]
        assert row.split()[:4] == ["m000", "1", "READY", "0"] and len(row.rstrip()) <= COMPACT.width
        assert table.virtual_size.width <= table.scrollable_content_region.width
        await pilot.resize_terminal(131, 45)  # every column would fit but for the scrollbar
        await pilot.pause()
        assert table.virtual_size.width <= table.scrollable_content_region.width
        await pilot.resize_terminal(160, 45)
        await pilot.pause()
        header = table.render_line(0).text
        assert "BACKEND" in header and "DEVICE" in header and table.virtual_size.width == FULL.width


def test_changed_rows_are_repainted_one_region_per_run() -> None:
    assert line_runs([]) == []
    assert line_runs([5, 1, 2, 3, 9, 10, 5]) == [(1, 3), (5, 1), (9, 2)]
