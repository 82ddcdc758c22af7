"""Static SVG charts: what a closed dashboard and notebook 03's comparison leave in a saved notebook."""

from __future__ import annotations

import base64
import math
import re
import xml.etree.ElementTree as ET

from triton_ge_console.widgets.static_charts import (
    bar_chart_svg,
    image_html,
    line_chart_svg,
    nice_top,
    sparkline_svg,
)

SVG = "{http://www.w3.org/2000/svg}"


def parsed(svg: str) -> ET.Element:
    """The SVG as XML (it must parse: a browser shows a broken image otherwise)."""
    return ET.fromstring(svg)


def lines_of(svg: str) -> list[list[tuple[float, float]]]:
    """Each polyline's points."""
    return [[tuple(map(float, p.split(","))) for p in line.get("points", "").split()]  # type: ignore[misc]
            for line in parsed(svg).iter(f"{SVG}polyline")]


def bars_of(svg: str) -> list[float]:
    """Each bar's height in pixels, left to right."""
    return [float(r.get("height", "0")) for r in parsed(svg).iter(f"{SVG}rect") if r.get("class") == "bar"]


def test_a_line_chart_draws_each_run_of_known_points_and_leaves_gaps() -> None:
    svg = line_chart_svg("latency", [-3.0, -2.0, -1.0, 0.0],
                         {"p50": [1.0, math.nan, 3.0, 4.0], "p99": [2.0, 4.0, 6.0, 8.0]}, "ms")
    runs = lines_of(svg)
    assert [len(run) for run in runs] == [1, 2, 4]  # p50 split at its gap, p99 whole
    xs = [x for x, _ in runs[2]]
    assert xs == sorted(xs) and xs[0] < xs[-1]
    ys = [y for _, y in runs[2]]
    assert ys == sorted(ys, reverse=True)  # larger values higher up
    texts = [t.text for t in parsed(svg).iter(f"{SVG}text")]
    assert "latency" in texts and "p50" in texts and "p99" in texts and "10" in texts  # y top: 8 -> 10


def test_a_line_chart_without_two_points_says_so() -> None:
    svg = line_chart_svg("throughput", [0.0], {"req/s": [1.0]}, "per second")
    assert lines_of(svg) == [] and "no figures yet" in svg


def test_a_count_chart_tops_at_a_whole_number_of_at_least_four() -> None:
    svg = line_chart_svg("queue depth", [-1.0, 0.0], {"queue depth": [0.0, 1.0]}, "requests", counts=True)
    labels = [t.text for t in parsed(svg).iter(f"{SVG}text")]
    assert {"0", "1", "2", "3", "4"} <= set(labels) and "0.5" not in labels


def test_bars_are_as_tall_as_their_values_and_a_missing_one_is_not_drawn() -> None:
    svg = bar_chart_svg("client latency (ms)", ["before", "after"],
                        {"p50 ms": [10.0, 20.0], "p99 ms": [None, 40.0]})
    heights = bars_of(svg)
    assert len(heights) == 3 and all(h > 0 for h in heights)
    p50_before, p50_after, p99_after = heights
    assert p50_after == 2 * p50_before and p99_after == 4 * p50_before
    assert "p99 ms after: 40" in svg


def test_tops_are_round_numbers_above_the_tallest_value() -> None:
    assert [nice_top(v) for v in (0.0, 0.3, 1.0, 3.2, 7.0, 24.0, float("nan"))] == [
        1.0, 0.5, 1.0, 5.0, 10.0, 25.0, 1.0]


def test_a_sparkline_and_an_image_keep_their_data_inline() -> None:
    svg = sparkline_svg([-2.0, -1.0, 0.0], [0.0, 0.5, 1.0])
    assert len(lines_of(svg)[0]) == 3
    shown = image_html(svg, "NPU0 utilization history")
    data = re.search(r'src="data:image/svg\+xml;base64,([^"]+)"', shown)
    assert data is not None and base64.b64decode(data.group(1)).decode("utf-8") == svg
    assert 'alt="NPU0 utilization history"' in shown
