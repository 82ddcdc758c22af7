"""What the two GE backends accept (`ge`, this project's glue; `npu_ge`, CANN's native backend), named once
for the glue, the deployment spec and the validator.

npu_ge as its source reads its configuration (hicann/triton-inference-server-ge-backend, src/model_state.cpp
and src/model_instance_state.cpp):
- a model's `parameters`: `device_ids`, `device_exec_blocks`, `instance_exec_blocks`, `static_model`,
  `dump_graph`, `profiling` and `dump_data` (ModelState::ParseModelParametersConfig). `static_model` and
  the two block counts go through std::stoi, so text that is not an integer ("true") throws and the model
  fails to load; `dump_graph` and `dump_data` switch on only for "1"; `profiling` only for "dynamic" or
  "true". Every parameter also goes to ModelState::SetOptions (ModelState::Create): `session.*` ones are
  options of each ge::Session, `graph.*` ones of Session::AddGraph, the prefix stripped (its tuning guide
  sets `graph.ge.inputShape` so).
- `--backend-config=npu_ge,<key>=<value>`: the same seven keys, and GE's options: `ge.*` for
  GEInitialize (read only here), `session.*` and `graph.*` as above (ModelState::ParseCmdlineConfig).
- NPUs: the model's first instance sets up every NPU of `device_ids` (all NPUs aclrtGetDeviceCount sees
  when none are given: ModelInstanceState::InitDevices) and on each it opens `device_exec_blocks`
  sessions (by default ceil(instances x instance_exec_blocks / NPUs): CalculateDeviceExecBlock), each
  compiling and loading the whole graph, except with a static graph, where they share the first session
  (CreateSessions). So every NPU holds at least one full copy of the model: npu_ge replicates, it never
  splits a model over NPUs.
"""

from __future__ import annotations

import re

GE_BACKENDS = ("ge", "npu_ge")
EXECUTION_MODES = ("auto", "npu", "cpu")
DEFAULT_DEVICE_MEMORY_GIB = 64.0  # an emulated NPU's capacity, unless the config or $GE_NPU_MEMORY_GIB says

NPU_GE_PARAMETERS = ("device_ids", "device_exec_blocks", "instance_exec_blocks", "static_model",
                     "dump_graph", "dump_data", "profiling")
NPU_GE_INTEGER_PARAMETERS = ("device_exec_blocks", "instance_exec_blocks", "static_model")
NPU_GE_SWITCH_VALUES = {"dump_graph": ("1",), "dump_data": ("1",), "profiling": ("dynamic", "true")}
GE_OPTION_PREFIXES = ("ge.", "session.", "graph.")
NPU_GE_PARAMETER_OPTION_PREFIXES = ("session.", "graph.")  # GE options npu_ge also reads as model parameters
# std::stoi: optional leading blanks and sign, then at least one digit (what follows the digits is ignored)
_STOI = re.compile(r"^\s*([+-]?\d+)")


def stoi(text: str) -> int | None:
    """The integer C++'s std::stoi reads from text, None where it throws (npu_ge then fails to load)."""
    found = _STOI.match(text)
    return int(found.group(1)) if found else None


def is_ge_option(key: str) -> bool:
    """A GE option key (ge.*, session.*, graph.*): npu_ge reads these only from --backend-config."""
    return key.startswith(GE_OPTION_PREFIXES)


def is_npu_ge_parameter_option(key: str) -> bool:
    """A GE option npu_ge reads as a model parameter too (session.*, graph.*: ModelState::SetOptions)."""
    return key.startswith(NPU_GE_PARAMETER_OPTION_PREFIXES)


def ge_option_reason(key: str) -> str:
    """Why a GE option as a model parameter does nothing here, and where it belongs."""
    if is_npu_ge_parameter_option(key):
        return (f"GE option '{key}' is read only by npu_ge (as its model parameter or from "
                "--backend-config): the ge glue runs an OM already compiled by ATC")
    return (f"GE option '{key}' as a model parameter is read by neither backend: npu_ge takes ge.* "
            f"(GEInitialize's options) only from --backend-config=npu_ge,{key}=<value> (in a spec: "
            "server.backend_config.npu_ge), and the ge glue runs an OM already compiled by ATC")


def npu_ge_sessions_per_npu(instances: int, npus: int, device_exec_blocks: int | None,
                            instance_exec_blocks: int | None, static: bool) -> int:
    """How many full copies of an npu_ge model each of its NPUs holds: one per GE session there (one in
    all with a static graph, whose sessions share the first)."""
    if static:
        return 1
    if device_exec_blocks is not None and device_exec_blocks > 0:
        return device_exec_blocks
    blocks = instance_exec_blocks if instance_exec_blocks is not None and instance_exec_blocks > 0 else 1
    return max(1, -(-max(1, instances) * blocks // max(1, npus)))
