"""Pure parts: counter deltas, latency source choice, trace events, Prometheus parsing quirks."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from triton_ge_console.sessions.observe import metrics
from triton_ge_console.sessions.observe.figures import (
    COUNTER_METRICS,
    MetricViews,
    PollReadings,
    choose_latency,
    model_counters,
)
from triton_ge_console.sessions.observe.glue_failures import GlueFailures, counts_errors_as_success
from triton_ge_console.sessions.observe.metrics import MetricTable, parse_metrics
from triton_ge_console.sessions.observe.rates import ModelCounters, ModelRates, compute_rates, hold_success
from triton_ge_console.sessions.observe.snapshot import Latency
from triton_ge_console.sessions.observe.stats import ModelStatistics
from triton_ge_console.sessions.observe.trace import TraceCollector, percentile, requests_from_events


def test_rates_from_deltas() -> None:
    """Requests, inferences and executions per second; per-request averages in ms."""
    before = ModelCounters(success=10, inference=20, execution=5, request_us=10_000, queue_us=1000,
                           compute_infer_us=8000)
    after = ModelCounters(success=30, inference=80, execution=15, request_us=50_000, queue_us=3000,
                          compute_infer_us=40_000)
    rates = compute_rates(before, after, elapsed_s=2.0)
    assert (rates.request_rate, rates.inference_rate, rates.execution_rate) == (10.0, 30.0, 5.0)
    assert rates.avg_batch == 6.0 and rates.avg_latency_ms == 2.0 and rates.queue_ms == 0.1
    assert rates.compute_ms == pytest.approx(1.6) and not rates.reset


def test_reset_counts_from_zero_and_first_poll_has_no_rates() -> None:
    """Counters that went backwards (a reload) are the increase; nothing is ever negative."""
    before, after = ModelCounters(success=100, inference=100), ModelCounters(success=3, inference=3)
    rates = compute_rates(before, after, 1.0)
    assert rates.reset and rates.request_rate == 3.0 and rates.inference_rate == 3.0
    assert compute_rates(None, ModelCounters(success=5), 1.0) == ModelRates()
    idle = compute_rates(ModelCounters(success=5), ModelCounters(success=5), 1.0)
    assert idle.request_rate == 0.0 and idle.avg_latency_ms is None and idle.avg_batch is None


def test_success_held_while_a_glue_failure_is_counted_before_its_response() -> None:
    """Success minus the glue's failures dips by one in flight, nothing else going back: held (no reset,
    no phantom success after); a reload takes every counter back and is passed on as a reset."""
    before = ModelCounters(success=10, failure=2, inference=10, execution=10, request_us=500)
    in_flight = before._replace(success=9, failure=3)
    held = hold_success(before, in_flight)
    assert held == before._replace(failure=3) and not compute_rates(before, held, 1.0).reset
    landed = in_flight._replace(success=10)
    assert compute_rates(held, hold_success(held, landed), 1.0).request_rate == 0.0
    reloaded = ModelCounters(success=1, failure=0, inference=1, execution=1, request_us=40)
    assert hold_success(before, reloaded) == reloaded and compute_rates(before, reloaded, 1.0).reset


@pytest.mark.parametrize(("version", "moved"), [("2.46.0", False), ("2.47.0", True), ("2.51.0", True),
                                                ("3.0.1", True), (None, False), ("unknown", False)])
def test_glue_errors_move_to_failures_only_where_triton_counted_them_as_successes(
        version: str | None, moved: bool) -> None:
    """Python backend r24.06 (Triton 2.47) on reports error responses as successes; earlier ones as
    failures, and an unknown version is left as Triton counted it."""
    assert counts_errors_as_success(version) is moved
    text = ('nv_inference_request_success{model="m",version="1"} 10\n'
            'nv_inference_request_failure{model="m",reason="BACKEND",version="1"} 1\n'
            'ge_request_failures_total{model="m",version="1",device="0",kind="cpu-emulated"} 3\n')
    triton = {("m", "1"): ModelCounters(success=10, failure=1)}
    glue = GlueFailures().update(parse_metrics(text), version, triton)
    assert glue == ({("m", "1"): 3.0} if moved else {})


def test_the_glue_count_restarts_with_tritons_counters() -> None:
    """An unload and load starts Triton's counters afresh while the glue's series carries on: its count
    is taken from where it stood; a glue series that restarted too counts from zero; never above the
    successes Triton counted (which include every one of them)."""
    def table(glue: float) -> MetricTable:
        return parse_metrics(f'ge_request_failures_total{{model="m",version="1",device="0"}} {glue}\n')

    key = ("m", "1")
    failures = GlueFailures()
    assert failures.update(table(4), "2.51.0", {key: ModelCounters(success=9, failure=0)}) == {key: 4.0}
    assert failures.update(table(4), "2.51.0", {key: ModelCounters(success=0, failure=0)}) == {key: 0.0}
    assert failures.update(table(5), "2.51.0", {key: ModelCounters(success=2, inference=1)}) == {key: 1.0}
    assert failures.update(table(1), "2.51.0", {key: ModelCounters(success=3, inference=2)}) == {key: 1.0}
    assert failures.update(table(9), "2.51.0", {key: ModelCounters(success=4, inference=2)}) == {key: 4.0}
    assert failures.update(table(9), "2.51.0", {}) == {key: 0.0}  # unloaded: Triton has no counters for it
    assert failures.update(table(10), "2.51.0", {key: ModelCounters(success=1)}) == {key: 1.0}
    assert failures.update(parse_metrics(""), "2.51.0", {}) == {}  # the server restarted: the series went
    assert failures.update(table(2), "2.51.0", {key: ModelCounters(success=6)}) == {key: 2.0}  # counted anew


def test_a_poll_without_metrics_moves_the_glue_failures_it_last_knew() -> None:
    """The statistics API counts like /metrics: with /metrics missing one poll, the last known glue
    failures are moved all the same, so the counters do not jump (a false reset) between sources."""
    statistics = {("m", "1"): ModelStatistics("m", "1", None, ModelCounters(success=10, failure=1))}
    readings = PollReadings([], statistics, None, glue_failures={("m", "1"): 3.0})
    assert model_counters(readings)[("m", "1")] == ModelCounters(success=7, failure=4)


def test_latency_source_order() -> None:
    """Summary quantiles, then traces (percentiles; npu_ge reports zero durations), then the average."""
    traced = Latency(avg_ms=9.0, p50_ms=8.0, source="trace")
    with_avg = ModelRates(avg_latency_ms=4.0)
    assert choose_latency(with_avg, {"0.5": 3.0, "0.9": 5.0, "0.99": 7.0}, traced).source == "summary"
    assert choose_latency(with_avg, {}, None) == Latency(avg_ms=4.0, source="statistics")
    zero_durations = compute_rates(ModelCounters(success=1), ModelCounters(success=9), 1.0)
    assert zero_durations.avg_latency_ms is None
    assert choose_latency(zero_durations, {}, traced) is traced
    assert choose_latency(with_avg, {}, traced) is traced
    assert choose_latency(ModelRates(), {}, None) == Latency()


def test_counter_samples_keep_tritons_names() -> None:
    """prometheus_client renames counters to *_total; Triton's own names still find them; NaN is skipped."""
    table = parse_metrics(
        "# TYPE nv_inference_count counter\n"
        'nv_inference_count{model="m",version="1"} 7\n'
        "# TYPE nv_inference_request_summary_us summary\n"
        'nv_inference_request_summary_us{model="m",version="1",quantile="0.5"} NaN\n'
        'nv_inference_request_summary_us_count{model="m",version="1"} 0\n'
    )
    assert table.by_model("nv_inference_count") == {("m", "1"): 7.0}
    assert table.by_model("nv_inference_count_total") == {("m", "1"): 7.0}
    assert table.by_model("nv_inference_request_summary_us") == {}


EVENTS = [
    {"id": 1, "timestamps": [{"name": "HTTP_RECV_START", "ns": 1_000_000}]},
    {"id": 1, "model_name": "m", "model_version": 1},
    {"id": 1, "timestamps": [{"name": "REQUEST_START", "ns": 2_000_000}]},
    {"id": 1, "timestamps": [{"name": "REQUEST_END", "ns": 22_000_000}]},
    {"id": 1, "timestamps": [{"name": "HTTP_SEND_END", "ns": 23_000_000}]},
    {"id": 2, "model_name": "m", "model_version": 1},
    {"id": 2, "timestamps": [{"name": "HTTP_RECV_START", "ns": 0},
                             {"name": "HTTP_SEND_END", "ns": 5_000_000}]},
    {"id": 3, "model_name": "m", "model_version": 1},
]


def test_trace_events_to_request_latency() -> None:
    """REQUEST_START..REQUEST_END first, else the HTTP span; an incomplete trace is skipped."""
    found = {r.trace_id: r.latency_ms for r in requests_from_events(EVENTS)}
    assert found == {1: 20.0, 2: 5.0}
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.0 and percentile([1.0, 2.0, 3.0, 4.0], 0.99) == 4.0


def test_trace_files_read_incrementally(tmp_path: Path) -> None:
    """Rotated files are read once; a half-written file waits; new files add only new requests."""
    trace = tmp_path / "trace.json"
    collector = TraceCollector(trace)
    assert collector.update() == 0 and collector.latency("m", "1") is None
    (tmp_path / "trace.json.0").write_text(json.dumps(EVENTS[:5]))
    (tmp_path / "trace.json.1").write_text(json.dumps(EVENTS[5:])[:-3])  # still being written
    assert collector.update() == 1 and collector.update() == 0
    (tmp_path / "trace.json.1").write_text(json.dumps(EVENTS[5:]))
    assert collector.update() == 1
    latency = collector.latency("m", "1")
    assert latency is not None and latency.source == "trace" and latency.avg_ms == pytest.approx(12.5)


def test_fast_path_falls_back_to_the_library_for_unusual_text() -> None:
    """Escaped quotes in a label are beyond the plain form: the whole text goes to prometheus_client."""
    table = parse_metrics('# TYPE x gauge\nx{path="a\\"b",model="m",version="1"} 2\n')
    assert [(s.label("path"), s.value) for s in table.samples("x")] == [('a"b', 2.0)]


def test_glue_labels_give_devices_and_execution_mode() -> None:
    """The GE glue's per-model metrics name the device and the execution mode a model runs with."""
    table = parse_metrics(
        "# TYPE ge_model_info gauge\n"
        'ge_model_info{backend="ge",device="0",execution_mode="cpu-emulated",kind="cpu-emulated",model="m",'
        'version="1"} 1\n'
        "# TYPE ge_executions_total counter\n"
        'ge_executions_total{device="1",kind="cpu-emulated",model="m",version="1"} 4\n'
        'ge_executions_total{device="0",kind="npu",model="n",version="1"} 2\n'
    )
    glue = MetricViews.of(table).glue
    assert glue["m"] == (("0", "1"), "cpu-emulated") and glue["n"] == (("0",), "npu")


def test_skipped_families_are_left_out_before_parsing() -> None:
    """Families a caller never reads are dropped with their HELP/TYPE lines; the rest is intact."""
    text = ("# HELP nv_inference_queue_summary_us q\n# TYPE nv_inference_queue_summary_us summary\n"
            'nv_inference_queue_summary_us{model="m",version="1",quantile="0.5"} 3\n'
            "# HELP nv_inference_count c\n# TYPE nv_inference_count counter\n"
            'nv_inference_count{model="m",version="1"} 7\n')
    table = parse_metrics(text, skip=("nv_inference_queue_summary_us",))
    assert table.names() == frozenset({"nv_inference_count"})
    assert table.by_model("nv_inference_count") == {("m", "1"): 7.0}


def test_plain_lines_break_where_splitlines_does() -> None:
    """CRLF text parses like LF text, and a label text never runs across a line break (the library's)."""
    text = '# TYPE x counter\nx{model="m",version="1"} 7 123\ny 1.5\n\n'
    lf = parse_metrics(text)
    crlf = parse_metrics(text.replace("\n", "\r\n"))
    assert lf.names() == crlf.names() and all(lf.samples(n) == crlf.samples(n) for n in lf.names())
    assert lf.by_model("x") == {("m", "1"): 7.0} and lf.first("y") == 1.5
    assert metrics._parse_plain('x{a="1\n#"} 2\n') is None


def test_skipped_family_need_not_be_plain() -> None:
    """Samples of skipped families are dropped by name; one the fast path cannot read does not matter."""
    table = parse_metrics('nv_cpu_x{a="\\"} 1\nx{a="b"} 2\n', skip=("nv_cpu_",))
    assert table.names() == frozenset({"x"}) and table.first("x", a="b") == 2.0


def test_repeated_lines_give_the_same_samples() -> None:
    """A source's PlainLines reuses the samples of lines that did not change since its last scrape."""
    lines = metrics.PlainLines()
    first = parse_metrics('# TYPE x gauge\nx{model="m",version="1"} 1\ny 2\n', lines=lines)
    second = parse_metrics('# TYPE x gauge\nx{model="m",version="1"} 5\ny 2\n', lines=lines)
    assert second.samples("y")[0] is first.samples("y")[0]
    assert second.by_model("x") == {("m", "1"): 5.0}
    assert parse_metrics("y 2\n", skip=("y",), lines=lines).names() == frozenset()  # other skip, no reuse


def test_a_family_in_two_runs_is_found_whole_and_summed_per_model() -> None:
    """Samples of one name need not be contiguous: the table keeps both runs; by_model sums other labels."""
    text = ('f{model="m",reason="A",version="1"} 1\ng 7\nf{model="m",reason="B",version="1"} 2\n'
            'f{model="n",reason="A",version=""} 4\n')
    for table in (parse_metrics(text), metrics.MetricTable(metrics._parse_with_library(text))):
        assert table.by_model("f") == {("m", "1"): 3.0, ("n", ""): 4.0}
        assert table.by_model_and("f", "reason") == {("m", "1"): {"A": 1.0, "B": 2.0}, ("n", ""): {"A": 4.0}}
        assert table.by_model("g") == {}


def test_counter_metrics_follow_model_counters_order() -> None:
    """counters_from_metrics builds ModelCounters positionally from COUNTER_METRICS."""
    assert [*COUNTER_METRICS] == [f for f in ModelCounters._fields if f != "failure"]


def test_idle_interval_rates_equal_the_arithmetic() -> None:
    """Unchanged counters give what the deltas would; infinities and NaN take the long way."""
    counters = ModelCounters(success=3, inference=6, execution=2, request_us=900.0)
    idle = ModelRates(0.0, 0.0, 0.0, 0.0, None, None, None, None, False)
    assert compute_rates(counters, counters, 2.0) == idle
    odd = ModelCounters(success=float("inf"))
    assert compute_rates(odd, odd, 1.0).request_rate != 0.0


def test_old_rotated_trace_files_are_deleted_after_reading(tmp_path: Path) -> None:
    """Files read longer ago than keep_files_s go; unread or recent ones stay."""
    collector = TraceCollector(tmp_path / "trace.json", keep_files_s=60)
    old, recent = tmp_path / "trace.json.0", tmp_path / "trace.json.1"
    old.write_text(json.dumps(EVENTS[:5]))
    recent.write_text(json.dumps(EVENTS[5:]))
    os.utime(old, (time.time() - 120, time.time() - 120))
    assert collector.update() == 2
    assert not old.exists() and recent.exists()
    assert collector.latency("m", "1") is not None and collector.update() == 0
