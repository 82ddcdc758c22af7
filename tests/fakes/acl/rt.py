"""acl.rt: devices, per-thread contexts, memory, memcpy, device figures."""

from __future__ import annotations

import ctypes
import os

from . import _state
from ._state import (
    ACL_DDR_MEM,
    ACL_ERROR_INVALID_PARAM,
    ACL_ERROR_RT_CONTEXT_NULL,
    ACL_ERROR_RT_INVALID_DEVICEID,
    ACL_ERROR_RT_MEMORY_ALLOCATION,
    ACL_ERROR_RT_PARAM_INVALID,
    ACL_ERROR_UNINITIALIZE,
    ACL_HBM_MEM,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
    ACL_SUCCESS,
)


def _visible() -> list[int] | None:
    """ASCEND_RT_VISIBLE_DEVICES as logical ids (None: unset, every device visible)."""
    text = os.environ.get("ASCEND_RT_VISIBLE_DEVICES", "").strip()
    return [int(part) for part in text.split(",") if part.strip()] if text else None


def _device_ok(device_id: int) -> bool:
    """A user device id this process may set: aclrtSetDevice takes user ids, 0 .. the number of devices
    ASCEND_RT_VISIBLE_DEVICES lists (CANN runtime API reference, aclrtGetLogicDevIdByUserDevId: "user id N
    is the N-th id the variable sets"), every device without it."""
    visible = _visible()
    return 0 <= device_id < (len(visible) if visible is not None else _state.DEVICE_COUNT)


def get_user_dev_id_by_logic_dev_id(logic_id: int) -> tuple[int, int]:
    """aclrtGetUserDevIdByLogicDevId: (user id, ret) (pyACL rt_device.cpp WrapAclRtGetUserDevIdByLogicDevId);
    a logical id the variable does not list answers ACL_ERROR_RT_INVALID_DEVICEID (the fake's choice: the
    reference names no code)."""
    visible = _visible()
    if visible is None:  # "without the variable the user id is the logical id": set_device judges it
        return logic_id, ACL_SUCCESS
    if logic_id not in visible:
        return 0, ACL_ERROR_RT_INVALID_DEVICEID
    return visible.index(logic_id), ACL_SUCCESS


def get_logic_dev_id_by_user_dev_id(user_id: int) -> tuple[int, int]:
    """aclrtGetLogicDevIdByUserDevId: (logical id, ret)."""
    if not _device_ok(user_id):
        return 0, ACL_ERROR_RT_INVALID_DEVICEID
    visible = _visible()
    return (visible[user_id] if visible is not None else user_id), ACL_SUCCESS


def get_logic_dev_id_by_phy_dev_id(phy_id: int) -> tuple[int, int]:
    """aclrtGetLogicDevIdByPhyDevId: (id, ret). Outside a container the physical id is the logical one, and
    what this call answers is in fact the user id (CANN 9.1 runtime reference: "the logical device ID in
    this API is actually the user device ID")."""
    return get_user_dev_id_by_logic_dev_id(phy_id)


def get_phy_dev_id_by_logic_dev_id(user_id: int) -> tuple[int, int]:
    """aclrtGetPhyDevIdByLogicDevId: (physical id, ret); its "logical" id is the user id (as above)."""
    return get_logic_dev_id_by_user_dev_id(user_id)


def set_device(device_id: int) -> int:
    """aclrtSetDevice: reference-counted; creates the device's default context for this thread."""
    with _state.LOCK:
        if not _state.STATE.initialized:
            return ACL_ERROR_UNINITIALIZE
        if not _device_ok(device_id):
            return ACL_ERROR_RT_INVALID_DEVICEID
        _state.STATE.devices_set[device_id] += 1
        return ACL_SUCCESS


def reset_device(device_id: int) -> int:
    """aclrtResetDevice."""
    with _state.LOCK:
        if _state.STATE.devices_set[device_id] <= 0:
            return ACL_ERROR_RT_INVALID_DEVICEID
        _state.STATE.devices_set[device_id] -= 1
        if _state.STATE.devices_set[device_id] == 0:
            del _state.STATE.devices_set[device_id]
        return ACL_SUCCESS


def create_context(device_id: int) -> tuple[int, int]:
    """aclrtCreateContext: (context, ret); the new context becomes current for this thread."""
    with _state.LOCK:
        if _state.STATE.devices_set[device_id] <= 0:
            return 0, ACL_ERROR_RT_INVALID_DEVICEID
        context = _state.new_handle()
        _state.STATE.contexts[context] = device_id
        _state.set_current_context(context)
        return context, ACL_SUCCESS


def destroy_context(context: int) -> int:
    """aclrtDestroyContext."""
    with _state.LOCK:
        if _state.STATE.contexts.pop(context, None) is None:
            return ACL_ERROR_RT_CONTEXT_NULL
        _state.STATE.destroyed_contexts.add(context)
        if _state.current_context() == context:
            _state.set_current_context(None)
        return ACL_SUCCESS


def set_context(context: int) -> int:
    """aclrtSetCurrentContext for the calling thread.

    The real runtime does not check a handle it was given: a destroyed context is a dangling pointer
    (undefined behaviour, typically a crash). The fake answers an error and records the misuse.
    """
    with _state.LOCK:
        if context in _state.STATE.destroyed_contexts:
            _state.STATE.misuse.append(f"set_context({context:#x}) after destroy_context")
        if context not in _state.STATE.contexts:
            return ACL_ERROR_RT_CONTEXT_NULL
        _state.set_current_context(context)
        return ACL_SUCCESS


def get_context() -> tuple[int, int]:
    """aclrtGetCurrentContext: (context, ret)."""
    context = _state.current_context()
    return (context, ACL_SUCCESS) if context is not None else (0, ACL_ERROR_RT_CONTEXT_NULL)


def _used(device: int) -> int:
    return sum(a.size for a in _state.STATE.allocs.values() if a.device == device)


def malloc(size: int, policy: int) -> tuple[int, int]:
    """aclrtMalloc on the current context's device: (ptr, ret)."""
    with _state.LOCK:
        _state.STATE.calls["rt.malloc"] += 1
        context = _state.current_context()
        if context is None or context not in _state.STATE.contexts:
            return 0, ACL_ERROR_RT_CONTEXT_NULL
        if size <= 0:
            return 0, ACL_ERROR_INVALID_PARAM
        device = _state.STATE.contexts[context]
        if _used(device) + size > _state.DEVICE_MEMORY:
            return 0, ACL_ERROR_RT_MEMORY_ALLOCATION
        return _state.allocate(size, device, context), ACL_SUCCESS


def malloc_host(size: int) -> tuple[int, int]:
    """aclrtMallocHost: (ptr, ret)."""
    with _state.LOCK:
        _state.STATE.calls["rt.malloc_host"] += 1
        if _state.current_context() is None:
            return 0, ACL_ERROR_RT_CONTEXT_NULL
        return _state.allocate(size, None, None), ACL_SUCCESS


def _free(ptr: int, host: bool) -> int:
    with _state.LOCK:
        alloc = _state.STATE.allocs.get(ptr)
        if alloc is None or (alloc.device is None) != host:
            return ACL_ERROR_RT_PARAM_INVALID  # double free, or the wrong kind of pointer
        del _state.STATE.allocs[ptr]
        return ACL_SUCCESS


def free(ptr: int) -> int:
    """aclrtFree (device memory)."""
    return _free(ptr, host=False)


def free_host(ptr: int) -> int:
    """aclrtFreeHost."""
    return _free(ptr, host=True)


def _is_device(ptr: int) -> bool:
    alloc = _state.STATE.allocs.get(ptr)
    return alloc is not None and alloc.device is not None


def memcpy(dst: int, dest_max: int, src: int, count: int, kind: int) -> int:
    """aclrtMemcpy: the kind must match where dst and src live; count must fit dest_max."""
    with _state.LOCK:
        _state.STATE.calls["rt.memcpy"] += 1
        if count > dest_max or count < 0:
            return ACL_ERROR_INVALID_PARAM
        wanted = {ACL_MEMCPY_HOST_TO_DEVICE: (True, False), ACL_MEMCPY_DEVICE_TO_HOST: (False, True)}
        if kind in wanted and (_is_device(dst), _is_device(src)) != wanted[kind]:
            return ACL_ERROR_INVALID_PARAM
        for ptr in (dst, src):
            alloc = _state.STATE.allocs.get(ptr)
            if alloc is not None and count > alloc.size:
                return ACL_ERROR_INVALID_PARAM
        if kind == ACL_MEMCPY_DEVICE_TO_HOST:
            _state.STATE.calls["rt.memcpy d2h bytes"] += count
        ctypes.memmove(dst, src, count)
        return ACL_SUCCESS


DDR_OF_HBM_CARDS = 16 << 30  # the DDR of a card with HBM: not where models are allocated


def get_mem_info(attr: int) -> tuple[int, int, int]:
    """aclrtGetMemInfo(attr) for the current context's device: (free, total, ret).

    Models are allocated in the card's main memory: HBM, or DDR on Ascend 310 (Atlas 200/300/500),
    where ACL_HBM_MEM answers 0/0 with success (the profile's `hbm`).
    """
    with _state.LOCK:
        context = _state.current_context()
        if context is None or context not in _state.STATE.contexts:
            return 0, 0, ACL_ERROR_RT_CONTEXT_NULL
        if attr not in (ACL_DDR_MEM, ACL_HBM_MEM):
            return 0, 0, ACL_ERROR_INVALID_PARAM
        if (attr == ACL_HBM_MEM) != _state.PROFILE.hbm:
            return (0, 0, ACL_SUCCESS) if attr == ACL_HBM_MEM else (
                DDR_OF_HBM_CARDS, DDR_OF_HBM_CARDS, ACL_SUCCESS)
        used = _used(_state.STATE.contexts[context])
        return _state.DEVICE_MEMORY - used, _state.DEVICE_MEMORY, ACL_SUCCESS


def get_device_utilization_rate(device_id: int) -> tuple[dict[str, int], int]:
    """aclrtGetDeviceUtilizationRate: (dict, ret) with snake-case keys, as the binding builds them.

    hicann/runtime python/pyACL/rt/rt_device.cpp GetPyDictFromUtilizationInfo: cube_utilization,
    vector_utilization, aicpu_utilization, memory_utilization, utilization_extend. -1: not measured.
    Older pyacl has no such function (the profile's `utilization`; `_versions.apply` removes it).
    """
    if not _device_ok(device_id):
        return {}, ACL_ERROR_RT_INVALID_DEVICEID
    # the device's load at the moment asked (the fake's reading: 100 while one of its executions runs);
    # a thread of the executing process can only ask between executions (the GIL, _state.hold_gil)
    busy = 100 if _state.STATE.in_flight[device_id] > 0 else 0
    return {"cube_utilization": busy, "vector_utilization": -1, "aicpu_utilization": 0,
            "memory_utilization": -1, "utilization_extend": 0}, ACL_SUCCESS
