"""The seed's llama end to end on an Ascend host as the fakes play it: `ge-console convert` its ONNX with
sequence-length gears (ATC --dynamic_dims over batch and length), with a dynamic shape (-1 without gears)
and with batch gears at a fixed length, then serve each OM through the ge glue in a real tritonserver
whose stubs import the fake acl, at every gear and at odd lengths: the logits equal ONNX Runtime's on the
ONNX, and the bytes copied to the device show each request padded to the smallest gear holding it (gears)
or sent at its own size (dynamic shape). Requests Triton joins (a copy of each with dynamic batching that
waits for three) answer as each alone, over HTTP and gRPC: padded to a gear together, split back apart."""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests.backend_glue.conftest import FAKES, server_env
from tests.backend_glue.metrics import model_value
from tests.conftest import RunningServer, run_triton
from tests.models import infer, infer_joined
from tests.waiting import wait_until
from triton_ge_console.backend_glue.distribution import TritonDistribution
from triton_ge_console.backend_glue.installer import install_backend_dir
from triton_ge_console.cli import main
from triton_ge_console.repository.demo_models import demo_bytes

pytestmark = [pytest.mark.timeout(300), pytest.mark.server]

BATCHES, LENGTHS = (1, 2, 4, 8), (8, 16, 32)
GEARS = list(itertools.product(BATCHES, LENGTHS))  # (batch, sequence length) for input_ids' two -1 axes
ODD = [(1, 1), (1, 5), (3, 9), (2, 17), (5, 31), (7, 3)]
CONFIG = """name: "{name}"
backend: "ge"
max_batch_size: 8
input [{{ name: "input_ids" data_type: TYPE_INT64 dims: [-1] }}]
output [{{ name: "logits" data_type: TYPE_FP32 dims: [-1, 32000] }}]
parameters {{ key: "om_model_path" value: {{ string_value: "{om}" }} }}
parameters {{ key: "execution_mode" value: {{ string_value: "npu" }} }}
"""
MODELS = ("llama_gears", "llama_shape", "llama_batch")
JOINED = 3  # requests each NAME_joined copy waits for (max_batch_size 3, a 30 s queue delay)
JOINING = ("max_batch_size: 8\n",
           "max_batch_size: 3\ndynamic_batching { max_queue_delay_microseconds: 30000000 }\n")
BATCH_LENGTH = 16  # llama_batch's fixed sequence length (--dynamic_batch_size: only N may be -1)


def _convert(onnx: Path, output: Path, shape: str, *gears: str) -> Path:
    """ge-console convert with the fake atc; the OM it wrote (a dynamic shape's carries the host's name)."""
    args = ["convert", str(onnx), "--soc-version", "Ascend910B3", "--input-shape", shape, *gears,
            "-o", str(output)]
    assert main(args) == 0
    (om,) = output.parent.glob(f"{output.name}*.om")
    return om


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory,
           triton_dist: TritonDistribution) -> Iterator[RunningServer]:
    """A repository with the seed llama converted twice, served with the fake acl in the stubs."""
    root = tmp_path_factory.mktemp("seed-om")
    onnx = root / "llama.onnx"
    onnx.write_bytes(demo_bytes("demo:llama"))
    install_backend_dir(root / "backends", triton_dist)
    repo = root / "repo"
    source = str(Path(__file__).resolve().parents[2] / "src")
    with server_env(PATH=f"{FAKES}{os.pathsep}{os.environ['PATH']}"):
        dims = ";".join(f"{b},{s}" for b, s in GEARS)
        batch = ["--dynamic-batch-size", ",".join(map(str, BATCHES))]
        for name, shape, gears in (("llama_gears", "input_ids:-1,-1", ["--dynamic-dims", dims]),
                                   ("llama_shape", "input_ids:-1,-1", []),
                                   ("llama_batch", f"input_ids:-1,{BATCH_LENGTH}", batch)):
            version = repo / name / "1"
            version.mkdir(parents=True)
            om = _convert(onnx, version / "model", shape, *gears)
            (repo / name / "config.pbtxt").write_text(CONFIG.format(name=name, om=om.name), encoding="utf-8")
            joined = repo / f"{name}_joined"
            shutil.copytree(repo / name, joined)
            config = CONFIG.format(name=joined.name, om=om.name).replace(*JOINING)
            (joined / "config.pbtxt").write_text(config, encoding="utf-8")
    with (server_env(PYTHONPATH=os.pathsep.join([str(FAKES), source]), GE_GLUE_RUN_DIR=str(root / "run")),
          run_triton(triton_dist, repo, root / "backends",
                     models=(*MODELS, *(f"{m}_joined" for m in MODELS))) as running):
        running.onnx = onnx  # type: ignore[attr-defined]
        yield running


def _ids(batch: int, length: int) -> np.ndarray:
    return np.random.default_rng(batch * 1000 + length).integers(0, 32000, (batch, length)).astype(np.int64)


def _smallest_gear(batch: int, length: int) -> tuple[int, int]:
    return min((g for g in GEARS if g[0] >= batch and g[1] >= length), key=lambda g: g[0] * g[1])


def test_both_oms_run_on_the_fake_npu(server: RunningServer) -> None:
    """execution_mode npu: each OM went through AscendCL (the fake), not CPU emulation."""
    log = server.log()
    for model in MODELS:
        assert f"ge glue: model {model} instance" in log and "execution_mode=npu" in log, log[-3000:]


def _requests(model: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(request shape, shape sent to the device) at every gear and between."""
    if model == "llama_batch":
        return [((b, BATCH_LENGTH), (next(g for g in BATCHES if g >= b), BATCH_LENGTH))
                for b in (*BATCHES, 3, 5, 7)]
    shapes = [*GEARS, *ODD]
    return [(s, _smallest_gear(*s) if model == "llama_gears" else s) for s in shapes]


@pytest.mark.parametrize("model", MODELS)
def test_every_gear_and_odd_lengths_answer_like_onnx_runtime(server: RunningServer, model: str) -> None:
    """Dimension gears: the smallest gear holding the request, padded and cut back; dynamic shape: buffers
    at the request's own size; batch gears: the next batch gear. Each time the logits are ONNX Runtime's
    on the same ids."""
    onnx = str(server.onnx)  # type: ignore[attr-defined]
    session = ort.InferenceSession(onnx, providers=["CPUExecutionProvider"])
    before = model_value(server, "ge_h2d_bytes_total", model)
    sent = 0
    for (batch, length), gear in _requests(model):
        ids = _ids(batch, length)
        logits = infer(httpclient, server.http_hostport, model, {"input_ids": ids}, 120)["logits"]
        assert logits.shape == (batch, length, 32000)
        np.testing.assert_allclose(logits, session.run(None, {"input_ids": ids})[0], atol=1e-4, rtol=1e-4)
        sent += gear[0] * gear[1] * 8
    wait_until(lambda: model_value(server, "ge_h2d_bytes_total", model) - before == sent, timeout=20,
               what=f"{model}'s host-to-device bytes to reach {sent}")


def test_a_request_beyond_the_largest_gear_is_refused_with_the_gears(server: RunningServer) -> None:
    """Longer than every gear: the glue says which gears the OM has; the dynamic shape takes it."""
    with pytest.raises(Exception, match="fit none of the OM's gears"):
        infer(httpclient, server.http_hostport, "llama_gears", {"input_ids": _ids(1, 33)}, 120)
    shaped = infer(httpclient, server.http_hostport, "llama_shape", {"input_ids": _ids(1, 33)}, 120)["logits"]
    assert shaped.shape == (1, 33, 32000)


@pytest.mark.parametrize("client_module", (httpclient, grpcclient), ids=("http", "grpc"))
@pytest.mark.parametrize("model", MODELS)
def test_requests_triton_joins_answer_as_each_alone(server: RunningServer, model: str,
                                                     client_module: object) -> None:
    """Three different requests Triton joins into one execution of the OM (a batch gear of 4 holds them,
    the dimension gear (4, 16) holds [3, 9], the dynamic shape takes [3, 9]): each answer is ONNX Runtime's
    on that request alone."""
    length = BATCH_LENGTH if model == "llama_batch" else 9
    rng = np.random.default_rng(38)
    requests = [{"input_ids": rng.integers(0, 32000, (1, length)).astype(np.int64)} for _ in range(JOINED)]
    answers = infer_joined(client_module, server.hostport(client_module), f"{model}_joined", requests)
    onnx = str(server.onnx)  # type: ignore[attr-defined]
    session = ort.InferenceSession(onnx, providers=["CPUExecutionProvider"])
    for index, (feeds, got) in enumerate(zip(requests, answers, strict=True)):
        np.testing.assert_allclose(got["logits"], session.run(None, feeds)[0], atol=1e-4, rtol=1e-4,
                                   err_msg=f"{model}: request {index}")
