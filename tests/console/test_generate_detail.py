"""The detail pane of a generate model shows its token figures in its three lines; others are unchanged."""

from __future__ import annotations

import dataclasses

from tests.conftest import DATA
from tests.waiting import until
from triton_ge_console.console.app import create_app, next_connection
from triton_ge_console.console.screens.dashboard import DashboardScreen
from triton_ge_console.console.widgets.detail import DetailPane, ModelDetail, SeriesChart
from triton_ge_console.console.widgets.models import SORT_KEYS, ModelsTable
from triton_ge_console.sessions.observe.generation import GenerationFigures, generation_figures
from triton_ge_console.sessions.observe.metrics import parse_metrics
from triton_ge_console.sessions.observe.recorded import RecordedSource
from triton_ge_console.sessions.observe.snapshot import Endpoints, Latency, ModelSnapshot, ServerSnapshot


def _detail(model: ModelSnapshot) -> ModelDetail:
    return ModelDetail(model, (), (), (), (), "decoupled, max_batch_size 0", None)


def test_generate_model_detail_carries_its_token_figures_in_three_lines() -> None:
    """TTFT, ITL, KV use and endings from recorded metrics; config and last error share the last line."""
    recorded = parse_metrics((DATA / "generate_metrics.prom").read_text(encoding="utf-8"))
    figures = generation_figures(recorded)[("llama_generate", "1")]
    text = DetailPane._info(_detail(ModelSnapshot("llama_generate", "1", "READY", generation=figures))).plain
    lines = text.splitlines()
    assert len(lines) == 3
    assert lines[1].startswith("TTFT p50 5.83 p99") and "KV " in lines[1] and "length 9" in lines[1]
    assert lines[2].startswith("config: decoupled") and "last error: —" in lines[2]


def test_other_models_keep_their_config_line() -> None:
    """A model without generation figures shows config and last error on lines of their own."""
    lines = DetailPane._info(_detail(ModelSnapshot("bert_model", "1", "READY"))).plain.splitlines()
    assert len(lines) == 3 and lines[1].startswith("config: ") and lines[2].startswith("last error: ")


def test_spec_thresholds_colour_the_token_figures() -> None:
    """ttft_p99_ms and kv_cache_share thresholds: red at or over, yellow from 75 %, plain below."""
    recorded = parse_metrics((DATA / "generate_metrics.prom").read_text(encoding="utf-8"))
    figures = generation_figures(recorded)[("llama_generate", "1")]
    assert figures.ttft_p99_ms is not None
    model = ModelSnapshot("llama_generate", "1", "READY", generation=figures)
    limits = {"ttft_p99_ms": figures.ttft_p99_ms / 2, "itl_p99_ms": 1000.0, "kv_cache_share": 0.5}
    text = DetailPane._info(ModelDetail(model, (), (), (), (), "c", None, limits))
    styled = {text.plain[span.start:span.end]: str(span.style) for span in text.spans}
    assert styled[f"{figures.ttft_p99_ms:.2f}"] == "bold red"
    assert f"{figures.itl_p99_ms:.2f}" not in styled or styled[f"{figures.itl_p99_ms:.2f}"] == ""
    assert all(style != "bold red" for piece, style in styled.items() if "KV" in piece or "%" in piece)


def _generating(step: int) -> ServerSnapshot:
    """A generate model whose token figures move every step."""
    figures = GenerationFigures(ttft_p99_ms=10.0 + step, itl_p99_ms=1.0 + step / 10,
                                output_tokens_per_s=100.0 * step, generated_tokens_total=100 * step)
    model = ModelSnapshot(name="llama_generate", version="1", state="READY", backend="ge",
                          request_rate=2.0, generation=figures)
    return ServerSnapshot(1_790_000_000.0 + 6 * step, "t", True, True, "2.51.0", 1.0 + 6 * step,
                          Endpoints("http://127.0.0.1:1", "127.0.0.1:2"), (model,), ())


async def test_a_generate_model_s_charts_are_its_token_latency_and_tokens_per_second() -> None:
    """The detail view charts TTFT p99 and ITL p99 over time, and output tokens/s beside requests/s."""
    snapshots = [_generating(step) for step in range(1, 5)]
    app = create_app(RecordedSource(snapshots[:1], name="t"), max_polls=1)
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen)
                    and app.screen.query_one("#latency-chart", SeriesChart).plotted is not None,
                    what="the first charts")
        for snapshot in snapshots[1:]:  # 6 s apart: every one redraws the charts
            app.source.history.append(snapshot)
            app.connection = next_connection(app.connection, snapshot, app.options)
            await pilot.pause()
        screen = app.screen
        assert isinstance(screen, DashboardScreen)
        latency = screen.query_one("#latency-chart", SeriesChart).plotted
        throughput = screen.query_one("#throughput-chart", SeriesChart).plotted
        assert latency is not None and throughput is not None
        assert latency[0] == "token latency ms" and [s.label for s in latency[1]] == ["TTFT p99", "ITL p99"]
        assert [v for _, v in latency[1][0].points][-1] == 14.0  # the peak of the newest point
        assert [s.label for s in throughput[1]] == ["tok/s", "req/s"]
        assert max(v for _, v in throughput[1][0].points if v is not None) > 0


def _recorded_generate_session() -> ServerSnapshot:
    """A generate model whose Triton request duration (1 ms: the call returns before its stream ends) is far
    below its recorded TTFT, beside a plain model."""
    recorded = parse_metrics((DATA / "generate_metrics.prom").read_text(encoding="utf-8"))
    figures = dataclasses.replace(generation_figures(recorded)[("llama_generate", "1")], window_s=30.0)
    request_duration = Latency(p50_ms=1.0, p99_ms=1.0, avg_ms=1.0, source="summary")
    llama = ModelSnapshot("llama_generate", "1", "READY", backend="python", latency=request_duration,
                          generation=figures)
    bert = ModelSnapshot("bert_model", "1", "READY", backend="onnxruntime",
                         latency=Latency(p50_ms=2.5, p99_ms=4.0, source="summary"))
    return ServerSnapshot(1_790_000_000.0, "t", True, True, "2.51.0", 1.0,
                          Endpoints("http://127.0.0.1:1", "127.0.0.1:2"), (bert, llama), ())


async def test_a_generate_model_s_row_shows_ttft_and_itl_not_request_duration() -> None:
    """The models table's latency cells of a generate model read its TTFT and ITL p50 (tagged T and I,
    the box title saying so and over what window), not Triton's request duration, plain models' as before."""
    snapshot = _recorded_generate_session()
    figures = snapshot.models[1].generation
    assert figures is not None and figures.ttft_p50_ms is not None and figures.itl_p50_ms is not None
    app = create_app(RecordedSource([snapshot], name="t"), max_polls=1)
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen)
                    and len(app.screen.query_one(ModelsTable).row_keys) == 2, what="the models")
        table = app.screen.query_one(ModelsTable)
        lines = {table.render_line(y).text.split()[0]: table.render_line(y).text for y in (1, 2)}
        generate, plain = lines["llama_generate"].split(), lines["bert_model"].split()
        assert f"T {figures.ttft_p50_ms:.2f}" in lines["llama_generate"]
        assert f"I {figures.itl_p50_ms:.2f}" in lines["llama_generate"]
        assert "1.00" not in generate
        assert "2.50" in plain and "4.00" in plain
        title = str(app.screen.query_one("#models-box").border_title)
        assert "T/I: generate models' TTFT/ITL p50 ms (last 30 s)" in title


def test_the_p99_sort_orders_generate_models_by_the_itl_their_cell_shows() -> None:
    """A generate model's P99 cell reads its ITL p50, so the p99 sort places it by that, not by Triton's
    request duration hidden behind it."""
    bert, llama = _recorded_generate_session().models
    assert llama.generation is not None and llama.generation.itl_p50_ms is not None
    slow_itl = dataclasses.replace(llama.generation, itl_p50_ms=50.0)
    fast_itl = dataclasses.replace(llama.generation, itl_p50_ms=0.5)
    by_p99 = next(key for key in SORT_KEYS if key.label == "p99")
    for generation, first in ((slow_itl, "llama_generate"), (fast_itl, "bert_model")):  # bert's p99: 4 ms
        rows = sorted((bert, dataclasses.replace(llama, generation=generation)), key=by_p99.key, reverse=True)
        assert rows[0].name == first
