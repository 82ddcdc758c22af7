"""Shapes and types Triton cannot write as the ONNX does, built from a spec and served through the glue by a
real tritonserver: scalars, batch-only tensors, every type the glue carries (BF16 too), an output of
unknown rank and an input with a default. Answers equal ONNX Runtime's, over HTTP and gRPC."""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from pathlib import Path

import ml_dtypes
import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests.backend_glue.conftest import server_env
from tests.conftest import RunningServer, run_triton
from tests.models import (
    batch_only_model,
    bf16_model,
    infer,
    no_input_model,
    scalar_model,
    types_model,
    unranked_model,
    write_model,
)
from triton_ge_console.backend_glue.distribution import TritonDistribution
from triton_ge_console.backend_glue.installer import install_backend_dir
from triton_ge_console.repository.build import build_repository
from triton_ge_console.repository.spec.load import parse_spec
from triton_ge_console.repository.validate import validate_path
from triton_ge_console.sessions.act.probe import send_test_request
from triton_ge_console.sessions.loadgen.run import LoadSpec, LoadSpecError, run_load_sync

SOURCES = {"scalar": scalar_model, "batch_only": batch_only_model, "types": types_model,
           "unranked": unranked_model, "no_input": no_input_model, "bf16": bf16_model}
SPEC = """
name: shapes
models:
  - {name: scalars, backend: ge, source: scalar.onnx}
  - {name: batch_only, backend: ge, source: batch_only.onnx, max_batch_size: 4,
     dynamic_batching: {max_queue_delay_microseconds: 50000}}
  - {name: types, backend: ge, source: types.onnx, max_batch_size: 4}
  - {name: types_batched, backend: ge, source: types.onnx, max_batch_size: 4,
     dynamic_batching: {max_queue_delay_microseconds: 200000}}
  - {name: unranked, backend: ge, source: unranked.onnx}
  - {name: bf16, backend: ge, source: bf16.onnx, max_batch_size: 4,
     dynamic_batching: {max_queue_delay_microseconds: 200000}}
  - {name: no_input, backend: ge, source: no_input.onnx}
  - name: overridable
    backend: ge
    source: unranked.onnx
    inputs: [{name: x, data_type: FP32, dims: [2, -1]}, {name: scale, data_type: FP32, dims: [1]}]
"""
# Written by hand: a batch-only tensor declared dims [1] without Triton's reshape, and left to auto-complete
# (Triton's auto-complete API takes no reshape): the glue squeezes and expands it itself.
HAND_WRITTEN = {
    "batch_only_hand": """
        backend: "ge"
        max_batch_size: 4
        input [{ name: "score" data_type: TYPE_FP32 dims: [1] }]
        output [{ name: "doubled" data_type: TYPE_FP32 dims: [1] },
                { name: "over" data_type: TYPE_INT64 dims: [2] }]
        """,
    "batch_only_auto": """
        backend: "ge"
        max_batch_size: 4
        """,
}
MODELS = ("scalars", "batch_only", "types", "types_batched", "unranked", "overridable", "no_input", "bf16",
          *HAND_WRITTEN)
CLIENTS = (httpclient, grpcclient)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory,
           triton_dist: TritonDistribution) -> Iterator[RunningServer]:
    """The models built from one spec, validated without an error, served by one tritonserver."""
    root = tmp_path_factory.mktemp("shapes")
    for name, make in SOURCES.items():
        (root / f"{name}.onnx").write_bytes(make())
    build_repository(parse_spec(SPEC, base_dir=root), root / "repo")
    for name, config in HAND_WRITTEN.items():
        write_model(root / "repo", name, config, batch_only_model())
    install_backend_dir(root / "backends", triton_dist)
    report = validate_path(root / "repo", [root / "backends"])
    assert report.errors == (), [str(p) for p in report.errors]
    source = str(Path(__file__).resolve().parents[2] / "src")  # this checkout's package in the stubs
    with (server_env(PYTHONPATH=source, GE_GLUE_RUN_DIR=str(root / "run")),
          run_triton(triton_dist, root / "repo", root / "backends", models=MODELS) as running):
        yield running


@pytest.mark.parametrize("client_module", CLIENTS, ids=("http", "grpc"))
def test_scalar_input_and_output_are_served_as_dims_1(server: RunningServer, client_module: object) -> None:
    """sr (ONNX []) is sent as [1] and reaches the model as a scalar; total (ONNX []) comes back as [1]."""
    x = np.linspace(-1, 1, 7, dtype=np.float32)
    sr = np.array([16000], np.int64)
    got = infer(client_module, server.hostport(client_module), "scalars", {"x": x, "sr": sr})
    y, total = ort.InferenceSession(scalar_model()).run(None, {"x": x, "sr": sr.reshape(())})
    assert got["total"].shape == (1,) and got["y"].shape == (7,)
    np.testing.assert_allclose(got["y"], y, rtol=1e-6)
    np.testing.assert_allclose(got["total"], total.reshape(1), rtol=1e-6)


@pytest.mark.parametrize("client_module", CLIENTS, ids=("http", "grpc"))
def test_batch_only_tensor_is_reshaped_by_triton(server: RunningServer, client_module: object) -> None:
    """score (ONNX [N]) is sent as [N, 1]; Triton's own reshape hands the model [N] and doubled back as
    [N, 1], next to over [N, 2]."""
    score = np.array([[0.5], [1.5], [-2.0]], np.float32)
    got = infer(client_module, server.hostport(client_module), "batch_only", {"score": (score, "FP32")})
    doubled, over = ort.InferenceSession(batch_only_model()).run(None, {"score": score.reshape(3)})
    np.testing.assert_array_equal(got["doubled"], doubled.reshape(3, 1))
    np.testing.assert_array_equal(got["over"], over)


@pytest.mark.parametrize("model", tuple(HAND_WRITTEN))
@pytest.mark.parametrize("client_module", CLIENTS, ids=("http", "grpc"))
def test_batch_only_tensor_without_reshape_is_squeezed_by_the_glue(server: RunningServer,
                                                                   client_module: object, model: str) -> None:
    """Review mends: declared (or auto-completed) dims [1] without reshape, score reaches the model as [N]
    and doubled comes back as [N, 1] (the glue refused to load such a config: dims [-1, 1] against [-1])."""
    score = np.array([[0.5], [1.5], [-2.0]], np.float32)
    got = infer(client_module, server.hostport(client_module), model, {"score": (score, "FP32")})
    doubled, over = ort.InferenceSession(batch_only_model()).run(None, {"score": score.reshape(3)})
    np.testing.assert_array_equal(got["doubled"], doubled.reshape(3, 1))
    np.testing.assert_array_equal(got["over"], over)


@pytest.mark.parametrize("client_module", CLIENTS, ids=("http", "grpc"))
def test_every_type_the_glue_carries_round_trips(server: RunningServer, client_module: object) -> None:
    """FP16, BOOL, UINT8 and STRING (BYTES on the wire, text for the model) in and out, five outputs."""
    rng = np.random.default_rng(3)
    half = rng.standard_normal((2, 3)).astype(np.float16)
    flag = rng.integers(0, 2, (2, 4)).astype(bool)
    byte = np.array([[0, 254], [7, 128]], np.uint8)
    text = np.array([["héllo".encode(), b""], [b"ge", b"glue"]], dtype=np.object_)
    got = infer(client_module, server.hostport(client_module), "types", {
        "half": (half, "FP16"), "flag": (flag, "BOOL"), "byte": (byte, "UINT8"), "text": (text, "BYTES")})
    names = ("half_twice", "flag_not", "byte_next", "text_same", "flags_set")
    direct = dict(zip(names, ort.InferenceSession(types_model()).run(None, {
        "half": half, "flag": flag, "byte": byte,
        "text": np.array([[v.decode() for v in row] for row in text], dtype=np.object_)}), strict=True))
    assert got["half_twice"].dtype == np.float16 and got["flag_not"].dtype == np.bool_
    for name in ("half_twice", "flag_not", "byte_next"):
        np.testing.assert_array_equal(got[name], direct[name])
    assert got["text_same"].tolist() == [[s.encode() for s in row] for row in direct["text_same"]]
    np.testing.assert_array_equal(got["flags_set"], direct["flags_set"].reshape(2, 1))


def _bf16_direct(half: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """tripled (as bfloat16) and wide straight from ONNX Runtime, BF16 passed as a typed OrtValue and read
    back from its memory (ORT's .numpy() has no BF16)."""
    session = ort.InferenceSession(bf16_model(), providers=["CPUExecutionProvider"])
    tripled, wide = session.run_with_ort_values(["tripled", "wide"], {
        "half": ort.OrtValue.ortvalue_from_numpy_with_onnx_type(half.view(np.uint16), 16)})
    raw = ctypes.string_at(tripled.data_ptr(), 2 * int(np.prod(tripled.shape())))
    return np.frombuffer(raw, np.uint16).reshape(tripled.shape()).view(ml_dtypes.bfloat16), wide.numpy()


@pytest.mark.parametrize("client_module", CLIENTS, ids=("http", "grpc"))
def test_bf16_round_trips_through_the_glue(server: RunningServer, client_module: object) -> None:
    """A BF16 input reaches ONNX Runtime as BF16 and a BF16 output comes back bit for bit as ORT's."""
    half = np.array([[1.5, -2.0, 3.140625], [0.1, 65280.0, -0.0078125]], ml_dtypes.bfloat16)
    got = infer(client_module, server.hostport(client_module), "bf16", {"half": half})
    tripled, wide = _bf16_direct(half)
    assert got["tripled"].dtype == ml_dtypes.bfloat16 and got["tripled"].shape == (2, 3)
    np.testing.assert_array_equal(got["tripled"].view(np.uint16), tripled.view(np.uint16))
    np.testing.assert_array_equal(got["wide"], wide)
    np.testing.assert_array_equal(wide, half.astype(np.float32))  # the input reached the model unchanged


def test_bf16_requests_batched_together_split_back(server: RunningServer) -> None:
    """Three BF16 requests queued together (the batcher waits 200 ms) run in fewer executions than
    requests; each gets its own rows back, equal to ONNX Runtime's."""
    rows = [np.array([[float(i + 1), -0.5 * i, 1.0 / (i + 1)]], ml_dtypes.bfloat16) for i in range(3)]
    with httpclient.InferenceServerClient(server.http_hostport, concurrency=3) as client:
        pending = []
        for half in rows:
            tensor = httpclient.InferInput("half", list(half.shape), "BF16")
            tensor.set_data_from_numpy(half)
            pending.append(client.async_infer("bf16", [tensor]))
        for half, request in zip(rows, pending, strict=True):
            result = request.get_result()
            tripled, wide = _bf16_direct(half)
            np.testing.assert_array_equal(result.as_numpy("tripled").view(np.uint16), tripled.view(np.uint16))
            np.testing.assert_array_equal(result.as_numpy("wide"), wide)
        stats = client.get_inference_statistics("bf16")["model_stats"][0]
    assert stats["execution_count"] < stats["inference_count"]


def test_probe_and_load_generator_send_bf16(server: RunningServer) -> None:
    """The console's test request and the load generator build BF16 inputs (ml_dtypes.bfloat16) and
    the glue answers them over HTTP (binary tensors) and gRPC without an error."""
    probe = send_test_request(f"http://{server.http_hostport}", "bf16")
    assert probe.ok, probe.message
    for client_module in CLIENTS:
        protocol = "grpc" if client_module is grpcclient else "http"
        (row,) = run_load_sync(LoadSpec("bf16", server.hostport(client_module), protocol=protocol,
                                        concurrency=(1,), window_ms=300, warmup_ms=200, max_windows=3))
        assert row.requests > 0 and row.errors == 0, (protocol, row.first_error)


def test_bf16_in_a_json_body_is_a_spec_error(server: RunningServer) -> None:
    """KServe's JSON tensors have no BF16 form: asked for, the load generator says so in one line."""
    spec = LoadSpec("bf16", server.http_hostport, protocol="http", http_json_body=True, concurrency=(1,),
                    window_ms=300, warmup_ms=200, max_windows=3)
    refusal = r"^input half \(BF16\) cannot be sent as a JSON body: BF16 inputs must be sent as binary data"
    with pytest.raises(LoadSpecError, match=refusal):
        run_load_sync(spec)


@pytest.mark.parametrize("client_module", CLIENTS, ids=("http", "grpc"))
def test_output_of_unknown_rank_keeps_the_models_rank(server: RunningServer, client_module: object) -> None:
    """grid has no shape in the ONNX: declared dims [-1], it comes back with the rank the model gave it
    ([2, K, 1]); the input with a default (scale) is not asked for and keeps its default."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = infer(client_module, server.hostport(client_module), "unranked", {"x": (x, "FP32")})
    (grid,) = ort.InferenceSession(unranked_model()).run(None, {"x": x})
    assert got["grid"].shape == (2, 3, 1)
    np.testing.assert_array_equal(got["grid"], grid)


@pytest.mark.parametrize("client_module", CLIENTS, ids=("http", "grpc"))
def test_declared_default_is_optional_and_overrides(server: RunningServer, client_module: object) -> None:
    """scale has an initializer (3.0): declared in the spec it is an optional input; a request without it
    gets the default, one with it overrides it, both as ONNX Runtime answers."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    direct = ort.InferenceSession(unranked_model())
    default = infer(client_module, server.hostport(client_module), "overridable", {"x": (x, "FP32")})
    np.testing.assert_array_equal(default["grid"], direct.run(None, {"x": x})[0])
    scale = np.array([0.5], np.float32)
    override = infer(client_module, server.hostport(client_module), "overridable", {"x": x, "scale": scale})
    (expected,) = direct.run(None, {"x": x, "scale": scale.reshape(())})
    np.testing.assert_array_equal(override["grid"], expected)
    assert not np.array_equal(override["grid"], default["grid"])


@pytest.mark.parametrize("client_module", CLIENTS, ids=("http", "grpc"))
def test_a_model_without_inputs_answers(server: RunningServer, client_module: object) -> None:
    """Review mends: a graph with no inputs builds, validates and loads, so a request without inputs gets
    its output (every request failed with an IndexError in the glue)."""
    got = infer(client_module, server.hostport(client_module), "no_input", {})
    np.testing.assert_array_equal(got["table"], ort.InferenceSession(no_input_model()).run(None, {})[0])


def test_not_utf8_text_is_refused_with_the_reason(server: RunningServer) -> None:
    """A STRING element that is not UTF-8 fails its request alone, saying why."""
    feeds = {"half": (np.zeros((1, 3), np.float16), "FP16"), "flag": (np.zeros((1, 4), bool), "BOOL"),
             "byte": (np.zeros((1, 2), np.uint8), "UINT8"),
             "text": (np.array([[b"\xff\xfe", b"ok"]], dtype=np.object_), "BYTES")}
    with pytest.raises(Exception, match="not UTF-8"):
        infer(httpclient, server.hostport(httpclient), "types", feeds)


def test_not_utf8_text_fails_only_its_own_request_in_a_batch(server: RunningServer) -> None:
    """Review mends: batched with good requests (the dynamic batcher waits 200 ms for them), the request
    whose text is not UTF-8 fails alone; the others get their answers."""
    with httpclient.InferenceServerClient(server.http_hostport, concurrency=3) as client:
        pending = []
        for text in (b"good", b"\xff\xfe", b"fine"):
            tensors = []
            for name, array, kind in (("half", np.zeros((1, 3), np.float16), "FP16"),
                                      ("flag", np.zeros((1, 4), bool), "BOOL"),
                                      ("byte", np.zeros((1, 2), np.uint8), "UINT8"),
                                      ("text", np.array([[text, b"ok"]], dtype=np.object_), "BYTES")):
                tensor = httpclient.InferInput(name, list(array.shape), kind)
                tensor.set_data_from_numpy(array)
                tensors.append(tensor)
            pending.append((text, client.async_infer("types_batched", tensors)))
        for text, request in pending:
            if text == b"\xff\xfe":
                with pytest.raises(Exception, match="not UTF-8"):
                    request.get_result()
            else:
                assert request.get_result().as_numpy("text_same").tolist() == [[text, b"ok"]]


def test_batch_only_requests_batched_together_split_back(server: RunningServer) -> None:
    """Concurrent requests of a batch-only tensor (merged by the dynamic batcher) each get their own row."""
    with httpclient.InferenceServerClient(server.http_hostport, concurrency=4) as client:
        pending = []
        for value in (1.0, 2.0, 3.0, 4.0):
            tensor = httpclient.InferInput("score", [1, 1], "FP32")
            tensor.set_data_from_numpy(np.array([[value]], np.float32))
            pending.append((value, client.async_infer("batch_only", [tensor])))
        for value, request in pending:
            np.testing.assert_array_equal(request.get_result().as_numpy("doubled"), [[2 * value]])
