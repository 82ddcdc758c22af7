"""A fake of CANN's `acl` Python module (pyacl), for tests only: same calls, tuple returns and int codes.

Mirrors the documented pyacl API: `ret = acl.init()`, `ptr, ret = acl.rt.malloc(size, policy)`,
`model_id, ret = acl.mdl.load_from_file(path)`, `ret = acl.mdl.execute(model_id, in_ds, out_ds)`, ...
A "fake OM" is a JSON file: {"fake_om": 1, "onnx": "<path, relative to the .om>",
"dynamic_batch": [1, 2, 4, 8]} (batch gears, adds the `ascend_mbatch_shape_data` input) or
{"fake_om": 1, "onnx": ..., "static_batch": 1}; the fake runs the ONNX with ONNX Runtime.
`acl._state.leaks()` counts what is still allocated; `acl._state.STATE.calls` counts calls;
`acl._state.STATE.misuse` lists calls the real runtime would crash on (a destroyed context made current).
`acl._versions.apply(name)` imitates an older CANN or another card (FAKE_ACL_CANN for a whole process).

Checked against the real binding's source (hicann/runtime python/pyACL/: mdl/mdl_wrap.cpp,
rt/rt_device.cpp, util/*.cpp), CANN's pyacl API reference and Ascend/samples acl_net.py /
acllite_model.py. None of pyacl's wrappers release the GIL (no Py_BEGIN_ALLOW_THREADS in mdl_wrap.cpp):
`acl.mdl.execute` holds it for the whole execution (this fake cannot hold it; it serialises on its lock).
"""

from __future__ import annotations

from . import _state, _versions, mdl, rt, util
from ._state import ACL_ERROR_INVALID_PARAM, ACL_ERROR_REPEAT_INITIALIZE, ACL_ERROR_UNINITIALIZE, ACL_SUCCESS

__all__ = ["create_data_buffer", "destroy_data_buffer", "finalize", "get_data_buffer_addr",
           "get_data_buffer_size_v2", "init", "mdl", "rt", "util"]


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
    """aclCreateDataBuffer: wraps memory; returns a handle (0 on failure, as the C API returns NULL)."""
    with _state.LOCK:
        _state.STATE.calls["create_data_buffer"] += 1
        if ptr not in _state.STATE.allocs or size > _state.STATE.allocs[ptr].size:
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
