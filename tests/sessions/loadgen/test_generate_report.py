"""bench --generate's report from generations whose times are known: every figure's avg, min, max, std
and p25 to p99 (the statistics AIPerf prints), input and output sequence lengths, the warnings (too few
generations for a percentile, an open-loop rate not kept up with), the JSON's context and the export."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from triton_ge_console.sessions.loadgen.generate_bench import GenerateLoad, Slo, read_baseline, summarize
from triton_ge_console.sessions.loadgen.generate_client import StreamResult
from triton_ge_console.sessions.loadgen.generate_report import (
    RequestExport,
    generate_context,
    generate_json,
    generate_warnings,
)
from triton_ge_console.sessions.loadgen.generate_stats import STATISTICS, distribution


def _result(ttft_ms: float, gaps_ms: list[float], prompt: int = 4, sent: float = 0.0) -> StreamResult:
    """A generation sent at `sent` whose tokens arrive after these times."""
    arrivals = [sent + ttft_ms / 1000]
    for gap in gaps_ms:
        arrivals.append(arrivals[-1] + gap / 1000)
    return StreamResult(sent, tokens=list(range(len(arrivals))), arrivals=arrivals, prompt_tokens=prompt)


def test_every_figure_has_the_statistics_aiperf_prints() -> None:
    """TTFT 10/20/30/40 ms: avg 25, min 10, max 40, population std, percentiles interpolated as numpy's."""
    results = [_result(ttft, [1.0] * n, prompt=p) for ttft, n, p in ((10, 1, 3), (20, 2, 5), (30, 3, 7),
                                                                     (40, 4, 9))]
    row = summarize(1, results, 1.0, Slo())
    assert list(row.ttft_ms) == list(STATISTICS)
    assert (row.ttft_ms["avg"], row.ttft_ms["min"], row.ttft_ms["max"]) == pytest.approx((25, 10, 40))
    assert row.ttft_ms["std"] == pytest.approx(11.1803, abs=1e-3)
    assert (row.ttft_ms["p25"], row.ttft_ms["p50"], row.ttft_ms["p75"]) == pytest.approx((17.5, 25, 32.5))
    assert row.input_tokens["avg"] == 6 and (row.input_tokens["min"], row.input_tokens["max"]) == (3, 9)
    assert row.output_tokens_each["avg"] == 3.5 and row.output_tokens == 14
    assert distribution([]) == dict.fromkeys(STATISTICS)


def test_an_openai_chunk_count_gives_way_to_the_usage() -> None:
    """Behind an OpenAI API a chunk may carry several tokens: ITL divides by the usage's count."""
    result = _result(10, [4.0, 4.0])
    result.counted = 5
    assert result.output_tokens == 5 and result.itl == pytest.approx(0.002)


def test_percentiles_on_too_few_generations_are_named() -> None:
    """8 generations: p99 (needs 100), p95 (20) and p90 (10) are named; 100 generations: no warning."""
    few = summarize(1, [_result(10, [1]) for _ in range(8)], 1.0, Slo())
    (warning,) = generate_warnings([few])
    assert warning.startswith("conc 1: 8 generations: p99 needs 100, p95 needs 20, p90 needs 10;")
    enough = summarize(1, [_result(10, [1]) for _ in range(100)], 1.0, Slo())
    assert generate_warnings([enough]) == []


def test_an_open_loop_rate_not_kept_up_with_is_a_warning() -> None:
    """The issue's run: Poisson arrivals offered ~20/s, 10.1 requests/s completed: a warning saying the
    figures are at saturation; 19/s of 20 is kept up with."""
    row = summarize(12, [_result(10, [1]) for _ in range(101)], 10.0, Slo())
    slow = dataclasses.replace(row, rate=20.0, offered_per_s=20.0)
    (warning,) = generate_warnings([slow])
    assert warning == ("20/s (≤12 in flight): 10.1 requests/s completed of 20/s arriving (50%): the server "
                       "did not keep up, so the figures are at its saturation, not at this rate")
    kept = dataclasses.replace(slow, duration_s=101 / 19, requests_per_s=19.0)
    assert generate_warnings([kept]) == []


def test_the_json_has_the_readme_s_context_warnings_and_rows(tmp_path: Path) -> None:
    """{"context", "warnings", "rows"} like plain bench's; the context names the endpoint, model, server
    version, config digest and the arguments (never the token's headers); --compare reads it back."""
    load = GenerateLoad(model="llama", host="127.0.0.1", port=8001, protocol="grpc", prompt_tokens=(8, 8),
                        output_tokens=(4, 4), concurrency=(1,), headers=(("x-token", "secret"),))
    row = summarize(1, [_result(10, [1])], 1.0, Slo())
    context = generate_context(load, "2026-01-01T00:00:00+00:00",
                               {"server_version": "2.51.0", "config_digest": "ab" * 32},
                               {"cpu": "x", "cores": 2})
    data = generate_json(context, ["w"], [row])
    assert list(data) == ["context", "warnings", "rows"]
    assert data["context"]["kind"] == "generate" and data["context"]["model"] == "llama"
    assert data["context"]["server_version"] == "2.51.0" and data["context"]["url"] == "127.0.0.1:8001"
    assert data["context"]["arguments"]["output_tokens"] == (4, 4)
    assert "secret" not in json.dumps(data)
    assert list(read_baseline(json.dumps(data), "run.json")) == [("concurrency", 1.0)]


def test_the_export_is_one_line_per_generation_with_every_interval(tmp_path: Path) -> None:
    """JSON Lines in send order: send time (epoch seconds), TTFT, each ITL, e2e, lengths and status."""
    results = [_result(20, [3, 5], prompt=6, sent=0.5), _result(10, [2], sent=0.1),
               StreamResult(0.7, error="max_tokens 49: expected 1 to 48", prompt_tokens=2)]
    row = summarize(2, results, 1.0, Slo())
    export = RequestExport(tmp_path / "requests.jsonl")
    export.step(row, results)
    export.close()
    lines = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert [line["status"] for line in lines] == ["ok", "ok", "error"]
    first, second, failed = lines
    assert first["ttft_ms"] == pytest.approx(10) and first["itls_ms"] == pytest.approx([2])
    assert second["itls_ms"] == pytest.approx([3, 5]) and second["e2e_ms"] == pytest.approx(28)
    assert (second["input_tokens"], second["output_tokens"]) == (6, 3)
    assert second["send_time"] - first["send_time"] == pytest.approx(0.4)
    assert failed["error"] == "max_tokens 49: expected 1 to 48" and failed["ttft_ms"] is None
    assert first["step"] == "conc 2"
