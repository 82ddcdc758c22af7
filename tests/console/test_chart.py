"""The braille chart: scale from zero, lines where the points are, gaps where figures are missing."""

from __future__ import annotations

from random import Random

import pytest

from triton_ge_console.console.chart import (
    BRAILLE_BASE,
    DOT_BITS,
    DOT_ROWS,
    ChartSeries,
    Grid,
    Scale,
    chart_runs,
    nice_ceiling,
    scale_of,
    x_labels,
    y_label,
)


def _text(rows: list[list[tuple[str, str]]]) -> list[str]:
    return ["".join(text for text, _ in row) for row in rows]


@pytest.mark.parametrize(("value", "top"), [(0.0, 1.0), (0.7, 1.0), (1.0, 1.0), (1.01, 2.0), (2.2, 2.5),
                                            (3.0, 5.0), (7.0, 10.0), (20.0, 20.0), (31.5, 50.0),
                                            (480.0, 500.0), (float("nan"), 1.0)])
def test_the_y_scale_ends_on_a_round_number_at_or_above_the_peak(value: float, top: float) -> None:
    assert nice_ceiling(value) == top


def test_scale_spans_every_known_point_and_leaves_room_above_the_highest() -> None:
    scale = scale_of([ChartSeries("a", [(-3.0, 1.0), (-2.0, None)]), ChartSeries("b", [(0.0, 20.0)])])
    assert scale == Scale(-3.0, 0.0, 25.0)  # 20 * 1.05 rounds up to 25
    assert scale_of([ChartSeries("a", [(0.0, None)])]) is None


def test_a_rising_line_runs_from_the_bottom_left_cell_to_the_top_right_one() -> None:
    grid = Grid(width=4, height=2)
    grid.draw([(0.0, 0.0), (1.0, 1.0)], Scale(0.0, 1.0, 1.0), "line0")
    assert grid.bits[1][0] & 0x40 and grid.bits[0][3] & 0x08  # bottom-left dot, top-right dot
    assert grid.bits[0][0] == 0 and grid.bits[1][3] == 0  # nothing in the opposite corners
    assert all(any(grid.bits[row][column] for row in range(2)) for column in range(4))  # no column skipped


def test_a_missing_figure_breaks_the_line() -> None:
    grid = Grid(width=8, height=1)
    grid.draw([(0.0, 1.0), (1.0, 1.0), (2.0, None), (3.0, 1.0), (4.0, 1.0)], Scale(0.0, 4.0, 1.0), "line0")
    lit = [bool(bits) for bits in grid.bits[0]]
    assert lit[0] and lit[-1] and not all(lit)


def test_every_known_point_lights_its_own_dot_even_when_the_clock_steps_back() -> None:
    random = Random(7)
    for _ in range(200):
        xs = sorted(random.uniform(0.0, 10.0) for _ in range(random.randint(1, 60)))
        if len(xs) > 2:
            xs[len(xs) // 2] -= random.uniform(0.0, 3.0)  # a point out of time order
        points = [(x, None if random.random() < 0.1 else random.uniform(0.0, 1.0)) for x in xs]
        grid, scale = Grid(width=30, height=4), Scale(min(xs), max(xs), 1.0)
        grid.draw(points, scale, "line0")
        for dot in grid._dots(points, scale):
            if dot is not None:
                column, row = dot
                top_row = DOT_ROWS * grid.height - 1 - row
                cell_row, in_cell = divmod(top_row, DOT_ROWS)
                assert grid.bits[cell_row][column // 2] & DOT_BITS[column % 2][in_cell], (points, dot)


def test_a_cell_two_lines_share_takes_the_colour_of_the_later_one() -> None:
    grid = Grid(width=2, height=1)
    grid.draw([(0.0, 0.5), (1.0, 0.5)], Scale(0.0, 1.0, 1.0), "line0")
    grid.draw([(0.0, 0.5), (1.0, 0.5)], Scale(0.0, 1.0, 1.0), "line1")
    cells = "".join(chr(BRAILLE_BASE + bits) for bits in grid.bits[0])
    assert grid.runs(0) == [(cells, "line1")]


def test_the_chart_has_a_legend_a_y_axis_from_zero_and_time_labels() -> None:
    points = [(-15.0 + minute, float(minute)) for minute in range(16)]
    rows = chart_runs("latency ms", [ChartSeries("p50", points), ChartSeries("p99", [])], 40, 8)
    text = _text(rows)
    assert len(rows) == 8
    assert text[0] == "latency ms  ━━ p50  ━━ p99"
    assert ("━━ ", "line0") in rows[0] and ("━━ ", "line1") in rows[0]
    assert text[1].startswith("20┤") and text[6].startswith(" 0┤")  # peak 15 -> scale to 20
    assert text[7].strip().startswith("-15 min") and text[7].endswith("now")
    assert all(len(line) == 40 for line in text[1:])


def test_a_chart_without_figures_says_so() -> None:
    text = _text(chart_runs("throughput /s", [ChartSeries("inf/s", [(0.0, None)])], 40, 6))
    assert text[:2] == ["throughput /s  ━━ inf/s", "no data yet"] and len(text) == 6


def test_x_labels_stay_inside_the_width() -> None:
    assert x_labels(Scale(-1.5, 0.0, 1.0), 20) == "-1.5 min         now"  # no room for -0.8
    assert x_labels(Scale(-1.5, 0.0, 1.0), 26) == "-1.5 min  -0.8         now"
    assert len(x_labels(Scale(-15.0, 0.0, 1.0), 8)) == 8


def test_a_single_instant_sits_at_the_right_edge() -> None:
    rows = chart_runs("t", [ChartSeries("a", [(5.0, 1.0)])], 20, 5)
    plot = [runs for runs in rows[1:-1]]
    assert any(runs[-1][1] == "line0" and runs[-1][0][-1] != " " for runs in plot)


@pytest.mark.parametrize(("value", "label"), [(0.0, "0"), (2.5, "2.5"), (12.5, "12.5"), (1250.0, "1.25k"),
                                              (2500.0, "2.5k"), (12500.0, "12.5k"), (2_000_000.0, "2M")])
def test_y_labels_stay_short_and_never_scientific(value: float, label: str) -> None:
    assert y_label(value) == label


@pytest.mark.parametrize("peak", [0.4, 4.0, 11.0, 2400.0, 4000.0, 1_200_000.0])
def test_every_plot_row_is_exactly_the_chart_width(peak: float) -> None:
    points = [(-10.0 + minute, peak * minute / 10) for minute in range(11)]
    text = _text(chart_runs("t", [ChartSeries("a", points)], 40, 9))
    assert all(len(line) == 40 for line in text[1:]) and not any("e+" in line for line in text)


def test_a_short_span_reads_in_seconds_or_tenths_and_never_minus_zero() -> None:
    assert x_labels(Scale(-0.04, 0.0, 1.0), 20) == "-2 s    -1       now"
    assert x_labels(Scale(-0.5, -0.2, 1.0), 20).endswith("-12")
    assert x_labels(Scale(-2.0, 0.0, 1.0), 26) == "-2.0 min  -1.0         now"


@pytest.mark.parametrize("span", [0.001, 0.005, 0.01, 0.02, 0.03, 0.05, 0.2, 0.99, 1.0, 1.04, 2.95, 3.0, 3.4,
                                  10.0])
@pytest.mark.parametrize("end", [0.0, -0.001, -0.3])
def test_no_time_label_repeats(span: float, end: float) -> None:
    """The start, middle and end ticks never read the same, nor "0 … now" (the same instant twice)."""
    labels = x_labels(Scale(end - span, end, 1.0), 60).replace(" s ", " ").replace(" min ", " ").split()
    values = [0.0 if label == "now" else float(label) for label in labels]
    assert len(values) == len(set(values)), labels
