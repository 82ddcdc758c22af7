"""What AscendCL and GE return codes mean, so a failed load says why and not only a number.

aclmdlLoadFromFile answers ACL's own codes (1000xx, 107xxx, 207xxx, 5000xx: acl_base_rt.h, acl_base.h) and
passes GE's through (145xxx, 245xxx, 545xxx: include/external/acl/error_codes/ge_error_codes.h,
hicann/runtime). An OM built for another NpuArch (chip generation) fails with 500002, ACL_ERROR_GE_FAILURE.
"""

from __future__ import annotations

MEANINGS: dict[int, str] = {
    100000: "invalid parameter",
    100001: "AscendCL is not initialized",
    100003: "the model file does not exist or cannot be read",
    100006: "the file could not be parsed (not an OM?)",
    100007: "the file lacks a required attribute",
    100011: "invalid model id (not loaded, or unloaded)",
    100012: "the model could not be deserialized (damaged, or from an incompatible CANN)",
    100013: "the model could not be parsed (damaged, or from an incompatible CANN)",
    100014: "the model file could not be read",
    100015: "the model size is invalid (truncated file?)",
    100016: "the model lacks a required attribute",
    100017: "the inputs do not match the model",
    100019: "the model has no dynamic batch gears",
    107001: "invalid device id (not visible to this process?)",
    107002: "no current context",
    207001: "out of device memory",
    145000: "GE refused a parameter (ACL_ERROR_GE_PARAM_INVALID: an argument GE does not take; the plog "
            "in ~/ascend/log names it)",
    145002: "GE: invalid model path",
    145003: "GE: invalid model id",
    145006: "GE: invalid input data size",
    145013: "GE: invalid dynamic batch size (not one of the OM's gears)",
    145021: "GE: invalid shape",
    145022: "GE: invalid data type",
    245000: "GE: out of memory",
    300000: "storage over limit (ACL_ERROR_STORAGE_OVER_LIMIT): at load, an OM with more than 128 gears, "
            "which AscendCL cannot describe (aclmdlGetDynamicBatch, GetDynamicHW, GetInputDynamicGearCount)",
    245002: "GE: device memory operation failed",
    545000: "GE internal error",
    545001: "GE failed to load the model",
    545002: "GE failed to load the model's partitions (damaged OM?)",
    545003: "GE failed to load the model's weights (damaged OM?)",
    545004: "GE failed to load the model's tasks (OM built for another SoC or CANN?)",
    545005: "GE failed to load the model's kernels (OM built for another SoC or CANN?)",
    545601: "GE: model execution timed out",
    500000: "AscendCL internal error (ACL_ERROR_INTERNAL_ERROR; see the plog)",
    500002: "GE failure (ACL_ERROR_GE_FAILURE): at load, most often an OM built for another NpuArch, i.e. "
            "another chip generation (the plog says the soc version is not supported on this device); "
            "rebuild it with atc --soc_version for this card",
}


def meaning(code: int) -> str:
    """A short explanation of an ACL/GE code, or where to look when we do not know it."""
    if code in MEANINGS:
        return MEANINGS[code]
    family = "GE" if len(str(code)) == 6 and str(code)[1:3] == "45" else "ACL"
    return f"{family} error (see CANN's error code reference and the plog in ~/ascend/log)"
