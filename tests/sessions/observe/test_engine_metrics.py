"""vLLM's and MindIE's /metrics read into per-model figures (recordings in tests/data/, each citing its
source): running/waiting, TTFT/ITL percentiles, token counters, KV use, success/failure; None when absent."""

from __future__ import annotations

import pytest

from tests.engine_standins import (
    MINDIE_METRICS,
    MONITOR_OFF,
    VLLM_ASCEND_METRICS,
    VLLM_METRICS,
    VLLM_METRICS_CURRENT,
    VLLM_METRICS_GPU_CACHE,
)
from triton_ge_console.sessions.observe.engine_metrics import engine_figures, engine_memory
from triton_ge_console.sessions.observe.engine_poller import monitoring_off
from triton_ge_console.sessions.observe.metrics import parse_metrics
from triton_ge_console.sessions.observe.snapshot import EngineMemory


@pytest.mark.parametrize(("recording", "kv_name", "itl_name"), [
    (VLLM_METRICS_CURRENT, "vllm:kv_cache_usage_perc", "vllm:inter_token_latency_seconds"),
    (VLLM_METRICS, "vllm:kv_cache_usage_perc", "vllm:time_per_output_token_seconds"),
    (VLLM_METRICS_GPU_CACHE, "vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds")])
def test_vllm_figures_read_under_the_new_and_the_deprecated_names(recording, kv_name, itl_name) -> None:
    """KV use under vLLM's name before and after 0.9, ITL under its name before and after 0.11 (a current
    release has only vllm:inter_token_latency_seconds; its per-request mean beside it is not ITL)."""
    figures = engine_figures("vllm", parse_metrics(recording.read_text()))
    model = figures["qwen2.5-7b-instruct"]
    g = model.generation
    assert (g.running, g.waiting) == (3, 2)
    assert g.kv_cache_share == pytest.approx(0.42)
    assert kv_name in model.names_read and itl_name in model.names_read
    assert g.ttft_p50_ms == pytest.approx(85.0) and g.ttft_p99_ms == pytest.approx(242.5)
    assert g.itl_p50_ms == pytest.approx(25.0) and g.itl_p99_ms == pytest.approx(72.5)
    assert (g.prompt_tokens_total, g.generated_tokens_total) == (52340, 18872)
    assert g.ended_by_reason == (("abort", 2), ("length", 8), ("stop", 90))
    assert model.success_total == 100
    assert model.failure_total is None  # vLLM counts no failed requests: unknown, never 0
    assert model.e2e_p50_ms == pytest.approx(1875.0)


def test_mindie_figures_come_from_its_own_names() -> None:
    figures = engine_figures("mindie", parse_metrics(MINDIE_METRICS.read_text()))
    model = figures["llama3-8b"]
    g = model.generation
    assert (g.running, g.waiting) == (4, 1)
    assert g.kv_cache_share == pytest.approx(0.35)
    assert g.ttft_p50_ms == pytest.approx(95.0) and g.ttft_p99_ms == pytest.approx(246.25)
    assert g.itl_p50_ms == pytest.approx(54.1667, rel=1e-4)
    assert (g.prompt_tokens_total, g.generated_tokens_total) == (41216, 12416)
    assert (model.success_total, model.failure_total) == (97, 3)


def test_a_figure_the_text_lacks_stays_none() -> None:
    text = 'vllm:num_requests_running{model_name="m",engine="0"} 1.0\n'
    g = engine_figures("vllm", parse_metrics(text))["m"].generation
    assert g.running == 1
    assert (g.waiting, g.kv_cache_share, g.ttft_p50_ms, g.itl_p99_ms, g.generated_tokens_total) == (None,) * 5


def test_mindie_with_its_monitoring_switch_off_is_said_plainly() -> None:
    body = MONITOR_OFF
    said = monitoring_off("mindie", 500, body)
    assert said is not None and "MIES_SERVICE_MONITOR_MODE=1" in said
    assert monitoring_off("mindie", 200, b"") is not None  # an empty answer: nothing to read either
    assert monitoring_off("mindie", 200, MINDIE_METRICS.read_bytes()) is None
    assert monitoring_off("vllm", 200, b"") is None


def test_mindie_s_joined_model_label_lands_on_its_one_model_or_on_a_row_of_its_own() -> None:
    from triton_ge_console.sessions.observe.engine_poller import EnginePoller

    text = MINDIE_METRICS.read_text().replace('model_name="llama3-8b"', 'model_name="base & lora-a"')
    figures = engine_figures("mindie", parse_metrics(text))
    one = dict(figures)
    assert EnginePoller._names(("base",), one) == ("base",) and one["base"].success_total == 97
    both = dict(figures)  # several served models: the figures are all of them together, shown as such
    assert EnginePoller._names(("base", "lora-a"), both) == ("base", "lora-a", "base & lora-a")


def test_vllm_ascend_s_npu_memory_is_read_per_data_parallel_rank() -> None:
    """ms_service_metric's vllm_profiling_engine:memory:* gauges (GiB, labelled dp/role/phase, no model):
    one EngineMemory per data-parallel rank; a vLLM without them has none, and its model figures are the
    same either way."""
    table = parse_metrics(VLLM_ASCEND_METRICS.read_text())
    assert engine_memory(table) == (EngineMemory(
        dp="0", total_gib=60.96, utilization=0.9, reserved_gib=54.86, weights_gib=15.24, kv_cache_gib=36.21,
        non_torch_gib=0.35, activation_gib=2.09, graph_gib=0.97),)
    assert engine_memory(parse_metrics(VLLM_METRICS_CURRENT.read_text())) == ()
    assert engine_memory(parse_metrics(MINDIE_METRICS.read_text())) == ()
    plain = engine_figures("vllm", parse_metrics(VLLM_METRICS_CURRENT.read_text()))
    assert engine_figures("vllm", table) == plain


def test_an_engine_memory_figure_the_text_lacks_stays_none() -> None:
    text = 'vllm_profiling_engine:memory:weights_gb{dp="1",role="prefill",phase="mixed"} 7.5\n'
    [memory] = engine_memory(parse_metrics(text))
    assert (memory.dp, memory.weights_gib, memory.total_gib, memory.kv_cache_gib) == ("1", 7.5, None, None)


def test_a_snapshot_with_engine_memory_round_trips_through_a_recording() -> None:
    """A console recording keeps vllm-ascend's NPU memory as it was read (JSON turns tuples into lists)."""
    import json

    from triton_ge_console.sessions.observe.snapshot import ServerSnapshot

    memory = engine_memory(parse_metrics(VLLM_ASCEND_METRICS.read_text()))
    snapshot = ServerSnapshot(taken_at=1.0, session="va", live=True, engine="vllm", engine_memory=memory)
    assert ServerSnapshot.from_dict(json.loads(json.dumps(snapshot.to_dict()))) == snapshot
