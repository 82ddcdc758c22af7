"""The glue serves real models through a real tritonserver: results equal ONNX Runtime's (1e-5)."""

from __future__ import annotations

import os
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.backend_glue.conftest import FAKES, server_env
from tests.backend_glue.metrics import metric_samples, model_value
from tests.conftest import RunningServer, run_triton
from tests.models import DENSE_CONFIG, dense_model, param, reference, write_fake_om, write_model
from tests.waiting import wait_until
from triton_ge_console.backend_glue.distribution import TritonDistribution
from triton_ge_console.backend_glue.installer import install_backend_dir
from triton_ge_console.repository.demo_models import demo_bytes
from triton_ge_console.sessions.observe.metrics import parse_metrics
from triton_ge_console.sessions.observe.snapshot import DeviceSnapshot
from triton_ge_console.sessions.observe.telemetry.devices import devices_from_glue

MODELS = ("dense", "npu_dense", "llama_model", "bert_model", "om_dense", "om_forced_cpu", "unbatched")
UNBATCHED_CONFIG = """
    backend: "ge"
    max_batch_size: 0
    input [{ name: "x" data_type: TYPE_FP32 dims: [-1, 4] }]
    output [{ name: "y" data_type: TYPE_FP32 dims: [-1, 3] },
            { name: "z" data_type: TYPE_FP32 dims: [-1, 3] }]
"""

LLAMA_CONFIG = """
    backend: "ge"
    max_batch_size: 8
    input [{ name: "input_ids" data_type: TYPE_INT64 dims: [-1] }]
    output [{ name: "logits" data_type: TYPE_FP32 dims: [-1, 32000] }]
    dynamic_batching { preferred_batch_size: [4, 8] max_queue_delay_microseconds: 500 }
    parameters { key: "om_model_path" value: { string_value: "model.om" } }
"""

BERT_CONFIG = """
    backend: "ge"
    max_batch_size: 16
    dynamic_batching { max_queue_delay_microseconds: 200 }
    instance_group [{ count: 1 }]
    parameters { key: "device_ids" value: { string_value: "1" } }
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory,
           triton_dist: TritonDistribution) -> Iterator[RunningServer]:
    """One server: ge models (seed llama/bert, a dense one on two devices), npu_ge without I/O, an OM."""
    root = tmp_path_factory.mktemp("serving")
    install_backend_dir(root / "backends", triton_dist)
    repo = root / "repo"
    write_model(repo, "dense", DENSE_CONFIG.format(
        backend="ge", extra="instance_group [{ count: 2 }]\n" + param("device_ids", "0,1")), dense_model())
    write_model(repo, "npu_dense", 'backend: "npu_ge"\nmax_batch_size: 8\n' + param("device_ids", "4,5"),
                dense_model(seed=5), onnx_name="net.onnx")
    write_model(repo, "llama_model", LLAMA_CONFIG, demo_bytes("demo:llama"))
    write_model(repo, "bert_model", BERT_CONFIG, demo_bytes("demo:bert"))
    om_folder = write_model(repo, "om_dense", DENSE_CONFIG.format(
        backend="ge", extra=param("om_model_path", "dense.om") + "\n" + param("device_ids", "2")), None)
    write_fake_om(om_folder / "1", dense_model(seed=9), gears=(1, 2, 4, 8), name="dense.om")
    write_model(repo, "unbatched", UNBATCHED_CONFIG, dense_model(seed=2))
    forced = write_model(repo, "om_forced_cpu", DENSE_CONFIG.format(
        backend="ge", extra=param("om_model_path", "dense.om") + "\n" + param("execution_mode", "cpu")),
        dense_model(seed=9))
    write_fake_om(forced / "1", dense_model(seed=9), name="dense.om")
    spanning = write_model(repo, "om_tensor_parallel", DENSE_CONFIG.format(  # not loaded at start
        backend="ge", extra="\n".join([param("om_model_path", "dense.om"), param("device_ids", "0,1"),
                                       param("tensor_parallel", "2")])), dense_model(seed=9))
    write_fake_om(spanning / "1", dense_model(seed=9), name="dense.om")
    # the stubs import the fake `acl`, so OMs run as on an NPU; the device ledger stays in this test's tmp
    # this checkout's package, not whichever one is installed
    source = str(Path(__file__).resolve().parents[2] / "src")
    with (server_env(PYTHONPATH=os.pathsep.join([str(FAKES), source]), GE_GLUE_RUN_DIR=str(root / "run")),
          run_triton(triton_dist, repo, root / "backends", models=MODELS) as running):
        running.repo = repo  # type: ignore[attr-defined]
        yield running


def _http_infer(server: RunningServer, model: str, feeds: dict[str, np.ndarray]) -> httpclient.InferResult:
    """One HTTP inference."""
    with httpclient.InferenceServerClient(server.http_hostport) as client:
        inputs = []
        for name, array in feeds.items():
            data_type = "FP32" if array.dtype == np.float32 else "INT64"
            tensor = httpclient.InferInput(name, list(array.shape), data_type)
            tensor.set_data_from_numpy(array)
            inputs.append(tensor)
        return client.infer(model, inputs)


def test_all_models_loaded(server: RunningServer) -> None:
    with httpclient.InferenceServerClient(server.http_hostport) as client:
        assert all(client.is_model_ready(m) for m in MODELS), server.log()[-3000:]


def test_ge_model_answers_like_onnx_runtime(server: RunningServer) -> None:
    x = np.random.default_rng(3).standard_normal((5, 4)).astype(np.float32)
    result = _http_infer(server, "dense", {"x": x})
    y, z = reference(server.repo / "dense" / "1" / "model.onnx", {"x": x})  # type: ignore[attr-defined]
    np.testing.assert_allclose(result.as_numpy("y"), y, atol=1e-5)
    np.testing.assert_allclose(result.as_numpy("z"), z, atol=1e-5)


def test_npu_ge_config_without_io_is_completed_from_the_onnx_and_answers(server: RunningServer) -> None:
    with httpclient.InferenceServerClient(server.http_hostport) as client:
        config = client.get_model_config("npu_dense")
        assert [(i["name"], i["data_type"], i["dims"]) for i in config["input"]] == [("x", "TYPE_FP32", [4])]
        assert [o["name"] for o in config["output"]] == ["y", "z"]
        x = np.arange(8, dtype=np.float32).reshape(2, 4)
        y, _ = reference(server.repo / "npu_dense" / "1" / "net.onnx", {"x": x})  # type: ignore[attr-defined]
        np.testing.assert_allclose(_http_infer(server, "npu_dense", {"x": x}).as_numpy("y"), y, atol=1e-5)


def test_npu_ge_over_two_npus_shows_no_utilization_it_cannot_know(server: RunningServer) -> None:
    """Native npu_ge runs each execution on instance_exec_blocks (1) of its GE sessions, the least loaded
    ones over every NPU of device_ids (scheduler.cpp GetIdleInstances, inference.cpp BatchSplicTasks):
    which NPU ran it is decided at run time, so the emulation, which cannot know, shows the utilization of
    NPUs 4 and 5 as unknown (it used to count each execution busy on both, twice the work done), their
    memory as the ledger has it, and a ge model's NPU its busy time."""
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    for _ in range(20):
        _http_infer(server, "npu_dense", {"x": x})
        _http_infer(server, "dense", {"x": x})

    def devices() -> dict[str, DeviceSnapshot]:
        with urllib.request.urlopen(server.metrics_url, timeout=5) as response:
            table = parse_metrics(response.read().decode())
        return {d.id: d for d in devices_from_glue(table)}

    assert wait_until(lambda: model_value(server, "ge_executions_total", "npu_dense") >= 20)
    assert wait_until(lambda: (devices()["0"].utilization or 0) > 0)
    assert wait_until(lambda: [devices()[d].utilization for d in ("4", "5")] == [None, None], timeout=20)
    shown = devices()
    assert (shown["4"].memory_used_bytes or 0) > 0 and (shown["5"].memory_used_bytes or 0) > 0


def test_seed_llama_model_over_http_and_grpc_equals_onnx_runtime(server: RunningServer) -> None:
    ids = np.random.default_rng(7).integers(0, 32000, (2, 6)).astype(np.int64)
    (expected,) = reference(demo_bytes("demo:llama"), {"input_ids": ids})
    over_http = _http_infer(server, "llama_model", {"input_ids": ids}).as_numpy("logits")
    np.testing.assert_allclose(over_http, expected, rtol=1e-5, atol=1e-5)
    with grpcclient.InferenceServerClient(server.grpc_hostport) as client:
        tensor = grpcclient.InferInput("input_ids", list(ids.shape), "INT64")
        tensor.set_data_from_numpy(ids)
        over_grpc = client.infer("llama_model", [tensor]).as_numpy("logits")
        np.testing.assert_allclose(over_grpc, expected, rtol=1e-5, atol=1e-5)


def test_seed_bert_model_with_io_from_the_onnx_equals_onnx_runtime(server: RunningServer) -> None:
    ids = np.random.default_rng(8).integers(0, 30000, (3, 7)).astype(np.int64)
    mask = np.ones_like(ids)
    mask[1, 5:] = 0
    feeds = {"input_ids": ids, "attention_mask": mask}
    (expected,) = reference(demo_bytes("demo:bert"), feeds)
    np.testing.assert_allclose(_http_infer(server, "bert_model", feeds).as_numpy("pooled"), expected,
                               rtol=1e-5, atol=1e-5)


def test_om_model_runs_through_acl_when_acl_imports(server: RunningServer) -> None:
    x = np.random.default_rng(4).standard_normal((3, 4)).astype(np.float32)
    y, z = reference(server.repo / "om_dense" / "1" / "dense.source.onnx", {"x": x})  # type: ignore[attr-defined]
    result = _http_infer(server, "om_dense", {"x": x})
    np.testing.assert_allclose(result.as_numpy("y"), y, atol=1e-5)
    np.testing.assert_allclose(result.as_numpy("z"), z, atol=1e-5)
    modes = {(s.labels["model"], s.labels["device"], s.labels["execution_mode"])
             for s in metric_samples(server, "ge_model_info")}
    assert {("om_dense", "2", "npu"), ("dense", "0", "cpu-emulated"), ("dense", "1", "cpu-emulated"),
            ("npu_dense", "4", "cpu-emulated"), ("npu_dense", "5", "cpu-emulated"),
            ("om_forced_cpu", "0", "cpu-emulated")} <= modes
    npu_total = [s.value for s in metric_samples(server, "ge_device_memory_total_bytes")
                 if s.labels == {"device": "2", "kind": "npu"}]
    assert npu_total == [32 * (1 << 30)]  # acl.rt.get_mem_info of the (fake) 32 GiB device, not the ledger
    # 3 rows of 4 floats padded to gear 4 in; y and z (3 rows of 3 floats each) out
    assert wait_until(lambda: model_value(server, "ge_h2d_bytes_total", "om_dense")) == 4 * 4 * 4
    assert wait_until(lambda: model_value(server, "ge_d2h_bytes_total", "om_dense")) == 2 * 3 * 3 * 4
    assert model_value(server, "ge_h2d_bytes_total", "dense") == 0  # CPU emulation copies nothing


def test_model_without_batching_answers_and_returns_only_the_requested_output(server: RunningServer) -> None:
    x = np.random.default_rng(5).standard_normal((3, 4)).astype(np.float32)
    _, z = reference(server.repo / "unbatched" / "1" / "model.onnx", {"x": x})  # type: ignore[attr-defined]
    with httpclient.InferenceServerClient(server.http_hostport) as client:
        tensor = httpclient.InferInput("x", [3, 4], "FP32")
        tensor.set_data_from_numpy(x)
        result = client.infer("unbatched", [tensor], outputs=[httpclient.InferRequestedOutput("z")])
    np.testing.assert_allclose(result.as_numpy("z"), z, atol=1e-5)
    assert result.as_numpy("y") is None


def test_om_over_two_npus_is_refused_at_load_with_the_reason(server: RunningServer) -> None:
    """tensor_parallel 2 with an OM where acl imports: UNAVAILABLE, saying AscendCL loads an OM on one NPU."""
    with httpclient.InferenceServerClient(server.http_hostport) as client:
        with pytest.raises(InferenceServerException, match=r"tensor_parallel 2: this instance spans NPUs "
                                                           r"\[0, 1\], but the GE glue runs an OM through"):
            client.load_model("om_tensor_parallel")
        entry = next(e for e in client.get_model_repository_index() if e["name"] == "om_tensor_parallel")
    assert entry["state"] == "UNAVAILABLE" and "aclmdlLoadFromFile" in entry["reason"]
