"""What the two GE backends accept (`ge`, this project's glue; `npu_ge`, CANN's native backend), named once
for the glue, the deployment spec and the validator."""

from __future__ import annotations

GE_BACKENDS = ("ge", "npu_ge")
EXECUTION_MODES = ("auto", "npu", "cpu")
DEFAULT_DEVICE_MEMORY_GIB = 64.0  # an emulated NPU's capacity, unless the config or $GE_NPU_MEMORY_GIB says
