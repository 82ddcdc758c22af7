"""Render cost of one dashboard refresh with 100 models and 8 devices (target: 16 ms, one 60 Hz frame).

The 160x45 dashboard runs in Textual's headless driver; each refresh folds a new snapshot into the
widgets (models table rows, device lines, detail pane) and then lets the app render and write its next
frame. Measured as CPU time on the UI thread (the event loop's thread), which is what a refresh costs
and which other load on a shared machine inflates far less than wall time (the load average is printed):
- update: the watchers putting the snapshot into the widgets (synchronous);
- render: everything else the UI thread does until the frame is written (layout, widget rendering,
  compositing, writing to the driver), less the CPU an idle window of the same length costs the app.
  The window is a plain sleep, so the app's own 60 Hz update timer writes the frame; the test pilot's
  pause is not used there, because it wakes every widget (tens of ms per second on this machine) and
  that harness cost is not the console's;
- total: both.
Snapshots are synthetic but shaped like a live session's (every figure changes every refresh), with a
15-minute history behind them. The two detail charts are redrawn every 5 s of snapshots, spread over two
refreshes (latency, then throughput on the next), so p50 is a typical refresh and p95/max include those.
"full repaint" (the whole screen laid out and composited from each widget's cached lines, no widget
re-rendering; wall time) is a yardstick of the machine's speed during the run. One full garbage
collection with all of it alive (wall time) is shown for reference too: a live console runs one every
few minutes (when the objects kept since the last one reach a quarter of those it holds), and the
refresh it lands in costs that much more. The benchmark runs one before the measured window, because
building 15 minutes of history in one go would otherwise put it inside (and keep the young generations
full of history); so no measured refresh includes a full collection, and its row is where it shows.

    python3 benchmarks/tui_render.py [--refreshes 60] [--models 100] [--devices 8] [--table]

The JSON (every sample) always goes to results/tui_render.json; --table also writes the printed tables
to results/tui_render.table.md, as run_all.py keeps them.
"""

from __future__ import annotations

import argparse
import asyncio
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

from triton_ge_console.console.app import GEConsoleApp, create_app, next_connection
from triton_ge_console.console.screens.dashboard import DashboardScreen
from triton_ge_console.sessions.recorded import RecordedSource
from triton_ge_console.sessions.snapshot import (
    DeviceSnapshot,
    Endpoints,
    Latency,
    ModelSnapshot,
    ServerSnapshot,
)

RESULTS = Path(__file__).resolve().parent / "results"
TARGET_MS = 16.0
WARMUP = 3  # refreshes not counted
FRAME_WAIT_S = 0.05  # longer than a 60 Hz frame: the refresh's frame is written within it
SIZE = (160, 45)
GIB = 1024**3


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
    """Model i's figures at a step."""
    wave = 0.5 + 0.5 * math.sin(step / 7)
    return ModelSnapshot(
        name=f"model_{i:03d}", version="1", state="READY" if i % 17 else "UNAVAILABLE", backend="ge",
        queue_depth=(step + i) % 9, request_rate=10 + i * wave, inference_rate=30 + i * wave,
        avg_batch=1 + (i % 4) * wave, latency=Latency(p50_ms=5 + wave * i / 10, p99_ms=20 + wave * i / 5),
        queue_ms=1 + wave, compute_ms=4 + wave, success_total=step * 10 + i, failure_total=i % 3,
        devices=(str(i % devices),), execution_mode="cpu-emulated",
    )


async def measure(refreshes: int, models: int, devices: int, history: int,
                  busy: float = 1.0) -> dict[str, list[float]]:
    """Time `refreshes` refreshes after filling `history` snapshots."""
    source = RecordedSource([synthetic(0, models, devices)], name="bench")
    for step in range(history):
        source.history.append(synthetic(step, models, devices, busy))
    app = create_app(source, thresholds={"model_001": {"queue_depth": 4, "p99_ms": 20}}, max_polls=1)
    times: dict[str, list[float]] = {"update_ms": [], "render_ms": [], "total_ms": []}
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.3)
        screen = app.screen
        assert isinstance(screen, DashboardScreen)
        for step in range(history, history + WARMUP):  # first frames build caches and lay everything out
            source.history.append(synthetic(step, models, devices, busy))
            _fold_in(app, source.history.snapshots()[-1])
            await pilot.pause(FRAME_WAIT_S)
        history += WARMUP
        gc.collect()  # the history was built in one go: its full collection would land in the window
        idle = await idle_cpu_ms()
        for step in range(history, history + refreshes):
            snapshot = synthetic(step, models, devices, busy)
            source.history.append(snapshot)
            started = time.thread_time()
            _fold_in(app, snapshot)
            updated = time.thread_time()
            await asyncio.sleep(FRAME_WAIT_S)  # the app's 60 Hz update timer renders and writes the frame
            done = time.thread_time()
            times["update_ms"].append((updated - started) * 1000)
            render = max(0.0, (done - updated) * 1000 - idle)
            times["render_ms"].append(render)
            times["total_ms"].append((updated - started) * 1000 + render)
        times["full_repaint_ms"] = full_repaint_ms(screen)
        times["full_gc_ms"] = full_gc_ms()
    return times


def full_gc_ms(repeats: int = 3) -> list[float]:
    """One full garbage collection with the history and the app alive (wall), for reference."""
    return wall_ms(gc.collect, repeats)


async def idle_cpu_ms(windows: int = 10) -> float:
    """UI-thread CPU the app spends in a frame window with nothing to draw, subtracted from renders."""
    samples = []
    for _ in range(windows):
        started = time.thread_time()
        await asyncio.sleep(FRAME_WAIT_S)
        samples.append((time.thread_time() - started) * 1000)
    return statistics.median(samples)


def _fold_in(app: GEConsoleApp, snapshot: ServerSnapshot) -> None:
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
        ordered = sorted(values)
        out[part] = {"p50": statistics.median(ordered), "p95": ordered[int(0.95 * (len(ordered) - 1))],
                     "max": ordered[-1]}
    return out


REFERENCE_LABELS = {"full_repaint_ms": "full repaint, wall (reference)",
                    "full_gc_ms": "full garbage collection, wall (reference)"}
SCENARIOS = (("every model's figures change", 1.0), ("10% of models busy, the rest idle", 0.1))


def main() -> None:
    """Run both scenarios, print markdown tables, write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--refreshes", type=int, default=60)
    parser.add_argument("--models", type=int, default=100)
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--history", type=int, default=900, help="snapshots in history (15 min at 1 s)")
    parser.add_argument("--table", action="store_true", help="also write results/tui_render.table.md")
    args = parser.parse_args()
    scenarios: list[dict[str, Any]] = []
    sections: list[str] = []
    for title, busy in SCENARIOS:
        times = asyncio.run(measure(args.refreshes, args.models, args.devices, args.history, busy))
        summary = summarize(times)
        load = os.getloadavg()[0]
        caption = (f"Dashboard refresh at {SIZE[0]}x{SIZE[1]}, {args.models} models, {args.devices} devices, "
                   f"{args.history} snapshots of history, {args.refreshes} refreshes "
                   f"(target ≤ {TARGET_MS:g} ms), load average {load:.1f} on {os.cpu_count()} CPUs")
        sections.append(f"#### {title}\n\n{caption}\n\n{table(summary)}")
        print(f"### {title}\n\n{caption}\n\n{table(summary)}\n")
        scenarios.append({"scenario": title, "busy_fraction": busy, "load_average": load, "summary": summary,
                          "samples": times})
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
