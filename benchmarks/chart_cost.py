"""CPU cost of one detail chart redraw (SeriesChart.draw and building its lines) at the dashboard's size.

The dashboard spreads a periodic redraw of its two detail charts over two refreshes; that only pays when
one chart costs a noticeable part of a frame. This draws a 76x9 chart of two 113-point lines (what 15
minutes of history thin to) `--draws` times with moving data, and prints the UI-thread CPU per redraw,
and per `chart_runs` call alone (the pure layout in console/chart.py).

    python3 benchmarks/chart_cost.py [--draws 300]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import time

from textual.app import App, ComposeResult
from textual.geometry import Region

from triton_ge_console.console.chart import ChartSeries, chart_runs
from triton_ge_console.console.widgets.detail import SeriesChart

Lines = list[tuple[str, list[tuple[float, float | None]]]]


class Charted(App[None]):
    """One chart the size of a detail chart on a 160x45 dashboard."""

    CSS = "SeriesChart { width: 78; height: 9; }"

    def compose(self) -> ComposeResult:
        """The chart."""
        yield SeriesChart(id="c")


def lines(step: int) -> Lines:
    """p50 and p99 over 15 minutes, one point per 8 s, moving with the step."""
    times = [float(t) for t in range(0, 900, 8)]
    p50: list[tuple[float, float | None]] = [(t, 5 + 3 * math.sin((t + step) / 7)) for t in times]
    p99: list[tuple[float, float | None]] = [(t, 20 + 10 * math.sin((t + step) / 5)) for t in times]
    return [("p50", p50), ("p99", p99)]


async def measure(draws: int) -> tuple[list[float], list[float]]:
    """CPU ms of each redraw, and of each chart_runs call on the same data."""
    redraws, runs = [], []
    async with Charted().run_test(size=(160, 45)) as pilot:
        chart = pilot.app.query_one(SeriesChart)
        await pilot.pause()
        for step in range(draws):
            data = lines(step)
            started = time.thread_time()
            chart.draw("latency ms", data, 900.0)
            chart.render_lines(Region(0, 0, *chart.size))
            redraws.append((time.thread_time() - started) * 1000)
            series = [ChartSeries(label, tuple(((t - 900) / 60, v) for t, v in points))
                      for label, points in data]
            started = time.thread_time()
            chart_runs("latency ms", series, *chart.size)
            runs.append((time.thread_time() - started) * 1000)
    return redraws, runs


def main() -> None:
    """Print p50 / p95 of both."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=300)
    redraws, runs = asyncio.run(measure(parser.parse_args().draws))

    def p50_p95(values: list[float]) -> str:
        return f"{statistics.median(values):.2f} / {sorted(values)[int(0.95 * (len(values) - 1))]:.2f}"

    print(f"chart redraw (draw + lines), CPU ms p50 / p95: {p50_p95(redraws)}")
    print(f"chart_runs alone, CPU ms p50 / p95: {p50_p95(runs)}")


if __name__ == "__main__":
    main()
