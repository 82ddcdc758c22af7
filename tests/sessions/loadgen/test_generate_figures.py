"""bench --generate's figures from streamed generations whose token times are known: TTFT, ITL and
goodput as genai-perf defines them (profile_data_parser/llm_profile_data_parser.py: ITL per request is
(request latency - TTFT) / (output tokens - 1), percentiles taken over requests)."""

from __future__ import annotations

import pytest

from triton_ge_console.sessions.loadgen.generate_bench import Slo, summarize
from triton_ge_console.sessions.loadgen.generate_client import StreamResult


def _result(ttft_ms: float, gaps_ms: list[float]) -> StreamResult:
    """A generation sent at 0 whose tokens arrive after these times."""
    arrivals = [ttft_ms / 1000]
    for gap in gaps_ms:
        arrivals.append(arrivals[-1] + gap / 1000)
    return StreamResult(0.0, tokens=list(range(len(arrivals))), arrivals=arrivals)


def test_itl_is_one_figure_per_generation() -> None:
    """A long generation of 1 ms gaps and a short one of a 9 ms gap: genai-perf's ITL p50 is their
    middle (5 ms), not the pooled intervals' median (1 ms) that the long one dominates."""
    long, short = _result(10, [1, 1, 1, 1]), _result(20, [9])
    row = summarize(2, [long, short], 1.0, Slo())
    assert long.itl == pytest.approx(0.001) and short.itl == pytest.approx(0.009)
    assert row.itl_ms["p50"] == pytest.approx(5.0)
    assert row.ttft_ms["p50"] == pytest.approx(15.0)
    assert row.itl_p99_worst_stream_ms == pytest.approx(9.0)
    assert _result(5, []).itl is None


def test_goodput_counts_generations_meeting_every_objective() -> None:
    """Goodput: generations within the TTFT and ITL objectives per second; one token has no ITL to judge."""
    results = [_result(10, [1, 1]), _result(30, [1, 1]), _result(10, [6, 6]), _result(10, [])]
    row = summarize(4, results, 2.0, Slo(ttft_ms=20, itl_ms=5))
    assert row.goodput_per_s == pytest.approx(1.0) and row.goodput_share == pytest.approx(0.5)
    assert summarize(4, results, 2.0, Slo()).goodput_per_s is None
