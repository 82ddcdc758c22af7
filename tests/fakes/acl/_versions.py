"""The CANN versions and cards the fake can imitate; `apply` removes what that version's pyacl lacks.

- `acl.util.bytes_to_ptr` / `ptr_to_bytes` exist from CANN 6.0.1; before, only `numpy_to_ptr` /
  `ptr_to_numpy` (Ascend/samples acllite_model.py and acl_net.py choose by version the same way; the
  registry of today's binding: hicann/runtime python/pyACL/util/pyutil_methods.cpp).
- `acl.rt.get_device_utilization_rate` (aclrtGetDeviceUtilizationRate) is absent from older pyacl.
- Atlas 200/300/500 (Ascend 310) have no HBM: `get_mem_info(ACL_HBM_MEM)` answers 0/0 with success, the
  memory is DDR (CANN pyacl API reference, acl.rt.get_mem_info; aclrtMemAttr in acl_rt.h).
Select one in-process with `apply(name)`, or for a tritonserver's stubs with FAKE_ACL_CANN=<name>.
"""

from __future__ import annotations

import os
import sys

from . import _state

PROFILES = {p.name: p for p in (
    _state.PROFILES_DEFAULT,
    _state.Profile("cann-6.0.0-910", (6, 0, 0), "Ascend910A", bytes_ptr=False, utilization=False),
    _state.Profile("cann-7.0-310", (7, 0, 0), "Ascend310", hbm=False),
)}


def apply(name: str) -> _state.Profile:
    """Imitate this version: later calls see its behaviour, and its missing functions are gone."""
    profile = PROFILES[name]
    _state.PROFILE = profile
    util, rt = sys.modules[f"{__package__}.util"], sys.modules[f"{__package__}.rt"]
    if not profile.bytes_ptr:
        for missing in ("bytes_to_ptr", "ptr_to_bytes"):
            if hasattr(util, missing):
                delattr(util, missing)
    if not profile.utilization and hasattr(rt, "get_device_utilization_rate"):
        delattr(rt, "get_device_utilization_rate")
    return profile


def apply_from_environment() -> None:
    """FAKE_ACL_CANN picks the version for a whole process (a Triton stub)."""
    name = os.environ.get("FAKE_ACL_CANN")
    if name:
        apply(name)
