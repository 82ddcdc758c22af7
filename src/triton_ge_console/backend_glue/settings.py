"""What one model instance of the glue runs: paths, mode, device and threads, read from Triton's args."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from triton_ge_console.display import GIB
from triton_ge_console.errors import GeConsoleError
from triton_ge_console.ge_backends import (
    DEFAULT_DEVICE_MEMORY_GIB,
    EXECUTION_MODES,
    NPU_GE_PARAMETERS,
    npu_ge_blocks_problem,
    npu_ge_repeated_id_problem,
    npu_ge_scheduling_problem,
    npu_ge_sessions_per_npu,
    stoi,
)
from triton_ge_console.npu_smi import host_npu_count

MEMORY_ENV = "GE_NPU_MEMORY_GIB"
RUN_DIR_ENV = "GE_GLUE_RUN_DIR"
BACKEND_CONFIG_FLAG = "--backend-config"
_INSTANCE_INDEX = re.compile(r"_(\d+)$")


class GlueConfigError(GeConsoleError, ValueError):
    """A model's config asks for something the glue cannot do; the message names model and field."""


@dataclass(frozen=True)
class GlueSettings:
    """Everything an instance needs, resolved once at load."""

    model_name: str
    backend: str
    model_dir: Path
    version_dir: Path
    instance_name: str
    mode: str  # "npu" | "cpu" (the resolved execution mode)
    requested_mode: str  # "auto" | "npu" | "cpu" as configured
    device_id: int
    om_path: Path | None
    onnx_path: Path | None
    max_batch_size: int
    intra_op_threads: int
    inter_op_threads: int
    device_memory_bytes: int  # capacity of an emulated device
    devices: tuple[int, ...] = ()  # every NPU the instance's model is charged on (see memory_per_device)
    ort_spinning: bool = False  # ORT's pool threads spin-wait for work (CPU emulation)
    instances: int = 1  # the model's instances (config instance_group counts)
    npu_copies: int = 1  # npu_ge: full copies of the model on each NPU (one per GE session there)
    npus_unknown: bool = False  # npu_ge naming no NPU: it runs on every one, how many is unknown here

    def memory_per_device(self, model_bytes: int) -> int:
        """What this instance is charged on each of its NPUs: npu_ge's copies on every NPU of device_ids,
        carried by the model's instances in equal parts (native npu_ge replicates the model on each NPU);
        ge: the whole model on its one NPU, or 1/N on each of N (tensor parallel, a CPU-emulation what-if)."""
        if self.backend == "npu_ge":
            return -(-model_bytes * self.npu_copies // max(1, self.instances))
        return -(-model_bytes // max(1, len(self.devices)))

    @property
    def kind(self) -> str:
        """Device kind as metrics and snapshots label it."""
        return "npu" if self.mode == "npu" else "cpu-emulated"


def parameter(config: dict[str, Any], *keys: str) -> str | None:
    """A config parameter's string value (first of keys present), stripped; None when absent or empty."""
    params = config.get("parameters") or {}
    for key in keys:
        entry = params.get(key)
        if entry is None:
            continue
        value = entry.get("string_value", "") if isinstance(entry, dict) else str(entry)
        if value.strip():
            return str(value).strip()
    return None


def parse_device_ids(text: str | None, where: str) -> tuple[int, ...]:
    """'0,1' or '4' → (0, 1) / (4,); a bad list names the field."""
    if text is None:
        return ()
    try:
        ids = tuple(int(part) for part in text.replace(" ", "").split(",") if part)
    except ValueError:
        raise GlueConfigError(f"{where}: device_ids {text!r}: expected comma-separated integers") from None
    if any(i < 0 for i in ids):
        raise GlueConfigError(f"{where}: device_ids {text!r}: ids must be >= 0")
    return ids


def device_id_keys(backend: str) -> tuple[str, ...]:
    """The parameters a backend reads its NPUs from: native npu_ge `device_ids` alone (model_state.cpp
    ParseModelParametersConfig, ProcessDeviceIdsConfig), the glue DEVICEIDS too (its first examples'
    spelling)."""
    return ("device_ids",) if backend == "npu_ge" else ("device_ids", "DEVICEIDS")


def instance_index(instance_name: str) -> int:
    """Triton names instances `<group>_<index>`; the index spreads instances over devices."""
    match = _INSTANCE_INDEX.search(instance_name)
    return int(match.group(1)) if match else 0


def pick_device(device_ids: tuple[int, ...], instance_name: str, triton_device_id: int) -> int:
    """The device this instance runs on: device_ids round-robin by instance index, else Triton's id."""
    if not device_ids:
        return triton_device_id
    return device_ids[instance_index(instance_name) % len(device_ids)]


def model_file_candidates(path_text: str, version_dir: Path) -> list[Path]:
    """Where a configured file may be: absolute as is; relative, against the version folder, then the
    model folder, and only where that stays inside the model folder (`../../etc/passwd` has no place)."""
    path = Path(path_text)
    if path.is_absolute():
        return [path]
    model_dir = Path(os.path.normpath(version_dir.parent))
    candidates = [Path(os.path.normpath(base / path)) for base in (version_dir, version_dir.parent)]
    return [c for c in candidates if c != model_dir and model_dir in c.parents]


def leaves_model_folder(path_text: str) -> bool:
    """Whether a relative configured path points outside its model folder from every place it is tried."""
    return not model_file_candidates(path_text, Path("model") / "1")


def pick_devices(device_ids: tuple[int, ...], instance_name: str, triton_device_id: int,
                 parallel: int) -> tuple[int, ...]:
    """The NPUs this instance spans: device_ids cut into groups of `parallel`, round-robin by instance."""
    if not device_ids or parallel <= 1:
        return (pick_device(device_ids, instance_name, triton_device_id),)
    groups = [device_ids[i:i + parallel] for i in range(0, len(device_ids) - parallel + 1, parallel)]
    return tuple(groups[instance_index(instance_name) % len(groups)])


def tensor_parallel(config: dict[str, Any], device_ids: tuple[int, ...], where: str) -> int:
    """NPUs per instance (parameter tensor_parallel, default 1); device_ids must cut into whole groups."""
    parallel = _int_param(config, ("tensor_parallel",), 1, where)
    if parallel < 1 or (parallel > 1 and len(device_ids) % parallel):
        raise GlueConfigError(f"{where}: tensor_parallel {parallel}: device_ids {list(device_ids)} must "
                              f"list a whole multiple of it (>= 1)")
    return parallel


def resolve_path(path_text: str | None, version_dir: Path, where: str, key: str) -> Path | None:
    """A configured path: absolute as is, relative against the version folder, then the model folder."""
    if path_text is None:
        return None
    candidates = model_file_candidates(path_text, version_dir)
    if not candidates:
        raise GlueConfigError(f"{where}: {key} {path_text[:80]!r} leaves the model folder")
    return next((c for c in candidates if c.exists()), candidates[0])


def first_onnx(version_dir: Path) -> Path | None:
    """The first `*.onnx` in the version folder (sorted by name), as the native npu_ge picks it."""
    found = sorted(version_dir.glob("*.onnx")) if version_dir.is_dir() else []
    return found[0] if found else None


def honour_pythonpath() -> None:
    """The Python backend stub ignores $PYTHONPATH; CANN's set_env.sh puts pyacl there, so apply it."""
    entries = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in sys.path]
    sys.path[1:1] = entries


def acl_available() -> bool:
    """Whether CANN's `acl` Python module can be imported here."""
    return importlib.util.find_spec("acl") is not None


def resolve_mode(requested: str, om_path: Path | None, where: str) -> str:
    """auto → npu when acl imports and the OM exists, else cpu; npu without acl/OM is an error."""
    if requested not in EXECUTION_MODES:
        raise GlueConfigError(f"{where}: execution_mode {requested!r}: expected one of "
                              f"{', '.join(EXECUTION_MODES)}")
    om_ok = om_path is not None and om_path.is_file()
    if requested == "npu":
        if not acl_available():
            raise GlueConfigError(f"{where}: execution_mode npu: CANN's acl module is not importable here")
        if not om_ok:
            raise GlueConfigError(f"{where}: execution_mode npu: om_model_path {om_path} is not a file")
        return "npu"
    if requested == "auto" and om_ok and acl_available():
        return "npu"
    return "cpu"


def no_tensor_parallel_on_npu(where: str, devices: tuple[int, ...]) -> str:
    """Why an instance spanning several NPUs is refused on an Ascend host (rather than run on its first NPU).

    tensor_parallel is a what-if of CPU emulation: no part of CANN splits one model over NPUs. AscendCL's
    aclmdlLoadFromFile runs an OM on one NPU; real tensor parallel on Ascend lives in serving frameworks
    (one process per rank, with HCCL).
    """
    return (f"{where}: tensor_parallel {len(devices)}: this instance spans NPUs {list(devices)}, but the "
            "GE glue runs an OM through AscendCL (aclmdlLoadFromFile) on one NPU, and no part of CANN (ATC, "
            "AscendCL, npu_ge) splits one model over NPUs: tensor_parallel is a what-if of CPU emulation "
            "only. Serve it with tensor_parallel 1 (instances spread over device_ids) or with "
            "execution_mode cpu")


def every_visible_npu() -> tuple[int, ...]:
    """The NPUs native npu_ge runs a model on when it names no device_ids: every device the process sees
    (ModelInstanceState::InitDevices, aclrtGetDeviceCount). Those ASCEND_RT_VISIBLE_DEVICES lists (npu-smi's
    logical ids), else every NPU npu-smi lists (logical ids 0..N-1, as validate counts them); () when
    neither says: how many is unknown."""
    text = os.environ.get("ASCEND_RT_VISIBLE_DEVICES", "").strip()
    if text:
        return tuple(dict.fromkeys(int(part) for part in text.split(",") if part.strip().isdigit()))
    return tuple(range(host_npu_count() or 0))


def npu_ge_command_line(argv: Sequence[str]) -> dict[str, str]:
    """npu_ge's own keys among tritonserver's `--backend-config=npu_ge,KEY=VALUE` arguments, split as
    Triton splits them (at the first comma, then the first '=': device_ids keep their commas); GE's ge.*
    options are GE's, not the emulation's."""
    found: dict[str, str] = {}
    for flag, value in zip(argv, [*argv[1:], ""], strict=True):
        text = flag.removeprefix(f"{BACKEND_CONFIG_FLAG}=") if flag.startswith(f"{BACKEND_CONFIG_FLAG}=") \
            else value if flag == BACKEND_CONFIG_FLAG else ""
        backend, _, setting = text.partition(",")
        key, equals, setting_value = setting.partition("=")
        if backend == "npu_ge" and equals and key in NPU_GE_PARAMETERS:
            found[key] = setting_value
    return found


def server_command_line() -> list[str]:
    """The command line of the tritonserver this stub serves: the Python backend forks the stub from it
    (python_backend src/stub_launcher.cc, StubLauncher::Launch: fork, then bash `exec` of the stub), so it
    is the parent's; [] where it cannot be read. npu_ge's --backend-config values reach no stub otherwise
    (the Python backend hands a stub only its shared-memory settings)."""
    try:
        raw = Path(f"/proc/{os.getppid()}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def npu_ge_value(config: dict[str, Any], cmdline: Mapping[str, str], key: str) -> tuple[str, str] | None:
    """(where it was given, its text) of one of npu_ge's keys: the model's parameter over the command
    line's value (ParseModelParametersConfig runs after DisposeConfig); None when neither gives it."""
    params = config.get("parameters") or {}
    if key in params:
        entry = params[key]
        return f"parameter {key}", str(entry.get("string_value", "") if isinstance(entry, dict) else entry)
    if key in cmdline:
        return f"{BACKEND_CONFIG_FLAG}=npu_ge,{key}={cmdline[key]}", cmdline[key]
    return None


def npu_ge_device_ids(config: dict[str, Any], cmdline: Mapping[str, str], where: str) -> tuple[int, ...]:
    """The NPUs npu_ge names: the model's device_ids, which replace the command line's (ParseParameterValue
    clears the list before filling it, so the two are never appended), else the command line's; an NPU
    named twice is refused, as spec and validate do, not merged (npu_ge would set it up twice)."""
    found = npu_ge_value(config, cmdline, "device_ids")
    ids = parse_device_ids(found[1] if found else None, where)
    problem = npu_ge_repeated_id_problem(ids)
    if found is not None and problem is not None:
        raise GlueConfigError(f"{where}: {found[0]} '{found[1]}': {problem}")
    return ids


def npu_ge_placement(config: dict[str, Any], cmdline: Mapping[str, str], instances: int,
                     triton_device_id: int, where: str,
                     visible: tuple[int, ...] | None = None) -> tuple[tuple[int, ...], int]:
    """npu_ge's NPUs (every one of device_ids, as the native backend sets each up) and its full copies per
    NPU, read in native npu_ge's order (model_state.cpp, ModelState::ModelState): --backend-config first
    (ParseCmdlineConfig, DisposeConfig), then the model's parameters over it (ParseModelParametersConfig:
    its device_ids replace the command line's list, ParseParameterValue clears it first; its block counts
    replace the command line's; static_model is on when either turns it on). tensor_parallel, which npu_ge
    does not read, is refused rather than emulated. visible: every_visible_npu() when already asked."""
    if _int_param(config, ("tensor_parallel",), 1, where) != 1:
        raise GlueConfigError(f"{where}: tensor_parallel: npu_ge does not read it: it runs a full copy of "
                              "the model on every NPU of device_ids (no part of CANN splits one model over "
                              "NPUs); remove it")
    params = config.get("parameters") or {}

    def integer(key: str) -> int | None:
        found = npu_ge_value(config, cmdline, key)
        if found is None:
            return None
        source, text = found
        value = stoi(text)
        if value is None:  # native npu_ge's std::stoi throws and its load fails: so does the emulation's
            raise GlueConfigError(f"{where}: {source} {text!r}: npu_ge reads it as an integer (std::stoi), "
                                  "which fails its load")
        problem = npu_ge_blocks_problem(key, value)
        if problem is not None:  # native npu_ge would load and then never answer: refused instead
            raise GlueConfigError(f"{where}: {source}: {problem}")
        return value

    known = npu_ge_device_ids(config, cmdline, where) or (every_visible_npu() if visible is None else visible)
    devices = known or (triton_device_id,)
    static = cmdline.get("static_model") == "1" or ("static_model" in params and integer("static_model") == 1)
    device_blocks, instance_blocks = integer("device_exec_blocks"), integer("instance_exec_blocks")
    problem = npu_ge_scheduling_problem(device_blocks, instance_blocks, instances, len(known) or None)
    if problem is not None:  # native npu_ge would load, then hang or crash at its first requests
        source = (npu_ge_value(config, cmdline, "instance_exec_blocks") or ("instance_exec_blocks",))[0]
        raise GlueConfigError(f"{where}: {source}: {problem}")
    return devices, npu_ge_sessions_per_npu(instances, len(devices), device_blocks, instance_blocks, static)


def instance_count(config: dict[str, Any]) -> int:
    """The model's instances: the counts of its config's instance groups (1 when none is given)."""
    return sum(max(1, int(group.get("count", 1) or 1)) for group in config.get("instance_group") or []) or 1


def _int_param(config: dict[str, Any], keys: tuple[str, ...], default: int, where: str) -> int:
    """An integer parameter (first of its spellings present), or a clear error naming it."""
    text = parameter(config, *keys)
    if text is None:
        return default
    try:
        return int(text)
    except ValueError:
        raise GlueConfigError(f"{where}: parameter {keys[0]} {text!r}: expected an integer") from None


def _bool_param(config: dict[str, Any], key: str, where: str) -> bool:
    """A yes/no parameter (off when absent), or a clear error naming it."""
    text = (parameter(config, key) or "false").strip().lower()
    if text not in {"1", "true", "0", "false"}:  # what `validate` accepts (ge_rules.BOOLEAN_VALUES)
        raise GlueConfigError(f"{where}: parameter {key} {text!r}: expected true or false")
    return text in {"1", "true"}


def device_memory_bytes(config: dict[str, Any], where: str) -> int:
    """Emulated device capacity: parameter npu_memory_gib, else $GE_NPU_MEMORY_GIB, else 64 GiB."""
    text = parameter(config, "npu_memory_gib") or os.environ.get(MEMORY_ENV) or str(DEFAULT_DEVICE_MEMORY_GIB)
    try:
        gib = float(text)
    except ValueError:
        raise GlueConfigError(f"{where}: npu_memory_gib {text!r}: expected a number of GiB") from None
    return int(gib * GIB)


def load_settings(args: dict[str, str], config: dict[str, Any]) -> GlueSettings:
    """Resolve an instance's settings from Triton's initialize() args and the parsed model config."""
    model_dir = Path(args["model_repository"])
    version_dir = model_dir / str(args.get("model_version", "1"))
    name = args.get("model_name", config.get("name", model_dir.name))
    where = f"model {name} ({model_dir / 'config.pbtxt'})"
    backend = str(config.get("backend", "ge"))
    device_ids = parse_device_ids(parameter(config, *device_id_keys(backend)), where)  # ge's; npu_ge's below
    om_path = resolve_path(parameter(config, "om_model_path"), version_dir, where, "om_model_path")
    onnx_path = (resolve_path(parameter(config, "onnx_model_path"), version_dir, where, "onnx_model_path")
                 or first_onnx(version_dir))
    requested = (parameter(config, "execution_mode") or "auto").lower()
    instance_name = args.get("model_instance_name", name)
    place = _placement(config, backend, device_ids, instance_name,
                       int(args.get("model_instance_device_id", "0") or 0), where)
    mode = resolve_mode(requested, om_path, where)
    if mode == "npu" and backend == "ge" and len(place.devices) > 1:
        raise GlueConfigError(no_tensor_parallel_on_npu(where, place.devices))
    return GlueSettings(
        model_name=name,
        backend=backend,
        model_dir=model_dir,
        version_dir=version_dir,
        instance_name=instance_name,
        mode=mode,
        requested_mode=requested,
        device_id=place.device_id,
        om_path=om_path,
        onnx_path=onnx_path,
        max_batch_size=int(config.get("max_batch_size", 0)),
        intra_op_threads=_int_param(config, ("intra_op_threads", "intra_op_thread_count"), 0, where),
        inter_op_threads=_int_param(config, ("inter_op_threads", "inter_op_thread_count"), 0, where),
        device_memory_bytes=device_memory_bytes(config, where),
        devices=place.devices,
        ort_spinning=_bool_param(config, "ort_spinning", where),
        instances=instance_count(config),
        npu_copies=place.copies,
        npus_unknown=place.npus_unknown,
    )


class _Placement(NamedTuple):
    """Where an instance runs: its NPUs, the one it runs on, its model's copies on each (npu_ge), and
    whether npu_ge's NPUs were guessed (no device_ids anywhere and no NPU list to read)."""

    devices: tuple[int, ...]
    device_id: int
    copies: int = 1
    npus_unknown: bool = False


def _placement(config: dict[str, Any], backend: str, device_ids: tuple[int, ...], instance_name: str,
               triton_device: int, where: str) -> _Placement:
    """An instance's NPUs: npu_ge's from its config over the command line's (as the native backend reads
    them), ge's from its device_ids, cut into tensor-parallel groups."""
    if backend == "npu_ge":
        cmdline = npu_ge_command_line(server_command_line())
        named = npu_ge_device_ids(config, cmdline, where)
        visible = () if named else every_visible_npu()
        devices, copies = npu_ge_placement(config, cmdline, instance_count(config), triton_device, where,
                                           visible)
        return _Placement(devices, pick_device(devices, instance_name, triton_device), copies,
                          not named and not visible)
    parallel = tensor_parallel(config, device_ids, where)
    devices = pick_devices(device_ids, instance_name, triton_device, parallel)
    return _Placement(devices, devices[0])
