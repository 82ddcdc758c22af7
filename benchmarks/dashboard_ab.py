"""The dashboard at 100 models, two variants side by side: whether a rendering cache or a `gc.freeze` is worth
its code. Keep one only where a user would notice its absence: a refresh (or a garbage collection inside one)
longer than NOTICED_MS delays the answer to a key by a visible amount.

A variant is a source tree (`--a-src`, `--b-src`; default this checkout) and whether start-up objects are
frozen once the app is mounted (`--a-freeze`, `--b-freeze`: a collection, then `gc.freeze()`, as the console
once did). Each round runs every variant in its own interpreter, in `round_order` (ABBA BAAB ...), so a busy
host's drift hits both alike. One run: the 160x45 dashboard in Textual's headless driver, 100 models and 8
devices whose figures all move, 15 minutes of history filled after mount, then `--refreshes` refreshes
`--pace` seconds apart (the console's own pace, 1 s, would make a run last minutes). Each refresh is timed in
wall clock from the snapshot reaching the app to its frame handed to the driver; every full collection
(generation 2) is timed through `gc.callbacks`, wherever it lands.

    python3 benchmarks/dashboard_ab.py --b-freeze                          # this tree, gc.freeze or not
    python3 benchmarks/dashboard_ab.py --b-src /tmp/before/src --rounds 4  # this tree against another

Prints a markdown table (each figure the median over rounds, its range in brackets) and writes every
sample to results/dashboard_ab.json (`--out` to name another file).
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
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
SIZE = (160, 45)
NOTICED_MS = 100.0  # a delay a user sees between a key and its answer
GIB = 1024**3
FRAME_TIMEOUT_S = 1.0


def synthetic(step: int, models: int, devices: int) -> Any:
    """One snapshot whose every figure moves with `step`."""
    from triton_ge_console.sessions.observe.snapshot import (
        DeviceSnapshot,
        Endpoints,
        Latency,
        ModelSnapshot,
        ServerSnapshot,
    )

    wave = 0.5 + 0.5 * math.sin(step / 7)
    rows = tuple(ModelSnapshot(
        name=f"model_{i:03d}", version="1", state="READY" if i % 17 else "UNAVAILABLE", backend="ge",
        queue_depth=(step + i) % 9, request_rate=10 + 20 * wave * (1 + i / 10),
        inference_rate=30 + 40 * wave * (1 + i / 10), avg_batch=1 + (i % 4) * wave,
        latency=Latency(p50_ms=5 + 3 * wave, p99_ms=20 + 10 * wave), queue_ms=1 + wave, compute_ms=4 + wave,
        success_total=step * 10 + i, failure_total=i % 3, devices=(str(i % devices),),
        execution_mode="cpu-emulated") for i in range(models))
    cards = tuple(DeviceSnapshot(str(d), "cpu-emulated", "910B", utilization=(wave + d / devices) % 1.0,
                                 memory_used_bytes=int((8 + d) * GIB), memory_total_bytes=64 * GIB,
                                 health="OK") for d in range(devices))
    return ServerSnapshot(1_790_000_000.0 + step, "bench", True, True, "2.51.0", 100.0 + step,
                          Endpoints("http://127.0.0.1:1", "127.0.0.1:2"), rows, cards)


class FullCollections:
    """The wall time of every full collection while installed."""

    def __init__(self) -> None:
        self.ms: list[float] = []
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        """gc's callback: time generation 2 from start to stop."""
        if info["generation"] != 2:
            return
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.ms.append((time.perf_counter() - self._started) * 1000)


async def one_run(args: argparse.Namespace) -> dict[str, Any]:
    """The child's run: refresh times and full collections, as JSON-able lists."""
    from triton_ge_console.console.app import create_app, next_connection
    from triton_ge_console.sessions.observe.recorded import RecordedSource

    source = RecordedSource([synthetic(0, args.models, args.devices)], name="bench")
    app = create_app(source, thresholds={"model_001": {"queue_depth": 4, "p99_ms": 20}}, max_polls=1)
    handed_over = asyncio.Event()
    display = app._display

    def watched(screen: Any, renderable: Any) -> None:
        display(screen, renderable)
        handed_over.set()

    app._display = watched  # type: ignore[method-assign]
    refresh_ms: list[float] = []
    collections = FullCollections()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.3)
        if args.freeze and gc.get_freeze_count() == 0:
            gc.collect()
            gc.freeze()
        frozen = gc.get_freeze_count()
        for step in range(args.history):
            source.history.append(synthetic(step, args.models, args.devices))
        gc.callbacks.append(collections)
        for step in range(args.history, args.history + args.refreshes):
            snapshot = synthetic(step, args.models, args.devices)
            source.history.append(snapshot)
            handed_over.clear()
            started = time.perf_counter()
            app.connection = next_connection(app.connection, snapshot, app.options)
            try:
                await asyncio.wait_for(handed_over.wait(), FRAME_TIMEOUT_S)
                refresh_ms.append((time.perf_counter() - started) * 1000)
            except TimeoutError:
                pass
            await asyncio.sleep(args.pace)
        gc.callbacks.remove(collections)
    return {"refresh_ms": refresh_ms, "full_gc_ms": collections.ms, "frozen_objects": frozen}


def run_variant(variant: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """One run of a variant in a fresh interpreter with its source tree first on the path."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        command = [sys.executable, __file__, "--child", out.name, f"--refreshes={args.refreshes}",
                   f"--pace={args.pace}", f"--models={args.models}", f"--devices={args.devices}",
                   f"--history={args.history}", *(["--freeze"] if variant["freeze"] else [])]
        env = {**os.environ, "PYTHONPATH": variant["src"]}
        subprocess.run(command, env=env, check=True, timeout=900)
        result: dict[str, Any] = json.loads(Path(out.name).read_text(encoding="utf-8"))
    return result


def summary(run: dict[str, Any]) -> dict[str, float]:
    """One run's figures: refresh p50 / p95 / max, full collections and the longest."""
    ordered = sorted(run["refresh_ms"])
    return {"p50": statistics.median(ordered), "p95": ordered[int(0.95 * (len(ordered) - 1))],
            "max": ordered[-1], "noticed": sum(ms > NOTICED_MS for ms in ordered),
            "collections": len(run["full_gc_ms"]), "gc_max": max(run["full_gc_ms"], default=0.0)}


def table(variants: list[dict[str, Any]]) -> str:
    """A row per variant: each figure's median over rounds and its range."""
    from triton_ge_console.sessions.loadgen.rounds import Spread

    rows = ["| variant | refresh p50 ms | p95 ms | max ms | refreshes over "
            f"{NOTICED_MS:g} ms | full collections | longest ms |", "|---|---|---|---|---|---|---|"]
    for variant in variants:
        figures = [summary(run) for run in variant["runs"]]
        cells = [Spread.of(f[key] for f in figures).text(fmt) for key, fmt in (
            ("p50", "{:.1f}"), ("p95", "{:.1f}"), ("max", "{:.0f}"), ("noticed", "{:.0f}"),
            ("collections", "{:.0f}"), ("gc_max", "{:.0f}"))]
        rows.append(f"| {variant['label']} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def arguments() -> argparse.Namespace:
    """The command line (the parent's and the child's)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = str(HERE.parent / "src")
    parser.add_argument("--a-src", default=here)
    parser.add_argument("--b-src", default=here)
    parser.add_argument("--a-freeze", action="store_true")
    parser.add_argument("--b-freeze", action="store_true")
    parser.add_argument("--rounds", type=int, default=2, help="round groups (each runs every variant once)")
    parser.add_argument("--refreshes", type=int, default=400)
    parser.add_argument("--pace", type=float, default=0.02, help="seconds between refreshes")
    parser.add_argument("--models", type=int, default=100)
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--history", type=int, default=900, help="snapshots in history (15 min at 1 s)")
    parser.add_argument("--out", type=Path, default=RESULTS / "dashboard_ab.json")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--freeze", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args()


def main() -> None:
    """Interleaved rounds of both variants, a table, the JSON."""
    from triton_ge_console.sessions.loadgen.rounds import round_order

    args = arguments()
    if args.child:
        Path(args.child).write_text(json.dumps(asyncio.run(one_run(args))), encoding="utf-8")
        return
    variants = [{"label": f"{name}: {src}" + (" + gc.freeze" if freeze else ""), "src": src, "freeze": freeze,
                 "runs": []} for name, src, freeze in (("A", args.a_src, args.a_freeze),
                                                       ("B", args.b_src, args.b_freeze))]
    for index in range(args.rounds):
        for variant in round_order(variants, index):
            print(f"round {index + 1}: {variant['label']}", file=sys.stderr, flush=True)
            variant["runs"].append(run_variant(variant, args))
    caption = (f"Dashboard at {SIZE[0]}x{SIZE[1]}, {args.models} models, {args.devices} devices, "
               f"{args.history} snapshots of history, {args.refreshes} refreshes {args.pace:g} s apart, "
               f"{args.rounds} rounds per variant, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} "
               "CPUs (wall clock)")
    print(f"{caption}\n\n{table(variants)}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    payload = {"benchmark": "dashboard_ab", "caption": caption, "noticed_ms": NOTICED_MS,
               "variants": variants, "machine": {"python": platform.python_version(), "cpus": os.cpu_count()}}
    args.out.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
