"""Snapshots of models served by the GE glue (CPU emulation): ge_device_* devices, execution mode, and
automatic trace sampling for `npu_ge` models (whose native backend reports no statistics)."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as triton_http

from tests.backend_glue.models import DENSE_CONFIG, dense_model, param, write_model
from tests.conftest import RunningServer, run_triton
from triton_ge_console.backend_glue.distribution import TritonDistribution
from triton_ge_console.backend_glue.installer import install_backend_dir
from triton_ge_console.sessions.live import LiveSource
from triton_ge_console.sessions.poller import Poller
from triton_ge_console.sessions.snapshot import Endpoints
from triton_ge_console.sessions.trace import TraceCollector, trace_server_args


@pytest.fixture(scope="module")
def glue_server(triton_dist: TritonDistribution, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[tuple[RunningServer, Path]]:
    """A server with one `ge` model and one `npu_ge` model, both run by the glue on CPU."""
    root = tmp_path_factory.mktemp("glue")
    repository = root / "repository"
    onnx = dense_model()
    write_model(repository, "dense", DENSE_CONFIG.format(backend="ge", extra=""), onnx)
    write_model(repository, "npu_dense", DENSE_CONFIG.format(backend="npu_ge", extra=param("DEVICEIDS", "0")),
                onnx)
    install_backend_dir(root / "backends", triton_dist)
    trace_file = root / "session" / "trace.json"
    trace_file.parent.mkdir()
    with run_triton(triton_dist, repository, root / "backends", ("dense", "npu_dense"),
                    trace_server_args(trace_file)) as server:
        yield server, trace_file


def test_glue_devices_mode_and_npu_ge_tracing(glue_server: tuple[RunningServer, Path]) -> None:
    """Devices come from ge_device_*, the model row carries its execution mode and device, and the npu_ge
    model gets TIMESTAMPS tracing switched on by the poller."""
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
    with urllib.request.urlopen(f"{server.http_url}/v2/models/npu_dense/trace/setting", timeout=30) as answer:
        assert json.loads(answer.read())["trace_level"] == ["TIMESTAMPS"]
    with urllib.request.urlopen(f"{server.http_url}/v2/models/dense/trace/setting", timeout=30) as answer:
        assert json.loads(answer.read())["trace_level"] == ["OFF"]


def test_traced_model_gets_percentiles_without_summaries(glue_server: tuple[RunningServer, Path]) -> None:
    """Summaries off: after trace_model, the poller's latency for that model comes from the trace file."""
    server, trace_file = glue_server
    source = LiveSource("traced", Endpoints(server.http_url, None, server.metrics_url), trace_file=trace_file)
    client = triton_http.InferenceServerClient(server.http_hostport)
    tensor = triton_http.InferInput("x", [1, 4], "FP32")
    tensor.set_data_from_numpy(np.ones((1, 4), dtype=np.float32))
    try:
        assert source.poll().model("dense").latency.source != "trace"  # type: ignore[union-attr]
        assert source.trace_model("dense", rate=1, log_frequency=2)
        latency = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            client.infer("dense", [tensor])
            latency = source.poll().model("dense").latency  # type: ignore[union-attr]
            if latency.source == "trace":
                break
    finally:
        source.close()
        client.close()
    assert latency is not None and latency.source == "trace"
    assert latency.p50_ms is not None and latency.p99_ms is not None and 0 < latency.p50_ms <= latency.p99_ms
    attached = LiveSource("attached", Endpoints(server.http_url, None, None))  # no trace file of its own
    assert not attached.trace_model("dense")
    attached.close()
