"""A dashboard refresh at three paces, beside what this machine charges to touch memory that sat idle.

tui_render.py runs dashboard refreshes back to back; a live console refreshes once a second. On the
machines these benchmarks run on, memory that nobody touched for a few milliseconds costs far more to
touch again than memory touched a moment ago, whatever program touches it: the first table shows it with
no console at all (one byte read from each of 2,000 pages of a bytearray, after the pages sat idle).
A refresh touches thousands of pages (Python objects, code and Textual's state), so at a slower pace the
same refresh costs more. This measures, side by side in one run:
- the dashboard of tui_render.py (160x45, 100 models, 8 devices, every figure moving, 15 minutes of
  history) and, for scale, a one-label Textual app whose label changes every refresh;
- at three paces: back to back (the next refresh as soon as the last frame is written), 50 ms idle
  between refreshes (about tui_render.py's pace before it ran back to back), and 1 s idle between (the
  console polls once a second);
- UI-thread CPU from handing the app the new snapshot (built just before, as a poll hands over fresh
  objects) to the frame being written (Textual's headless driver: the app renders the frame but writes
  nothing to a terminal), and the memory pages the refresh
  touched (Linux's /proc/self/clear_refs, on separate refreshes; "—" where the kernel does not offer it).

    python3 benchmarks/refresh_pace.py [--refreshes 20] [--table]

The JSON goes to results/refresh_pace.json; --table also writes results/refresh_pace.table.md.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.app import App, ComposeResult
from textual.widgets import Static

from triton_ge_console.console.app import create_app
from triton_ge_console.sessions.observe.recorded import RecordedSource
from tui_render import SIZE, FrameWatch, dashboard_arguments, fill_history, fold_in, synthetic

RESULTS = Path(__file__).resolve().parent / "results"
PAGE = 4096
PROBE_PAGES = 2000
PACES = (("back to back", 0.0), ("50 ms idle between", 0.05), ("1 s idle between (the console's pace)", 1.0))
IDLES = (0.0, 0.005, 0.05, 1.0)  # seconds the probe's pages sit untouched before they are read again
PAGE_COUNT_REFRESHES = 8


def retouch_us_per_page(idle_s: float, repeats: int = 5) -> float:
    """Microseconds to read one byte of each of PROBE_PAGES pages again after they sat idle (median)."""
    buffer = bytearray(PROBE_PAGES * PAGE)
    strided = memoryview(buffer)[::PAGE]  # one byte per page
    samples = []
    for _ in range(repeats):
        for page in range(PROBE_PAGES):  # written, so every page is resident and recently touched
            buffer[page * PAGE] = (buffer[page * PAGE] + 1) % 256
        time.sleep(idle_s)
        started = time.perf_counter()
        sum(strided)
        samples.append((time.perf_counter() - started) * 1e6 / PROBE_PAGES)
    return statistics.median(samples)


class PageCounter:
    """Pages this process touches between start() and stop(), less what the counting itself touches."""

    CLEAR = Path("/proc/self/clear_refs")
    ROLLUP = Path("/proc/self/smaps_rollup")

    def __init__(self) -> None:
        self.available = self.CLEAR.exists() and self.ROLLUP.exists()
        self.overhead = 0
        if self.available:
            try:
                self.overhead = min(self._counting_alone() for _ in range(5))
            except OSError:  # present but not ours to use (a locked-down kernel)
                self.available = False

    def _counting_alone(self) -> int:
        """Pages that clearing and reading touch with nothing in between (before any overhead is known)."""
        self.start()
        return self.stop()

    def _referenced(self) -> int:
        """Pages the kernel has seen referenced since its bits were last cleared."""
        for line in self.ROLLUP.read_text().splitlines():
            if line.startswith("Referenced:"):
                return int(line.split()[1]) * 1024 // PAGE
        return 0

    def start(self) -> None:
        """Clear the referenced bits."""
        self.CLEAR.write_text("1")

    def stop(self) -> int:
        """Pages referenced since start(), less the counting's own."""
        return max(0, self._referenced() - self.overhead)


class OneLabel(App[None]):
    """A minimal Textual app for scale: one label whose text changes."""

    def compose(self) -> ComposeResult:
        """One Static."""
        yield Static("0", id="label")

    def show(self, step: int) -> None:
        """The refresh: new text in the label."""
        self.query_one("#label", Static).update(f"refresh {step}")


UpdateFactory = Callable[[int], Callable[[], object]]  # step -> the refresh's update, with its snapshot


async def paced(app: App[Any], prepare: UpdateFactory, gap_s: float, refreshes: int,
                pages: PageCounter, first: int) -> dict[str, list[float]]:
    """Time `refreshes` refreshes, each after `gap_s` idle; then count pages on a few more."""
    frames = FrameWatch(app)
    times: dict[str, list[float]] = {"update_ms": [], "render_ms": [], "total_ms": [], "pages": []}
    gc.collect()
    for step in range(first, first + refreshes + PAGE_COUNT_REFRESHES):
        await asyncio.sleep(gap_s)
        apply = prepare(step)  # the new snapshot is built now, not timed: a poll hands over fresh objects
        counting = step >= first + refreshes
        if counting and pages.available:
            pages.start()
        timed = await frames.time_refresh(apply)
        if counting:
            if pages.available:
                times["pages"].append(pages.stop())
            continue
        if timed is None:  # no frame drawn: left out (none are expected; every refresh changes figures)
            continue
        update, render = timed
        times["update_ms"].append(update)
        times["render_ms"].append(render)
        times["total_ms"].append(update + render)
    return times


async def dashboard(gap_s: float, refreshes: int, pages: PageCounter,
                    args: argparse.Namespace) -> dict[str, list[float]]:
    """The tui_render dashboard at one pace."""
    models, devices = args.models, args.devices
    source = RecordedSource([synthetic(0, models, devices)], name="bench")
    app = create_app(source, max_polls=1)

    def prepare(step: int) -> Callable[[], object]:
        snapshot = synthetic(step, models, devices)
        source.history.append(snapshot)
        return lambda: fold_in(app, snapshot)

    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.3)
        fill_history(source, args.history, models, devices)
        for step in range(args.history, args.history + 3):  # caches built, everything laid out
            prepare(step)()
            await pilot.pause(0.05)
        return await paced(app, prepare, gap_s, refreshes, pages, args.history + 3)


async def one_label(gap_s: float, refreshes: int, pages: PageCounter) -> dict[str, list[float]]:
    """The one-label app at one pace."""
    app = OneLabel()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.3)
        return await paced(app, lambda step: lambda: app.show(step), gap_s, refreshes, pages, 1)


def summary(times: dict[str, list[float]]) -> dict[str, float | None]:
    """p50 of each part, p95 of the total, p50 of the pages (None when not counted)."""
    total = sorted(times["total_ms"])
    return {"update_p50": statistics.median(times["update_ms"]),
            "render_p50": statistics.median(times["render_ms"]),
            "total_p50": statistics.median(total), "total_p95": total[int(0.95 * (len(total) - 1))],
            "pages_p50": statistics.median(times["pages"]) if times["pages"] else None}


def main() -> None:
    """Probe the machine, run both apps at each pace, print tables, write JSON."""
    args = dashboard_arguments(__doc__.splitlines()[0], "refresh_pace", refreshes=20)
    probe = {idle: retouch_us_per_page(idle) for idle in IDLES}
    pages = PageCounter()
    runs = []
    for label, gap in PACES:
        dashboard_summary = summary(asyncio.run(dashboard(gap, args.refreshes, pages, args)))
        one_label_summary = summary(asyncio.run(one_label(gap, args.refreshes, pages)))
        runs.append({"pace": label, "gap_s": gap, "dashboard": dashboard_summary,
                     "one_label": one_label_summary})
    text = tables(probe, runs, args)
    print(text)
    result = {"benchmark": "refresh_pace", "terminal": list(SIZE), "models": args.models,
              "devices": args.devices, "history": args.history, "refreshes": args.refreshes,
              "probe_us_per_page": {str(idle): us for idle, us in probe.items()}, "paces": runs,
              "load_average": os.getloadavg()[0],
              "machine": {"python": platform.python_version(), "cpus": os.cpu_count()}}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "refresh_pace.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if args.table:
        (RESULTS / "refresh_pace.table.md").write_text(text + "\n", encoding="utf-8")


def tables(probe: dict[float, float], runs: list[dict[str, Any]], args: argparse.Namespace) -> str:
    """The machine table, then the refresh table."""
    lines = [f"Reading one byte of each of {PROBE_PAGES:,} pages again after they sat idle "
             "(no console running; median of 5)", "",
             "| idle before | µs per page | × no idle |", "|---|---|---|"]
    warm = probe[0.0] or float("nan")
    for idle, us in probe.items():
        lines.append(f"| {idle * 1000:g} ms | {us:.3f} | {us / warm:.0f}× |")
    lines += ["", f"Refresh at three paces: the dashboard ({SIZE[0]}x{SIZE[1]}, {args.models} models, "
              f"{args.devices} devices, {args.history} snapshots of history) and a one-label Textual app; "
              f"UI-thread CPU to the frame, {args.refreshes} refreshes each", "",
              "| pace | update p50 ms | render p50 ms | total p50 ms | total p95 ms | pages touched p50 "
              "| one-label app total p50 ms | its pages p50 |", "|---|---|---|---|---|---|---|---|"]
    for run in runs:
        ours, one_label_app = run["dashboard"], run["one_label"]
        lines.append(f"| {run['pace']} | {ours['update_p50']:.2f} | {ours['render_p50']:.2f} | "
                     f"{ours['total_p50']:.2f} | {ours['total_p95']:.2f} | {_pages(ours)} | "
                     f"{one_label_app['total_p50']:.2f} | {_pages(one_label_app)} |")
    return "\n".join(lines)


def _pages(figures: dict[str, float | None]) -> str:
    """Pages p50, or a dash when they could not be counted."""
    value = figures["pages_p50"]
    return "—" if value is None else f"{value:,.0f}"


if __name__ == "__main__":
    main()
