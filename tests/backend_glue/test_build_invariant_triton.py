"""The build invariant's last step, on a representative sample: what build writes and validate passes also
loads in a real tritonserver (tests/repository/test_build_invariant.py holds the property over all ONNX)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from onnx import TensorProto

from tests.backend_glue.conftest import server_env
from tests.conftest import RunningServer, run_triton
from tests.repository.invariant import MADE, SHIPPED, Port, check_build_invariant, passthrough_model
from triton_ge_console.backend_glue.distribution import TritonDistribution
from triton_ge_console.backend_glue.installer import install_backend_dir
from triton_ge_console.repository.build import build_repository
from triton_ge_console.repository.spec.load import parse_spec
from triton_ge_console.repository.validate import validate_path

# generated graphs, one per kind of shape and type the glue maps: name → (inputs, max_batch_size)
GENERATED: dict[str, tuple[tuple[Port, ...], int]] = {
    "gen_scalar_text": ((Port("sr", TensorProto.STRING, (), True),
                         Port("input.1", TensorProto.FLOAT16, ("N", 3), False)), 0),
    "gen_batched": ((Port("encoder/ids", TensorProto.INT64, ("N",), True),
                     Port("x", TensorProto.BOOL, ("N", 2), True)), 2),
    "gen_fixed": ((Port("ids:0", TensorProto.UINT16, (2, 3), True),
                   Port("state", TensorProto.INT8, (2, "N", 4), True)), 0),
    "gen_any_rank": ((Port("x", TensorProto.FLOAT, None, True),), 0),
    # names config.pbtxt must escape (a quote, a backslash, a line break) or that are not ASCII
    "gen_odd_names": ((Port('say "hi"', TensorProto.FLOAT, ("N", 2), True),
                       Port("c:\\d", TensorProto.INT64, ("N", 2), True),
                       Port("two\nlines", TensorProto.FLOAT, ("N", 2), True),
                       Port("déjà vu", TensorProto.STRING, ("N", 2), True)), 2),
}
# a slice of the onnx wheel's models that build (every 6th: real architectures, converted PyTorch modules)
SAMPLE = {f"shipped_{i}": path for i, path in enumerate(
    [p for p in SHIPPED if check_build_invariant(p, 0) == "built"][::6])}
OWN = {"mixed": 0, "nonzero": 0, "token": 4}  # the suite's models no other server test serves so
NUMPY = {TensorProto.STRING: np.object_, TensorProto.FLOAT16: np.float16, TensorProto.INT64: np.int64,
         TensorProto.BOOL: np.bool_, TensorProto.UINT16: np.uint16, TensorProto.INT8: np.int8,
         TensorProto.FLOAT: np.float32}
WIRE = {TensorProto.STRING: "BYTES", TensorProto.FLOAT16: "FP16", TensorProto.INT64: "INT64",
        TensorProto.BOOL: "BOOL", TensorProto.UINT16: "UINT16", TensorProto.INT8: "INT8",
        TensorProto.FLOAT: "FP32"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory,
           triton_dist: TritonDistribution) -> Iterator[RunningServer]:
    """The sample built from one spec and validated without an error, then loaded by one tritonserver."""
    root = tmp_path_factory.mktemp("invariant")
    sources: dict[str, tuple[Path, int]] = {name: (path, 0) for name, path in SAMPLE.items()}
    for name, batch in OWN.items():
        (root / f"{name}.onnx").write_bytes(MADE[name]())
        sources[name] = (root / f"{name}.onnx", batch)
    for name, (ports, batch) in GENERATED.items():
        (root / f"{name}.onnx").write_bytes(passthrough_model(ports))
        sources[name] = (root / f"{name}.onnx", batch)
    spec = "name: sample\nmodels:\n" + "".join(
        f"  - {{name: {name}, backend: ge, source: '{path}', max_batch_size: {batch}}}\n"
        for name, (path, batch) in sources.items())
    build_repository(parse_spec(spec, base_dir=root), root / "repo")
    install_backend_dir(root / "backends", triton_dist)
    report = validate_path(root / "repo", [root / "backends"])
    assert report.errors == (), [str(p) for p in report.errors]
    source = str(Path(__file__).resolve().parents[2] / "src")  # this checkout's package in the stubs
    with (server_env(PYTHONPATH=source, GE_GLUE_RUN_DIR=str(root / "run")),
          run_triton(triton_dist, root / "repo", root / "backends", models=tuple(sources)) as running):
        yield running


def test_every_model_of_the_sample_is_ready(server: RunningServer) -> None:
    """Triton loads each model the build wrote and validate passed (the sample: the onnx wheel's every
    25th model, the suite's own and generated graphs)."""
    with httpclient.InferenceServerClient(server.http_hostport) as client:
        states = {e["name"]: e.get("state") for e in client.get_model_repository_index()}
    expected = {*SAMPLE, *OWN, *GENERATED}
    assert {name: states.get(name) for name in expected} == dict.fromkeys(expected, "READY"), server.log()


def _array(port: Port, batch: int) -> np.ndarray:
    """A request's value for one generated input: its shape with symbolic dims 2, a batch dim first when
    the model batches (a scalar sent as [1], an input of unknown rank as its dims [-1] say: one dim)."""
    dims = [5] if port.shape is None else [2 if isinstance(d, str) else d for d in port.shape]
    full = [2, *(dims[1:] or [1])] if batch else dims or [1]  # a batch-only [N] is sent as [N, 1]
    if port.elem_type == TensorProto.STRING:
        return np.array([f"t{i}".encode() for i in range(int(np.prod(full)))], dtype=np.object_).reshape(full)
    return np.arange(int(np.prod(full))).reshape(full).astype(NUMPY[port.elem_type])


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_generated_graph_passes_its_inputs_through(server: RunningServer, name: str) -> None:
    """Each generated graph's outputs equal its inputs, whatever the shape and type."""
    ports, batch = GENERATED[name]
    arrays = {p.name: _array(p, batch) for p in ports}
    inputs = []
    for port in ports:
        tensor = httpclient.InferInput(port.name, list(arrays[port.name].shape), WIRE[port.elem_type])
        tensor.set_data_from_numpy(arrays[port.name])
        inputs.append(tensor)
    with httpclient.InferenceServerClient(server.http_hostport) as client:
        result = client.infer(name, inputs)
    for port in ports:
        np.testing.assert_array_equal(result.as_numpy(f"{port.name}_out"), arrays[port.name])

