"""Render cost of one dashboard refresh with 100 models and 8 devices (target: 16 ms, one 60 Hz frame).

The 160x45 dashboard runs in Textual's headless driver; each refresh folds a new snapshot into the
widgets (models table rows, device lines, detail pane) and then lets the app render its next frame, which
it hands to the driver. Refreshes run back to back: the next one starts as soon as the last frame is
handed over (a refresh that draws no frame within a second is counted and left out). Measured as CPU
time on the UI thread (the event loop's thread), which is what a refresh costs and which other load on a
shared machine inflates far less than wall time (the load average is printed):
- update: the watchers putting the snapshot into the widgets (synchronous);
- render: everything else the UI thread does until the frame is handed over (waiting for the app's 60 Hz
  update timer, layout, widget rendering, compositing, and turning the frame into the terminal's text,
  which Textual's headless driver skips and this does; writing that text out is not timed);
- total: both.
Back to back, because on the machines these benchmarks run on, memory left untouched for a few
milliseconds costs many times more to touch again, whatever program touches it (why is not known here),
and a refresh touches thousands of pages: with 50 ms idle between refreshes the same refresh costs a few
ms more, at the console's one a second several times more, and a one-label Textual app alone costs more
than the target there. refresh_pace.py measures that side by side; this script measures the console's
own work. Each measured refresh follows the replay of the one before (below), which touches much of the
same memory; refresh_pace.py's back-to-back row has no replays, for comparison.
Snapshots are synthetic but shaped like a live session's (every figure changes every refresh), with a
15-minute history behind them. The two detail charts are redrawn every 5 s of snapshots, spread over two
refreshes (latency, then throughput on the next), so p50 is a typical refresh and p95/max include those.
"render, same repaints with nothing new" replays each measured refresh's repaints (every widget.refresh()
call it made, with the same regions) once the figures stop changing: the widgets answer from their caches,
so what is left is Textual restyling and compositing those lines, the floor of a refresh that changes
them. "full repaint" (the whole screen laid out and composited from each widget's cached lines, no widget
re-rendering; wall time) is a yardstick of the machine's speed during the run. One full garbage
collection with all of it alive (wall time) is shown for reference too: a live console runs one every
few minutes (when the objects kept since the last one reach a quarter of those it holds), and the
refresh it lands in costs that much more. The benchmark runs one before the measured window, because
building 15 minutes of history in one go would otherwise put it inside (and keep the young generations
full of history). The window's refreshes and replays still allocate enough for about one automatic full
collection (one per ~120 refreshes, gc_pause.py): it lands in one refresh or one replay, whose max it
becomes, and it costs more than the forced one because the memory it walks has sat idle (refresh_pace.py).

    python3 benchmarks/tui_render.py [--refreshes 60] [--models 100] [--devices 8] [--table]

The JSON (every sample) always goes to results/tui_render.json; --table also writes the printed tables
to results/tui_render.table.md, as run_all.py keeps them.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import json
import math
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import RenderableType
from textual._compositor import CompositorUpdate
from textual.app import App
from textual.geometry import Region
from textual.screen import Screen
from textual.widget import Widget

from triton_ge_console.console.app import GEConsoleApp, create_app, next_connection
from triton_ge_console.console.screens.dashboard import DashboardScreen
from triton_ge_console.display import GIB
from triton_ge_console.sessions.observe.recorded import RecordedSource
from triton_ge_console.sessions.observe.snapshot import (
    DeviceSnapshot,
    Endpoints,
    Latency,
    ModelSnapshot,
    ServerSnapshot,
)

RESULTS = Path(__file__).resolve().parent / "results"
TARGET_MS = 16.0
WARMUP = 3  # refreshes not counted
FRAME_WAIT_S = 0.05  # longer than a 60 Hz frame: an unmeasured refresh's frame is written within it
FRAME_TIMEOUT_S = 1.0  # a refresh that changes nothing on screen has no frame: stop waiting for one
SIZE = (160, 45)


def synthetic(step: int, models: int, devices: int, busy: float = 1.0) -> ServerSnapshot:
    """One snapshot; the figures of the first `busy` fraction of models move, the others stay put."""
    model_rows = tuple(_model(i, step if i < busy * models else 0, devices) for i in range(models))
    wave = 0.5 + 0.5 * math.sin(step / 7)
    device_rows = tuple(
        DeviceSnapshot(str(d), "cpu-emulated", "910B", utilization=(wave + d / devices) % 1.0,
                       memory_used_bytes=int((8 + d) * GIB), memory_total_bytes=64 * GIB, health="OK")
        for d in range(devices)
    )
    return ServerSnapshot(1_790_000_000.0 + step, "bench", True, True, "2.51.0", 100.0 + step,
                          Endpoints("http://127.0.0.1:1", "127.0.0.1:2"), model_rows, device_rows)


def _model(i: int, step: int, devices: int) -> ModelSnapshot:
    """Model i's figures at a step; every model's move visibly, model_000's (the one charted) included."""
    wave = 0.5 + 0.5 * math.sin(step / 7)
    load = wave * (1 + i / 10)
    return ModelSnapshot(
        name=f"model_{i:03d}", version="1", state="READY" if i % 17 else "UNAVAILABLE", backend="ge",
        queue_depth=(step + i) % 9, request_rate=10 + 20 * load, inference_rate=30 + 40 * load,
        avg_batch=1 + (i % 4) * wave, latency=Latency(p50_ms=5 + 3 * load, p99_ms=20 + 10 * load),
        queue_ms=1 + wave, compute_ms=4 + wave, success_total=step * 10 + i, failure_total=i % 3,
        devices=(str(i % devices),), execution_mode="cpu-emulated",
    )


async def measure(refreshes: int, models: int, devices: int, history: int,
                  busy: float = 1.0) -> tuple[dict[str, list[float]], int]:
    """Time `refreshes` refreshes after filling `history` snapshots; also how many drew no frame."""
    source = RecordedSource([synthetic(0, models, devices)], name="bench")
    app = create_app(source, thresholds={"model_001": {"queue_depth": 4, "p99_ms": 20}}, max_polls=1)
    times: dict[str, list[float]] = {"update_ms": [], "render_ms": [], "total_ms": [], "same_repaints_ms": []}
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.3)
        fill_history(source, history, models, devices, busy)
        screen = app.screen
        assert isinstance(screen, DashboardScreen)
        for step in range(history, history + WARMUP):  # first frames build caches and lay everything out
            await _refresh_unmeasured(app, source, synthetic(step, models, devices, busy))
        history += WARMUP
        gc.collect()  # the history was built in one go: its full collection would land in the window
        frames = FrameWatch(app)
        log = RepaintLog(screen)
        for step in range(history, history + refreshes):
            snapshot = synthetic(step, models, devices, busy)
            source.history.append(snapshot)
            log.calls = []
            timed = await frames.time_refresh(functools.partial(fold_in, app, snapshot))
            if timed is None:
                continue  # no frame: counted in frames.missed, reported under the table
            update, render = timed
            times["update_ms"].append(update)
            times["render_ms"].append(render)
            times["total_ms"].append(update + render)
            # the same repaints again at once, side by side with the refresh that made them
            times["same_repaints_ms"].append(await replayed_render_ms(log, frames))
        log.stop()
        times["full_repaint_ms"] = full_repaint_ms(screen)
        times["full_gc_ms"] = full_gc_ms()
    return times, frames.missed


Repaint = tuple[Widget, tuple[Region, ...], dict[str, bool]]  # a widget.refresh() call: regions, options


class RepaintLog:
    """Every refresh() call the screen's widgets make while it is on, to replay with nothing new to draw."""

    def __init__(self, screen: DashboardScreen) -> None:
        self.calls: list[Repaint] = []
        self.widgets = list(screen.walk_children(Widget, with_self=True))
        for widget in self.widgets:
            widget.refresh = self._logging(widget)  # type: ignore[method-assign]

    def _logging(self, widget: Widget) -> Callable[..., Widget]:
        """The widget's refresh, recording each call."""
        refresh = widget.refresh

        def logged(*regions: Region, **options: bool) -> Widget:
            self.calls.append((widget, regions, options))
            return refresh(*regions, **options)

        return logged

    def stop(self) -> None:
        """Back to the widgets' own refresh."""
        for widget in self.widgets:
            del widget.refresh


class FrameWatch:
    """Knows when the app hands a frame to its driver, so a refresh is timed to its frame and no further.

    Textual's headless driver skips turning the frame into the terminal's text; this does it, as a
    terminal driver would, so that work is timed too (writing the text out is not)."""

    def __init__(self, app: App[Any]) -> None:
        self.handed_over = asyncio.Event()
        self.missed = 0  # refreshes that drew no frame within FRAME_TIMEOUT_S
        display = app._display

        def watched(screen: Screen[Any], renderable: RenderableType | None) -> None:
            display(screen, renderable)
            if isinstance(renderable, CompositorUpdate) and not app._batch_count:
                renderable.render_segments(app.console)
                self.handed_over.set()

        app._display = watched  # type: ignore[method-assign]

    async def time_refresh(self, update: Callable[[], object]) -> tuple[float, float] | None:
        """UI-thread CPU ms of `update`, and of everything after it until the app hands over its frame
        (None, counted in `missed`, when no frame comes)."""
        self.handed_over.clear()
        started = time.thread_time()
        update()
        updated = time.thread_time()
        try:
            await asyncio.wait_for(self.handed_over.wait(), FRAME_TIMEOUT_S)
        except TimeoutError:
            self.missed += 1
            return None
        return (updated - started) * 1000, (time.thread_time() - updated) * 1000


async def replayed_render_ms(log: RepaintLog, frames: FrameWatch) -> float:
    """Render CPU of the last refresh's repaints made again, with nothing new (widgets draw from cache)."""
    calls, log.calls = log.calls, []

    def repaint() -> None:
        for widget, regions, options in calls:
            widget.refresh(*regions, **options)

    timed = await frames.time_refresh(repaint)
    return timed[1] if timed else math.nan  # as for the refresh, whose refresh() calls are its update


def full_gc_ms(repeats: int = 3) -> list[float]:
    """One full garbage collection with the history and the app alive (wall), for reference."""
    return wall_ms(gc.collect, repeats)


async def _refresh_unmeasured(app: GEConsoleApp, source: RecordedSource, snapshot: ServerSnapshot) -> None:
    """One refresh and its frame, not timed."""
    source.history.append(snapshot)
    fold_in(app, snapshot)
    await asyncio.sleep(FRAME_WAIT_S)


def fill_history(source: RecordedSource, steps: int, models: int, devices: int, busy: float = 1.0) -> None:
    """A session's history, built once the app is running, as a live console builds it after start-up."""
    for step in range(steps):
        source.history.append(synthetic(step, models, devices, busy))


def fold_in(app: GEConsoleApp, snapshot: ServerSnapshot) -> None:
    """What the app does when a poll returns (the watchers run synchronously)."""
    app.connection = next_connection(app.connection, snapshot, app.options)


def full_repaint_ms(screen: DashboardScreen, repeats: int = 10) -> list[float]:
    """The screen laid out and composited from every widget's cached lines: a machine-speed yardstick."""

    def repaint() -> None:
        screen._refresh_layout(screen.size)
        screen._compositor.render_full_update()

    return wall_ms(repaint, repeats)


def wall_ms(action: Callable[[], object], repeats: int) -> list[float]:
    """Wall milliseconds of each of `repeats` calls."""
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def summarize(times: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    """p50 / p95 / max per part."""
    out = {}
    for part, values in times.items():
        ordered = sorted(value for value in values if not math.isnan(value))  # nan: a replay drew no frame
        out[part] = {"p50": statistics.median(ordered), "p95": ordered[int(0.95 * (len(ordered) - 1))],
                     "max": ordered[-1]}
    return out


def render_over_same_repaints(times: dict[str, list[float]]) -> float:
    """How a refresh's render compares with Textual redoing its repaints: 1.0 means ours adds nothing."""
    pairs = zip(times["render_ms"], times["same_repaints_ms"], strict=True)
    ratios = [render / again for render, again in pairs if again > 0]  # nan > 0 is False: left out
    return statistics.median(ratios) if ratios else math.nan  # no replay cost anything measurable


REFERENCE_LABELS = {"same_repaints_ms": "render, same repaints with nothing new (Textual's part)",
                    "full_repaint_ms": "full repaint, wall (reference)",
                    "full_gc_ms": "full garbage collection, wall (reference)"}
SCENARIOS = (("every model's figures change", 1.0), ("10% of models busy, the rest idle", 0.1))


def dashboard_arguments(description: str, name: str, refreshes: int) -> argparse.Namespace:
    """The command line the dashboard benchmarks share, parsed."""
    return dashboard_parser(description, name, refreshes).parse_args()


def dashboard_parser(description: str, name: str, refreshes: int) -> argparse.ArgumentParser:
    """The command line the dashboard benchmarks share: how many refreshes, models, devices, history."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--refreshes", type=int, default=refreshes)
    parser.add_argument("--models", type=int, default=100)
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--history", type=int, default=900, help="snapshots in history (15 min at 1 s)")
    parser.add_argument("--table", action="store_true", help=f"also write results/{name}.table.md")
    return parser


def main() -> None:
    """Run both scenarios, print markdown tables, write JSON."""
    args = dashboard_arguments(__doc__.splitlines()[0], "tui_render", refreshes=60)
    scenarios: list[dict[str, Any]] = []
    sections: list[str] = []
    for title, busy in SCENARIOS:
        times, missed = asyncio.run(measure(args.refreshes, args.models, args.devices, args.history, busy))
        summary = summarize(times)
        load = os.getloadavg()[0]
        caption = (f"Dashboard refresh at {SIZE[0]}x{SIZE[1]}, {args.models} models, {args.devices} devices, "
                   f"{args.history} snapshots of history, {args.refreshes} refreshes "
                   f"(target ≤ {TARGET_MS:g} ms), load average {load:.1f} on {os.cpu_count()} CPUs")
        ratio = render_over_same_repaints(times)
        footnote = (f"render ÷ the same repaints with nothing new, per refresh (median): {ratio:.2f}×; "
                    f"refreshes that drew no frame (left out): {missed}")
        sections.append(f"#### {title}\n\n{caption}\n\n{table(summary)}\n\n{footnote}")
        print(f"### {title}\n\n{caption}\n\n{table(summary)}\n\n{footnote}\n")
        scenarios.append({"scenario": title, "busy_fraction": busy, "load_average": load, "summary": summary,
                          "render_over_same_repaints": ratio, "missed_frames": missed, "samples": times})
    result: dict[str, Any] = {
        "benchmark": "tui_render", "target_ms": TARGET_MS, "terminal": list(SIZE), "models": args.models,
        "devices": args.devices, "history": args.history, "refreshes": args.refreshes, "scenarios": scenarios,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "tui_render.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if args.table:
        (RESULTS / "tui_render.table.md").write_text("\n\n".join(sections) + "\n", encoding="utf-8")


def table(summary: dict[str, dict[str, float]]) -> str:
    """One markdown table: p50 / p95 / max per part, and the verdict on the total."""
    rows = ["| part (UI-thread CPU) | p50 ms | p95 ms | max ms | within target (p95) |",
            "|---|---|---|---|---|"]
    for part, figures in summary.items():
        verdict = ("yes" if figures["p95"] <= TARGET_MS else "no") if part == "total_ms" else ""
        label = REFERENCE_LABELS.get(part, part[:-3])
        figures_text = " | ".join(f"{figures[key]:.2f}" for key in ("p50", "p95", "max"))
        rows.append(f"| {label} | {figures_text} | {verdict} |")
    return "\n".join(rows)


if __name__ == "__main__":
    main()
