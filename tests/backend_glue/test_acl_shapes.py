"""Every OM shape ATC builds, run by AclExecutor over the fake acl: dimension gears (--dynamic_dims),
image-size gears (--dynamic_image_size), dynamic shapes (-1 without gears), and AIPP refused; each checked
against ONNX Runtime on the same model, with nothing left allocated."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from tests.models import (
    VOCAB,
    dense_model,
    image_model,
    nonzero_model,
    reference,
    token_model,
    write_fake_om,
)
from triton_ge_console.backend_glue.acl_executor import AclExecutor
from triton_ge_console.backend_glue.executor import ExecutorError, TensorInfo

DIMS_GEARS = [[1, 4], [1, 8], [2, 8], [4, 16]]  # (batch, sequence) for input_ids' two -1 axes


def _ids(batch: int, length: int) -> np.ndarray:
    return np.random.default_rng(batch * 100 + length).integers(0, VOCAB, (batch, length)).astype(np.int64)


def _profile_set(acl: ModuleType) -> int | None:
    """The gear the last run chose (on the fake's input dataset)."""
    (dataset,) = [d for d in acl._state.STATE.datasets.values() if d.profile is not None]
    return dataset.profile


def test_dimension_gears_run_the_smallest_that_fits_padded_and_cut_back(any_cann: ModuleType,
                                                                         tmp_path: Path) -> None:
    """--dynamic_dims: no batch gears and ascend_mbatch_shape_data; the gears read with
    get_input_dynamic_gear_count/get_input_dynamic_dims; each request runs on the smallest gear holding it,
    zero-padded, and its logits are cut back to its own batch and length (at every gear, and between)."""
    onnx = token_model()
    om = write_fake_om(tmp_path, onnx, input_shape={"input_ids": [-1, -1]}, dynamic_dims=DIMS_GEARS)
    executor = AclExecutor(om, device_id=0)
    assert executor.gears == () and [p.values for p in executor.profiles] == [tuple(g) for g in DIMS_GEARS]
    assert executor.inputs == (TensorInfo("input_ids", "INT64", (-1, -1)),)
    assert executor.outputs[0].dims == (-1, -1, VOCAB) and executor.max_batch == 4
    for (batch, length), gear in [((1, 4), 0), ((1, 8), 1), ((2, 8), 2), ((4, 16), 3),
                                   ((1, 3), 0), ((1, 5), 1), ((2, 1), 2), ((3, 9), 3)]:
        ids = _ids(batch, length)
        outputs, stats = executor.run({"input_ids": ids})
        np.testing.assert_allclose(outputs["logits"], reference(onnx, {"input_ids": ids})[0], atol=1e-5)
        assert _profile_set(any_cann) == gear
        assert stats.h2d_bytes == np.prod(DIMS_GEARS[gear]) * 8  # padded to the gear
    with pytest.raises(ExecutorError, match=r"fit none of the OM's gears"):
        executor.run({"input_ids": _ids(1, 17)})
    executor.close()
    assert not any(any_cann._state.leaks().values())


def test_an_output_no_input_axis_explains_runs_only_at_exact_gears(fake_acl: ModuleType,
                                                                   tmp_path: Path) -> None:
    """An output axis that changes with the gear but follows no input axis (2 x length) cannot be cut
    back after padding: exact gears run, others are refused with the gears to send."""
    onnx = token_model(doubled=True)
    om = write_fake_om(tmp_path, onnx, input_shape={"input_ids": [-1, -1]}, dynamic_dims=DIMS_GEARS)
    executor = AclExecutor(om, device_id=0)
    assert executor.outputs[0].dims == (-1, -1, VOCAB)  # the 2 x length axis varies too: not fixed
    ids = _ids(2, 8)
    np.testing.assert_allclose(executor.run({"input_ids": ids})[0]["logits"],
                               reference(onnx, {"input_ids": ids})[0], atol=1e-5)
    with pytest.raises(ExecutorError, match=r"axis 1 changes with the OM's gear but follows no input axis"):
        executor.run({"input_ids": _ids(2, 5)})
    executor.close()
    assert not any(fake_acl._state.leaks().values())


def test_image_size_gears_set_height_and_width(any_cann: ModuleType, tmp_path: Path) -> None:
    """--dynamic_image_size: get_dynamic_hw's H,W pairs, set_dynamic_hw_size; an odd image is padded to
    the smallest size holding it and cut back."""
    onnx = image_model()
    om = write_fake_om(tmp_path, onnx, input_shape={"x": [1, 3, -1, -1]}, dynamic_image_size=[[4, 4], [8, 8]])
    executor = AclExecutor(om, device_id=0)
    assert [p.values for p in executor.profiles] == [(4, 4), (8, 8)]
    for shape, gear in [((1, 3, 4, 4), 0), ((1, 3, 3, 5), 1), ((1, 3, 8, 8), 1), ((1, 3, 2, 1), 0)]:
        x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
        outputs, _ = executor.run({"x": x})
        np.testing.assert_allclose(outputs["y"], reference(onnx, {"x": x})[0], atol=1e-6)
        assert _profile_set(any_cann) == gear
    executor.close()
    assert not any(any_cann._state.leaks().values())


def test_dynamic_shape_allocates_per_request_and_reads_described_outputs(any_cann: ModuleType,
                                                                          tmp_path: Path) -> None:
    """-1 without gears: input sizes are 0 (acl.rt.malloc(0) fails, so nothing is allocated at load);
    each request gets buffers at its real size and a tensor description per input, AscendCL allocates
    the outputs (empty data buffers) and describes their shapes; all of it freed after the request."""
    onnx = token_model()
    om = write_fake_om(tmp_path, onnx, input_shape={"input_ids": [-1, -1]}, dynamic_shape=True)
    executor = AclExecutor(om, device_id=0)
    assert executor.dynamic_shape and executor.inputs == (TensorInfo("input_ids", "INT64", (-1, -1)),)
    held = any_cann._state.leaks()
    for batch, length in [(1, 1), (3, 7), (2, 33), (1, 1)]:
        ids = _ids(batch, length)
        outputs, stats = executor.run({"input_ids": ids})
        np.testing.assert_allclose(outputs["logits"], reference(onnx, {"input_ids": ids})[0], atol=1e-5)
        assert stats.h2d_bytes == ids.nbytes and any_cann._state.leaks() == held
    executor.close()
    assert not any(any_cann._state.leaks().values())


def test_a_data_dependent_output_alone_makes_a_dynamic_shape(fake_acl: ModuleType, tmp_path: Path) -> None:
    """Static inputs but an output shaped by the data (NonZero): its size is 0 (gert ModelIoDesc::GetSize
    answers 0 for any -1 dim, hicann/ge runtime/v2/core/model_desc/model_desc.cc), so AscendCL allocates it
    and describes its shape; the glue reads it so instead of copying from a buffer it never had."""
    onnx = nonzero_model()
    om = write_fake_om(tmp_path, onnx, input_shape={"x": [6]}, dynamic_shape=True)
    executor = AclExecutor(om, device_id=0)
    assert executor.dynamic_shape and executor.outputs[0].dims == (1, -1)
    held = fake_acl._state.leaks()
    for values in ([0, 1, 0, 2, 3, 0], [0] * 6, [1] * 6):
        x = np.array(values, dtype=np.float32)
        outputs, _ = executor.run({"x": x})
        np.testing.assert_array_equal(outputs["where"], reference(onnx, {"x": x})[0])
        assert fake_acl._state.leaks() == held
    executor.close()
    assert not any(fake_acl._state.leaks().values())


def test_a_request_failing_after_execute_frees_every_output_ascendcl_allocated(
        fake_acl: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """AscendCL allocates each empty output buffer at execute and the caller frees it: when reading one
    output fails, the others' memory is freed all the same (the next request is served)."""
    om = write_fake_om(tmp_path, dense_model(), input_shape={"x": [-1, 4]}, dynamic_shape=True)
    executor = AclExecutor(om, device_id=0)
    held = fake_acl._state.leaks()
    real = fake_acl.mdl.get_dataset_tensor_desc
    monkeypatch.setattr(fake_acl.mdl, "get_dataset_tensor_desc", lambda dataset, index: 0)
    x = np.ones((2, 4), dtype=np.float32)
    with pytest.raises(ExecutorError, match=r"output y: AscendCL gave no tensor description"):
        executor.run({"x": x})
    assert fake_acl._state.leaks() == held
    monkeypatch.setattr(fake_acl.mdl, "get_dataset_tensor_desc", real)
    assert executor.run({"x": x})[0]["z"].shape == (2, 3)
    executor.close()
    assert not any(fake_acl._state.leaks().values())


@pytest.mark.parametrize(("aipp", "said"), [("static", "static AIPP"), ("dynamic", "dynamic AIPP")])
def test_aipp_models_are_refused_at_load_saying_why(fake_acl: ModuleType, tmp_path: Path, aipp: str,
                                                    said: str) -> None:
    """get_aipp_type finds AIPP (a static YUV input's buffer is not what its dims say; a dynamic one takes
    its parameters in an extra input): refused until supported, nothing left allocated."""
    om = write_fake_om(tmp_path, image_model(), input_shape={"x": [1, 3, 8, 8]}, aipp=aipp)
    with pytest.raises(ExecutorError, match=rf"input x carries {said} \(ATC --insert_op_conf\): the glue "
                                            "does not support AIPP models yet"):
        AclExecutor(om, device_id=0)
    assert not any(fake_acl._state.leaks().values())


def test_a_static_om_is_unchanged(fake_acl: ModuleType, tmp_path: Path) -> None:
    """No gears of any kind: neither profiles nor a dynamic shape."""
    executor = AclExecutor(write_fake_om(tmp_path, dense_model()), device_id=0)
    assert (executor.profiles, executor.dynamic_shape, executor.gears) == ((), False, ())
    executor.close()


def test_gear_axes_are_found_where_the_description_gives_the_largest_gear(
        fake_acl: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Should a description report a gear axis at its largest gear rather than -1 (as
    aclmdlGetInputDimsV2 does), the axes the gears vary are still the ones padded and cut back."""
    real = fake_acl.mdl.get_input_dims

    def largest(desc: int, index: int) -> tuple[dict[str, object], int]:
        dims, ret = real(desc, index)
        if dims.get("name") == "input_ids":
            dims = {**dims, "dims": [4, 16]}
        return dims, ret

    monkeypatch.setattr(fake_acl.mdl, "get_input_dims", largest)
    onnx = token_model()
    om = write_fake_om(tmp_path, onnx, input_shape={"input_ids": [-1, -1]}, dynamic_dims=DIMS_GEARS)
    executor = AclExecutor(om, device_id=0)
    assert executor.inputs == (TensorInfo("input_ids", "INT64", (-1, -1)),)
    ids = _ids(3, 9)
    np.testing.assert_allclose(executor.run({"input_ids": ids})[0]["logits"],
                               reference(onnx, {"input_ids": ids})[0], atol=1e-5)
    executor.close()
