"""The checks Triton applies when it loads a config.pbtxt (core's model_config_utils.cc), with its wording,
so a bad config is caught before a server is started.

Triton stops at its first error; these checks report every error they find. Messages are quoted from
Triton (including its " for <model>" suffixes), so they can be matched against a server log.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from tritonclient.grpc import model_config_pb2 as mc

from triton_ge_console.repository.rules import triton_batching, triton_ensemble, triton_state, triton_warmup
from triton_ge_console.repository.rules.findings import (
    ENSEMBLE_PLATFORM,
    WILDCARD_DIM,
    Finding,
    element_count,
    error,
    warning,
)

TENSORRT_PLATFORM = "tensorrt_plan"
# Said after Triton's refusal of a GPU instance group: whether Triton refuses it depends on the machine.
NO_GPU_HERE = (
    " (Triton's refusal on a machine without a CUDA GPU: this check depends on the machine; Ascend NPUs are "
    "not GPUs, use KIND_CPU or KIND_MODEL and the backend's device_ids)"
)

# backend → the platforms Triton pairs with it (GetBackendType / GetBackendTypeFromPlatform).
BACKEND_PLATFORMS: dict[str, tuple[str, ...]] = {
    "tensorrt": ("tensorrt_plan",),
    "tensorflow": ("tensorflow_graphdef", "tensorflow_savedmodel"),
    "onnxruntime": ("onnxruntime_onnx",),
    "pytorch": ("pytorch_libtorch",),
}
PLATFORM_BACKEND: dict[str, str] = {p: b for b, platforms in BACKEND_PLATFORMS.items() for p in platforms}


class _ModelIO(Protocol):
    """What ModelInput and ModelOutput share."""

    name: str
    data_type: int
    dims: Sequence[int]
    is_shape_tensor: bool
    is_non_linear_format_io: bool

    def HasField(self, field_name: str) -> bool: ...

    @property
    def reshape(self) -> mc.ModelTensorReshape: ...


def check_config(config: mc.ModelConfig) -> list[Finding]:
    """Everything Triton checks in a config alone; config.name must already be filled (from the folder)."""
    findings: list[Finding] = []
    findings += check_name_and_backend(config)
    if config.max_batch_size < 0:
        findings.append(
            error("max_batch_size", f"'max_batch_size' must be non-negative value for {config.name}")
        )
    findings += triton_batching.check_dynamic_batching(config)
    findings += triton_batching.check_sequence_batching(config)
    findings += triton_ensemble.check_ensemble(config)
    findings += check_cache_and_metrics(config)
    findings += check_instance_groups(config)
    findings += check_io(config)
    findings += triton_warmup.check_warmup(config)  # at load: instances are created, then warmed up
    findings += triton_state.check_states(config)  # at load: then the sequence batcher is created
    return _unique(findings)


def _unique(findings: Iterable[Finding]) -> list[Finding]:
    """Findings without repeats, in order."""
    return list(dict.fromkeys(findings))


def autofill_backend(config: mc.ModelConfig) -> None:
    """Fill backend/platform from each other the way Triton's AutoCompleteBackendFields does."""
    if not config.backend and config.platform in PLATFORM_BACKEND:
        config.backend = PLATFORM_BACKEND[config.platform]
    if not config.platform and config.backend in ("tensorrt", "onnxruntime", "pytorch"):
        config.platform = BACKEND_PLATFORMS[config.backend][0]


def check_name_and_backend(config: mc.ModelConfig) -> list[Finding]:
    """Name set; backend and platform set and paired the way Triton expects."""
    if not config.name:
        return [error("name", "model configuration must specify 'name'")]
    if not config.backend:
        if config.platform != ENSEMBLE_PLATFORM:
            return [
                error(
                    "backend" if not config.platform else "platform",
                    f"unexpected platform type '{config.platform}' for {config.name}",
                )
            ]
        return []
    if config.platform == ENSEMBLE_PLATFORM:
        return [
            error(
                "backend",
                f"Ensemble model '{config.name}' must have platform type "
                f"'{config.platform}' and empty backend type",
            )
        ]
    paired = BACKEND_PLATFORMS.get(config.backend)
    if paired is not None and config.platform not in paired:
        return [
            error(
                "platform",
                f"unexpected 'platform' and 'backend' pair, got:{config.platform}, {config.backend}",
            )
        ]
    return []


def check_cache_and_metrics(config: mc.ModelConfig) -> list[Finding]:
    """Response cache restrictions and model_metrics completeness."""
    findings: list[Finding] = []
    if config.model_transaction_policy.decoupled and config.response_cache.enable:
        findings.append(
            error(
                "response_cache.enable",
                f"Response Cache does not currently support model "
                f"{config.name} with 'decoupled' transaction policy. Please disable the "
                "response cache.",
            )
        )
    for i, control in enumerate(config.model_metrics.metric_control):
        where = f"model_metrics.metric_control[{i}]"
        if not control.HasField("metric_identifier"):
            findings.append(error(where, "metric control must specify 'metric_identifier'"))
        elif not control.metric_identifier.family:
            findings.append(
                error(f"{where}.metric_identifier", "metric identifier must specify non-empty 'family'")
            )
        elif not control.HasField("histogram_options"):
            findings.append(error(where, "metric control must specify 'histogram_options'"))
        elif not control.histogram_options.buckets:
            findings.append(
                error(f"{where}.histogram_options", "histogram options must specify non-empty 'buckets'")
            )
    return findings


def check_instance_groups(config: mc.ModelConfig) -> list[Finding]:
    """Instance group kinds, GPU lists and profiles (ValidateInstanceGroup after normalisation)."""
    if config.HasField("ensemble_scheduling"):
        return []
    findings: list[Finding] = []
    for i, group in enumerate(config.instance_group):
        where = f"instance_group[{i}]"
        label = f"instance group {group.name or f'{config.name}_{i}'} of model {config.name}"
        kind = group.kind
        if kind == mc.ModelInstanceGroup.KIND_AUTO:
            kind = mc.ModelInstanceGroup.KIND_GPU if group.gpus else mc.ModelInstanceGroup.KIND_CPU
        if kind == mc.ModelInstanceGroup.KIND_MODEL and group.gpus:
            findings.append(
                error(f"{where}.gpus", f"{label} has kind KIND_MODEL but specifies one or more GPUs")
            )
        elif kind == mc.ModelInstanceGroup.KIND_CPU and group.kind == kind and group.gpus:
            findings.append(
                error(f"{where}.gpus", f"{label} has kind KIND_CPU but specifies one or more GPUs")
            )
        elif kind == mc.ModelInstanceGroup.KIND_GPU:
            findings += _gpu_group_findings(where, label, group)
        if config.platform != TENSORRT_PLATFORM and group.profile:
            findings.append(
                error(
                    f"{where}.profile",
                    f"{label} and platform {config.platform}specifies profile "
                    "field which is only supported for TensorRT models",
                )
            )
    return findings


def _gpu_group_findings(where: str, label: str, group: mc.ModelInstanceGroup) -> list[Finding]:
    """KIND_GPU is valid in a config, but loads only where the CUDA GPUs it names exist: Triton's refusal on a
    machine without them is a warning (it depends on the machine), a negative id is always refused."""
    if not group.gpus:
        return [warning(f"{where}.kind", f"{label} has kind KIND_GPU but no GPUs are available{NO_GPU_HERE}")]
    findings = []
    for gid in group.gpus:
        refusal = f"{label} specifies invalid or unsupported gpu id {gid}"
        if gid < 0:
            findings.append(error(f"{where}.gpus", refusal))
        else:
            machine = NO_GPU_HERE.replace("a CUDA GPU", f"CUDA GPU {gid}")
            findings.append(warning(f"{where}.gpus", refusal + machine))
    return findings


def check_io(config: mc.ModelConfig) -> list[Finding]:
    """Inputs, outputs, batch inputs and batch outputs (ValidateModelIOConfig), plus duplicate names."""
    findings: list[Finding] = []
    for i, model_input in enumerate(config.input):
        findings += _input_findings(f"input[{i}]", model_input, config)
    for i, model_output in enumerate(config.output):
        finding = _io_shape_finding(f"output[{i}]", model_output, config.max_batch_size, "model output ")
        finding = finding or _tensor_kind_finding(f"output[{i}]", model_output, config.platform, "output")
        if finding:
            findings.append(_suffixed(finding, config.name))
    findings += [_suffixed(f, config.name) for f in check_batch_io(config)]
    findings += _duplicate_names("input", [io.name for io in config.input])
    findings += _duplicate_names("output", [io.name for io in config.output])
    return findings


def _suffixed(finding: Finding, model_name: str) -> Finding:
    """Triton appends " for <model>" to every IO error."""
    return Finding(finding.severity, finding.field, f"{finding.message} for {model_name}")


def _input_findings(where: str, model_input: mc.ModelInput, config: mc.ModelConfig) -> list[Finding]:
    """ValidateModelInput for one input."""
    finding = _io_shape_finding(where, model_input, config.max_batch_size, "model input ")
    if (
        finding is None
        and model_input.format in (mc.ModelInput.FORMAT_NHWC, mc.ModelInput.FORMAT_NCHW)
        and len(model_input.dims) != 3
    ):
        finding = error(f"{where}.format", "model input NHWC/NCHW require 3 dims")
    finding = finding or _tensor_kind_finding(where, model_input, config.platform, "input")
    return [_suffixed(finding, config.name)] if finding else []


def _tensor_kind_finding(where: str, io: _ModelIO, platform: str, kind: str) -> Finding | None:
    """Shape tensors and non-linear formats are TensorRT-only."""
    if platform != TENSORRT_PLATFORM and io.is_shape_tensor:
        return error(f"{where}.is_shape_tensor", "shape tensors are only supported for TensorRT platform")
    if io.is_non_linear_format_io:
        if platform != TENSORRT_PLATFORM:
            return error(
                f"{where}.is_non_linear_format_io",
                "Non-linear IO format is only supported for the TensorRT platform",
            )
        if len(io.dims) != 3:
            return error(f"{where}.dims", f"Non-linear IO format {kind} requires 3 dims")
    return None


def _io_shape_finding(where: str, io: _ModelIO, max_batch_size: int, prefix: str) -> Finding | None:
    """ValidateIOShape: the first problem with one tensor's name, type, dims and reshape."""
    if not io.name:
        return error(f"{where}.name", f"{prefix}must specify 'name'")
    named = f"{prefix}'{io.name}' "
    if io.data_type == mc.TYPE_INVALID:
        return error(f"{where}.data_type", f"{named}must specify 'data_type'")
    if not io.dims:
        return error(f"{where}.dims", f"{named}must specify 'dims'")
    if io.HasField("reshape") and not io.reshape.shape and max_batch_size == 0:
        return error(
            f"{where}.reshape",
            f"{named}cannot have empty reshape for non-batching model as scalar tensors are not supported",
        )
    for j, dim in enumerate(io.dims):
        if dim < 1 and dim != WILDCARD_DIM:
            return error(
                f"{where}.dims[{j}]",
                f"{named}dimension must be integer >= 1, or {WILDCARD_DIM} "
                "to indicate a variable-size dimension",
            )
    if io.HasField("reshape"):
        return _reshape_finding(f"{where}.reshape", named, list(io.dims), list(io.reshape.shape))
    return None


def _trunks(dims: Sequence[int]) -> list[int]:
    """Element counts of the runs of fixed dims between variable-size dims."""
    counts, current = [], 1
    for dim in dims:
        if dim == WILDCARD_DIM:
            counts.append(current)
            current = 1
        else:
            current *= dim
    return [*counts, current]


def _reshape_finding(where: str, named: str, dims: list[int], shape: list[int]) -> Finding | None:
    """Reshape dims valid, same element count as dims, same variable-size layout."""
    for j, dim in enumerate(shape):
        if dim < 1 and dim != WILDCARD_DIM:
            return error(
                f"{where}.shape[{j}]",
                f"{named}reshape dimensions must be integer >= 1, or "
                f"{WILDCARD_DIM} to indicate a variable-size dimension",
            )
    dims_size, reshape_size = element_count(dims), element_count(shape)
    if dims_size != reshape_size and (reshape_size != 0 or dims_size != 1):
        return error(where, f"{named}has different size for dims and reshape")
    if dims_size == WILDCARD_DIM:
        dim_trunks, shape_trunks = _trunks(dims), _trunks(shape)
        if len(dim_trunks) != len(shape_trunks):
            return error(
                where, f"{named}has different number of variable-size dimensions for dims and reshape"
            )
        if dim_trunks != shape_trunks:
            return error(where, f"{named}has different size for dims and reshape")
    return None


def _duplicate_names(kind: str, names: list[str]) -> list[Finding]:
    """A tensor name given twice. Triton (2.51) still loads such a model, but requests carry one tensor per
    name, so one of the two can never be fed or read: an error here, not in Triton's wording."""
    findings, seen = [], set()
    for i, name in enumerate(names):
        if name and name in seen:
            message = f"model {kind} '{name}' is specified more than once"
            findings.append(error(f"{kind}[{i}].name", f"{message} (requests carry one tensor per name)"))
        seen.add(name)
    return findings


def check_batch_io(config: mc.ModelConfig) -> list[Finding]:
    """ValidateBatchIO: batch input/output kinds, sources, targets and types."""
    input_names = {io.name for io in config.input}
    output_names = {io.name for io in config.output}
    findings: list[Finding] = []
    for i, batch_input in enumerate(config.batch_input):
        where = f"batch_input[{i}]"
        kind = mc.BatchInput.Kind.Name(batch_input.kind)
        if len(batch_input.source_input) != 1:
            findings.append(
                error(
                    f"{where}.source_input",
                    f"batch input kind '{kind}' expects 1 source input, got {len(batch_input.source_input)}",
                )
            )
        elif batch_input.data_type not in (mc.TYPE_INT32, mc.TYPE_FP32):
            findings.append(
                error(f"{where}.data_type", "batch input data type must be TYPE_INT32 or TYPE_FP32")
            )
        findings += _unknown_sources(where, batch_input.source_input, input_names)
    for i, batch_output in enumerate(config.batch_output):
        where = f"batch_output[{i}]"
        kind = mc.BatchOutput.Kind.Name(batch_output.kind)
        if len(batch_output.source_input) != 1:
            findings.append(
                error(
                    f"{where}.source_input",
                    f"batch output kind '{kind}' expects 1 source input, "
                    f"got {len(batch_output.source_input)}",
                )
            )
        findings += _unknown_sources(where, batch_output.source_input, input_names)
        findings += _bad_targets(where, batch_output.target_name, output_names)
    return findings


def _unknown_sources(where: str, sources: Sequence[str], input_names: set[str]) -> list[Finding]:
    """Batch IO sources must be model inputs."""
    return [
        error(f"{where}.source_input[{j}]", f"unknown source input name '{name}'")
        for j, name in enumerate(sources)
        if name not in input_names
    ]


def _bad_targets(where: str, targets: Sequence[str], output_names: set[str]) -> list[Finding]:
    """Batch output targets must be model outputs, each named once."""
    findings, seen = [], set()
    for j, name in enumerate(targets):
        if name not in output_names:
            findings.append(error(f"{where}.target_name[{j}]", f"unknown target output name '{name}'"))
        elif name in seen:
            findings.append(
                error(f"{where}.target_name[{j}]", f"target output name '{name}' can only be specified once")
            )
        seen.add(name)
    return findings
