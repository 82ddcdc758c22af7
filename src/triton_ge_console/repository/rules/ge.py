"""Checks for the two GE backends: `ge` (this project's glue: .om through AscendCL, or the ONNX on CPU) and
`npu_ge` (CANN's native backend, compiling ONNX / TensorFlow .pb online); parameters and model files."""

from __future__ import annotations

import difflib
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from triton_ge_console.backend_glue.generate_protocol import PARAMETERS as GENERATE_PARAMETERS
from triton_ge_console.backend_glue.generate_protocol import TOKENIZER_PARAMETER
from triton_ge_console.backend_glue.settings import leaves_model_folder, model_file_candidates
from triton_ge_console.ge_backends import (
    EXECUTION_MODES,
    GE_BACKENDS,
    NPU_GE_INTEGER_PARAMETERS,
    NPU_GE_PARAMETERS,
    NPU_GE_SWITCH_VALUES,
    ge_option_reason,
    is_ge_option,
    is_npu_ge_parameter_option,
    npu_ge_blocks_problem,
    npu_ge_id_list,
    npu_ge_repeated_id_problem,
    npu_ge_scheduling_problem,
    npu_ge_switch_problem,
    stoi,
)
from triton_ge_console.repository import atc, soc
from triton_ge_console.repository.rules import ge_onnx as ge_rules_onnx
from triton_ge_console.repository.rules.findings import ERROR, Finding, error, warning

BOOLEAN_VALUES = ("1", "0", "true", "false")
COMMAND_LINE_BLOCKS = 1 << 30  # a device_exec_blocks --backend-config could give, enough for any count
# What the ge glue reads (backend_glue.settings); when it serves npu_ge (CPU emulation) it reads the same.
GLUE_PARAMETERS = (
    "om_model_path",
    "onnx_model_path",
    "execution_mode",
    "device_ids",
    "DEVICEIDS",
    "intra_op_threads",
    "inter_op_threads",
    # spellings the glue reads as well
    "intra_op_thread_count",
    "inter_op_thread_count",
    "npu_memory_gib",
    "tensor_parallel",
    "ort_spinning",
    *GENERATE_PARAMETERS,
    TOKENIZER_PARAMETER,
)
# Read only by the glue's CPU emulation of npu_ge (native npu_ge ignores them, harmlessly).
EMULATION_PARAMETERS = ("execution_mode", "onnx_model_path", "intra_op_threads", "inter_op_threads",
                        "intra_op_thread_count", "inter_op_thread_count", "npu_memory_gib", "ort_spinning")
KNOWN_PARAMETERS = {"ge": GLUE_PARAMETERS, "npu_ge": (*NPU_GE_PARAMETERS, *EMULATION_PARAMETERS)}
# tensor_parallel is a what-if of CPU emulation: no part of CANN (ATC, AscendCL, npu_ge) splits one model
# over NPUs.
TENSOR_PARALLEL_LIMITS = {
    "ge": "tensor_parallel > 1 is a what-if of CPU emulation only (each NPU charged 1/N of the model): no "
          "part of CANN (ATC, AscendCL, npu_ge) splits one model over NPUs, so on an Ascend host the glue "
          "refuses to load it (aclmdlLoadFromFile runs an OM on one NPU); real tensor parallel on Ascend "
          "lives in serving frameworks, one process per rank with HCCL",
    "npu_ge": "tensor_parallel is not read by npu_ge: it runs a full copy of the model on every NPU of "
              "device_ids (no part of CANN splits one model over NPUs); remove it",
}
INTEGER_PARAMETERS = (
    "intra_op_threads",
    "inter_op_threads",
    "intra_op_thread_count",
    "inter_op_thread_count",
)


def param_field(key: str) -> str:
    """Field path of a parameter's value."""
    return f'parameters["{key}"].value.string_value'


def parameter(config: mc.ModelConfig, key: str) -> str | None:
    """A parameter's string value, stripped; None when absent."""
    if key not in config.parameters:
        return None
    return str(config.parameters[key].string_value).strip()


def check_ge_config(config: mc.ModelConfig) -> list[Finding]:
    """What a GE backend config alone can get wrong: parameters, batching mode, instance kind."""
    if config.backend not in GE_BACKENDS:
        return []
    findings = _unknown_parameters(config)
    findings += _device_id_findings(config)
    findings += _tensor_parallel_findings(config)
    findings += _value_findings(config)
    findings += _path_findings(config)
    if is_static(config) and config.HasField("dynamic_batching"):
        findings.append(
            error(
                param_field("static_model"),
                "static_model is on, and dynamic_batching is set: "
                "they exclude each other (a static graph has fixed shapes); remove one",
            )
        )
    for i, group in enumerate(config.instance_group):
        if group.kind == mc.ModelInstanceGroup.KIND_GPU:
            findings.append(
                error(
                    f"instance_group[{i}].kind",
                    f"backend '{config.backend}' runs on Ascend NPUs "
                    "(or CPU emulation), not GPUs: use KIND_CPU or KIND_MODEL and 'device_ids'",
                )
            )
    return findings


def is_static(config: mc.ModelConfig) -> bool:
    """npu_ge's static graph: static_model read as an integer equal to 1 (the ge glue has no such mode)."""
    value = parameter(config, "static_model")
    return config.backend == "npu_ge" and value is not None and stoi(value) == 1


def _unknown_parameters(config: mc.ModelConfig) -> list[Finding]:
    """Keys the backend does not read are warnings: GE options (ge.*, which npu_ge reads only from
    --backend-config; session.* and graph.* on the glue, npu_ge reads them as parameters too), npu_ge's keys
    on ge and the glue's on npu_ge, with the reason; others with a did-you-mean."""
    findings = []
    known = KNOWN_PARAMETERS[config.backend]
    for key in config.parameters:
        if key in known or (config.backend == "npu_ge" and is_npu_ge_parameter_option(key)):
            continue
        field = f'parameters["{key}"]'
        if is_ge_option(key):
            findings.append(warning(field, ge_option_reason(key) + "; it is ignored"))
        elif key in NPU_GE_PARAMETERS:
            findings.append(warning(field, f"'{key}' is read only by npu_ge; backend 'ge' (the glue "
                                           "running an OM) ignores it"))
        elif key == "DEVICEIDS":
            findings.append(warning(field, "npu_ge reads device_ids, never DEVICEIDS (only its first "
                                           "examples spelt it so): without device_ids it runs on every NPU; "
                                           "use device_ids"))
        elif key == "tensor_parallel":
            findings.append(error(field, TENSOR_PARALLEL_LIMITS["npu_ge"]))
        else:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            findings.append(warning(field, f"unknown parameter '{key}' for backend '{config.backend}'{hint}; "
                                           "it is ignored"))
    return findings


def _device_id_findings(config: mc.ModelConfig) -> list[Finding]:
    """device_ids / DEVICEIDS: comma-separated non-negative integers, npu_ge's each named once."""
    findings = []
    for key in ("device_ids", "DEVICEIDS"):
        value = parameter(config, key)
        if value is None:
            continue
        parts = [part.strip() for part in value.split(",")]
        if not value or not all(part.isdigit() for part in parts):
            findings.append(
                error(
                    param_field(key),
                    f'{key} \'{value}\' must be comma-separated non-negative integers, e.g. "0" or "4,5"',
                )
            )
    repeated = npu_ge_repeated_id_problem(npu_ge_id_list(parameter(config, "device_ids") or "") or ())
    if config.backend == "npu_ge" and repeated is not None:
        findings.append(error(param_field("device_ids"), repeated))
    if config.backend == "npu_ge" and parameter(config, "device_ids") is None:
        findings.append(warning("parameters", "no device_ids: npu_ge runs a full copy of the model on every "
                                              "NPU of the host (aclrtGetDeviceCount); name the NPUs with "
                                              "device_ids"))
    both = [parameter(config, key) for key in ("device_ids", "DEVICEIDS")]
    if None not in both and both[0] != both[1]:
        findings.append(
            warning(
                param_field("DEVICEIDS"),
                f"device_ids '{both[0]}' and DEVICEIDS '{both[1]}' disagree; give the NPU list once",
            )
        )
    return findings


def _tensor_parallel_findings(config: mc.ModelConfig) -> list[Finding]:
    """tensor_parallel (ge only, a CPU-emulation what-if): a positive integer that cuts device_ids into whole
    groups of NPUs per instance."""
    value = parameter(config, "tensor_parallel")
    if value is None or config.backend != "ge":
        return []
    if not value.strip().isdigit() or int(value) < 1:
        return [error(param_field("tensor_parallel"), f"tensor_parallel '{value}' must be an integer >= 1")]
    devices = parameter(config, "device_ids") or parameter(config, "DEVICEIDS") or "0"
    count = len(devices.split(","))
    if count % int(value):
        return [error(param_field("tensor_parallel"),
                      f"tensor_parallel {value} spans {value} NPUs per instance, but device_ids '{devices}' "
                      f"lists {count}: list a multiple of {value}")]
    if int(value) > 1:
        return [warning(param_field("tensor_parallel"), TENSOR_PARALLEL_LIMITS["ge"])]
    return []


def _value_findings(config: mc.ModelConfig) -> list[Finding]:
    """Booleans, integers and execution_mode have the values the backends accept."""
    findings = _npu_ge_value_findings(config) if config.backend == "npu_ge" else []
    for key in ("ort_spinning",):
        value = parameter(config, key)
        if value is not None and value.lower() not in BOOLEAN_VALUES:
            findings.append(error(param_field(key), f"failed to convert {key} '{value}' to boolean value"))
    for key in INTEGER_PARAMETERS:
        value = parameter(config, key)
        if value is not None and not value.isdigit():
            findings.append(error(param_field(key), f"{key} '{value}' must be a non-negative integer"))
    mode = parameter(config, "execution_mode")
    if mode is not None and mode.lower() not in EXECUTION_MODES:
        findings.append(
            error(
                param_field("execution_mode"),
                f"execution_mode '{mode}' must be one of {', '.join(EXECUTION_MODES)}",
            )
        )
    return findings


def _npu_ge_value_findings(config: mc.ModelConfig) -> list[Finding]:
    """npu_ge's integers (std::stoi: other text fails the load) and its switches (on for one value only)."""
    findings = []
    for key in NPU_GE_INTEGER_PARAMETERS:
        value = parameter(config, key)
        if value is not None and stoi(value) is None:
            advice = "; use 1 or 0" if key == "static_model" else ""
            findings.append(error(param_field(key), f"npu_ge reads {key} as an integer (std::stoi): "
                                                    f"'{value}' fails the model's load{advice}"))
    for key in ("device_exec_blocks", "instance_exec_blocks"):
        number = stoi(parameter(config, key) or "")
        problem = npu_ge_blocks_problem(key, number) if number is not None else None
        if problem is not None:
            findings.append(error(param_field(key), problem))
    findings += _npu_ge_scheduling_findings(config)
    for key in NPU_GE_SWITCH_VALUES:
        value = parameter(config, key)
        problem = npu_ge_switch_problem(key, value) if value is not None else None
        if problem is not None:
            findings.append(warning(param_field(key), problem))
    return findings


def _npu_ge_scheduling_findings(config: mc.ModelConfig) -> list[Finding]:
    """npu_ge_scheduling_problem of the config alone: its instances (Triton's default 1), its NPUs from its
    device_ids as written, as InitializeDeviceThreads counts them (unknown without: every NPU of the host
    the server runs on). Where the config leaves device_exec_blocks out and a positive one would settle
    it, tritonserver's --backend-config (which validate does not see) decides: a warning saying so."""
    device, instance = (stoi(parameter(config, key) or "") for key in ("device_exec_blocks",
                                                                       "instance_exec_blocks"))
    ids = npu_ge_id_list(parameter(config, "device_ids") or "")
    instances = sum(max(1, group.count) for group in config.instance_group) or 1
    npus = len(ids) if ids else None
    problem = npu_ge_scheduling_problem(device, instance, instances, npus)
    if problem is None:
        return []
    at = param_field("instance_exec_blocks")
    if parameter(config, "device_exec_blocks") is None and npu_ge_scheduling_problem(
            COMMAND_LINE_BLOCKS, instance, instances, npus) is None:
        return [warning(at, f"{problem}, unless tritonserver's --backend-config=npu_ge,device_exec_blocks=N "
                            "gives a positive count (validate reads the config alone)")]
    return [error(at, problem)]


def check_ge_files(config: mc.ModelConfig, model_dir: Path, versions: list[Path]) -> list[Finding]:
    """The model files each version folder of a GE model needs."""
    if config.backend not in GE_BACKENDS:
        return []
    findings: list[Finding] = []
    for version_dir in versions:
        found = (_ge_version_findings(config, version_dir) if config.backend == "ge"
                 else _npu_ge_version_findings(version_dir))
        findings += found
        onnx_path = ge_rules_onnx.onnx_of_version(parameter(config, "onnx_model_path"), version_dir)
        if onnx_path is None and not any(f.severity == ERROR for f in found):
            findings += _batching_not_checked(config, version_dir)
        if onnx_path is not None:
            findings += ge_rules_onnx.check_external_data(onnx_path, model_dir)
            findings += (ge_rules_onnx.check_decoder(onnx_path) if config.model_transaction_policy.decoupled
                         else ge_rules_onnx.check_graph(config, onnx_path))
        findings += _tokenizer_findings(config, version_dir)
    return list(dict.fromkeys(findings))


def _batching_not_checked(config: mc.ModelConfig, version_dir: Path) -> list[Finding]:
    """A batched model served from an OM or a .pb alone: whether Triton may join its requests is read from
    the ONNX's graph (batch_axis), which is not there, so say it was not checked rather than pass it."""
    if config.max_batch_size <= 0 or config.model_transaction_policy.decoupled:
        return []
    return [warning("max_batch_size", f"max_batch_size {config.max_batch_size}: whether joined requests stay "
                    f"apart was not checked: version folder {version_dir.name} has no ONNX (the graph this "
                    "check reads); serve it with max_batch_size: 0 unless you know it batches along dim 0, "
                    "or set onnx_model_path to the ONNX it was made from")]


def _tokenizer_findings(config: mc.ModelConfig, version_dir: Path) -> list[Finding]:
    """A generate model's tokenizer must be a file the glue finds and the tokenizers library reads."""
    from triton_ge_console.backend_glue.generate_text import TextCodec

    text = parameter(config, TOKENIZER_PARAMETER)
    if text is None or config.backend != "ge":
        return []
    field = f'parameters["{TOKENIZER_PARAMETER}"]'
    path = resolve_model_path(text, version_dir)
    if path is None:
        return [error(field, f"tokenizer '{text}' is not a file in {version_dir} or its model folder")]
    try:
        TextCodec.from_file(path)
    except ValueError as exc:
        return [error(field, f"not a tokenizer the tokenizers library reads: {exc}")]
    return []


def resolve_model_path(text: str, version_dir: Path) -> Path | None:
    """A configured file: absolute as is, else relative to the version folder, then the model folder."""
    return next((path for path in model_file_candidates(text, version_dir) if path.is_file()), None)


def _path_findings(config: mc.ModelConfig) -> list[Finding]:
    """A relative model path must stay in the model folder; an absolute one is named (it is not copied)."""
    findings = []
    for key in ("om_model_path", "onnx_model_path"):
        text = parameter(config, key)
        if text and leaves_model_folder(text):
            findings.append(error(param_field(key), f"{key} '{text[:80]}' leaves the model folder"))
        elif text and Path(text).is_absolute() and Path(text).is_file():  # a missing one is said elsewhere
            said = f"{key} is absolute: {text[:200]} (outside the repository, not checked by build)"
            findings.append(warning(param_field(key), said))
    return findings


def _ge_version_findings(config: mc.ModelConfig, version_dir: Path) -> list[Finding]:
    """`ge` runs the .om on an NPU, or an ONNX on CPU: at least one must be there."""
    om_text = parameter(config, "om_model_path")
    onnx_text = parameter(config, "onnx_model_path")
    om_path = resolve_model_path(om_text, version_dir) if om_text else None
    onnx_path = resolve_model_path(onnx_text, version_dir) if onnx_text else None
    findings = []
    if onnx_text and onnx_path is None:
        message = (
            f"onnx_model_path '{onnx_text}' is not a file (looked in {version_dir} and {version_dir.parent})"
        )
        findings.append(error(param_field("onnx_model_path"), message))
    has_onnx = onnx_path is not None or any(version_dir.glob("*.onnx"))
    if om_path is None and not has_onnx:
        where = param_field("om_model_path") if om_text else "backend"
        said = f"om_model_path '{om_text}' is not a file" if om_text else "no om_model_path is set"
        message = (
            f"backend 'ge' needs an .om or an ONNX to run: {said}, and version folder {version_dir.name} "
        )
        findings.append(error(where, message + "has no *.onnx (nor onnx_model_path) for CPU emulation"))
    elif om_text and om_path is None:
        findings.append(_missing_om_finding(config, om_text, version_dir))
    if om_path is not None and (parameter(config, "execution_mode") or "auto").lower() != "cpu":
        found = soc.mismatch(om_path)
        if found is not None:
            severity, message = found
            made = error(param_field("om_model_path"), message) if severity == "error" else warning(
                param_field("om_model_path"), message)
            findings.append(made)
    if om_path is not None and (stale := soc.stale_record(om_path)) is not None:
        findings.append(warning(param_field("om_model_path"), stale))
    if om_path is not None and (parameter(config, "execution_mode") or "auto").lower() != "cpu":
        findings += [error(param_field("om_model_path"), problem) for problem in _acl_limit_problems(om_path)]
    return findings


def _acl_limit_problems(om_path: Path) -> list[str]:
    """Gears convert recorded that AscendCL refuses at load (more than 128, or a gear of more than 128
    dims): an OM converted before convert checked them."""
    record = soc.read_record(om_path) or {}
    command = record.get("atc")
    if not isinstance(command, list):
        return []
    request = atc.command_request([str(word) for word in command], om_path, str(record.get("soc_version")))
    try:
        shapes = atc.parse_input_shape(request.input_shape) if request.input_shape else []
        problems = atc.acl_limit_problems(request, shapes)
    except atc.AtcArgumentError:
        return []  # ATC itself would have refused: not an OM this command wrote
    return [f"{om_path.name} ({soc.record_path(om_path).name}): {problem}" for problem in problems]


def _missing_om_finding(config: mc.ModelConfig, om_text: str, version_dir: Path) -> Finding:
    """An OM that is not here: fatal when the NPU is forced, else the version runs in CPU emulation."""
    if (parameter(config, "execution_mode") or "").lower() == "npu":
        return error(
            param_field("om_model_path"), f"execution_mode npu: om_model_path '{om_text}' is not a file"
        )
    message = (
        f"om_model_path '{om_text}' is not a file here: version {version_dir.name} runs in CPU emulation"
    )
    return warning(param_field("om_model_path"), message + " from its ONNX")


def _npu_ge_version_findings(version_dir: Path) -> list[Finding]:
    """`npu_ge` compiles an ONNX or TensorFlow .pb from each version folder (CPU emulation needs the ONNX)."""
    suffixes = {p.suffix for p in version_dir.iterdir() if p.is_file()}
    if ".onnx" in suffixes:
        return []
    if ".pb" in suffixes:
        message = f"version folder {version_dir.name} has only a TensorFlow *.pb: native npu_ge compiles it, "
        return [
            warning("backend", message + "but CPU emulation (the ge glue serving npu_ge) needs an *.onnx")
        ]
    message = (
        f"backend 'npu_ge' needs a *.onnx or *.pb model in version folder {version_dir.name}; found none"
    )
    return [error("backend", message)]
