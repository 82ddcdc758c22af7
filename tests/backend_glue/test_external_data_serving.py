"""External-data ONNX models built into a repository are served by the glue through a real tritonserver
(CPU emulation, `ge` and `npu_ge`), with their data in one file and in several; a repository whose data
file is short, or a link out of its model's folder, is refused at load with the tensor named. Requests
Triton joins (copies with dynamic batching that waits for three) answer as each alone."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.backend_glue.conftest import server_env
from tests.conftest import RunningServer, run_triton
from tests.models import EXT_WIDTH, infer, infer_joined, save_external
from triton_ge_console.backend_glue.distribution import TritonDistribution
from triton_ge_console.backend_glue.installer import install_backend_dir
from triton_ge_console.repository.build import build_repository
from triton_ge_console.repository.spec.load import load_spec

SPEC = """
models:
  - {name: one_file, backend: ge, source: src/one.onnx, max_batch_size: 4}
  - {name: several, backend: npu_ge, source: src/several/net.onnx, max_batch_size: 4}
  - {name: short, backend: ge, source: src/short.onnx, max_batch_size: 4}
  - {name: linked_out, backend: ge, source: src/linked_out.onnx, max_batch_size: 4}
  - {name: one_file_joined, backend: ge, source: src/one.onnx, max_batch_size: 3,
     dynamic_batching: {max_queue_delay_microseconds: 30000000}}
  - {name: several_joined, backend: npu_ge, source: src/several/net.onnx, max_batch_size: 3,
     dynamic_batching: {max_queue_delay_microseconds: 30000000}}
"""
JOINED = 3  # requests the NAME_joined copies wait for


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, triton_dist: TritonDistribution
) -> Iterator[RunningServer]:
    """A server on a built repository: one_file and several loaded; short and linked_out built but not
    loaded (linked_out's data file then replaced by a link to a whole copy outside its model folder)."""
    root = tmp_path_factory.mktemp("extdata-serving")
    src = root / "src"
    save_external(src / "one.onnx", location="weights/one.data", seed=3)
    (src / "several").mkdir()
    save_external(src / "several" / "net.onnx", one_file=False, seed=4)
    save_external(src / "short.onnx", seed=5)
    save_external(src / "linked_out.onnx", seed=6)
    (root / "deploy.yaml").write_text(textwrap.dedent(SPEC), encoding="utf-8")
    repo = root / "repo"
    build_repository(load_spec(root / "deploy.yaml"), repo, link=False)
    with open(repo / "short" / "1" / "short.onnx.data", "r+b") as stream:
        stream.truncate(1000)
    data = repo / "linked_out" / "1" / "linked_out.onnx.data"
    (root / "elsewhere").mkdir()
    data.rename(root / "elsewhere" / "secret")
    data.symlink_to(root / "elsewhere" / "secret")
    install_backend_dir(root / "backends", triton_dist)
    _glue_from_this_checkout(root / "backends")
    with (server_env(GE_GLUE_RUN_DIR=str(root / "run")),
          run_triton(triton_dist, repo, root / "backends",
                     models=("one_file", "several", "one_file_joined", "several_joined")) as running):
        running.src = src  # type: ignore[attr-defined]
        yield running


def _glue_from_this_checkout(backends: Path) -> None:
    """The stub ignores $PYTHONPATH and would import the installed package: make the glue this source's."""
    src = Path(__file__).resolve().parents[2] / "src"
    for backend in ("ge", "npu_ge"):
        model_py = backends / backend / "model.py"
        model_py.unlink()  # may be a link to the package's own model.py: never write through it
        model_py.write_text(
            f"import sys\nsys.path.insert(0, {str(src)!r})\n"
            "from triton_ge_console.backend_glue.triton_model import TritonPythonModel  # noqa: E402\n",
            encoding="utf-8",
        )


@pytest.mark.parametrize(("model", "source"), [("one_file", "one.onnx"), ("several", "several/net.onnx")])
def test_external_data_model_answers_like_onnx_runtime(
    served: RunningServer, model: str, source: str
) -> None:
    """The served model computes with its external weights: equal to ONNX Runtime on the source."""
    x = np.random.default_rng(0).standard_normal((2, EXT_WIDTH)).astype(np.float32)
    path = served.src / source  # type: ignore[attr-defined]
    expected = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = infer(httpclient, served.http_hostport, model, {"x": x})["y"]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("client_module", (httpclient, grpcclient), ids=("http", "grpc"))
@pytest.mark.parametrize(("model", "source"), [("one_file", "one.onnx"), ("several", "several/net.onnx")])
def test_requests_triton_joins_answer_as_each_alone(served: RunningServer, model: str, source: str,
                                                     client_module: object) -> None:
    """Three different requests Triton joins into one execution (ge and npu_ge): each answer is ONNX
    Runtime's on that request alone."""
    rng = np.random.default_rng(38)
    requests = [{"x": rng.standard_normal((1, EXT_WIDTH)).astype(np.float32)} for _ in range(JOINED)]
    answers = infer_joined(client_module, served.hostport(client_module), f"{model}_joined", requests)
    path = served.src / source  # type: ignore[attr-defined]
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for index, (feeds, got) in enumerate(zip(requests, answers, strict=True)):
        np.testing.assert_allclose(got["y"], session.run(None, feeds)[0], rtol=1e-5, atol=1e-5,
                                   err_msg=f"{model}: request {index}")


def test_short_external_data_is_refused_at_load_naming_the_tensor(served: RunningServer) -> None:
    """Loading a model whose data file is short fails with the glue's sentence, not a crash."""
    with (httpclient.InferenceServerClient(served.http_hostport) as client,
          pytest.raises(InferenceServerException) as caught):
        client.load_model("short")
    message = str(caught.value)
    assert "tensor 'w0': external data 'short.onnx.data' is too short: 1000 bytes" in message, message
    with httpclient.InferenceServerClient(served.http_hostport) as client:
        assert client.is_model_ready("one_file")


def test_external_data_linked_out_of_the_model_folder_is_refused_at_load(served: RunningServer) -> None:
    """A data file that is a link out of Triton's model folder (whole and readable: ONNX Runtime would
    read what it points at) fails the load with the glue's sentence naming the tensor and where it points."""
    with (httpclient.InferenceServerClient(served.http_hostport) as client,
          pytest.raises(InferenceServerException) as caught):
        client.load_model("linked_out")
    message = str(caught.value)
    assert "tensor 'w0': external data 'linked_out.onnx.data' is a link to " in message, message
    assert "/elsewhere/secret, outside the model's folder " in message, message
