"""AclExecutor over the fake acl: load/execute/unload, buffers reused, batch gears, ACL codes, no leaks."""

from __future__ import annotations

import threading
from pathlib import Path
from types import ModuleType

import numpy as np
import onnxruntime as ort
import pytest

from tests.backend_glue.models import dense_model, token_model, write_fake_om
from triton_ge_console.backend_glue.acl_executor import AclError, AclExecutor
from triton_ge_console.backend_glue.executor import ExecutorError, TensorInfo

ALLOCATING_CALLS = ("rt.malloc", "rt.malloc_host", "create_data_buffer", "mdl.load_from_file")


def _ort(onnx: bytes, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Reference results from ONNX Runtime."""
    return list(ort.InferenceSession(onnx, providers=["CPUExecutionProvider"]).run(None, feeds))


def _no_leaks(acl: ModuleType) -> bool:
    """Whether the fake runtime holds nothing any more."""
    return not any(acl._state.leaks().values())


def test_static_om_loads_executes_and_frees_everything(fake_acl: ModuleType, tmp_path: Path) -> None:
    onnx = dense_model()
    executor = AclExecutor(write_fake_om(tmp_path, onnx, static_batch=2), device_id=3)
    assert executor.kind == "npu" and executor.gears == () and executor.max_batch is None
    assert executor.inputs == (TensorInfo("x", "FP32", (2, 4)),)
    assert [o.name for o in executor.outputs] == ["y", "z"]
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    outputs, stats = executor.run({"x": x})
    y, z = _ort(onnx, {"x": x})
    np.testing.assert_allclose(outputs["y"], y, atol=1e-6)
    np.testing.assert_allclose(outputs["z"], z, atol=1e-6)
    assert stats.h2d_bytes == x.nbytes and stats.d2h_bytes == y.nbytes + z.nbytes
    assert executor.memory_bytes > 0
    executor.close()
    executor.close()
    assert _no_leaks(fake_acl)


def test_buffers_are_allocated_once_not_per_request(fake_acl: ModuleType, tmp_path: Path) -> None:
    executor = AclExecutor(write_fake_om(tmp_path, dense_model(), gears=(1, 2, 4, 8)), device_id=0)
    calls = fake_acl._state.STATE.calls
    before = {name: calls[name] for name in ALLOCATING_CALLS}
    for batch in (1, 3, 8, 2, 5):
        executor.run({"x": np.ones((batch, 4), dtype=np.float32)})
    assert {name: calls[name] for name in ALLOCATING_CALLS} == before
    assert calls["mdl.execute"] == 5
    executor.close()
    assert _no_leaks(fake_acl)


def test_batch_is_padded_to_the_next_gear_and_sliced_back(fake_acl: ModuleType, tmp_path: Path) -> None:
    onnx = token_model()
    om = write_fake_om(tmp_path, onnx, gears=(1, 2, 4, 8), input_shape={"input_ids": [-1, 5]})
    executor = AclExecutor(om, device_id=0)
    assert executor.gears == (1, 2, 4, 8) and executor.max_batch == 8
    assert executor.inputs == (TensorInfo("input_ids", "INT64", (-1, 5)),)
    ids = np.random.default_rng(1).integers(0, 60, (3, 5)).astype(np.int64)
    outputs, stats = executor.run({"input_ids": ids})
    np.testing.assert_allclose(outputs["logits"], _ort(onnx, {"input_ids": ids})[0], atol=1e-5)
    assert outputs["logits"].shape[0] == 3
    assert stats.h2d_bytes == 4 * 5 * 8  # padded to gear 4
    (dataset,) = [d for d in fake_acl._state.STATE.datasets.values() if d.dynamic_batch is not None]
    assert dataset.dynamic_batch == 4
    with pytest.raises(ExecutorError, match="largest batch gear 8"):
        executor.run({"input_ids": np.zeros((9, 5), dtype=np.int64)})
    executor.close()
    assert _no_leaks(fake_acl)


def test_runs_from_another_thread_by_setting_its_context(fake_acl: ModuleType, tmp_path: Path) -> None:
    executor = AclExecutor(write_fake_om(tmp_path, dense_model(), gears=(1, 2)), device_id=1)
    results: list[np.ndarray] = []
    batch = {"x": np.ones((2, 4), np.float32)}
    thread = threading.Thread(target=lambda: results.append(executor.run(batch)[0]["y"]))
    thread.start()
    thread.join()
    assert results and results[0].shape == (2, 3)
    figures = executor.device_figures()
    assert figures is not None and figures.total_bytes and figures.used_bytes and figures.used_bytes > 0
    assert figures.utilization is not None and 0 < figures.utilization <= 1
    executor.close()
    assert _no_leaks(fake_acl)


def test_acl_errors_name_the_call_and_code_and_leave_nothing(fake_acl: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(AclError, match=r"acl\.mdl\.load_from_file\(.*missing.om\) failed .* 100003"):
        AclExecutor(tmp_path / "missing.om", device_id=0)
    assert _no_leaks(fake_acl)
    with pytest.raises(AclError, match=r"acl\.rt\.set_device failed with ACL error 107001"):
        AclExecutor(write_fake_om(tmp_path, dense_model()), device_id=42)
    (tmp_path / "garbage.om").write_bytes(b"\x00not an om")
    with pytest.raises(AclError, match="ACL error 100006"):
        AclExecutor(tmp_path / "garbage.om", device_id=0)
    assert _no_leaks(fake_acl)


def test_execute_error_is_surfaced_and_run_after_close_refused(fake_acl: ModuleType, tmp_path: Path) -> None:
    executor = AclExecutor(write_fake_om(tmp_path, dense_model(), gears=(1, 2)), device_id=0)
    fake_acl.mdl.unload(executor._model_id)  # the model vanishes underneath (device reset by someone else)
    with pytest.raises(AclError, match=r"acl\.mdl\.set_dynamic_batch_size\(1\) failed with ACL error 100011"):
        executor.run({"x": np.ones((1, 4), np.float32)})
    with pytest.raises(ExecutorError, match=r"teardown errors: acl\.mdl\.unload → 100011"):
        executor.close()
    with pytest.raises(ExecutorError, match="run after close"):
        executor.run({"x": np.ones((1, 4), np.float32)})
    assert _no_leaks(fake_acl)
