"""The glue serves real models through a real tritonserver: results equal ONNX Runtime's, npu_ge style too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.http as httpclient

from tests.backend_glue.models import DENSE_CONFIG, dense_model, param, write_model
from tests.conftest import RunningServer, run_triton
from triton_ge_console.backend_glue.distribution import TritonDistribution
from triton_ge_console.backend_glue.installer import install_backend_dir

MODELS = ("dense", "npu_dense")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory,
           triton_dist: TritonDistribution) -> Iterator[RunningServer]:
    """One server for the module: a `ge` model on two devices and an `npu_ge` model without I/O."""
    root = tmp_path_factory.mktemp("serving")
    backends = root / "backends"
    install_backend_dir(backends, triton_dist)
    repo = root / "repo"
    write_model(repo, "dense", DENSE_CONFIG.format(
        backend="ge", extra="instance_group [{ count: 2 }]\n" + param("device_ids", "0,1")), dense_model())
    write_model(repo, "npu_dense", 'backend: "npu_ge"\nmax_batch_size: 8\n' + param("DEVICEIDS", "1"),
                dense_model(seed=5), onnx_name="net.onnx")
    with run_triton(triton_dist, repo, backends, models=MODELS) as running:
        running.repo = repo  # type: ignore[attr-defined]
        yield running


def _direct(onnx_path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The same model run in-process by ONNX Runtime."""
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    return list(session.run(None, feeds))


def _infer_dense(server: RunningServer, model: str, x: np.ndarray) -> httpclient.InferResult:
    """One HTTP inference of a dense model."""
    client = httpclient.InferenceServerClient(server.http_hostport)
    tensor = httpclient.InferInput("x", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x)
    return client.infer(model, [tensor])


def test_ge_model_answers_like_onnx_runtime(server: RunningServer) -> None:
    x = np.random.default_rng(3).standard_normal((5, 4)).astype(np.float32)
    result = _infer_dense(server, "dense", x)
    y, z = _direct(server.repo / "dense" / "1" / "model.onnx", {"x": x})  # type: ignore[attr-defined]
    np.testing.assert_allclose(result.as_numpy("y"), y, atol=1e-5)
    np.testing.assert_allclose(result.as_numpy("z"), z, atol=1e-5)


def test_npu_ge_config_without_io_is_completed_from_the_onnx_and_answers(server: RunningServer) -> None:
    client = httpclient.InferenceServerClient(server.http_hostport)
    config = client.get_model_config("npu_dense")
    assert [(i["name"], i["data_type"], i["dims"]) for i in config["input"]] == [("x", "TYPE_FP32", [4])]
    assert [o["name"] for o in config["output"]] == ["y", "z"]
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    y, _ = _direct(server.repo / "npu_dense" / "1" / "net.onnx", {"x": x})  # type: ignore[attr-defined]
    np.testing.assert_allclose(_infer_dense(server, "npu_dense", x).as_numpy("y"), y, atol=1e-5)
