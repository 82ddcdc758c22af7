"""Dynamic batching through the glue (fewer executions than requests, right answers each), a bad request
failing alone, and custom metrics agreeing with Triton's own statistics."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.backend_glue.conftest import server_env
from tests.backend_glue.metrics import metric_samples, model_value
from tests.conftest import RunningServer, run_triton
from tests.models import TOKEN_CONFIG, VOCAB, dense_model, token_model, write_model
from tests.waiting import wait_until
from triton_ge_console.backend_glue.distribution import TritonDistribution
from triton_ge_console.backend_glue.installer import install_backend_dir

RAGGED_TOKENS = TOKEN_CONFIG.replace('dims: [-1] }', 'dims: [-1] allow_ragged_batch: true }')
RAGGED_DENSE = """
    backend: "ge"
    max_batch_size: 8
    input [{ name: "x" data_type: TYPE_FP32 dims: [-1] allow_ragged_batch: true }]
    output [{ name: "y" data_type: TYPE_FP32 dims: [3] }, { name: "z" data_type: TYPE_FP32 dims: [3] }]
    dynamic_batching { preferred_batch_size: [4] max_queue_delay_microseconds: 2000000 }
"""
MODELS = ("tokens", "ragged_tokens", "ragged_dense")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory,
           triton_dist: TritonDistribution) -> Iterator[RunningServer]:
    """A server with a dynamically batched token model (plain and ragged) and a ragged dense one."""
    root = tmp_path_factory.mktemp("batching")
    install_backend_dir(root / "backends", triton_dist)
    repo = root / "repo"
    write_model(repo, "tokens", TOKEN_CONFIG.format(vocab=VOCAB, extra=""), token_model())
    write_model(repo, "ragged_tokens", RAGGED_TOKENS.format(vocab=VOCAB, extra=""), token_model())
    write_model(repo, "ragged_dense", RAGGED_DENSE, dense_model())
    with (server_env(GE_GLUE_RUN_DIR=str(root / "run")),
          run_triton(triton_dist, repo, root / "backends", models=MODELS) as running):
        yield running


def _ids_input(ids: np.ndarray) -> httpclient.InferInput:
    """An INT64 input_ids tensor."""
    tensor = httpclient.InferInput("input_ids", list(ids.shape), "INT64")
    tensor.set_data_from_numpy(ids)
    return tensor


def _stats(server: RunningServer, model: str) -> tuple[int, int, int]:
    """(successful requests, inferences, executions) from Triton's statistics API."""
    with httpclient.InferenceServerClient(server.http_hostport) as client:
        stats = client.get_inference_statistics(model)["model_stats"][0]
        return int(stats["inference_stats"]["success"]["count"]), int(stats["inference_count"]), \
            int(stats["execution_count"])


def _concurrent_tokens(server: RunningServer, model: str, lengths: list[int]) -> None:
    """Send one request per length from as many threads; each answer must equal ONNX Runtime's."""
    reference = ort.InferenceSession(token_model(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(11)
    batches = [rng.integers(0, VOCAB, (1 + i % 2, n)).astype(np.int64) for i, n in enumerate(lengths)]

    def one(ids: np.ndarray) -> None:
        with httpclient.InferenceServerClient(server.http_hostport) as client:
            got = client.infer(model, [_ids_input(ids)]).as_numpy("logits")
            np.testing.assert_allclose(got, reference.run(None, {"input_ids": ids})[0], atol=1e-5)

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(one, batches))


def test_concurrent_clients_are_batched_and_each_gets_its_answer(server: RunningServer) -> None:
    _concurrent_tokens(server, "tokens", [5] * 32)
    requests, _, executions = _stats(server, "tokens")
    assert requests == 32 and executions < requests


def test_ragged_requests_are_grouped_by_shape_within_one_batch(server: RunningServer) -> None:
    _concurrent_tokens(server, "ragged_tokens", [3, 5] * 12)
    requests, _, triton_executions = _stats(server, "ragged_tokens")
    assert requests == 24 and triton_executions < requests
    # one glue execution per shape group of each batch Triton formed
    assert wait_until(
        lambda: model_value(server, "ge_executions_total", "ragged_tokens") >= triton_executions)
    assert model_value(server, "ge_executions_total", "ragged_tokens") < requests


def test_a_request_that_does_not_fit_the_model_fails_alone(server: RunningServer) -> None:
    def one(columns: int) -> str:
        with httpclient.InferenceServerClient(server.http_hostport) as client:
            x = httpclient.InferInput("x", [1, columns], "FP32")
            x.set_data_from_numpy(np.ones((1, columns), dtype=np.float32))
            try:
                return str(client.infer("ragged_dense", [x]).as_numpy("y").shape)
            except InferenceServerException as exc:
                return str(exc)

    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = list(pool.map(one, [4, 5, 4, 4]))
    assert answers[0] == answers[2] == answers[3] == "(1, 3)"
    assert "model ragged_dense: input x has shape [1, 5], the model needs [-1, 4]" in answers[1]
    _, _, executions = _stats(server, "ragged_dense")
    assert executions == 1  # the four arrived in one batch (preferred size 4, 2 s queue delay)


def test_custom_metrics_agree_with_the_work_done(server: RunningServer) -> None:
    # executions per batch size are counters, one increment per size a flush saw: a histogram took one
    # observe() per execution, an IPC round trip each (issue 44)
    _, inferences, executions = _stats(server, "tokens")
    assert wait_until(lambda: model_value(server, "ge_executions_total", "tokens") == executions)
    assert model_value(server, "ge_inferences_total", "tokens") == inferences
    per_size = metric_samples(server, "ge_execution_batch_size_total")
    sizes = {int(s.labels["batch_size"]): s.value for s in per_size if s.labels.get("model") == "tokens"}
    assert sum(sizes.values()) == executions
    assert sum(size * count for size, count in sizes.items()) == inferences
    assert model_value(server, "ge_execution_duration_us", "tokens") > 0
    info = [s.labels for s in metric_samples(server, "ge_model_info") if s.labels["model"] == "tokens"]
    assert info == [{"model": "tokens", "version": "1", "device": "0", "kind": "cpu-emulated",
                     "backend": "ge", "execution_mode": "cpu-emulated"}]


def test_device_gauges_show_the_shared_pool_and_busy_time(server: RunningServer) -> None:
    def device0(name: str) -> float | None:
        values = [s.value for s in metric_samples(server, name) if s.labels == {"device": "0",
                                                                               "kind": "cpu-emulated"}]
        return values[0] if values else None

    assert device0("ge_device_memory_total_bytes") == 64 * (1 << 30)
    model_bytes = 2 * len(token_model()) + len(dense_model())
    assert wait_until(lambda: (device0("ge_device_memory_used_bytes") or 0) >= model_bytes)
    _concurrent_tokens(server, "tokens", [5] * 16)
    assert wait_until(lambda: (device0("ge_device_utilization_ratio") or 0) > 0)
    assert (device0("ge_device_utilization_ratio") or 0) <= 1.0
