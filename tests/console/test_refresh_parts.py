"""A refresh's parts draw what a rescan would: history views, sparklines, charts, device lines."""

from __future__ import annotations

import math

from rich.segment import Segment
from rich.style import Style
from textual.app import App, ComposeResult
from textual.css.query import NoMatches
from textual.geometry import Region
from textual.pilot import Pilot

from tests.waiting import until
from triton_ge_console.console.app import GEConsoleApp, create_app, next_connection
from triton_ge_console.console.screens.dashboard import CHART_EVERY_S, DashboardScreen
from triton_ge_console.console.series import ModelSeriesCache, UtilizationCache
from triton_ge_console.console.widgets.detail import SeriesChart
from triton_ge_console.sessions.observe.history import SnapshotHistory
from triton_ge_console.sessions.observe.recorded import RecordedSource
from triton_ge_console.sessions.observe.snapshot import (
    DeviceSnapshot,
    Endpoints,
    Latency,
    ModelSnapshot,
    ServerSnapshot,
)

from .conftest import recorded_app, rounded


def _snapshot(step: int, models: int = 2, devices: int = 2) -> ServerSnapshot:
    """Figures that move every step; device 1 reports no utilization on odd steps."""
    wave = 0.5 + 0.5 * math.sin(step / 3)
    rows = tuple(ModelSnapshot(name=f"m{i}", version="1", state="READY", backend="ge", request_rate=wave * 10,
                               inference_rate=wave * 20, latency=Latency(p50_ms=1 + wave, p99_ms=3 + wave))
                 for i in range(models))
    cards = tuple(DeviceSnapshot(str(d), "cpu-emulated", "910B",
                                 utilization=None if d == 1 and step % 2 else (wave + d / 4) % 1.0)
                  for d in range(devices))
    return ServerSnapshot(1_790_000_000.0 + step, "t", True, True, "2.51.0", 1.0 + step,
                          Endpoints("http://127.0.0.1:1", "127.0.0.1:2"), rows, cards)


def test_history_hands_a_catching_up_view_only_what_is_new() -> None:
    history = SnapshotHistory(capacity=5)
    for step in range(8):
        history.append(_snapshot(step))
    times = history.times()
    assert [t for t, _ in history.model_newer_than("m0", times[1], ("p50_ms",))] == times[2:]
    assert history.devices_newer_than(times[1])[0] == times[2:]
    assert history.model_newer_than("m0", times[-1], ("p50_ms",)) == []
    assert history.devices_newer_than(times[-1]) == ([], {"0": [], "1": []})


def test_chart_points_fold_fixed_runs_of_snapshots_as_a_rescan_would() -> None:
    history = SnapshotHistory(capacity=50)
    cache = ModelSeriesCache(capacity=50, points=10)  # 5 snapshots per point, at most 11 points
    taken: list[ServerSnapshot] = []
    for step in range(73):
        snapshot = _snapshot(step) if step % 7 else _snapshot(step, models=0)  # m0 missing every 7th
        history.append(snapshot)
        taken.append(snapshot)
        cache.update("m0", history)
        oldest = taken[-50:][0].taken_at  # what the history still holds
        runs = [run for run in (taken[start:start + 5] for start in range(0, len(taken), 5))
                if run[-1].taken_at >= oldest][-11:]
        p99 = [[s.models[0].latency.p99_ms for s in run if s.models] for run in runs]
        assert cache.series("p99", peak=True) == [(run[-1].taken_at, max(v) if v else None)
                                                  for run, v in zip(runs, p99, strict=True)]
    assert len(cache.series("p50")) == 11 and cache.series("p50")[-1][0] == taken[-1].taken_at


def test_chart_points_stop_at_the_snapshot_on_screen() -> None:
    """The poller may have added newer snapshots than the one drawn: the chart does not run ahead of it."""
    history = SnapshotHistory(capacity=50)
    taken = [_snapshot(step) for step in range(6)]
    for snapshot in taken:
        history.append(snapshot)
    cache = ModelSeriesCache(capacity=6, points=6)  # one snapshot per point
    cache.update("m0", history, until=taken[3].taken_at)
    assert [t for t, _ in cache.series("p50")] == [s.taken_at for s in taken[:4]]
    cache.update("m0", history, until=taken[5].taken_at)  # the next redraw catches up
    assert [t for t, _ in cache.series("p50")] == [s.taken_at for s in taken]


def test_chart_points_never_reach_past_a_smaller_history() -> None:
    history = SnapshotHistory(capacity=20)
    cache = ModelSeriesCache()  # sized for 15 minutes
    for step in range(200):
        history.append(_snapshot(step))
        cache.update("m0", history)
    times = history.times()
    points = cache.series("p50")
    assert points[0][0] >= times[0] and points[-1][0] == times[-1]


def _rescanned(taken: list[ServerSnapshot], device_ids: list[str], cells: int, most: int) -> dict[str, list]:
    """The sparkline cells computed from scratch over the snapshots kept (what the cache must agree with)."""
    window = taken[-cells * most:]
    size = min(most, max(1, -(-len(window) // cells)))
    out: dict[str, list] = {}
    for device_id in device_ids:
        values = [next((d.utilization for d in s.devices if d.id == device_id), None) for s in window]
        buckets = [[v for v in values[i:i + size] if v is not None] for i in range(0, len(values), size)]
        out[device_id] = [sum(b) / len(b) if b else None for b in buckets]
    return out


def test_the_utilization_cache_agrees_with_a_rescan_as_the_history_grows_and_wraps() -> None:
    for capacity in (7, 50):  # a ring smaller than the sparkline window, and one larger
        history = SnapshotHistory(capacity=capacity)
        cache = UtilizationCache(cells=4, max_bucket=3)
        taken: list[ServerSnapshot] = []
        for step in range(40):
            taken.append(_snapshot(step, devices=2 + step // 20))  # a device appears half-way
            history.append(taken[-1])
            cache.update(history)
            ids = ["0", "1", "2", "9"]
            kept = taken[-capacity:]
            assert rounded(cache.series(ids)) == rounded(_rescanned(kept, ids, 4, 3)), (capacity, step)


def _look(style: Style | None) -> tuple[object, ...]:
    """What a style looks like: attributes and colours by value ("yellow" is "color(3)"), no metadata."""
    if style is None:
        return ()
    colors = [(c.type, c.number, c.triplet) if c else None for c in (style.color, style.bgcolor)]
    return (*colors, style.bold, style.dim, style.italic, style.underline, style.reverse, style.strike)


def _cells(segments: list[Segment]) -> list[tuple[str, tuple[object, ...]]]:
    """Each cell's character and look (Textual's Content adds selection offsets, which do not show)."""
    return [(char, _look(segment.style)) for segment in segments for char in segment.text]


def _drawn(screen: DashboardScreen) -> tuple[object, object]:
    """What each chart plots now (a redraw with new data replaces it)."""
    charts = [screen.query_one(f"#{name}-chart", SeriesChart) for name in ("latency", "throughput")]
    return charts[0].plotted, charts[1].plotted


async def _charted(pilot: Pilot[None], app: GEConsoleApp) -> DashboardScreen:
    """The dashboard, once its first charts are drawn."""
    await until(pilot, lambda: isinstance(app.screen, DashboardScreen) and None not in _drawn(app.screen),
                what="the dashboard's first charts")
    assert isinstance(app.screen, DashboardScreen)
    return app.screen


async def _feed(pilot: Pilot[None], app: GEConsoleApp, snapshot: ServerSnapshot) -> None:
    """One poll's snapshot, into the history and the app, and the frame it causes."""
    app.source.history.append(snapshot)
    app.connection = next_connection(app.connection, snapshot, app.options)
    await pilot.pause()


def _same_time_axis(screen: DashboardScreen) -> bool:
    """Whether both charts were drawn from one instant's series (their x positions agree)."""
    latency = screen.query_one("#latency-chart", SeriesChart).plotted
    throughput = screen.query_one("#throughput-chart", SeriesChart).plotted
    assert latency and throughput
    return [x for x, _ in latency[1][0].points] == [x for x, _ in throughput[1][0].points]


async def test_both_charts_redraw_together_once_per_chart_interval_of_snapshots() -> None:
    app = create_app(RecordedSource([_snapshot(0)], name="t"), max_polls=1)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await _charted(pilot, app)
        before = _drawn(screen)
        steps: list[tuple[bool, bool]] = []
        for step in range(1, 2 * int(CHART_EVERY_S) + 2):
            await _feed(pilot, app, _snapshot(step))
            now = _drawn(screen)
            steps.append((now[0] is not before[0], now[1] is not before[1]))
            before = now
        assert [index for index, step in enumerate(steps) if step != (False, False)] == [4, 9], steps
        assert [steps[index] for index in (4, 9)] == [(True, True)] * 2
        assert _same_time_axis(screen)
        latency = screen.query_one("#latency-chart", SeriesChart).plotted
        assert latency and latency[1][0].points[-1][0] == 0.0  # minutes before the newest point


async def test_a_chart_drawn_before_it_is_mounted_draws_once_it_is() -> None:
    class Charted(App[None]):
        def compose(self) -> ComposeResult:
            yield chart

    chart = SeriesChart(id="c")
    chart.draw("t", [("p50", [(1.0, 2.0), (2.0, 3.0)])], 2.0)  # no styles or size yet
    async with Charted().run_test(size=(40, 10)) as pilot:
        await pilot.pause()
        assert chart.plotted is not None
        assert any(s.text.strip() for s in chart.render_lines(Region(0, 1, *chart.size)))


async def test_a_chart_takes_the_new_themes_colours() -> None:
    class Charted(App[None]):
        def compose(self) -> ComposeResult:
            yield SeriesChart(id="c")

    def line_colour(chart: SeriesChart) -> object:
        strips = chart.render_lines(Region(0, 0, *chart.size))
        return next(segment.style.color for strip in strips[1:] for segment in strip
                    if segment.text.strip() and segment.text[0] >= "\u2800")

    async with Charted().run_test(size=(40, 10)) as pilot:
        chart = pilot.app.query_one(SeriesChart)
        chart.draw("t", [("p50", [(1.0, 2.0), (2.0, 3.0)])], 2.0)
        await pilot.pause()
        dark = line_colour(chart)
        pilot.app.theme = "nord"
        await pilot.pause()
        assert line_colour(chart) != dark


def _first_device_line(app: App[None], line: int = 1) -> str:
    """The device panel's first device line (line 0: the header) as drawn now ("" before it is mounted)."""
    try:
        return app.screen.query_one("#devices").render_line(line).text
    except NoMatches:
        return ""


def _wide(header: str) -> bool:
    """The device header as drawn in a wide terminal: temperature and power before health."""
    return header.startswith("NPU") and header.find("TEMP") < header.find("POWER") < header.find("HEALTH")


def _narrow(header: str) -> bool:
    """The device header as drawn in a narrow terminal: health before temperature and power (or those cut)."""
    health, temp = header.find("HEALTH"), header.find("TEMP")
    return header.startswith("NPU") and health > -1 and (temp == -1 or health < temp)


async def test_device_lines_follow_a_resize_without_waiting_for_the_next_poll() -> None:
    app = create_app(RecordedSource([_snapshot(0)], name="t"), max_polls=1)
    async with app.run_test(size=(160, 45)) as pilot:
        # the box is laid out to its lines after they are set: wait for the first device's line too
        shown = lambda: _first_device_line(app).startswith("NPU0")  # noqa: E731
        await until(pilot, lambda: _wide(_first_device_line(app, 0)) and shown(), what="the wide lines")
        panel = app.screen.query_one("#devices")
        wide = len(panel.render_line(1).text.rstrip())
        await pilot.resize_terminal(100, 30)
        await until(pilot, lambda: _narrow(_first_device_line(app, 0)) and shown(), what="the narrow lines")
        assert len(panel.render_line(1).text.rstrip()) < wide


async def test_an_80_column_terminal_still_shows_each_devices_health() -> None:
    """Narrow lines put health before temperature and power: the crop at 80 columns cuts those."""
    app = recorded_app("healthy")  # a recorded session whose devices report health OK
    async with app.run_test(size=(80, 24)) as pilot:
        # the box is laid out to its lines after they are set: wait for the first device's line too
        shown = lambda: _narrow(_first_device_line(app, 0)) and bool(_first_device_line(app).strip())  # noqa: E731
        await until(pilot, shown, what="the narrow device lines")
        assert _first_device_line(app).rstrip().endswith("GiB  OK")
