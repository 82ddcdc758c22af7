"""The batching invariant, through a real tritonserver and the glue: for every model the suite builds with
batching, N requests Triton joins into one execution (it waits for them: max_batch_size N, a long
max_queue_delay) answer exactly what each answers alone, over HTTP and gRPC. Triton's statistics must show
the requests joined, or the test says it tested nothing. A model that mixes requests, served by hand past
validate's refusal, shows the check can fail."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx as onnx_lib
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests.backend_glue.conftest import server_env
from tests.conftest import RunningServer, run_triton
from tests.models import (
    across_batch_model,
    batch_at_model,
    batch_only_model,
    dense_model,
    image_model,
    infer_joined,
    reference,
    token_model,
    types_model,
    write_model,
)
from triton_ge_console.backend_glue.distribution import TritonDistribution
from triton_ge_console.backend_glue.installer import install_backend_dir
from triton_ge_console.repository import demo_models
from triton_ge_console.repository.build import build_repository
from triton_ge_console.repository.spec.load import parse_spec
from triton_ge_console.repository.validate import validate_path

JOINED = 3  # requests sent at once; max_batch_size 3 runs them as soon as all three are queued
Feeds = dict[str, np.ndarray]
RNG = np.random.default_rng(38)
SOURCES: dict[str, tuple[Callable[[], bytes], Callable[[], Feeds]]] = {
    "batch_at_0": (lambda: batch_at_model(0),
                   lambda: {"x": RNG.standard_normal((1, 2, 3)).astype(np.float32)}),
    "dense": (dense_model, lambda: {"x": RNG.standard_normal((1, 4)).astype(np.float32)}),
    "token": (token_model, lambda: {"input_ids": RNG.integers(0, 64, (1, 5)).astype(np.int64)}),
    "image": (image_model, lambda: {"x": RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)}),
    "llama": (lambda: demo_models.demo_bytes("demo:llama"),
              lambda: {"input_ids": RNG.integers(0, 32000, (1, 6)).astype(np.int64)}),
    "types": (types_model, lambda: {  # every type the glue carries; flags_set is batch-only ([N] → [N, 1])
        "half": RNG.standard_normal((1, 3)).astype(np.float16),
        "flag": RNG.integers(0, 2, (1, 4)).astype(bool),
        "byte": RNG.integers(0, 255, (1, 2)).astype(np.uint8),
        "text": np.array([[f"w{RNG.integers(99)}", "é"]], dtype=object)}),
    "batch_only": (batch_only_model, lambda: {"score": RNG.standard_normal((1, 1)).astype(np.float32)}),
    "bert": (lambda: demo_models.demo_bytes("demo:bert"),
             lambda: {"input_ids": RNG.integers(0, 30522, (1, 6)).astype(np.int64),
                      "attention_mask": np.array([[1, 1, 1, 1, 0, 0]], np.int64)}),
}
BATCHED = ("max_batch_size: 3, dynamic_batching: {max_queue_delay_microseconds: 30000000}, "
           "instance_group: {count: 1}")
MIXING = """
backend: "ge"
max_batch_size: 3
dynamic_batching { max_queue_delay_microseconds: 30000000 }
instance_group [{ count: 1 kind: KIND_CPU }]
"""  # batch_mean served by hand: validate refuses it, Triton loads it
CLIENTS = (httpclient, grpcclient)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory,
           triton_dist: TritonDistribution) -> Iterator[RunningServer]:
    """Every batching model built from one spec (validated clean) beside the hand-written mixing one."""
    root = tmp_path_factory.mktemp("batching")
    lines = ["name: batching", "models:"]
    for name, (make, _) in SOURCES.items():
        (root / f"{name}.onnx").write_bytes(make())
        lines.append(f"  - {{name: {name}, backend: ge, source: {name}.onnx, {BATCHED}}}")
    build_repository(parse_spec("\n".join(lines) + "\n", base_dir=root), root / "repo")
    install_backend_dir(root / "backends", triton_dist)
    assert validate_path(root / "repo", [root / "backends"]).errors == ()
    write_model(root / "repo", "batch_mean", MIXING, across_batch_model("batch_mean"))
    source = str(Path(__file__).resolve().parents[2] / "src")  # this checkout's package in the stubs
    with (server_env(PYTHONPATH=source, GE_GLUE_RUN_DIR=str(root / "run")),
          run_triton(triton_dist, root / "repo", root / "backends",
                     models=(*SOURCES, "batch_mean")) as running):
        yield running


def _mixed(solo: list[list[np.ndarray]], joined: list[Feeds], names: list[str]) -> list[str]:
    """Which requests' joined answers are not their solo answers (ORT on each alone)."""
    return [f"request {index}: output {name}"
            for index, (alone, got) in enumerate(zip(solo, joined, strict=True))
            for name, expected in zip(names, alone, strict=True) if not _same(got[name], expected)]


def _same(got: np.ndarray, expected: np.ndarray) -> bool:
    """Triton's answer is ORT's: floats up to a batch's rounding, everything else exactly (text as UTF-8
    bytes); a batch-only output ORT gives as [1] comes back as [1, 1] (Triton's reshape)."""
    if got.size != expected.size or (got.shape != expected.shape and got.shape != (*expected.shape, 1)):
        return False
    expected = expected.reshape(got.shape)
    if expected.dtype == object:
        return got.tolist() == [[s.encode() for s in row] for row in expected.tolist()]
    if expected.dtype.kind == "f":
        return bool(np.allclose(got, expected, rtol=1e-5, atol=1e-5))
    return bool(np.array_equal(got, expected))


def _solo(onnx: bytes, requests: list[Feeds]) -> list[list[np.ndarray]]:
    """Each request's answer alone: ONNX Runtime in this process, one request at a time (a batch-only
    input sent as [1, 1] handed over as the ONNX's [1], as Triton's reshape does)."""
    ranks = {v.name: len(v.type.tensor_type.shape.dim) for v in onnx_lib.load_from_string(onnx).graph.input}
    return [reference(onnx, {name: array.reshape(array.shape[:ranks[name]]) for name, array in feeds.items()})
            for feeds in requests]


@pytest.mark.parametrize("client_module", CLIENTS, ids=("http", "grpc"))
@pytest.mark.parametrize("model", sorted(SOURCES))
def test_joined_requests_answer_as_each_alone(server: RunningServer, model: str, client_module: Any) -> None:
    """N different requests joined by Triton: each gets exactly its own answer (as ONNX Runtime gives it
    for the request alone, up to float rounding of a batch's kernels)."""
    make, feeds = SOURCES[model]
    requests = [feeds() for _ in range(JOINED)]
    joined = infer_joined(client_module, server.hostport(client_module), model, requests)
    onnx = make()
    names = [o.name for o in onnx_lib.load_from_string(onnx).graph.output]
    assert _mixed(_solo(onnx, requests), joined, names) == []


@pytest.mark.parametrize("client_module", CLIENTS, ids=("http", "grpc"))
def test_the_check_finds_a_model_that_mixes_requests(server: RunningServer, client_module: Any) -> None:
    """batch_mean (its batch mean subtracted), served past validate's refusal: joined, every request's
    answer is wrong, and the check above says so."""
    requests = [{"x": RNG.standard_normal((1, 4)).astype(np.float32)} for _ in range(JOINED)]
    joined = infer_joined(client_module, server.hostport(client_module), "batch_mean", requests)
    assert _mixed(_solo(across_batch_model("batch_mean"), requests), joined, ["y"]) == [
        f"request {i}: output y" for i in range(JOINED)]
