"""Snapshots of models served by the GE glue (CPU emulation): ge_device_* devices, execution mode, and
automatic trace sampling of every model on a server without latency summaries (`npu_ge`'s native backend
reports no statistics at all)."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.http as triton_http
from tritonclient.utils import InferenceServerException

from tests.conftest import RunningServer, run_triton
from tests.models import DENSE_CONFIG, dense_model, param, write_model
from tests.waiting import wait_until
from triton_ge_console.backend_glue.distribution import TritonDistribution
from triton_ge_console.backend_glue.installer import install_backend_dir
from triton_ge_console.sessions.live import LiveSource
from triton_ge_console.sessions.observe.poller import Poller
from triton_ge_console.sessions.observe.snapshot import Endpoints, Latency, ModelSnapshot
from triton_ge_console.sessions.observe.stats import HttpEndpoint
from triton_ge_console.sessions.observe.trace import TraceCollector, disable_tracing, trace_server_args
from triton_ge_console.triton_terms import MODEL_UNAVAILABLE


@pytest.fixture(scope="module")
def glue_server(triton_dist: TritonDistribution, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[tuple[RunningServer, Path]]:
    """A server with two `ge` models and one `npu_ge` model, all run by the glue on CPU; `loose`'s config
    lets through shapes its ONNX cannot take, which the glue answers with an error."""
    root = tmp_path_factory.mktemp("glue")
    repository = root / "repository"
    onnx = dense_model()
    write_model(repository, "dense", DENSE_CONFIG.format(backend="ge", extra=""), onnx)
    loose = DENSE_CONFIG.format(backend="ge", extra="").replace("dims: [4]", "dims: [-1]")
    write_model(repository, "loose", loose, onnx)
    write_model(repository, "npu_dense", DENSE_CONFIG.format(backend="npu_ge", extra=param("DEVICEIDS", "0")),
                onnx)
    install_backend_dir(root / "backends", triton_dist)
    trace_file = root / "session" / "trace.json"
    trace_file.parent.mkdir()
    with run_triton(triton_dist, repository, root / "backends", ("dense", "npu_dense", "loose"),
                    trace_server_args(trace_file)) as server:
        yield server, trace_file


def test_glue_devices_mode_and_tracing(glue_server: tuple[RunningServer, Path]) -> None:
    """Devices come from ge_device_*, the model row carries its execution mode and device, and both models
    (summaries are off) get sampled TIMESTAMPS tracing switched on by the poller."""
    server, trace_file = glue_server
    client = triton_http.InferenceServerClient(server.http_hostport)
    endpoints = Endpoints(server.http_url, None, server.metrics_url)
    poller = Poller("glue", endpoints, trace=TraceCollector(trace_file))
    try:
        poller.poll()
        tensor = triton_http.InferInput("x", [2, 4], "FP32")
        tensor.set_data_from_numpy(np.ones((2, 4), dtype=np.float32))
        for model in ("dense", "npu_dense"):
            client.infer(model, [tensor])
        snapshot = poller.poll()
    finally:
        poller.close()
        client.close()
    device = next(d for d in snapshot.devices if d.id == "0")
    assert device.kind == "cpu-emulated" and device.source == "ge-glue"
    assert device.memory_total_bytes and device.memory_total_bytes > 0
    dense = snapshot.model("dense")
    assert dense is not None and dense.backend == "ge" and dense.execution_mode == "cpu-emulated"
    assert dense.devices == ("0",) and dense.success_total == 1 and dense.latency.source is not None
    for model in ("dense", "npu_dense"):
        assert _trace_setting(server, model)["trace_level"] == ["TIMESTAMPS"]


def _trace_setting(server: RunningServer, model: str) -> dict[str, Any]:
    """Triton's trace setting for one model."""
    with urllib.request.urlopen(f"{server.http_url}/v2/models/{model}/trace/setting", timeout=30) as answer:
        setting: dict[str, Any] = json.loads(answer.read())
    return setting


def test_percentiles_come_from_traces_without_summaries(glue_server: tuple[RunningServer, Path]) -> None:
    """Summaries off, tracing off at first: the live source turns sampled tracing on by itself (every
    request of an idle model) and p50/p99 come from the trace file; an attached source (no trace file of
    its own) traces nothing and shows no percentiles."""
    server, trace_file = glue_server
    http = HttpEndpoint(server.http_url)
    for model in ("dense", "npu_dense"):
        disable_tracing(http, model)
    http.close()
    source = LiveSource("traced", Endpoints(server.http_url, None, server.metrics_url), trace_file=trace_file)
    attached = LiveSource("attached", Endpoints(server.http_url, None, server.metrics_url))
    client = triton_http.InferenceServerClient(server.http_hostport)
    tensor = triton_http.InferInput("x", [1, 4], "FP32")
    tensor.set_data_from_numpy(np.ones((1, 4), dtype=np.float32))

    def traced() -> Latency | None:
        client.infer("dense", [tensor])
        latency = source.poll().model("dense").latency  # type: ignore[union-attr]
        return latency if latency.source == "trace" else None

    try:
        source.poll()
        setting = _trace_setting(server, "dense")
        latency = wait_until(traced, 60, what="dense's latency from traces")
        seen_attached = attached.poll().model("dense")
    finally:
        source.close()
        attached.close()
        client.close()
    assert setting["trace_level"] == ["TIMESTAMPS"] and setting["trace_rate"] == "1" and latency is not None
    assert latency.p50_ms is not None and latency.p90_ms is not None and latency.p99_ms is not None
    assert 0 < latency.p50_ms <= latency.p90_ms <= latency.p99_ms
    assert seen_attached is not None and seen_attached.latency.source in (None, "statistics")  # no p50/p99
    assert seen_attached.latency.p50_ms is None and seen_attached.latency.p99_ms is None
    assert not attached.trace_model("dense")


def _index_state(client: triton_http.InferenceServerClient, model: str) -> str | None:
    """The model's state in Triton's repository index."""
    return next((e.get("state") for e in client.get_model_repository_index() if e["name"] == model), None)


def test_the_glues_error_responses_count_as_failures(glue_server: tuple[RunningServer, Path]) -> None:
    """Triton 2.51 counts a Python backend's error responses as successes; the glue counts them itself and
    the console moves them to failures (reason BACKEND): a model failing every request reads FAILING."""
    server, _trace_file = glue_server
    client = triton_http.InferenceServerClient(server.http_hostport)
    good, bad = (triton_http.InferInput("x", [1, width], "FP32") for width in (4, 5))
    good.set_data_from_numpy(np.ones((1, 4), dtype=np.float32))
    bad.set_data_from_numpy(np.ones((1, 5), dtype=np.float32))
    poller = Poller("glue", Endpoints(server.http_url, None, server.metrics_url))

    def counted(success: float, failure: float) -> ModelSnapshot | None:
        """The model once its counts read so (Triton counts a response just after sending it)."""
        model = poller.poll().model("loose")
        return model if model is not None and (model.success_total, model.failure_total) == (
            success, failure) else None

    try:
        before = poller.poll().model("loose")
        assert before is not None and before.success_total is not None and before.failure_total is not None
        client.infer("loose", [good])
        for _ in range(3):
            with pytest.raises(InferenceServerException, match=r"input x has shape \[1, 5\]"):
                client.infer("loose", [bad])
        middle = wait_until(lambda: counted(before.success_total + 1, before.failure_total + 3), 30,
                            what="1 success and 3 failures counted")
        for _ in range(2):
            with pytest.raises(InferenceServerException):
                client.infer("loose", [bad])
        after = poller.poll().model("loose")  # failures rose since `middle`, successes did not: FAILING
        wait_until(lambda: counted(before.success_total + 1, before.failure_total + 5), 30,
                   what="2 more failures, no more successes")
        client.unload_model("loose")  # Triton's counts start afresh, the glue's carry on: not 5 failures
        # Triton's unload returns before the model is gone (TRITONSERVER_ServerUnloadModel does not wait): a
        # load in that gap found the old one still there and its counts went on (seen once in a full run)
        wait_until(lambda: _index_state(client, "loose") == MODEL_UNAVAILABLE, 30, what="loose unloaded")
        client.load_model("loose")
        client.infer("loose", [good])
        reloaded = wait_until(lambda: counted(1, 0), 30, what="1 success, no failure, after the new load")
        fresh = Poller("fresh", Endpoints(server.http_url, None, server.metrics_url))  # a console opened now
        try:
            first_look = fresh.poll().model("loose")
        finally:
            fresh.close()
    finally:
        poller.close()
        client.close()
    assert dict(middle.failures_by_reason)["BACKEND"] == 3
    assert after is not None and after.health == "FAILING" and after.success_total == middle.success_total
    assert reloaded.health == "OK"
    # the glue noted where its count stood at the load: the earlier load's 5 failures are not this one's
    assert first_look is not None and (first_look.success_total, first_look.failure_total) == (1, 0)
