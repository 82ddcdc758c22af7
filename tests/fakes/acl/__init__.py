"""A fake of CANN's `acl` Python module (pyacl), for tests only: same calls, tuple returns and int codes.

Mirrors the documented pyacl API: `ret = acl.init()`, `ptr, ret = acl.rt.malloc(size, policy)`,
`model_id, ret = acl.mdl.load_from_file(path)`, `ret = acl.mdl.execute(model_id, in_ds, out_ds)`, ...;
tensor descriptions and empty data buffers for dynamic-shape OMs as acl's own module has them
(hicann/runtime python/pyACL/py_init_acl.cpp, where pyACL's top-level functions live: WrapAclCreateTensorDesc,
WrapAclGetTensorDescDimV2, WrapAclUpdateDataBuffer).
A "fake OM" is a JSON file: {"fake_om": 1, "onnx": "<path, relative to the .om>",
"dynamic_batch": [1, 2, 4, 8]} (batch gears, adds the `ascend_mbatch_shape_data` input) or
{"fake_om": 1, "onnx": ..., "static_batch": 1}, or with "dynamic_dims", "dynamic_image_size",
"dynamic_shape", "aipp" (tests/fakes/acl/mdl.py); the fake runs the ONNX with ONNX Runtime.
`acl._state.leaks()` counts what is still allocated; `acl._state.STATE.calls` counts calls;
`acl._state.STATE.misuse` lists calls the real runtime would crash on (a destroyed context made current).
`acl._versions.apply(name)` imitates an older CANN or another card (FAKE_ACL_CANN for a whole process).

Checked against the real binding's source (hicann/runtime python/pyACL/: py_init_acl.cpp for the top-level
functions, mdl/mdl_wrap.cpp and mdl/pymdl_methods.cpp, rt/rt_device.cpp and rt/pyrt_methods.cpp, util/*.cpp),
AscendCL's own (hicann/ge api/acl/acl_model/model/model_om2.cpp, model_common.cpp), CANN's pyacl API reference
and Ascend/samples acl_net.py / acllite_model.py. None of pyacl's wrappers release the GIL (no
Py_BEGIN_ALLOW_THREADS in mdl_wrap.cpp): `acl.mdl.execute` holds it for the whole execution (this fake
cannot hold it; it serialises on its lock).
"""

from __future__ import annotations

from . import _state, _versions, mdl, rt, util
from ._state import ACL_ERROR_INVALID_PARAM, ACL_ERROR_REPEAT_INITIALIZE, ACL_ERROR_UNINITIALIZE, ACL_SUCCESS

__all__ = ["create_data_buffer", "create_tensor_desc", "destroy_data_buffer", "destroy_tensor_desc",
           "finalize", "get_data_buffer_addr", "get_data_buffer_size_v2", "get_tensor_desc_dim_v2",
           "get_tensor_desc_num_dims", "get_tensor_desc_size", "init", "mdl", "rt", "update_data_buffer",
           "util"]


_versions.apply_from_environment()


def init(config_path: str | None = None) -> int:
    """aclInit: once per process; a second call returns ACL_ERROR_REPEAT_INITIALIZE."""
    with _state.LOCK:
        _state.STATE.calls["init"] += 1
        if _state.STATE.initialized:
            return ACL_ERROR_REPEAT_INITIALIZE
        _state.STATE.initialized = True
        return ACL_SUCCESS


def finalize() -> int:
    """aclFinalize."""
    with _state.LOCK:
        if not _state.STATE.initialized:
            return ACL_ERROR_UNINITIALIZE
        _state.STATE.initialized = False
        return ACL_SUCCESS


def create_data_buffer(ptr: int, size: int) -> int:
    """aclCreateDataBuffer: wraps memory; returns a handle (0 on failure, as the C API returns NULL). An
    empty buffer (ptr 0, size 0) is an output execute allocates (aclmdlGetOutputSizeByIndex's way one)."""
    with _state.LOCK:
        _state.STATE.calls["create_data_buffer"] += 1
        empty = (ptr, size) == (0, 0)
        if not empty and (ptr not in _state.STATE.allocs or size > _state.STATE.allocs[ptr].size):
            return 0
        handle = _state.new_handle()
        _state.STATE.data_buffers[handle] = (ptr, size)
        return handle


def destroy_data_buffer(data_buffer: int) -> int:
    """aclDestroyDataBuffer (does not free the memory it wraps)."""
    with _state.LOCK:
        if _state.STATE.data_buffers.pop(data_buffer, None) is None:
            return ACL_ERROR_INVALID_PARAM
        return ACL_SUCCESS


def get_data_buffer_addr(data_buffer: int) -> int:
    """aclGetDataBufferAddr (0 for an unknown buffer)."""
    return _state.STATE.data_buffers.get(data_buffer, (0, 0))[0]


def get_data_buffer_size_v2(data_buffer: int) -> int:
    """aclGetDataBufferSizeV2."""
    return _state.STATE.data_buffers.get(data_buffer, (0, 0))[1]


def update_data_buffer(data_buffer: int, ptr: int, size: int) -> int:
    """aclUpdateDataBuffer: point the buffer elsewhere (ptr 0, size 0: empty again, for the next run)."""
    with _state.LOCK:
        if data_buffer not in _state.STATE.data_buffers:
            return ACL_ERROR_INVALID_PARAM
        _state.STATE.data_buffers[data_buffer] = (ptr, size)
        return ACL_SUCCESS


def create_tensor_desc(data_type: int, dims: list[int], fmt: int) -> int:
    """aclCreateTensorDesc(type, dims, format): a handle the caller destroys; dims a list (py_init_acl.cpp
    WrapAclCreateTensorDesc: "argument 2 is not list")."""
    if not isinstance(dims, list):
        raise TypeError("argument 2 is not list")
    with _state.LOCK:
        _state.STATE.calls["create_tensor_desc"] += 1
        handle = _state.new_handle()
        dims_list = [int(d) for d in dims]
        _state.STATE.tensor_descs[handle] = _state.TensorDesc(int(data_type), dims_list, int(fmt))
        return handle


def destroy_tensor_desc(desc: int) -> None:
    """aclDestroyTensorDesc (returns nothing in the binding)."""
    with _state.LOCK:
        found = _state.STATE.tensor_descs.get(desc)
        if found is not None and found.owner is None:
            del _state.STATE.tensor_descs[desc]


def get_tensor_desc_num_dims(desc: int) -> int:
    """aclGetTensorDescNumDims."""
    found = _state.STATE.tensor_descs.get(desc)
    return 0 if found is None else len(found.dims)


def get_tensor_desc_dim_v2(desc: int, index: int) -> tuple[int, int]:
    """aclGetTensorDescDimV2: (dim, ret)."""
    found = _state.STATE.tensor_descs.get(desc)
    if found is None or not 0 <= index < len(found.dims):
        return 0, ACL_ERROR_INVALID_PARAM
    return found.dims[index], ACL_SUCCESS


_ITEM_SIZES = {0: 4, 1: 2, 2: 1, 3: 4, 4: 1, 6: 2, 7: 2, 8: 4, 9: 8, 10: 8, 11: 8, 12: 1}  # aclDataType


def get_tensor_desc_size(desc: int) -> int:
    """aclGetTensorDescSize: the bytes the described tensor takes."""
    found = _state.STATE.tensor_descs.get(desc)
    if found is None:
        return 0
    count = 1
    for dim in found.dims:
        count *= dim
    return count * _ITEM_SIZES.get(found.acl_type, 0)
