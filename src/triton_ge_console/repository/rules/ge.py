"""Checks for the two GE backends: `ge` (this project's glue: .om through AscendCL, or the ONNX on CPU) and
`npu_ge` (CANN's native backend, compiling ONNX / TensorFlow .pb online); parameters and model files."""

from __future__ import annotations

import difflib
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from triton_ge_console.backend_glue.settings import leaves_model_folder, model_file_candidates
from triton_ge_console.ge_backends import EXECUTION_MODES, GE_BACKENDS
from triton_ge_console.repository import rank_table, soc
from triton_ge_console.repository.rules import ge_onnx as ge_rules_onnx
from triton_ge_console.repository.rules.findings import Finding, error, warning

BOOLEAN_VALUES = ("1", "0", "true", "false")
KNOWN_PARAMETERS = (
    "om_model_path",
    "onnx_model_path",
    "execution_mode",
    "device_ids",
    "DEVICEIDS",
    "static_model",
    "profiling",
    "dump_graph",
    "intra_op_threads",
    "inter_op_threads",
    # spellings the glue reads as well
    "intra_op_thread_count",
    "inter_op_thread_count",
    "npu_memory_gib",
    "tensor_parallel",
    "ort_spinning",
)
# What tensor_parallel > 1 does on an Ascend host, per backend (CPU emulation charges each NPU its share).
TENSOR_PARALLEL_LIMITS = {
    "ge": "tensor_parallel > 1 runs in CPU emulation only: on an Ascend host the glue refuses to load it, "
          "since AscendCL (aclmdlLoadFromFile) runs an OM on one NPU and CANN's OMs for several NPUs need "
          "GE's LoadGraph/RunGraph or one process per rank",
    "npu_ge": "tensor_parallel > 1: the rank table (ge.exec.rankTableFile) lets GE run collective operators "
              "across these NPUs, but GE does not split a model by itself: the graph must already be cut per "
              "rank with HCCL operators, and each rank's process needs its own ge.exec.rankId and "
              "ge.exec.deviceId, which one config cannot give; the glue serves it in CPU emulation only",
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
    if _is_true(parameter(config, "static_model")) and config.HasField("dynamic_batching"):
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


def _is_true(value: str | None) -> bool:
    """Triton's boolean parameter reading: '1'/'true' (any case)."""
    return value is not None and value.lower() in ("1", "true")


def _unknown_parameters(config: mc.ModelConfig) -> list[Finding]:
    """Keys neither backend reads are warnings, with a did-you-mean."""
    findings = []
    for key in config.parameters:
        if key in KNOWN_PARAMETERS or key.startswith("ge."):
            continue
        close = difflib.get_close_matches(key, KNOWN_PARAMETERS, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        findings.append(
            warning(
                f'parameters["{key}"]',
                f"unknown parameter '{key}' for backend '{config.backend}'{hint}; it is ignored",
            )
        )
    return findings


def _device_id_findings(config: mc.ModelConfig) -> list[Finding]:
    """device_ids / DEVICEIDS: comma-separated non-negative integers."""
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
    """tensor_parallel: a positive integer that cuts device_ids into whole groups of NPUs per instance."""
    value = parameter(config, "tensor_parallel")
    if value is None:
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
        return [warning(param_field("tensor_parallel"), TENSOR_PARALLEL_LIMITS.get(config.backend, ""))]
    return []


def _value_findings(config: mc.ModelConfig) -> list[Finding]:
    """Booleans, integers and execution_mode have the values the backends accept."""
    findings = []
    for key in ("static_model", "dump_graph", "ort_spinning"):
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


def check_ge_files(config: mc.ModelConfig, model_dir: Path, versions: list[Path]) -> list[Finding]:
    """The model files each version folder of a GE model needs."""
    if config.backend not in GE_BACKENDS:
        return []
    findings: list[Finding] = _rank_table_findings(config, model_dir)
    for version_dir in versions:
        if config.backend == "ge":
            findings += _ge_version_findings(config, version_dir)
        else:
            findings += _npu_ge_version_findings(version_dir)
        onnx_path = ge_rules_onnx.onnx_of_version(parameter(config, "onnx_model_path"), version_dir)
        if onnx_path is not None:
            findings += ge_rules_onnx.check_external_data(onnx_path)
            findings += ge_rules_onnx.check_io_against_onnx(config, onnx_path)
    return list(dict.fromkeys(findings))


def _rank_table_findings(config: mc.ModelConfig, model_dir: Path) -> list[Finding]:
    """ge.exec.rankTableFile (relative: to the model folder) exists and is a rank table HCCL accepts, listing
    every NPU of device_ids."""
    text = parameter(config, rank_table.OPTION)
    if not text:
        return []
    path = Path(text) if Path(text).is_absolute() else model_dir / text
    field = param_field(rank_table.OPTION)
    if not path.is_file():
        return [error(field, f"{rank_table.OPTION} '{text}': {path} does not exist")]
    ids = parameter(config, "device_ids") or parameter(config, "DEVICEIDS")
    devices = tuple(int(i) for i in ids.split(",")) if ids and ids.replace(",", "").isdigit() else None
    return [error(field, f"{rank_table.OPTION} {path} {problem}")
            for problem in rank_table.rank_table_problems(path.read_text(errors="replace"), devices)]


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
        refused = soc.mismatch(om_path)
        if refused is not None:
            findings.append(error(param_field("om_model_path"), refused))
    return findings


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
