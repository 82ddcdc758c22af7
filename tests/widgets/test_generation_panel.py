"""The notebook dashboard's generation table (from recorded /metrics) and the load test's choice of
runner for a generate model."""

from __future__ import annotations

import dataclasses
import html
import math
from collections.abc import Callable
from typing import Any

from tests.conftest import DATA
from tests.widgets.recording import snapshot as demo_snapshot
from triton_ge_console.sessions.observe.engine_metrics import engine_figures
from triton_ge_console.sessions.observe.generation import GenerationFigures, generation_figures
from triton_ge_console.sessions.observe.metrics import parse_metrics
from triton_ge_console.sessions.observe.recorded import RecordedController, RecordedSource
from triton_ge_console.sessions.observe.snapshot import Latency, ModelSnapshot, ServerSnapshot
from triton_ge_console.widgets import Dashboard, GenerationPanel, LoadTestControl
from triton_ge_console.widgets.dashboard import static_html
from triton_ge_console.widgets.loadtest import generate_fields
from triton_ge_console.widgets.models import ModelsPanel


def _snapshot(**figures: Any) -> ServerSnapshot:
    recorded = generation_figures(parse_metrics((DATA / "generate_metrics.prom").read_text(encoding="utf-8")))
    rated = dataclasses.replace(recorded[("llama_generate", "1")], **figures)
    return ServerSnapshot(0.0, "s", models=(ModelSnapshot("llama_generate", "1", "READY", generation=rated),
                                            ModelSnapshot("bert_model", "1", "READY")))


def test_generation_panel_shows_token_figures_only_for_generate_models() -> None:
    """TTFT/ITL p50/p99, tokens/s, running/waiting, KV use for llama_generate; none for bert; hidden
    without a generate model."""
    panel = GenerationPanel()
    panel.update(_snapshot(output_tokens_per_s=42.25, running=3, kv_cache_bytes=1 << 19))
    row = panel.rows["llama_generate"]
    assert list(panel.rows) == ["llama_generate"] and panel.box.layout.display is None
    assert row["TTFT p50 ms"] == "5.83" and row["OUT TOK/S"] == "42.2" and row["RUNNING"] == "3"
    assert row["WAITING"] == "0" and row["KV"].endswith("(50%)")
    assert "TTFT p99 ms" in panel.static_html() and "42.2" in panel.static_html()
    panel.update(ServerSnapshot(0.0, "s", models=(ModelSnapshot("bert_model", "1", "READY"),)))
    assert panel.rows == {} and panel.box.layout.display == "none" and panel.static_html() == ""


def test_the_generation_table_says_over_what_span_its_percentiles_are() -> None:
    """Issue 39: the percentiles were since load, shown as now. The OVER column names their span: the
    poller's recent window, or since load (a first reading)."""
    panel = GenerationPanel()
    panel.update(_snapshot(window_s=30.0))
    assert panel.rows["llama_generate"]["OVER"] == "last 30 s" and "last 30 s" in panel.static_html()
    panel.update(_snapshot(window_s=None))
    assert panel.rows["llama_generate"]["OVER"] == "since load"


def test_the_generation_table_counts_refused_requests_apart() -> None:
    """Issue 39: requests refused for the client's mistakes are counted apart (the glue's
    ge_generate_requests_rejected_total), not as failures; status and the console say 'refused N', and the
    notebooks' table has a REFUSED column: — where the server keeps no such count (vLLM, MindIE)."""
    panel = GenerationPanel()
    panel.update(_snapshot(rejected_total=7))
    assert panel.rows["llama_generate"]["REFUSED"] == "7"
    assert "<th style='padding:0 6px'>REFUSED</th>" in panel.static_html()
    panel.update(_snapshot(rejected_total=0))
    assert panel.rows["llama_generate"]["REFUSED"] == "0"
    vllm = engine_figures("vllm", parse_metrics((DATA / "vllm_metrics.txt").read_text(encoding="utf-8")))
    panel.update(ServerSnapshot(0.0, "s", models=tuple(
        ModelSnapshot(name, "", "READY", generation=figures.generation) for name, figures in vllm.items())))
    assert panel.rows and {row["REFUSED"] for row in panel.rows.values()} == {"—"}


def test_the_generation_table_shows_a_model_s_newest_version() -> None:
    """Two versions served at once, each with its own figures: the row is the newest one's."""
    newest, older = (ModelSnapshot("g", v, "READY", generation=GenerationFigures(running=int(v)))
                     for v in "21")
    panel = GenerationPanel()
    panel.update(ServerSnapshot(0.0, "s", models=(older, newest)))
    assert panel.rows["g"]["RUNNING"] == "2"


def test_spec_thresholds_colour_the_generation_table() -> None:
    """ttft_p99_ms and kv_cache_share as the console colours them: red at or over, orange from 75 %."""
    snapshot = _snapshot(kv_cache_bytes=(1 << 20) * 4 // 5)  # 80 % of the KV capacity
    figures = snapshot.models[0].generation
    assert figures is not None and figures.ttft_p99_ms is not None
    panel = GenerationPanel({"llama_generate": {"ttft_p99_ms": figures.ttft_p99_ms / 2, "kv_cache_share": 1.0,
                                                "itl_p99_ms": 1000.0}})
    panel.update(snapshot)
    assert panel.levels == {"llama_generate": {"TTFT p99 ms": "over", "KV": "near"}}
    markup = panel.table.value
    assert f"color:firebrick; font-weight:bold'>{figures.ttft_p99_ms:.2f}<" in markup
    assert "color:darkorange'>" in markup and "(80%)" in markup
    plain = GenerationPanel()
    plain.update(snapshot)
    assert plain.levels == {"llama_generate": {}} and "firebrick" not in plain.table.value


def test_load_test_runs_a_generate_model_with_the_generate_runner() -> None:
    """A model named generate goes to the generate runner, any other to the request runner."""
    called: list[tuple[str, str]] = []

    def plain(model: str, concurrency: int, duration_s: float) -> dict[str, Any]:
        called.append(("plain", model))
        return {"requests": 1}

    def tokens(model: str, concurrency: int, duration_s: float) -> dict[str, Any]:
        called.append(("generate", model))
        return generate_fields({"requests": 2, "ttft_ms": {"p50": 1.5, "p99": 3.0}})

    control = LoadTestControl(plain, background=False, generate_runner=tokens)
    control.set_models(["bert_model", "llama_generate"], {"llama_generate"})
    for model in ("llama_generate", "bert_model"):
        control.model.value = model
        control.start()
    assert called == [("generate", "llama_generate"), ("plain", "bert_model")]
    assert control.results[0] == {"requests": 2, "ttft_p50_ms": 1.5, "ttft_p99_ms": 3.0}


def test_a_generate_model_s_row_in_the_models_table_shows_ttft_and_itl() -> None:
    """Triton's request duration of a decoupled model (1 ms, below its TTFT) is not its latency: the row's
    P50/P99 cells read its TTFT and ITL p50 (tagged T and I, the title saying so), its AVG —; a plain model's
    row is unchanged."""
    snapshot = _snapshot(window_s=30.0)
    llama, bert = (dataclasses.replace(m, latency=Latency(avg_ms=1.0, p50_ms=1.0, p99_ms=1.0))
                   for m in snapshot.models)
    figures = llama.generation
    assert figures is not None and figures.ttft_p50_ms is not None and figures.itl_p50_ms is not None
    panel = ModelsPanel(RecordedController())
    panel.update(dataclasses.replace(snapshot, models=(llama, bert)))
    row = panel.row("llama_generate").values
    assert row["P50 ms"] == f"T {figures.ttft_p50_ms:.2f}" and row["P99 ms"] == f"I {figures.itl_p50_ms:.2f}"
    assert row["AVG ms"] == "—"
    assert panel.row("bert_model").values["P50 ms"] == "1.00"
    assert "T/I: generate models' TTFT/ITL p50 ms (last 30 s)" in html.unescape(panel.title.value)
    panel.update(dataclasses.replace(snapshot, models=(bert,)))
    assert "T/I" not in panel.title.value


def _charted_generate(figures: list[GenerationFigures], fields: Callable[[int], dict[str, Any]]) -> Dashboard:
    """A dashboard refreshed over the demo recording's polls with llama_generate beside its models (its
    generation figures and other fields at each step), charting llama_generate."""
    snapshots = [dataclasses.replace(
        demo_snapshot(step), models=(*demo_snapshot(step).models,
                                ModelSnapshot("llama_generate", "1", "READY", generation=figures[step],
                                              **fields(step))))
        for step in range(len(figures))]
    board = Dashboard(RecordedSource(snapshots), autostart=False, background=False)
    for _ in snapshots:
        board.refresh()
    board.charts.picker.value = "llama_generate"
    return board


def test_the_notebook_charts_plot_a_generate_model_s_tokens_per_second() -> None:
    """The dashboard's throughput chart has a tok/s line beside req/s and inf/s: a generate model's output
    tokens per second over the recorded polls; hidden (no point) for a model that generates nothing."""
    figures = [GenerationFigures(output_tokens_per_s=None if step == 0 else 40.0 * step) for step in range(4)]
    board = _charted_generate(figures, lambda step: {"request_rate": 2.0 * step})
    try:
        charts = board.charts
        plotted = charts.throughput.plotted
        assert math.isnan(plotted["tok/s"][0]) and plotted["tok/s"][1:] == [40.0, 80.0, 120.0]
        assert plotted["req/s"] == [0.0, 2.0, 4.0, 6.0]
        marks = {mark.labels[0]: mark for mark in charts.throughput.marks}
        assert marks["tok/s"].visible and list(marks["tok/s"].y) == [40.0, 80.0, 120.0]
        charts.picker.value = "llama_model"
        assert not {mark.labels[0]: mark for mark in charts.throughput.marks}["tok/s"].visible
    finally:
        board.close()


def test_a_closed_dashboard_s_table_says_what_a_generate_model_s_latency_cells_read() -> None:
    """The plain HTML a closed dashboard leaves keeps the tagged cells and the legend that explains them."""
    snapshot = _snapshot(window_s=30.0)
    figures = snapshot.models[0].generation
    assert figures is not None and figures.ttft_p50_ms is not None
    left = html.unescape(static_html(snapshot, 0.0))
    assert f"T {figures.ttft_p50_ms:.2f}" in left
    assert "T/I: generate models' TTFT/ITL p50 ms (last 30 s)" in left
    plain = dataclasses.replace(snapshot, models=snapshot.models[1:])
    assert "T/I" not in static_html(plain, 0.0)


def test_the_notebook_latency_chart_of_a_generate_model_plots_its_ttft_and_itl() -> None:
    """A generate model's latency chart is its token latency (TTFT and ITL p50/p99), not Triton's request
    duration (which ends before the first token); a plain model's stays p50/p90/p99/avg, and a closed
    dashboard's images are of the chart shown."""
    figures = [GenerationFigures(ttft_p50_ms=10.0 + step, ttft_p99_ms=20.0 + step, itl_p50_ms=1.0 + step,
                                 itl_p99_ms=2.0 + step) for step in range(4)]
    duration = Latency(avg_ms=1.0, p50_ms=1.0, p90_ms=1.0, p99_ms=1.0, source="summary")
    board = _charted_generate(figures, lambda step: {"latency": duration})
    try:
        charts = board.charts
        assert charts.token_latency.plotted == {"TTFT p50": [10.0, 11.0, 12.0, 13.0],
                                                "TTFT p99": [20.0, 21.0, 22.0, 23.0],
                                                "ITL p50": [1.0, 2.0, 3.0, 4.0],
                                                "ITL p99": [2.0, 3.0, 4.0, 5.0]}
        assert charts.token_latency.box in charts.box.children[1].children
        assert charts.latency.box not in charts.box.children[1].children
        assert "token latency of llama_generate" in charts.static_html()
        assert "latency from token figures (TTFT, ITL)" in charts.caption.value
        charts.picker.value = "llama_model"
        assert charts.latency.box in charts.box.children[1].children
        shown = charts.static_html()
        assert "latency of llama_model" in shown and "token latency" not in shown
    finally:
        board.close()
