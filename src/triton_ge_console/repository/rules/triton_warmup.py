"""Triton's checks of model_warmup, applied when it loads a model, with its wording.

Triton 2.51 turns each warm-up sample into requests when it creates a model instance
(core backend_model_instance.cc, GenerateWarmupData), normalises them like client requests
(infer_request.cc, Normalize) and runs them before the model is ready: any error there fails the load.
A sample with batch_size 0 is skipped. Inputs that are not model inputs are passed as extra tensors,
meant for sequence control and state inputs.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TypeAlias

from tritonclient.grpc import model_config_pb2 as mc

from triton_ge_console.repository.rules.findings import (
    ENSEMBLE_PLATFORM,
    WILDCARD_DIM,
    Finding,
    element_count,
    error,
    warning,
)

WARMUP_FOLDER = "warmup"
# Warm-up requests carry no id; Triton prefixes their errors with this.
REQUEST = "[request id: <id_unknown>] "
BATCH_NOTE = (
    "NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to be "
    "prepended to each input shape. If you want to specify the full shape including the batch dim in "
    "your input dims config, try setting max_batch_size to zero. See the model configuration docs for "
    "more info on max_batch_size."
)
# DataType → (Triton's protocol name, bytes per element; 0 for variable-size strings and invalid).
TYPE_INFO: dict[int, tuple[str, int]] = {
    mc.TYPE_INVALID: ("<invalid>", 0),
    mc.TYPE_BOOL: ("BOOL", 1),
    mc.TYPE_UINT8: ("UINT8", 1),
    mc.TYPE_UINT16: ("UINT16", 2),
    mc.TYPE_UINT32: ("UINT32", 4),
    mc.TYPE_UINT64: ("UINT64", 8),
    mc.TYPE_INT8: ("INT8", 1),
    mc.TYPE_INT16: ("INT16", 2),
    mc.TYPE_INT32: ("INT32", 4),
    mc.TYPE_INT64: ("INT64", 8),
    mc.TYPE_FP16: ("FP16", 2),
    mc.TYPE_FP32: ("FP32", 4),
    mc.TYPE_FP64: ("FP64", 8),
    mc.TYPE_STRING: ("BYTES", 0),
    mc.TYPE_BF16: ("BF16", 2),
}


def byte_size(data_type: int, dims: Sequence[int]) -> int:
    """Bytes Triton expects for one tensor (4 per element where the type has no fixed size)."""
    size = TYPE_INFO.get(data_type, ("", 0))[1] or 4
    return element_count(dims) * size


def dims_text(dims: Sequence[int]) -> str:
    """Triton's DimsListToString: [1,4]."""
    return "[" + ",".join(str(d) for d in dims) + "]"


def check_warmup(config: mc.ModelConfig) -> list[Finding]:
    """Every warm-up sample of a (non-ensemble) model, as Triton prepares and runs it at load."""
    if config.platform == ENSEMBLE_PLATFORM:
        return []  # refused outright for ensembles (triton_ensemble)
    findings: list[Finding] = []
    for i, sample in enumerate(config.model_warmup):
        findings += _sample_findings(f"model_warmup[{i}]", sample, config)
    return findings


def _sample_findings(where: str, sample: mc.ModelWarmup, config: mc.ModelConfig) -> list[Finding]:
    """One sample: skipped at batch_size 0, else its inputs' data, the request it makes, its batch."""
    findings: list[Finding] = []
    if not sample.name:
        findings.append(
            warning(
                where,
                "warm-up sample has no 'name': Triton 2.51 runs it, but its log lines and errors call it ''",
            )
        )
    if sample.batch_size == 0:
        findings.append(
            warning(
                f"{where}.batch_size",
                "warm-up sample has batch_size 0 (the default): Triton skips it, "
                "so the model is not warmed up by it",
            )
        )
        return findings
    inputs = f"{where}.inputs"
    findings += [
        error(
            f'{inputs}["{key}"].dims',
            f"warmup setting expects all variable-size dimensions are specified for input '{key}'",
        )
        for key, value in sample.inputs.items()
        if WILDCARD_DIM in value.dims
    ]
    findings += [
        error(
            f'{inputs}["{key}"]', f"{REQUEST}warmup setting expects input '{key}' to have input_data_type set"
        )
        for key, value in sample.inputs.items()
        if value.WhichOneof("input_data_type") is None
    ]
    if config.input:  # else the backend reads the inputs from the model file: nothing to compare
        findings += _request_findings(inputs, sample, config)
    findings += _batch_findings(f"{where}.batch_size", sample, config.max_batch_size)
    return findings


def _request_findings(where: str, sample: mc.ModelWarmup, config: mc.ModelConfig) -> list[Finding]:
    """The warm-up request against the model's inputs: all required ones given, types and shapes."""
    model_inputs = {io.name: io for io in config.input}
    extra = _extra_tensor_names(config)
    findings = [
        warning(
            f'{where}["{key}"]',
            f"warm-up input '{key}' is not a model input, sequence control or "
            "state: Triton 2.51 passes it to the backend as an extra tensor",
        )
        for key in sample.inputs
        if key not in model_inputs and key not in extra
    ]
    finding = _input_count_finding(where, [k for k in sample.inputs if k in model_inputs], config)
    if finding:
        findings.append(finding)
    for key, value in sample.inputs.items():
        if key in model_inputs:
            findings += _tensor_findings(f'{where}["{key}"]', key, value, model_inputs[key], config)
    return findings


def _extra_tensor_names(config: mc.ModelConfig) -> set[str]:
    """Tensors Triton adds to requests itself: sequence control inputs and state inputs."""
    batcher = config.sequence_batching
    return {c.name for c in batcher.control_input} | {s.input_name for s in batcher.state}


def _input_count_finding(where: str, given: list[str], config: mc.ModelConfig) -> Finding | None:
    """Normalize: at least every required (non-optional) input, at most all inputs."""
    required = [io.name for io in config.input if not io.optional]
    if len(given) >= len(required):
        return None
    total, name = len(config.input), config.name
    missing = ",".join(f"'{n}'" for n in required if n not in given)
    got = ",".join(f"'{n}'" for n in sorted(given))
    expected = (
        f"expected {total} inputs"
        if total == len(required)
        else f"expected number of inputs between {len(required)} and {total}"
    )
    return error(
        where,
        f"{REQUEST}{expected} but got {len(given)} inputs for model '{name}'. Got input(s) [{got}], "
        f"but missing required input(s) [{missing}]. Please provide all required input(s).",
    )


def _tensor_findings(
    where: str, key: str, value: mc.ModelWarmup.Input, model_input: mc.ModelInput, config: mc.ModelConfig
) -> list[Finding]:
    """A warm-up tensor has the model input's data type and a shape its dims accept."""
    name = config.name
    if value.data_type != model_input.data_type:
        got, want = (
            TYPE_INFO.get(value.data_type, ("?", 0))[0],
            TYPE_INFO.get(model_input.data_type, ("?", 0))[0],
        )
        message = (
            f"{REQUEST}inference input '{key}' data-type is '{got}', but model '{name}' expects '{want}'"
        )
        return [error(f"{where}.data_type", message)]
    if WILDCARD_DIM in value.dims or model_input.is_shape_tensor:
        return []
    wanted, dims = list(model_input.dims), list(value.dims)
    if len(dims) == len(wanted) and all(w in (WILDCARD_DIM, d) for w, d in zip(wanted, dims, strict=True)):
        return []
    batching = config.max_batch_size > 0
    expected = [WILDCARD_DIM, *wanted] if batching else wanted
    got_shape = [1, *dims] if batching else dims
    message = (
        f"{REQUEST}unexpected shape for input '{key}' for model '{name}'. Expected {dims_text(expected)}, "
        f"got {dims_text(got_shape)}. {BATCH_NOTE if batching else ''}"
    )
    return [error(f"{where}.dims", message)]


def _batch_findings(where: str, sample: mc.ModelWarmup, max_batch_size: int) -> list[Finding]:
    """A sample's batch_size requests run as one batch, which must fit the model's batch limit."""
    limit = max(max_batch_size, 1)
    if sample.batch_size <= limit:
        return []
    return [
        error(
            where,
            f"warm-up batch_size {sample.batch_size} is more than the {limit} request(s) a batch may hold "
            f"(max_batch_size {max_batch_size}): Triton runs the sample's "
            'requests as one batch and the backend refuses it (Triton 2.51: "failed to run warmup sample '
            f"'{sample.name}': batch size {sample.batch_size} for '<instance>', max allowed is "
            f'{max_batch_size}"), '
            "so the model does not load; Triton 2.51's Python backend may crash the server instead",
        )
    ]


def check_warmup_files(config: mc.ModelConfig, model_dir: Path) -> list[Finding]:
    """Each input_data_file exists in the model's warmup/ folder and holds enough bytes."""
    if config.platform == ENSEMBLE_PLATFORM:
        return []
    findings: list[Finding] = []
    for i, sample in enumerate(config.model_warmup):
        if sample.batch_size == 0:
            continue
        for key, value in sample.inputs.items():
            if value.WhichOneof("input_data_type") == "input_data_file":
                where = f'model_warmup[{i}].inputs["{key}"].input_data_file'
                findings += data_file_findings(where, model_dir, WARMUP_FOLDER, value, "warmup setting")
    return findings


DataTensor: TypeAlias = "mc.ModelWarmup.Input | mc.ModelSequenceBatching.InitialState"


def data_file_findings(
    where: str, model_dir: Path, folder: str, tensor: DataTensor, setting: str
) -> list[Finding]:
    """A data file (warm-up input or initial state) exists and has the bytes its type and dims need."""
    file_name = tensor.input_data_file if isinstance(tensor, mc.ModelWarmup.Input) else tensor.data_file
    path = os.path.join(os.path.abspath(model_dir), folder, file_name)
    if not os.path.exists(path):
        return [error(where, f"failed to open text file for read {path}: No such file or directory")]
    needed = byte_size(tensor.data_type, tensor.dims)
    if tensor.data_type == mc.TYPE_STRING or WILDCARD_DIM in tensor.dims or not os.path.isfile(path):
        return []
    size = os.path.getsize(path)
    if size >= needed:
        return []
    prefix, stop = (REQUEST, "") if setting == "warmup setting" else ("", ".")
    # "{file_name}only has" (no space) is Triton 2.51's wording, reproduced on purpose: do not add one.
    return [
        error(
            where,
            f"{prefix}{setting} expects {needed} bytes, but the data provided from {file_name}only has "
            f"{size} bytes{stop}",
        )
    ]
