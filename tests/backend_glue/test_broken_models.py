"""Broken models are UNAVAILABLE with a message naming the cause; reloads keep serving and counting."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tests.backend_glue.conftest import server_env
from tests.backend_glue.metrics import metric_samples, model_value
from tests.conftest import RunningServer, run_triton
from tests.models import DENSE_CONFIG, dense_model, infer, param, write_model
from tests.waiting import wait_until
from triton_ge_console.backend_glue.distribution import TritonDistribution
from triton_ge_console.backend_glue.installer import install_backend_dir
from triton_ge_console.sessions.observe.poller import Poller
from triton_ge_console.sessions.observe.snapshot import Endpoints

WRONG_INPUT = DENSE_CONFIG.replace('name: "x"', 'name: "pixels"')


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory,
           triton_dist: TritonDistribution) -> Iterator[RunningServer]:
    """A server whose repository holds broken models (loaded one by one by the tests) and a good one."""
    root = tmp_path_factory.mktemp("broken")
    install_backend_dir(root / "backends", triton_dist)
    repo = root / "repo"
    write_model(repo, "missing_onnx", DENSE_CONFIG.format(backend="ge", extra=param("onnx_model_path",
                                                                                     "gone.onnx")), None)
    write_model(repo, "no_model_file", DENSE_CONFIG.format(backend="npu_ge", extra=""), None)
    write_model(repo, "wrong_input", WRONG_INPUT.format(backend="ge", extra=""), dense_model())
    write_model(repo, "too_big", DENSE_CONFIG.format(backend="ge", extra=param("npu_memory_gib", "0.000001")),
                dense_model())
    write_model(repo, "reloaded", DENSE_CONFIG.format(backend="ge", extra=""), dense_model())
    npu_only = DENSE_CONFIG.format(backend="ge", extra=param("execution_mode", "npu"))
    write_model(repo, "npu_without_acl", npu_only, dense_model())
    with (server_env(GE_GLUE_RUN_DIR=str(root / "run")),
          run_triton(triton_dist, repo, root / "backends", models=("reloaded",)) as running):
        running.repo = repo  # type: ignore[attr-defined]
        yield running


def _load_error(server: RunningServer, model: str) -> str:
    """Load a model that must fail; returns the error Triton answered with."""
    with httpclient.InferenceServerClient(server.http_hostport) as client:
        with pytest.raises(InferenceServerException) as failure:
            client.load_model(model)
        return str(failure.value)


def _index_entry(server: RunningServer, model: str) -> dict[str, str]:
    """The model's repository index entry (state and reason)."""
    with httpclient.InferenceServerClient(server.http_hostport) as client:
        return next(e for e in client.get_model_repository_index() if e["name"] == model)


@pytest.mark.parametrize(("model", "cause"), [
    ("missing_onnx", "ONNX model {repo}/missing_onnx/1/gone.onnx does not exist"),
    ("no_model_file", "no ONNX model for CPU emulation: no *.onnx in {repo}/no_model_file/1"),
    ("npu_without_acl", "model npu_without_acl ({repo}/npu_without_acl/config.pbtxt): execution_mode npu: "
                        "CANN's acl module is not importable here"),
    ("wrong_input", "input[0].name 'pixels': {repo}/wrong_input/1/model.onnx has no input of that name "
                    "(it has: x)"),
    # 0.000001 GiB is 1073 B; `reloaded` (219 B of ONNX + 320 B of I/O buffers) already holds 539 of them
    ("too_big", "model too_big does not fit in device 0 memory: it needs 539 B, 534 B of 1.0 KiB are free "
                "(in use: reloaded 539 B)"),
])
def test_broken_model_is_unavailable_with_its_cause(server: RunningServer, model: str, cause: str) -> None:
    expected = cause.format(repo=server.repo)  # type: ignore[attr-defined]
    assert expected in _load_error(server, model)
    entry = _index_entry(server, model)
    assert entry["state"] == "UNAVAILABLE" and expected in entry["reason"]


def test_metrics_keep_working_across_reloads(server: RunningServer) -> None:
    batch_of_two = {"x": np.ones((2, 4), np.float32)}
    before = infer(httpclient, server.http_hostport, "reloaded", batch_of_two)["y"]
    assert wait_until(lambda: model_value(server, "ge_inferences_total", "reloaded") == 2)
    config = server.repo / "reloaded" / "config.pbtxt"  # type: ignore[attr-defined]
    config.write_text(config.read_text() + param("intra_op_threads", "1") + "\n")
    with httpclient.InferenceServerClient(server.http_hostport) as client:
        client.load_model("reloaded")
        assert client.is_model_ready("reloaded")
    np.testing.assert_allclose(infer(httpclient, server.http_hostport, "reloaded", batch_of_two)["y"], before,
                               atol=1e-6)
    infer(httpclient, server.http_hostport, "reloaded", batch_of_two)
    # Triton loads the new instance before unloading the old one, so the new instance joins the same
    # series and the counter carries on (2 + 4); were the old one gone first, it would restart at 4.
    assert wait_until(lambda: model_value(server, "ge_inferences_total", "reloaded") in (4, 6))
    infos = [s for s in metric_samples(server, "ge_model_info") if s.labels["model"] == "reloaded"]
    assert len(infos) == 1


def test_reload_gives_the_old_instances_memory_back(server: RunningServer) -> None:
    def used() -> float:
        return sum(s.value for s in metric_samples(server, "ge_device_memory_used_bytes")
                   if s.labels["device"] == "0")

    unloaded = "successfully unloaded 'reloaded' version 1"
    before = server.log().count(unloaded)
    with httpclient.InferenceServerClient(server.http_hostport) as client:
        client.load_model("reloaded")
        one_instance = len(dense_model()) + 8 * (4 + 3 + 3) * 4  # ONNX bytes + I/O buffers at max batch
        assert wait_until(lambda: server.log().count(unloaded) > before)  # the old instance has ended
        assert wait_until(lambda: used() == one_instance)
    # the old instance, ending after the new one started, leaves the series at what the new one holds
    assert model_value(server, "ge_model_memory_bytes", "reloaded") == one_instance


def test_an_unloaded_model_frees_its_share_of_the_device_figures(
        tmp_path: Path, triton_dist: TritonDistribution) -> None:
    """`kept` and `dropped` share NPU 0, `alone` has NPU 1 to itself: once unloaded, a model's
    ge_model_memory_bytes reads 0, each NPU's ge_device_memory_used_bytes what the others still hold, and
    the emulated NPU 1, busy with `alone` until then, idles at 0 (Triton keeps a series an ended stub
    held, at its last value, for as long as it runs)."""
    install_backend_dir(tmp_path / "backends", triton_dist)
    repo = tmp_path / "repo"
    for name, device in (("kept", "0"), ("dropped", "0"), ("alone", "1")):
        write_model(repo, name, DENSE_CONFIG.format(backend="ge", extra=param("device_ids", device)),
                    dense_model())
    share = len(dense_model()) + 8 * (4 + 3 + 3) * 4  # ONNX bytes + I/O buffers at max batch

    models = ("kept", "dropped", "alone")
    with (server_env(GE_GLUE_RUN_DIR=str(tmp_path / "run")),
          run_triton(triton_dist, repo, tmp_path / "backends", models=models) as server):
        def used(device: str) -> float:
            return sum(s.value for s in metric_samples(server, "ge_device_memory_used_bytes")
                       if s.labels["device"] == device)

        def utilization(device: str) -> float | None:
            return next((s.value for s in metric_samples(server, "ge_device_utilization_ratio")
                         if s.labels["device"] == device), None)

        assert wait_until(lambda: (used("0"), used("1")) == (2 * share, share))
        infer(httpclient, server.http_hostport, "alone", {"x": np.ones((8, 4), np.float32)})
        assert wait_until(lambda: (utilization("1") or 0.0) > 0.0)
        with httpclient.InferenceServerClient(server.http_hostport) as client:
            client.unload_model("dropped")
            client.unload_model("alone")
        for model in ("dropped", "alone"):
            assert wait_until(lambda m=model: _index_entry(server, m)["state"] == "UNAVAILABLE")
        assert wait_until(lambda: (used("0"), used("1")) == (share, 0), timeout=10)
        assert wait_until(lambda: utilization("1") == 0.0)
        assert model_value(server, "ge_model_memory_bytes", "dropped") == 0
        assert model_value(server, "ge_model_memory_bytes", "alone") == 0
        assert model_value(server, "ge_model_memory_bytes", "kept") == share
        poller = Poller("unloaded", Endpoints(server.http_url, None, server.metrics_url))
        try:
            snapshot = poller.poll()
        finally:
            poller.close()
    dropped = snapshot.model("dropped")
    assert dropped is not None and dropped.state == "UNAVAILABLE" and dropped.memory_by_device == ()
    assert snapshot.models_by_device() == {"0": [("kept", share)]}  # an unloaded model is on no NPU
