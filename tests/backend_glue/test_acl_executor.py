"""AclExecutor over the fake acl, as each CANN version it imitates: load/execute/unload, buffers reused,
batch gears, ATC's output names, ACL and GE codes, device figures, shutdown order, no leaks."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import ModuleType, SimpleNamespace

import ml_dtypes
import numpy as np
import pytest

from tests.fakes import om_layout
from tests.models import bf16_model, dense_model, mixed_model, reference, token_model, write_fake_om
from tests.waiting import wait_until
from triton_ge_console.backend_glue.acl_executor import AclError, AclExecutor
from triton_ge_console.backend_glue.executor import ExecutorError, TensorInfo
from triton_ge_console.backend_glue.ledger import DeviceLedger
from triton_ge_console.backend_glue.loading import match_outputs_by_index
from triton_ge_console.backend_glue.telemetry import _DeviceGauges
from triton_ge_console.backend_glue.triton_model import TritonPythonModel

ALLOCATING_CALLS = ("rt.malloc", "rt.malloc_host", "create_data_buffer", "mdl.load_from_file")


def _no_leaks(acl: ModuleType) -> bool:
    """Whether the fake runtime holds nothing any more."""
    return not any(acl._state.leaks().values())


def test_static_om_loads_executes_and_frees_everything(any_cann: ModuleType, tmp_path: Path) -> None:
    fake_acl = any_cann
    onnx = dense_model()
    executor = AclExecutor(write_fake_om(tmp_path, onnx, static_batch=2), device_id=3)
    assert executor.kind == "npu" and executor.gears == () and executor.max_batch is None
    assert executor.inputs == (TensorInfo("x", "FP32", (2, 4)),)
    assert [o.name for o in executor.outputs] == ["y", "z"]
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    outputs, stats = executor.run({"x": x})
    y, z = reference(onnx, {"x": x})
    np.testing.assert_allclose(outputs["y"], y, atol=1e-6)
    np.testing.assert_allclose(outputs["z"], z, atol=1e-6)
    assert stats.h2d_bytes == x.nbytes and stats.d2h_bytes == y.nbytes + z.nbytes
    assert executor.memory_bytes > 0
    executor.close()
    executor.close()
    assert _no_leaks(fake_acl)


def test_a_bf16_om_runs_with_bfloat16_arrays(fake_acl: ModuleType, tmp_path: Path) -> None:
    """An OM with BF16 (ACL_BF16, 27) inputs and outputs: described as BF16, fed and answered as
    ml_dtypes.bfloat16 arrays: FP32 ×3 rounded to BF16, as the graph says (was refused: ACL data type 27)."""
    onnx = bf16_model()
    executor = AclExecutor(write_fake_om(tmp_path, onnx, static_batch=2), device_id=0)
    assert executor.inputs == (TensorInfo("half", "BF16", (2, 3)),)
    assert [(o.name, o.data_type) for o in executor.outputs] == [("tripled", "BF16"), ("wide", "FP32")]
    half = np.array([[1.5, -2.0, 3.140625], [0.1, 65280.0, -0.0078125]], ml_dtypes.bfloat16)
    outputs, _ = executor.run({"half": half})
    assert outputs["tripled"].dtype == ml_dtypes.bfloat16
    tripled = (half.astype(np.float32) * 3).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(outputs["tripled"], tripled)
    np.testing.assert_array_equal(outputs["wide"], half.astype(np.float32))
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


def test_batch_is_padded_to_the_next_gear_and_sliced_back(any_cann: ModuleType, tmp_path: Path) -> None:
    fake_acl = any_cann
    onnx = token_model()
    om = write_fake_om(tmp_path, onnx, gears=(1, 2, 4, 8), input_shape={"input_ids": [-1, 5]})
    executor = AclExecutor(om, device_id=0)
    assert executor.gears == (1, 2, 4, 8) and executor.max_batch == 8
    assert executor.inputs == (TensorInfo("input_ids", "INT64", (-1, 5)),)
    ids = np.random.default_rng(1).integers(0, 60, (3, 5)).astype(np.int64)
    outputs, stats = executor.run({"input_ids": ids})
    np.testing.assert_allclose(outputs["logits"], reference(onnx, {"input_ids": ids})[0], atol=1e-5)
    assert outputs["logits"].shape[0] == 3
    assert stats.h2d_bytes == 4 * 5 * 8  # padded to gear 4
    (dataset,) = [d for d in fake_acl._state.STATE.datasets.values() if d.dynamic_batch is not None]
    assert dataset.dynamic_batch == 4
    with pytest.raises(ExecutorError, match="largest batch gear 8"):
        executor.run({"input_ids": np.zeros((9, 5), dtype=np.int64)})
    executor.close()
    assert _no_leaks(fake_acl)


def test_runs_from_another_thread_by_setting_its_context(any_cann: ModuleType, tmp_path: Path) -> None:
    fake_acl = any_cann
    executor = AclExecutor(write_fake_om(tmp_path, dense_model(), gears=(1, 2)), device_id=1)
    results: list[np.ndarray] = []
    batch = {"x": np.ones((2, 4), np.float32)}
    thread = threading.Thread(target=lambda: results.append(executor.run(batch)[0]["y"]))
    thread.start()
    thread.join()
    assert results and results[0].shape == (2, 3)
    figures = executor.device_figures()
    # the card's main memory: HBM, or DDR on a 310 whose HBM answers 0/0
    assert figures is not None and figures.total_bytes == fake_acl._state.DEVICE_MEMORY
    assert figures.used_bytes and figures.used_bytes > 0
    if fake_acl._state.PROFILE.utilization:  # asked between executions (the GIL): the device is idle then
        assert figures.utilization == 0.0
    else:  # older pyacl: no figure rather than an invented one
        assert figures.utilization is None
    executor.close()
    assert _no_leaks(fake_acl)


def test_acl_errors_name_the_call_and_code_and_leave_nothing(fake_acl: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(AclError, match=r"acl\.mdl\.load_from_file\(.*missing.om\) failed .* 100003: the "
                       "model file does not exist"):
        AclExecutor(tmp_path / "missing.om", device_id=0)
    assert _no_leaks(fake_acl)
    with pytest.raises(AclError, match=r"acl\.rt\.set_device\(42\) failed with ACL error 107001"):
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


def test_outputs_named_by_atc_map_to_the_onnx_names(fake_acl: ModuleType, tmp_path: Path) -> None:
    executor = AclExecutor(write_fake_om(tmp_path, mixed_model(), static_batch=2), device_id=0)
    desc = executor._desc
    assert [fake_acl.mdl.get_output_name_by_index(desc, i) for i in range(3)] == [
        "Gemm_0:0:y", "Transpose_1:0:t", "Identity_2:0:w"]  # what ATC writes for an ONNX model
    assert [o.name for o in executor.outputs] == ["y", "t", "w"]
    executor.close()
    assert _no_leaks(fake_acl)


def test_outputs_whose_names_cannot_match_take_the_configs_by_index(fake_acl: ModuleType,
                                                                      tmp_path: Path) -> None:
    om = write_fake_om(tmp_path, dense_model(), output_names=["PartitionedCall:0:Identity",
                                                             "PartitionedCall:1:Identity_1"])
    executor = AclExecutor(om, device_id=0)
    assert [o.name for o in executor.outputs] == ["Identity", "Identity_1"]
    declared = [{"name": "y", "data_type": "TYPE_FP32"}, {"name": "z", "data_type": "TYPE_FP32"}]
    assert match_outputs_by_index(declared, executor)
    outputs, _ = executor.run({"x": np.ones((1, 4), np.float32)})
    assert list(outputs) == ["y", "z"]
    assert not match_outputs_by_index(declared[:1], executor)  # a count that differs is not guessed
    executor.close()
    assert _no_leaks(fake_acl)


def test_gear_outputs_are_read_at_the_current_dims_and_unpadded_on_their_batch_axis(
        any_cann: ModuleType, tmp_path: Path) -> None:
    onnx = mixed_model()
    executor = AclExecutor(write_fake_om(tmp_path, onnx, gears=(2, 4, 8)), device_id=0)
    desc = executor._desc
    assert any_cann.mdl.get_output_dims(desc, 0)[0]["dims"] == [8, 3]  # the largest gear, not -1
    assert [o.dims for o in executor.outputs] == [(-1, 3), (3, -1), (4, 3)]
    x = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    outputs, stats = executor.run({"x": x})
    y, t, w = reference(onnx, {"x": x})
    np.testing.assert_allclose(outputs["y"], y, atol=1e-6)
    np.testing.assert_allclose(outputs["t"], t, atol=1e-6)  # [3, 3]: sliced on axis 1, from gear 4
    np.testing.assert_allclose(outputs["w"], w, atol=1e-6)  # untouched: it has no batch
    assert stats.d2h_bytes == y.nbytes + t.nbytes + w.nbytes
    executor.close()
    assert _no_leaks(any_cann)


def test_load_refusals_from_ge_are_explained(fake_acl: ModuleType, tmp_path: Path) -> None:
    """An OM of another NpuArch fails with 500002 (ACL_ERROR_GE_FAILURE), said so; one built for another SoC
    of the card's NpuArch (Ascend910B4 on the fake's 910B3) loads."""
    other_soc = write_fake_om(tmp_path, dense_model(), soc_version="Ascend310P3", name="soc.om")
    with pytest.raises(AclError, match=r"ACL error 500002: GE failure \(ACL_ERROR_GE_FAILURE\).*another "
                                       r"NpuArch"):
        AclExecutor(other_soc, device_id=0)
    AclExecutor(write_fake_om(tmp_path, dense_model(), soc_version="Ascend910B4", name="b4.om"), 0).close()
    damaged = write_fake_om(tmp_path, dense_model(), damaged=True, name="damaged.om")
    with pytest.raises(AclError, match=r"ACL error 545003: GE failed to load the model's weights"):
        AclExecutor(damaged, device_id=0)
    assert _no_leaks(fake_acl)


def test_an_om_in_ge_layout_is_judged_by_its_models_soc_attribute(
        fake_acl: ModuleType, tmp_path: Path) -> None:
    """The fake atc's OMs (GE's header and partitions, tests/fakes/om_layout.py): the fake acl takes the SoC
    from the ModelDef's soc_version attribute, as GE's CheckModelCompatibility does, not from its JSON
    description (which says Ascend910B3 here): Ascend310P3 is refused with 500002, Ascend910B4 loads."""
    description = write_fake_om(tmp_path, dense_model(), soc_version="Ascend910B3").read_bytes()
    other = om_layout.write_om(tmp_path / "other.om", "Ascend310P3", description)
    with pytest.raises(AclError, match=r"ACL error 500002"):
        AclExecutor(other, device_id=0)
    AclExecutor(om_layout.write_om(tmp_path / "b4.om", "Ascend910B4", description), 0).close()
    assert _no_leaks(fake_acl)


def test_device_figures_never_wait_for_an_execution(fake_acl: ModuleType, tmp_path: Path) -> None:
    executor = AclExecutor(write_fake_om(tmp_path, dense_model()), device_id=0)
    results: list[object] = []
    with executor._lock:  # an execution in progress (acl.mdl.execute holds the lock, and the GIL)
        reader = threading.Thread(target=lambda: results.append(executor.device_figures()))
        reader.start()
        reader.join(timeout=5)
        assert not reader.is_alive() and results and results[0] is not None
    executor.close()
    assert _no_leaks(fake_acl)


def test_device_figures_racing_close_never_touch_a_destroyed_context(fake_acl: ModuleType,
                                                                      tmp_path: Path) -> None:
    executor = AclExecutor(write_fake_om(tmp_path, dense_model()), device_id=0)
    stop = threading.Event()
    seen: list[object] = []

    def poll() -> None:
        while not stop.is_set():
            seen.append(executor.device_figures())

    pollers = [threading.Thread(target=poll) for _ in range(2)]
    for poller in pollers:
        poller.start()
    while not seen:
        pass
    executor.close()
    stop.set()
    for poller in pollers:
        poller.join()
    assert fake_acl._state.STATE.misuse == []
    assert executor.device_figures() is None and _no_leaks(fake_acl)


def test_finalize_stops_telemetry_before_it_frees_the_executor() -> None:
    order: list[str] = []
    model = TritonPythonModel()
    model.executor = SimpleNamespace(close=lambda: order.append("executor"))  # type: ignore[assignment]
    model.telemetry = SimpleNamespace(close=lambda: order.append("telemetry"))  # type: ignore[attr-defined]
    model.finalize()
    assert order == ["telemetry", "executor"]  # the telemetry thread reads the executor's context


@pytest.mark.parametrize("mbatch_index", [0, 1])
def test_inputs_are_given_in_the_oms_order_wherever_the_gear_input_is(
        fake_acl: ModuleType, tmp_path: Path, mbatch_index: int) -> None:
    """A dataset's buffers are matched to the OM's inputs by position; ATC's ascend_mbatch_shape_data need
    not be last (AscendCL has its index asked with aclmdlGetInputIndexByName). With it first, the glue's
    dataset (data inputs, then the gear input) fed the gear input's 8 bytes as x (was: ACL error 100017)."""
    onnx = dense_model()
    om = write_fake_om(tmp_path, onnx, gears=(1, 2, 4), mbatch_index=mbatch_index)
    executor = AclExecutor(om, device_id=0)
    x = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    outputs, _ = executor.run({"x": x})
    np.testing.assert_allclose(outputs["y"], reference(onnx, {"x": x})[0], atol=1e-6)
    executor.close()
    assert _no_leaks(fake_acl)


def test_dimension_gears_with_the_gear_input_first_run(fake_acl: ModuleType, tmp_path: Path) -> None:
    """--dynamic_dims with ascend_mbatch_shape_data at index 0: each data input's buffer in its own place."""
    onnx = dense_model()
    om = write_fake_om(tmp_path, onnx, input_shape={"x": [-1, 4]}, dynamic_dims=[[1], [2], [4]],
                       mbatch_index=0)
    executor = AclExecutor(om, device_id=0)
    x = np.ones((2, 4), np.float32)
    outputs, _ = executor.run({"x": x})
    np.testing.assert_allclose(outputs["z"], reference(onnx, {"x": x})[1], atol=1e-6)
    executor.close()
    assert _no_leaks(fake_acl)


def test_an_om_with_more_gears_than_ascendcl_describes_fails_at_load_saying_why(
        fake_acl: ModuleType, tmp_path: Path) -> None:
    """129 batch gears: aclmdlGetDynamicBatch answers ACL_ERROR_STORAGE_OVER_LIMIT (model_om2.cpp), which
    the glue names; nothing is left allocated (the fake answered 129 gears before)."""
    om = write_fake_om(tmp_path, dense_model(), gears=tuple(range(1, 130)))
    said = (r"acl.mdl.get_dynamic_batch failed with ACL error 300000: storage over limit "
            r"\(ACL_ERROR_STORAGE_OVER_LIMIT\): at load, an OM with more than 128 gears")
    with pytest.raises(AclError, match=said):
        AclExecutor(om, device_id=0)
    assert _no_leaks(fake_acl)


def test_tensor_names_longer_than_an_iodims_holds_keep_their_real_names(
        fake_acl: ModuleType, tmp_path: Path) -> None:
    """Output names over 127 bytes: aclmdlIODims carries `acl_modelId_<id>_output_<i>` instead (hicann/ge
    model_common.cpp GetTensorDescNameToDims), get_tensor_real_name maps it back, and the glue, which names
    tensors by get_output_name_by_index (the full name), serves them under the graph's names."""
    long_y, long_z = "y" * 140, "z" * 140
    om = write_fake_om(tmp_path, dense_model(), output_names=[f"Gemm_0:0:{long_y}", f"Relu_1:0:{long_z}"])
    executor = AclExecutor(om, device_id=0)
    assert [o.name for o in executor.outputs] == [long_y, long_z]
    outputs, _ = executor.run({"x": np.ones((1, 4), np.float32)})
    assert set(outputs) == {long_y, long_z}
    mdl = fake_acl.mdl
    desc = mdl.create_desc()
    assert mdl.get_desc(desc, executor._model_id) == 0
    dims, _ = mdl.get_output_dims(desc, 1)
    assert dims["name"] == f"acl_modelId_{executor._model_id}_output_1"
    assert mdl.get_tensor_real_name(desc, dims["name"]) == f"Relu_1:0:{long_z}"
    assert mdl.get_output_name_by_index(desc, 1) == f"Relu_1:0:{long_z}"
    mdl.destroy_desc(desc)
    executor.close()
    assert _no_leaks(fake_acl)


def test_npu_smi_ids_become_the_user_ids_acl_sets_under_visible_devices(
        fake_acl: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ASCEND_RT_VISIBLE_DEVICES=4,5: aclrtSetDevice takes user ids 0 and 1 (CANN runtime reference), so
    NPU 5 (npu-smi's logical id, what device_ids name) is set as 1; the executor still reports 5 for its
    figures (was: set_device(5) refused, ACL error 107001). An NPU the variable leaves out is named."""
    monkeypatch.setenv("ASCEND_RT_VISIBLE_DEVICES", "4,5")
    om = write_fake_om(tmp_path, dense_model(), static_batch=1)
    executor = AclExecutor(om, device_id=5)
    assert executor.device_id == 5 and dict(fake_acl._state.STATE.devices_set) == {1: 1}
    executor.run({"x": np.ones((1, 4), np.float32)})
    executor.close()
    with pytest.raises(ExecutorError, match=r"NPU 3 \(npu-smi's logical id\) is not visible to this process "
                                            r"\(ASCEND_RT_VISIBLE_DEVICES=4,5\)"):
        AclExecutor(om, device_id=3)
    monkeypatch.delattr(fake_acl.rt, "get_user_dev_id_by_logic_dev_id")  # a pyACL without it: worked out
    executor = AclExecutor(om, device_id=4)
    assert dict(fake_acl._state.STATE.devices_set) == {0: 1}
    executor.close()
    assert _no_leaks(fake_acl)


def test_an_execution_holds_the_gil_as_pyacl_does(fake_acl: ModuleType, tmp_path: Path) -> None:
    """pyACL's WrapAclMdlExecute never releases the GIL (mdl_wrap.cpp): while one runs, no other Python
    thread of the process does. A thread ticking every 2 ms makes no tick inside a 300 ms execution, and
    the run reports that device time (the fake let threads run and took no time before)."""
    om = write_fake_om(tmp_path, dense_model(), static_batch=1, execute_ms=300)
    executor = AclExecutor(om, device_id=0)
    ticks: list[float] = []
    stop = threading.Event()

    def tick() -> None:
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.002)

    thread = threading.Thread(target=tick)
    thread.start()
    wait_until(lambda: len(ticks) >= 3, timeout=10, interval=0.001)
    started = time.perf_counter()
    _, stats = executor.run({"x": np.ones((1, 4), np.float32)})
    ended = time.perf_counter()
    stop.set()
    thread.join()
    assert ended - started >= 0.3 and stats.device_seconds is not None and stats.device_seconds >= 0.3
    assert [t for t in ticks if started + 0.05 < t < ended - 0.05] == []
    executor.close()
    assert _no_leaks(fake_acl)


class _Gauge:
    """A Triton gauge's set(), remembered."""

    def __init__(self) -> None:
        self.value: float | None = None

    def set(self, value: float) -> None:
        self.value = value


def test_utilization_under_the_gil_comes_from_busy_time_at_executes_edges(
        fake_acl: ModuleType, tmp_path: Path) -> None:
    """Back-to-back 100 ms executions: AscendCL's utilization can only be read between them (the GIL), so
    it reads the idle device (0); the gauge comes from the device time measured at execute's edges
    instead (it showed AscendCL's 0 before)."""
    om = write_fake_om(tmp_path, dense_model(), static_batch=1, execute_ms=100)
    executor = AclExecutor(om, device_id=0)
    ledger = DeviceLedger(0, tmp_path / "run")
    gauges = {name: _Gauge() for name in ("ge_device_memory_used_bytes", "ge_device_memory_total_bytes",
                                          "ge_device_utilization_ratio")}
    device = _DeviceGauges(ledger, gauges, executor.device_figures)  # type: ignore[arg-type]
    device.refresh()
    for _ in range(5):
        _, stats = executor.run({"x": np.ones((1, 4), np.float32)})
        ledger.add_busy(stats.device_seconds or 0.0)
        device.refresh()  # where the flusher thread gets to run: between executions
    figures = executor.device_figures()
    assert figures is not None and figures.utilization == 0.0
    assert (gauges["ge_device_utilization_ratio"].value or 0.0) > 0.8
    executor.close()
    assert _no_leaks(fake_acl)


def test_a_dynamic_shape_oms_memory_is_measured_at_load_and_said_to_be_an_estimate(
        fake_acl: ModuleType, tmp_path: Path) -> None:
    """aclmdlQuerySize answers a dynamic-shape OM with work size 0 (model_manager.cc
    GetModelMemAndWeightSize): its working memory comes per execution. The glue charges what the load took
    of the device's free memory (at least the weights) and says the figure leaves that out; a static OM's
    figure is query_size's, with no note (the fake answered 1 MiB of work for both, and nothing said so)."""
    onnx = dense_model()
    dynamic = AclExecutor(write_fake_om(tmp_path / "d", onnx, input_shape={"x": [-1, 4]}, dynamic_shape=True),
                          device_id=0)
    weight = (tmp_path / "d" / "model.source.onnx").stat().st_size
    assert fake_acl.mdl.query_size(str(dynamic.path)) == (0, weight, 0)
    assert dynamic.memory_bytes == weight  # buffers of a dynamic shape come per request
    assert dynamic.memory_note.startswith("an estimate: a dynamic-shape OM's working memory is allocated per "
                                          "execution and not counted")
    static = AclExecutor(write_fake_om(tmp_path / "s", onnx, static_batch=2), device_id=0)
    assert static.memory_note == "" and static.memory_bytes == weight + (1 << 20) + 2 * 4 * 4 + 2 * 2 * 3 * 4
    dynamic.close()
    static.close()
    assert _no_leaks(fake_acl)


def test_the_load_line_of_a_dynamic_shape_om_says_its_memory_is_an_estimate(
        fake_acl: ModuleType, tmp_path: Path) -> None:
    """Where an operator reads it, Triton's log: the instance's load line gives the memory figure and the
    executor's note beside it; a static OM's line has none."""
    settings = SimpleNamespace(om_path=tmp_path / "model.om", mode="npu", onnx_path=None, devices=(0,),
                               device_id=0, npus_unknown=False, model_name="m", instance_name="m_0",
                               kind="npu", requested_mode="auto")
    model = TritonPythonModel()
    model.settings = settings  # type: ignore[assignment]
    for kind, extra in (("dynamic", {"input_shape": {"x": [-1, 4]}, "dynamic_shape": True}),
                        ("static", {"static_batch": 2})):
        model.executor = AclExecutor(write_fake_om(tmp_path / kind, dense_model(), **extra),  # type: ignore
                                     device_id=0)
        line = model._load_message()
        said = f"memory={model.executor.memory_bytes} bytes"
        note = " (an estimate: a dynamic-shape OM's working memory is allocated per execution"
        assert (said + note in line) is (kind == "dynamic") and said in line, line
        model.executor.close()
    assert _no_leaks(fake_acl)


@pytest.mark.parametrize("kind", ["static", "dynamic_shape"])
def test_an_output_is_copied_once_from_the_device_into_the_array_served(
        any_cann: ModuleType, tmp_path: Path, kind: str) -> None:
    """Each output crosses from the device once, into the array the response is made of: no pinned staging
    buffer per output (nor per request for a dynamic-shape OM) and no second copy out of one (ptr_to_bytes /
    ptr_to_numpy) (was: memcpy into malloc_host memory, then ptr_to_bytes, on every CANN version)."""
    fake_acl = any_cann
    onnx = dense_model(outputs=64)
    extra: dict[str, object] = ({"input_shape": {"x": [-1, 4]}, "dynamic_shape": True} if kind != "static"
                                else {"static_batch": 8})
    executor = AclExecutor(write_fake_om(tmp_path, onnx, **extra), device_id=0)  # type: ignore[arg-type]
    calls = fake_acl._state.STATE.calls
    before = {name: calls[name] for name in ("rt.malloc_host", "util.ptr_to_bytes", "util.ptr_to_numpy",
                                             "rt.memcpy d2h bytes")}
    x = np.random.default_rng(3).standard_normal((8, 4)).astype(np.float32)
    outputs, stats = executor.run({"x": x})
    y, z = reference(onnx, {"x": x})
    np.testing.assert_allclose(outputs["y"], y, atol=1e-5)
    np.testing.assert_allclose(outputs["z"], z, atol=1e-5)
    assert [calls[name] - before[name] for name in before] == [0, 0, 0, y.nbytes + z.nbytes]
    assert stats.d2h_bytes == y.nbytes + z.nbytes
    executor.close()
    assert _no_leaks(fake_acl)
