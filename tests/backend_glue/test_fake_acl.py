"""The fake `acl` behaves like pyacl: tuple returns, int codes, per-thread contexts, misuse errors, leaks."""

from __future__ import annotations

import threading
from pathlib import Path
from types import ModuleType

import numpy as np

from tests.models import dense_model, write_fake_om

H2D, D2H = 1, 2


def _session(acl: ModuleType, device: int = 0) -> int:
    """init (once per process), set_device, create_context; returns the context."""
    assert acl.init() in (0, 100002)
    assert acl.rt.set_device(device) == 0
    context, ret = acl.rt.create_context(device)
    assert ret == 0 and context
    return int(context)


def test_init_twice_and_calls_before_init_return_codes(fake_acl: ModuleType) -> None:
    assert fake_acl.rt.set_device(0) == 100001  # ACL_ERROR_UNINITIALIZE
    assert fake_acl.init() == 0
    assert fake_acl.init() == 100002  # ACL_ERROR_REPEAT_INITIALIZE
    assert fake_acl.rt.set_device(99) == 107001  # invalid device id


def test_memory_needs_a_context_and_double_free_is_an_error(fake_acl: ModuleType) -> None:
    assert fake_acl.init() == 0
    assert fake_acl.rt.malloc(64, 0) == (0, 107002)  # no current context
    _session(fake_acl)
    ptr, ret = fake_acl.rt.malloc(64, 0)
    assert ret == 0 and fake_acl._state.leaks()["device_memory"] == 1
    assert fake_acl.rt.free(ptr) == 0
    assert fake_acl.rt.free(ptr) == 107000  # double free
    host, ret = fake_acl.rt.malloc_host(16)
    assert ret == 0 and fake_acl.rt.free(host) == 107000  # host memory is not freed with rt.free
    assert fake_acl.rt.free_host(host) == 0


def test_memcpy_checks_kind_and_size_and_really_copies(fake_acl: ModuleType) -> None:
    _session(fake_acl)
    device, _ = fake_acl.rt.malloc(16, 0)
    host, _ = fake_acl.rt.malloc_host(16)
    data = np.arange(4, dtype=np.float32).tobytes()
    src = fake_acl.util.bytes_to_ptr(data)
    assert fake_acl.rt.memcpy(device, 16, src, 16, D2H) == 100000  # wrong kind for host→device
    assert fake_acl.rt.memcpy(device, 8, src, 16, H2D) == 100000  # count beyond dest_max
    assert fake_acl.rt.memcpy(device, 16, src, 16, H2D) == 0
    assert fake_acl.rt.memcpy(host, 16, device, 16, D2H) == 0
    assert fake_acl.util.ptr_to_bytes(host, 16) == data


def _loaded(acl: ModuleType, om: Path) -> tuple[int, int]:
    """A loaded model and its description."""
    model_id, ret = acl.mdl.load_from_file(str(om))
    assert ret == 0
    desc = acl.mdl.create_desc()
    assert acl.mdl.get_desc(desc, model_id) == 0
    return int(model_id), int(desc)


def test_describes_an_om_with_batch_gears(fake_acl: ModuleType, tmp_path: Path) -> None:
    _session(fake_acl)
    model_id, desc = _loaded(fake_acl, write_fake_om(tmp_path, dense_model(), gears=(1, 2, 4)))
    assert fake_acl.mdl.get_num_inputs(desc) == 2 and fake_acl.mdl.get_num_outputs(desc) == 2
    assert fake_acl.mdl.get_input_dims(desc, 0) == ({"name": "x", "dimCount": 2, "dims": [-1, 4]}, 0)
    assert fake_acl.mdl.get_input_size_by_index(desc, 0) == 4 * 4 * 4  # FP32 at the largest gear
    assert fake_acl.mdl.get_input_data_type(desc, 0) == 0  # ACL_FLOAT
    assert fake_acl.mdl.get_dynamic_batch(desc) == ({"batchCount": 3, "batch": [1, 2, 4]}, 0)
    assert fake_acl.mdl.get_input_index_by_name(desc, "ascend_mbatch_shape_data") == (1, 0)
    assert fake_acl.mdl.set_dynamic_batch_size(model_id, fake_acl.mdl.create_dataset(), 1, 3) == 100000


def test_execute_after_unload_and_from_a_wrong_context_fail(fake_acl: ModuleType, tmp_path: Path) -> None:
    context = _session(fake_acl)
    model_id, _ = _loaded(fake_acl, write_fake_om(tmp_path, dense_model()))
    ins, outs = fake_acl.mdl.create_dataset(), fake_acl.mdl.create_dataset()
    results: list[int] = []
    thread = threading.Thread(target=lambda: results.append(fake_acl.mdl.execute(model_id, ins, outs)))
    thread.start()
    thread.join()
    assert results == [107002]  # contexts are per thread: the other thread has none
    assert fake_acl.rt.set_context(context) == 0
    assert fake_acl.mdl.execute(model_id, ins, outs) == 100017  # empty datasets do not match the model
    assert fake_acl.mdl.unload(model_id) == 0
    assert fake_acl.mdl.execute(model_id, ins, outs) == 100011  # invalid model id
    assert fake_acl.mdl.unload(model_id) == 100011


def test_leak_accounting_sees_everything_left_behind(fake_acl: ModuleType, tmp_path: Path) -> None:
    _session(fake_acl)
    _, desc = _loaded(fake_acl, write_fake_om(tmp_path, dense_model()))
    ptr, _ = fake_acl.rt.malloc(8, 0)
    dataset = fake_acl.mdl.create_dataset()
    buffer = fake_acl.create_data_buffer(ptr, 8)
    assert fake_acl.mdl.add_dataset_buffer(dataset, buffer) == (dataset, 0)
    assert fake_acl.mdl.destroy_dataset(dataset) == 0
    leaks = fake_acl._state.leaks()
    assert leaks == {"devices": 1, "contexts": 1, "device_memory": 1, "host_memory": 0, "data_buffers": 1,
                     "datasets": 0, "descs": 1, "models": 1, "tensor_descs": 0}
    tensor_desc = fake_acl.create_tensor_desc(9, [2, 3], 2)
    assert fake_acl._state.leaks()["tensor_descs"] == 1  # a caller's tensor description, until destroyed
    fake_acl.destroy_tensor_desc(tensor_desc)
    assert fake_acl.destroy_data_buffer(buffer) == 0 and fake_acl.destroy_data_buffer(buffer) == 100000
    assert fake_acl.mdl.destroy_desc(desc) == 0


def test_versions_lack_what_their_pyacl_lacks_and_a_310_has_no_hbm(fake_acl: ModuleType) -> None:
    assert fake_acl._versions.apply("cann-6.0.0-910").cann < (6, 0, 1)
    assert not hasattr(fake_acl.util, "bytes_to_ptr") and not hasattr(fake_acl.util, "ptr_to_bytes")
    assert not hasattr(fake_acl.rt, "get_device_utilization_rate")
    _session(fake_acl)
    host, _ = fake_acl.rt.malloc_host(16)
    data = np.arange(4, dtype=np.float32)
    device, _ = fake_acl.rt.malloc(16, 0)
    assert fake_acl.rt.memcpy(device, 16, fake_acl.util.numpy_to_ptr(data), 16, H2D) == 0
    assert fake_acl.rt.memcpy(host, 16, device, 16, D2H) == 0
    view = fake_acl.util.ptr_to_numpy(host, (4,), np.dtype(np.float32).num)
    np.testing.assert_array_equal(view, data)
    assert fake_acl.rt.memcpy(host, 16, fake_acl.util.numpy_to_ptr(data * 2), 16, 0) == 0
    np.testing.assert_array_equal(view, data * 2)  # a view of the memory, not a copy
    fake_acl._versions.apply("cann-7.0-310")
    free, total, ret = fake_acl.rt.get_mem_info(1)  # ACL_HBM_MEM
    assert (free, total, ret) == (0, 0, 0)  # success, and nothing: an Atlas 200/300/500 has DDR only
    assert fake_acl.rt.get_mem_info(0)[1] == fake_acl._state.DEVICE_MEMORY  # ACL_DDR_MEM


def test_utilization_keys_are_snake_case_and_a_destroyed_context_is_misuse(fake_acl: ModuleType) -> None:
    context = _session(fake_acl)
    info, ret = fake_acl.rt.get_device_utilization_rate(0)
    assert ret == 0 and set(info) == {"cube_utilization", "vector_utilization", "aicpu_utilization",
                                      "memory_utilization", "utilization_extend"}
    assert fake_acl.rt.destroy_context(context) == 0
    assert fake_acl.rt.set_context(context) == 107002
    assert fake_acl._state.STATE.misuse == [f"set_context({context:#x}) after destroy_context"]
    assert fake_acl.rt.reset_device(0) == 0


def test_dims_structs_and_tensor_descriptions_are_taken_as_the_binding_takes_them(
        fake_acl: ModuleType, tmp_path: Path) -> None:
    """set_input_dynamic_dims parses its dims as mdl_wrap.cpp's WrapAclMdlSetInputDynamicDims does (a dict
    whose "dims" is a list of int: a tuple or numpy integers raise TypeError) and AscendCL refuses a
    dimCount of 0; create_tensor_desc wants a list (py_init_acl.cpp WrapAclCreateTensorDesc);
    set_dataset_tensor_desc describes only a buffer already added (aclmdlSetDatasetTensorDesc: index < the
    dataset's buffers)."""
    import pytest

    from tests.models import token_model

    om = write_fake_om(tmp_path, token_model(), input_shape={"input_ids": [-1, -1]},
                       dynamic_dims=[[1, 4], [2, 8]])
    _session(fake_acl)
    model_id, _ = fake_acl.mdl.load_from_file(str(om))
    dataset = fake_acl.mdl.create_dataset()
    ptr, _ = fake_acl.rt.malloc(64, 0)
    for _ in range(2):
        fake_acl.mdl.add_dataset_buffer(dataset, fake_acl.create_data_buffer(ptr, 64))
    good = {"dimCount": 2, "name": "", "dims": [1, 4]}
    assert fake_acl.mdl.set_input_dynamic_dims(model_id, dataset, 1, good) == 0
    for wrong in ({**good, "dims": (1, 4)}, {**good, "dims": [np.int64(1), np.int64(4)]}, [1, 4]):
        with pytest.raises(TypeError):
            fake_acl.mdl.set_input_dynamic_dims(model_id, dataset, 1, wrong)
    assert fake_acl.mdl.set_input_dynamic_dims(model_id, dataset, 1, {**good, "dimCount": 0}) == 100000
    with pytest.raises(TypeError):
        fake_acl.create_tensor_desc(9, (1, 4), 2)
    desc = fake_acl.create_tensor_desc(9, [1, 4], 2)
    empty = fake_acl.mdl.create_dataset()
    assert fake_acl.mdl.set_dataset_tensor_desc(empty, desc, 0) == (empty, 100000)
    assert fake_acl.mdl.set_dataset_tensor_desc(dataset, desc, 0) == (dataset, 0)
