"""The detail pane of a generate model shows its token figures in its three lines; others are unchanged."""

from __future__ import annotations

from tests.conftest import DATA
from triton_ge_console.console.widgets.detail import DetailPane, ModelDetail
from triton_ge_console.sessions.generation import generation_figures
from triton_ge_console.sessions.metrics import parse_metrics
from triton_ge_console.sessions.snapshot import ModelSnapshot


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
