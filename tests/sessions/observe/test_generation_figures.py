"""A generate model's token figures read from recorded /metrics text: percentiles from the histograms,
totals, occupancy and endings; None or absent where the server reports nothing."""

from __future__ import annotations

import pytest

from tests.conftest import DATA
from triton_ge_console.display import generation_line
from triton_ge_console.sessions.observe.generation import (
    GenerationFigures,
    generation_figures,
    generation_row,
    histogram_quantile,
    with_token_rate,
)
from triton_ge_console.sessions.observe.metrics import parse_metrics
from triton_ge_console.sessions.observe.snapshot import ModelSnapshot, ServerSnapshot

RECORDED = (DATA / "generate_metrics.prom").read_text(encoding="utf-8")


def test_recorded_metrics_give_the_figures() -> None:
    """The glue's recorded families: p50 interpolated within its bucket, totals and occupancy as sent."""
    figures = generation_figures(parse_metrics(RECORDED))[("llama_generate", "1")]
    # 9 first tokens: 4 by 5 ms, 7 by 10 ms, so the 4.5th lies a sixth of the way into (5, 10]
    assert figures.ttft_p50_ms == pytest.approx(5.0 + 5.0 * 0.5 / 3)
    # 162 intervals: 6 by 1 ms, 99 by 2.5 ms, so the 81st lies 75/93 of the way into (1, 2.5]
    assert figures.itl_p50_ms == pytest.approx(1.0 + 1.5 * 75 / 93)
    assert figures.ttft_p99_ms is not None and figures.ttft_p99_ms <= 25.0
    assert (figures.prompt_tokens_total, figures.generated_tokens_total) == (75, 171)
    assert (figures.running, figures.waiting, figures.kv_cache_bytes) == (0, 0, 0)
    assert figures.kv_cache_capacity_bytes == 1 << 20 and figures.kv_cache_share == 0.0
    assert dict(figures.ended_by_reason) == {"cancel": 0, "error": 3, "length": 9, "stop": 0}


def test_without_generate_metrics_there_are_no_figures() -> None:
    """A server (or model) without ge_generate_* families has none, and its snapshot says None."""
    plain = "\n".join(line for line in RECORDED.splitlines() if "ge_generate" not in line) + "\n"
    assert generation_figures(parse_metrics(plain)) == {}
    assert generation_figures(None) == {}
    assert ModelSnapshot("m", "1", "READY").generation is None
    assert generation_row(None) is None


def test_quantile_edges() -> None:
    """No observations: None; a rank in +Inf: the last finite bound; all in the first bucket: within it."""
    assert histogram_quantile([], 0.5) is None
    assert histogram_quantile([(1.0, 0.0), (float("inf"), 0.0)], 0.5) is None
    assert histogram_quantile([(1.0, 1.0), (float("inf"), 4.0)], 0.99) == 1.0
    assert histogram_quantile([(2.0, 4.0), (float("inf"), 4.0)], 0.5) == pytest.approx(1.0)


def test_figures_survive_a_recording_and_read_as_one_line() -> None:
    """A snapshot with figures round-trips through to_dict/from_dict; missing figures read as —."""
    figures = generation_figures(parse_metrics(RECORDED))[("llama_generate", "1")]
    snapshot = ServerSnapshot(0.0, "s", models=(ModelSnapshot("llama_generate", "1", "READY",
                                                              generation=figures),))
    assert ServerSnapshot.from_dict(snapshot.to_dict()) == snapshot
    line = generation_line(generation_row(figures) or {})
    assert "TTFT p50 5.83 p99" in line and "KV " in line and "(0%)" in line and "length 9" in line
    assert generation_line(generation_row(GenerationFigures()) or {}).startswith("TTFT p50 — p99 — ms")


def test_output_tokens_per_second_is_a_rate_between_polls() -> None:
    """Generated tokens since the previous poll over the time between: None on the first poll, a reload's
    count gone backwards counts from zero, shown on the figures' line (— when unknown)."""
    first = GenerationFigures(generated_tokens_total=100)
    later = GenerationFigures(generated_tokens_total=160)
    assert with_token_rate(first, None, 0.5).output_tokens_per_s is None
    assert with_token_rate(later, first, 2.0).output_tokens_per_s == 30.0
    assert with_token_rate(later, later, 2.0).output_tokens_per_s == 0.0
    assert with_token_rate(first, later, 2.0).output_tokens_per_s == 50.0  # reloaded: 100 since
    assert with_token_rate(GenerationFigures(), first, 2.0).output_tokens_per_s is None
    assert "171 out (30.0/s)" in generation_line(generation_row(
        GenerationFigures(generated_tokens_total=171, output_tokens_per_s=30.0)) or {})
    assert "out (—/s)" in generation_line(generation_row(GenerationFigures()) or {})


def test_each_version_has_its_own_figures() -> None:
    """Two versions of a generate model served at once: each version's snapshot gets its own series
    (the glue labels them with the version, as Triton labels its own), not their sum."""
    second = "\n".join(line.replace('version="1"', 'version="2"') for line in RECORDED.splitlines()
                       if line.startswith("ge_generate_")) + "\n"
    figures = generation_figures(parse_metrics(RECORDED + second))
    assert figures[("llama_generate", "1")] == figures[("llama_generate", "2")]
    assert figures[("llama_generate", "1")].generated_tokens_total == 171
    assert dict(figures[("llama_generate", "2")].ended_by_reason)["length"] == 9


def test_percentiles_cover_the_recent_window_labelled_so() -> None:
    """Issue 39: the percentiles were since load, shown as now (status said TTFT p99 4,375 ms during a run
    whose p99 was 422 ms). Over a window they are those of what the histograms gained in it, the line says
    which: 10 first tokens between 250 and 500 ms in the last 10 s read p50 375 ms (262.5 since load);
    no token interval in the window reads —; a first reading is since load."""
    import re

    from triton_ge_console.sessions.observe.generation import over_window

    key = ("llama_generate", "1")
    before = generation_figures(parse_metrics(RECORDED))[key]
    bucket = r'(ge_generate_time_to_first_token_seconds_bucket\{[^}]*le="(0\.5|1|2\.5|5|10|\+Inf)"\}) 9'
    grown = re.sub(bucket, r"\1 19", RECORDED)
    now = generation_figures(parse_metrics(grown))[key]
    assert now.ttft_p50_ms == pytest.approx(262.5)  # since load
    windowed = over_window(now, before, 10.0)
    assert windowed.window_s == 10.0 and windowed.ttft_p50_ms == pytest.approx(375.0)
    assert windowed.itl_p50_ms is None and windowed.itl_p99_ms is None
    assert "ms (last 10 s)" in generation_line(generation_row(windowed) or {})
    assert over_window(now, None, 10.0) == now
    assert "ms (since load)" in generation_line(generation_row(now) or {})
