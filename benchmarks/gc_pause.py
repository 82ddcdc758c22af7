"""The full garbage collections a live dashboard runs, with 15 minutes of 100 busy models in its history.

A full collection walks every object the collector tracks and pauses the UI thread for that long; CPython
runs one whenever the objects promoted since the last reach a quarter of those it holds, so how often and
how long both depend on what the console keeps. The console leaves the objects start-up made out of them
(console/long_lived.py freezes them once the app is mounted). This drives the dashboard of
`tui_render.py` (160x45, 100 models, 8 devices, every figure moving, a 900-snapshot history built once the
app runs, as a live console builds it) through `--refreshes` refreshes back to back (a short pause for
each frame, not the 1 s of a live console: the collections come per refresh, not per second), and times
every full collection with `gc.callbacks`. Each round runs it twice, side by side: as the console runs,
and with start-up's objects handed back to the collector first (as before the console froze them); each
run in a fresh interpreter, and which goes first alternates from round to round.

    python3 benchmarks/gc_pause.py [--refreshes 600] [--rounds 2] [--table]

The JSON goes to results/gc_pause.json; --table also writes results/gc_pause.table.md.
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
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from triton_ge_console.console import long_lived
from triton_ge_console.console.app import create_app
from triton_ge_console.sessions.observe.recorded import RecordedSource
from tui_render import SIZE, dashboard_parser, fill_history, fold_in, synthetic

RESULTS = Path(__file__).resolve().parent / "results"
FRAME_S = 0.03  # long enough for the app's 60 Hz timer to draw each refresh


class FullCollections:
    """Wall milliseconds of each full (generation 2) collection while switched on."""

    def __init__(self) -> None:
        self.pauses: list[float] = []
        self.on = False
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        """gc.callbacks hook: time from a collection's start to its stop."""
        if phase == "start":
            self._started = time.perf_counter()
        elif self.on and info["generation"] == 2:
            self.pauses.append((time.perf_counter() - self._started) * 1000)


async def run(refreshes: int, models: int, devices: int, history: int, frozen: bool) -> dict[str, Any]:
    """Refresh the dashboard `refreshes` times after filling the history; every full collection's pause."""
    source = RecordedSource([synthetic(0, models, devices)], name="bench")
    app = create_app(source, max_polls=1)
    collections = FullCollections()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.3)
        if not frozen:
            long_lived.hand_back_start_up_objects()
        fill_history(source, history, models, devices)
        gc.collect()
        tracked = len(gc.get_objects())
        gc.callbacks.append(collections)
        collections.on = True
        for step in range(history, history + refreshes):
            snapshot = synthetic(step, models, devices)
            source.history.append(snapshot)
            fold_in(app, snapshot)
            await asyncio.sleep(FRAME_S)
        collections.on = False
        gc.callbacks.remove(collections)
    return {"frozen": frozen, "tracked_objects": tracked, "pauses_ms": collections.pauses}


WAYS = {True: "start-up objects frozen (the console)", False: "start-up objects walked too"}


def table(refreshes: int, results: list[dict[str, Any]]) -> str:
    """One markdown row per run: how many full collections, how long, how often; then the ratio."""
    rows = ["| round | start-up objects | objects tracked at start | full collections | one per refreshes "
            "| p50 ms | max ms |", "|---|---|---|---|---|---|---|"]
    for result in results:
        pauses = result["pauses_ms"]
        every = f"{refreshes / len(pauses):.0f}" if pauses else "—"
        p50 = f"{statistics.median(pauses):.0f}" if pauses else "—"
        longest = f"{max(pauses):.0f}" if pauses else "—"
        rows.append(f"| {result['round']} | {WAYS[result['frozen']]} | {result['tracked_objects']} | "
                    f"{len(pauses)} | {every} | {p50} | {longest} |")
    ratio = frozen_ratio(results)
    return "\n".join(rows) + f"\n\nfrozen ÷ walked, p50 pause (median of the rounds): {ratio:.2f}×"


def frozen_ratio(results: list[dict[str, Any]]) -> float:
    """Median over rounds of the frozen run's p50 pause ÷ the walked run's (nan when a run had none)."""
    ratios = []
    for first, second in zip(results[::2], results[1::2], strict=True):  # a round's two runs, either order
        frozen, walked = (first, second) if first["frozen"] else (second, first)
        if frozen["pauses_ms"] and walked["pauses_ms"]:
            ratios.append(statistics.median(frozen["pauses_ms"]) / statistics.median(walked["pauses_ms"]))
    return statistics.median(ratios) if ratios else math.nan


def in_own_process(args: argparse.Namespace, frozen: bool, round_number: int) -> dict[str, Any]:
    """One run in a fresh interpreter, so nothing one run leaves behind weighs on the other."""
    command = [sys.executable, __file__, "--single", "frozen" if frozen else "walked",
               *(f"--{name}={getattr(args, name)}" for name in ("refreshes", "models", "devices", "history"))]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return {"round": round_number, **json.loads(done.stdout.splitlines()[-1])}


def main() -> None:
    """Run both ways in rounds (which goes first alternates), each run its own process; table and JSON."""
    parser = dashboard_parser(__doc__.splitlines()[0], "gc_pause", refreshes=600)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--single", choices=("frozen", "walked"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.single:  # one run, for in_own_process: its result as the last line
        print(json.dumps(asyncio.run(run(args.refreshes, args.models, args.devices, args.history,
                                         args.single == "frozen"))))
        return
    orders = ((True, False), (False, True))
    results = [in_own_process(args, frozen, number + 1)
               for number in range(args.rounds) for frozen in orders[number % 2]]
    caption = (f"Full garbage collections over {args.refreshes} dashboard refreshes, {args.models} models, "
               f"{args.devices} devices, {args.history} snapshots of history (wall time of each)")
    text = table(args.refreshes, results)
    print(f"### Full garbage collections\n\n{caption}\n\n{text}\n")
    RESULTS.mkdir(parents=True, exist_ok=True)
    settings = {name: value for name, value in vars(args).items() if name != "single"}
    payload = {"benchmark": "gc_pause", **settings, "runs": results, "frozen_ratio": frozen_ratio(results),
               "machine": {"python": platform.python_version(), "cpus": os.cpu_count()}}
    (RESULTS / "gc_pause.json").write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    if args.table:
        (RESULTS / "gc_pause.table.md").write_text(f"{caption}\n\n{text}\n", encoding="utf-8")


if __name__ == "__main__":
    main()
