"""Shared state of the fake AscendCL: devices, contexts, memory, models, datasets, and leak accounting.

Error codes follow CANN's aclError values (hicann/runtime include/external/acl/acl_base_rt.h) and GE's
(include/external/acl/error_codes/ge_error_codes.h). Memory is real (ctypes buffers), so pointers are real
addresses and memcpy really copies bytes. `PROFILE` is the CANN version and card being imitated
(tests/fakes/acl/_versions.py).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import itertools
import os
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

ACL_SUCCESS = 0
ACL_ERROR_INVALID_PARAM = 100000
ACL_ERROR_UNINITIALIZE = 100001
ACL_ERROR_REPEAT_INITIALIZE = 100002
ACL_ERROR_INVALID_FILE = 100003
ACL_ERROR_PARSE_FILE = 100006
ACL_ERROR_INVALID_MODEL_ID = 100011
ACL_ERROR_MODEL_INPUT_NOT_MATCH = 100017
ACL_ERROR_MODEL_NOT_DYNAMIC = 100019
ACL_ERROR_RT_PARAM_INVALID = 107000
ACL_ERROR_RT_INVALID_DEVICEID = 107001
ACL_ERROR_RT_CONTEXT_NULL = 107002
ACL_ERROR_RT_MEMORY_ALLOCATION = 207001
ACL_ERROR_STORAGE_OVER_LIMIT = 300000
ACL_ERROR_FAILURE = 500001
# acl_mdl.h: what an aclmdlBatch / aclmdlHW / aclmdlIODims holds (model_om2.cpp refuses more)
ACL_MAX_BATCH_NUM = ACL_MAX_HW_NUM = ACL_MAX_DIM_CNT = 128
# GE's codes, which aclmdlLoadFromFile passes through (ge_error_codes.h)
ACL_ERROR_GE_PARAM_INVALID = 145000
ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID = 145002
ACL_ERROR_GE_LOAD_MODEL = 545001
ACL_ERROR_GE_EXEC_LOAD_WEIGHT_PARTITION_FAILED = 545003
# acl_base.h: ACL_ERROR_GE_FAILURE, what aclmdlLoadFromFile answers for an OM of another NpuArch
ACL_ERROR_GE_FAILURE = 500002
# aclrtMemAttr (acl_rt.h): ACL_DDR_MEM, ACL_HBM_MEM, ...
ACL_DDR_MEM = 0
ACL_HBM_MEM = 1

ACL_MEMCPY_HOST_TO_HOST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_MEMCPY_DEVICE_TO_DEVICE = 3

DEVICE_COUNT = int(os.environ.get("FAKE_ACL_DEVICE_COUNT", "8"))
DEVICE_MEMORY = int(float(os.environ.get("FAKE_ACL_DEVICE_GIB", "32")) * (1 << 30))


@dataclass
class DeviceAlloc:
    """A device (or pinned host) allocation: real bytes, owned by one context."""

    buffer: Any
    size: int
    device: int | None  # None for host memory from malloc_host
    context: int | None


@dataclass
class Dataset:
    """An aclmdlDataset: ordered data buffers, the batch set by set_dynamic_batch_size, the profile set by
    set_input_dynamic_dims / set_dynamic_hw_size, and tensor descriptions by index
    (aclmdlSetDatasetTensorDesc for inputs; for outputs of a dynamic-shape model, set by execute)."""

    buffers: list[int] = field(default_factory=list)
    dynamic_batch: int | None = None
    profile: int | None = None
    tensor_descs: dict[int, int] = field(default_factory=dict)


@dataclass
class TensorDesc:
    """An aclTensorDesc: data type, dims, format; owned by the caller (None) or by a dataset (outputs)."""

    acl_type: int
    dims: list[int]
    fmt: int
    owner: int | None = None


@dataclass
class Model:
    """A loaded fake OM."""

    session: Any
    context: int
    device: int
    inputs: list[dict[str, Any]]  # name, dtype (numpy), dims, acl_type
    outputs: list[dict[str, Any]]
    gears: list[int]
    weight_size: int
    output_dims: dict[int, list[list[int]]] = field(default_factory=dict)  # gear → each output's dims
    current_gear: int | None = None  # the last gear or profile set (aclmdlGetCurOutputDims reads it)
    kind: str = "static"  # "batch", "dims" (--dynamic_dims), "hw" (--dynamic_image_size), "shape"
    profiles: list[list[list[int]]] = field(default_factory=list)  # dims/hw: each input's shape per profile
    hw: list[list[int]] = field(default_factory=list)  # hw: (height, width) per profile
    aipp: list[tuple[int, int]] = field(default_factory=list)  # per input: (aclmdlInputAippType, index)
    execute_s: float | None = None  # the device time of one execution (OM spec "execute_ms")
    held: list[int] = field(default_factory=list)  # device memory the load took (weights, work)


@dataclass
class State:
    """Process-wide fake runtime state."""

    initialized: bool = False
    devices_set: Counter[int] = field(default_factory=Counter)
    contexts: dict[int, int] = field(default_factory=dict)  # context → device
    destroyed_contexts: set[int] = field(default_factory=set)
    allocs: dict[int, DeviceAlloc] = field(default_factory=dict)
    data_buffers: dict[int, tuple[int, int]] = field(default_factory=dict)  # handle → (ptr, size)
    datasets: dict[int, Dataset] = field(default_factory=dict)
    descs: dict[int, int | None] = field(default_factory=dict)  # desc → model id
    models: dict[int, Model] = field(default_factory=dict)
    calls: Counter[str] = field(default_factory=Counter)
    busy_executions: Counter[int] = field(default_factory=Counter)
    in_flight: Counter[int] = field(default_factory=Counter)  # executions running now, per device
    misuse: list[str] = field(default_factory=list)  # calls the real runtime would crash or corrupt on
    tensor_descs: dict[int, TensorDesc] = field(default_factory=dict)


@dataclass(frozen=True)
class Profile:
    """The CANN version and card imitated: which calls exist and how memory is reported."""

    name: str
    cann: tuple[int, int, int]
    soc: str  # the SoC the device is (OMs built for another fail to load)
    hbm: bool = True  # False: Atlas 200/300/500 (Ascend 310) report HBM as 0/0, memory is DDR
    bytes_ptr: bool = True  # acl.util.bytes_to_ptr / ptr_to_bytes (CANN >= 6.0.1)
    utilization: bool = True  # acl.rt.get_device_utilization_rate


# The NpuArch of each SoC family, as hicann's operator libraries map SocVersion to NpuArch (their platform
# stubs, PlatformInfo::GetCurNpuArch: ASCEND910 → DAV_1001, ASCEND910B and ASCEND910_93 → DAV_2201,
# ASCEND310P → DAV_2002, ASCEND310B → DAV_3002, ASCEND950 → DAV_3510). AscendCL loads an OM on any SoC
# of its NpuArch (an OM for Ascend910B3 runs on a 910B4); another NpuArch fails with ACL_ERROR_GE_FAILURE.
NPU_ARCH_FAMILIES = (
    (re.compile(r"^Ascend910B\d$|^Ascend910_93\d\d$"), "DAV_2201"),
    (re.compile(r"^Ascend910(A|B|ProA|ProB|PremiumA)?$"), "DAV_1001"),
    (re.compile(r"^Ascend310P\d$"), "DAV_2002"),
    (re.compile(r"^Ascend310B\d$"), "DAV_3002"),
    (re.compile(r"^Ascend950"), "DAV_3510"),
)


def npu_arch(soc: str) -> str:
    """The SoC's NpuArch; an SoC outside the table is its own family."""
    return next((arch for pattern, arch in NPU_ARCH_FAMILIES if pattern.match(soc)), soc)


PROFILES_DEFAULT = Profile("cann-8.0-910b", (8, 0, 0), "Ascend910B3")
PROFILE = PROFILES_DEFAULT
STATE = State()
LOCK = threading.RLock()
_HANDLES = itertools.count(0x1000)
_current = threading.local()


def new_handle() -> int:
    """A fresh opaque handle (contexts, descs, datasets, buffers, model ids)."""
    return next(_HANDLES)


def current_context() -> int | None:
    """This thread's current context (ACL contexts are per thread)."""
    return getattr(_current, "context", None)


def set_current_context(context: int | None) -> None:
    """Make context current for this thread."""
    _current.context = context


def allocate(size: int, device: int | None, context: int | None) -> int:
    """Real memory; returns its address."""
    buffer = ctypes.create_string_buffer(max(1, size))
    ptr = ctypes.addressof(buffer)
    STATE.allocs[ptr] = DeviceAlloc(buffer, size, device, context)
    return ptr


def leaks() -> dict[str, int]:
    """What is still allocated or loaded: every count must be zero after a clean teardown (a loaded model's
    own memory counts as the model)."""
    held = {ptr for model in STATE.models.values() for ptr in model.held}
    return {
        "devices": sum(STATE.devices_set.values()),
        "contexts": len(STATE.contexts),
        "device_memory": sum(1 for ptr, a in STATE.allocs.items()
                             if a.device is not None and ptr not in held),
        "host_memory": sum(1 for a in STATE.allocs.values() if a.device is None),
        "data_buffers": len(STATE.data_buffers),
        "datasets": len(STATE.datasets),
        "descs": len(STATE.descs),
        "models": len(STATE.models),
        "tensor_descs": sum(1 for d in STATE.tensor_descs.values() if d.owner is None),
    }


def reset() -> None:
    """Forget everything (between tests), as a fresh process would (the default version again)."""
    global STATE, PROFILE
    with LOCK:
        STATE = State()
        PROFILE = PROFILES_DEFAULT
        set_current_context(None)


_LIBC = ctypes.PyDLL(ctypes.util.find_library("c") or "libc.so.6")  # PyDLL: its calls keep the GIL


def hold_gil(seconds: float) -> None:
    """Block in C for `seconds` without releasing the GIL, as pyACL's wrappers do around every AscendCL
    call (hicann/runtime python/pyACL/mdl/mdl_wrap.cpp WrapAclMdlExecute: no Py_BEGIN_ALLOW_THREADS), so
    no other Python thread of the process runs meanwhile."""
    if seconds > 0:
        _LIBC.usleep(ctypes.c_uint(int(seconds * 1e6)))
