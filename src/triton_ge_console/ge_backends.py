"""What the two GE backends accept (`ge`, this project's glue; `npu_ge`, CANN's native backend), named once
for the glue, the deployment spec and the validator.

npu_ge as its source reads its configuration (hicann/triton-inference-server-ge-backend at 5a82641e,
src/model_state.cpp, src/model_instance_state.cpp, src/inference.cpp and src/scheduler.cpp):
- a model's `parameters`: `device_ids`, `device_exec_blocks`, `instance_exec_blocks`, `static_model`,
  `dump_graph`, `profiling` and `dump_data` (ModelState::ParseModelParametersConfig). `static_model` and
  the two block counts go through std::stoi, so text that is not an integer ("true") throws and the model
  fails to load; `dump_graph` and `dump_data` switch on only for "1"; `profiling` only for "dynamic" or
  "true", compared as written, any other value ignored without a log line (npu_ge_switch_problem). Every
  parameter also goes to ModelState::SetOptions (ModelState::Create): `session.*` ones are options of each
  ge::Session, `graph.*` ones of Session::AddGraph, the prefix stripped (its tuning guide
  sets `graph.ge.inputShape` so).
- `--backend-config=npu_ge,<key>=<value>`: the same seven keys, and GE's options: `ge.*` for
  GEInitialize (read only here), `session.*` and `graph.*` as above (ModelState::ParseCmdlineConfig).
  There the switches are read otherwise: `static_model`, `dump_graph` and `dump_data` are on for the string
  "1" alone (no std::stoi), `profiling` for any value (SetProfiling(value)); the block counts go through
  std::stoi (ProcessDeviceExecBlocksConfig, ProcessInstanceExecBlocksConfig).
- `device_exec_blocks` other than -1 is taken as given, even 0 or below, and `instance_exec_blocks` enters
  ceil(instances x blocks / NPUs) (ModelInstanceState::CalculateDeviceExecBlock): a count that opens no GE
  session leaves every request waiting (npu_ge_blocks_problem). `instance_exec_blocks` is read for every
  execution too, whatever `device_exec_blocks` is: each waits for that many idle sessions and takes them
  (inference.cpp Inference::BatchSplicTasks, scheduler.cpp Scheduler::GetIdleInstances), so more than the
  sessions opened waits forever and 0 or below can take none (npu_ge_scheduling_problem).
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


def npu_ge_blocks_problem(key: str, value: int) -> str | None:
    """Why a block count alone makes npu_ge hang or crash, whatever else is set (None when it alone does
    not): device_exec_blocks is taken as given unless it is -1 (model_instance_state.cpp
    CalculateDeviceExecBlock), so 0 or below opens no GE session, and every execution waits for
    instance_exec_blocks idle ones (inference.cpp BatchSplicTasks, scheduler.cpp GetIdleInstances), so 0
    gets none and SetInferenceContext reads the first of none. The rest: npu_ge_scheduling_problem."""
    if key == "device_exec_blocks" and value <= 0 and value != -1:
        return (f"npu_ge opens device_exec_blocks GE sessions on each NPU as given (-1: its default): "
                f"{value} opens none, so requests wait forever; use a positive count or -1")
    if key == "instance_exec_blocks" and value == 0:
        return ("npu_ge runs each execution on instance_exec_blocks of its GE sessions, whatever "
                "device_exec_blocks is: 0 takes none and the first of none is read, so the server crashes "
                "at the first request; use a positive count")
    return None


def npu_ge_scheduling_problem(device_exec_blocks: int | None, instance_exec_blocks: int | None,
                              instances: int, npus: int | None) -> str | None:
    """Why instance_exec_blocks makes npu_ge hang or crash with the GE sessions it opens (None when it
    does not, or when the NPUs are unknown and they decide). Each execution waits until that many of the
    model's sessions are idle and takes them (inference.cpp BatchSplicTasks; scheduler.cpp
    GetIdleInstances, HasIdleInstance, SelectInstancesWithLoadBalance, whose count is a size_t, so a
    negative one takes every idle session and waits for none); the sessions are device_exec_blocks per NPU,
    or ceil(instances x instance_exec_blocks / NPUs) for -1 (CalculateDeviceExecBlock)."""
    device = -1 if device_exec_blocks is None else device_exec_blocks
    wanted = 1 if instance_exec_blocks is None else instance_exec_blocks
    if wanted == 0 or (device <= 0 and device != -1):
        return None  # npu_ge_blocks_problem's
    if wanted < 0 and device == -1:
        return (f"instance_exec_blocks {wanted} with device_exec_blocks -1 (its default) opens no GE session "
                "(ceil(instances x instance_exec_blocks / NPUs) <= 0) and each execution, asking for a "
                "negative number, gets none at once: the server crashes at the first request; use a "
                "positive count")
    if wanted < 0 and instances > 1:
        return (f"a negative instance_exec_blocks ({wanted}) makes each execution take every idle GE "
                f"session: with {instances} instances an execution that finds none idle reads the first of "
                "none and the server crashes; use a positive count")
    if wanted > 0 and device > 0 and npus is not None and wanted > device * npus:
        return (f"npu_ge waits for {wanted} idle GE sessions for each execution, but opens {device} x {npus} "
                f"NPU{'s' if npus > 1 else ''} = {device * npus} (device_exec_blocks x NPUs): every request "
                f"waits forever; use at most {device * npus}")
    return None


def npu_ge_id_list(text: str) -> tuple[int, ...] | None:
    """The NPU ids npu_ge reads from a device_ids text (Split at ',', empty parts skipped, std::stoi each:
    model_state.cpp ProcessDeviceIdsConfig), None where std::stoi throws and its load fails."""
    ids = [stoi(part) for part in text.split(",") if part]
    return None if None in ids else tuple(i for i in ids if i is not None)


def npu_ge_repeated_id_problem(ids: tuple[int, ...]) -> str | None:
    """Why device_ids naming an NPU twice is refused (None when each is named once): npu_ge keeps the list
    as written (model_state.cpp ProcessDeviceIdsConfig and ParseParameterValue push every id) and sets up
    each entry (model_instance_state.cpp InitializeDeviceThreads: CreateDeviceThreads per entry, each with
    device_exec_blocks GE sessions, the count divided by the list's length), so the NPU loads the model
    once more per repeat, in silence."""
    repeated = next((i for i in ids if ids.count(i) > 1), None)
    if repeated is None:
        return None
    times = ids.count(repeated)
    return (f"NPU {repeated} is named {times} times: npu_ge does not merge repeated ids, it sets NPU "
            f"{repeated} up {times} times, each with its device_exec_blocks GE sessions (each a full copy "
            "of the model, unless static_model), so the model takes that much more of its memory; name "
            "each NPU once")


# switch values that read "on" / "off" to a person: npu_ge's comparison with "1" takes the first as off, and
# its profiling switch from the command line takes the second as on
LOOKS_ON = ("true", "on", "yes", "y", "enable", "enabled")
LOOKS_OFF = ("0", "false", "off", "no", "")


def npu_ge_switch_problem(key: str, value: str) -> str | None:
    """Why a model's switch parameter is left off though it does not read off (None otherwise): npu_ge
    compares it as written with its on values and ignores any other in silence, with no log line
    (model_state.cpp ParseModelParametersConfig: dump_graph and dump_data == "1", profiling == "dynamic"
    or "true")."""
    values = NPU_GE_SWITCH_VALUES.get(key)
    if values is None or value in values or value.strip().lower() in LOOKS_OFF:
        return None
    said = " or ".join(f"'{v}'" for v in values)
    return f"npu_ge turns {key} on only for {said}: '{value}' leaves it off"


def npu_ge_cmdline_problem(key: str, value: str) -> str | None:
    """What npu_ge makes of one of its keys given through --backend-config, where it reads them otherwise
    than as model parameters (model_state.cpp ParseCmdlineConfig): static_model is compared with the string
    "1" (no std::stoi), profiling is handed to GE for any value (SetProfiling sets PROFILING_MODE to it and
    PROFILING_OPTIONS), the block counts go through std::stoi (ProcessDeviceExecBlocksConfig)."""
    if key == "static_model" and value != "1" and (stoi(value) == 1 or value.strip().lower() in LOOKS_ON):
        return (f"npu_ge compares static_model from --backend-config with the string '1' (no integer "
                f"reading there): '{value}' leaves the static graph off; write 1")
    if key == "profiling" and value.strip().lower() in LOOKS_OFF:
        return (f"npu_ge hands any profiling value from --backend-config to GE as PROFILING_MODE, with "
                f"PROFILING_OPTIONS set (a model parameter counts only as 'dynamic' or 'true'): '{value}' "
                "does not keep it off; leave the key out")
    if key == "device_ids":
        ids = npu_ge_id_list(value)
        if ids is None:
            return f"npu_ge reads each id of device_ids with std::stoi: '{value}' fails its load"
        if any(i < 0 for i in ids):
            return f"'{value}': NPU ids are >= 0"
        return npu_ge_repeated_id_problem(ids)
    if key in ("device_exec_blocks", "instance_exec_blocks"):
        number = stoi(value)
        if number is None:
            return f"npu_ge reads {key} with std::stoi: '{value}' fails its load"
        return npu_ge_blocks_problem(key, number)
    return None


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
