"""What a spec's models put in /dev/shm: each Python-backend instance's region (1 MiB unless
shm-default-byte-size says more) grown to hold its largest response (every output at max_batch_size)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from triton_ge_console.doctor.checks import PYTHON_BACKEND_REGION
from triton_ge_console.model_files.tensors import TensorSpec

if TYPE_CHECKING:
    from triton_ge_console.repository.spec.types import ModelSpec

ITEM_BYTES = {"BOOL": 1, "UINT8": 1, "INT8": 1, "INT16": 2, "UINT16": 2, "FP16": 2, "BF16": 2, "INT32": 4,
              "UINT32": 4, "FP32": 4, "INT64": 8, "UINT64": 8, "FP64": 8}


def response_bytes(outputs: tuple[TensorSpec, ...], max_batch_size: int) -> int | None:
    """One full response's bytes (None: a dim only known at run time, or a STRING output)."""
    total = 0
    for tensor in outputs:
        if tensor.data_type not in ITEM_BYTES or any(d < 0 for d in tensor.dims) or not tensor.ranked:
            return None
        count = max(1, max_batch_size)
        for dim in tensor.dims:
            count *= dim
        total += count * ITEM_BYTES[tensor.data_type]
    return total


def _outputs(model: ModelSpec) -> tuple[TensorSpec, ...] | None:
    """The model's outputs as Triton serves them: the spec's, else its ONNX graph's (None: not readable)."""
    from triton_ge_console.model_files.onnx_io import OnnxReadError, for_config, read_onnx_io

    if model.outputs:
        return model.outputs
    if model.onnx_path is None or not model.onnx_path.is_file():
        return None
    try:
        _, outputs = read_onnx_io(model.onnx_path)
    except OnnxReadError:
        return None
    return tuple(for_config(t, model.max_batch_size) for t in outputs)


def spec_shm_need(spec_path: Path) -> tuple[int, str]:
    """Bytes the spec's models need in /dev/shm, and a note naming the largest and what is unknown."""
    from triton_ge_console.repository.spec.load import load_spec

    spec = load_spec(spec_path)
    need, unknown, largest = 0, [], ("", 0)
    for model in spec.models:
        outputs = _outputs(model)
        size = None if outputs is None else response_bytes(outputs, model.max_batch_size)
        instances = model.instance_group.count * max(1, len(model.instance_group.device_ids))
        if size is None:
            unknown.append(model.name)
            size = 0
        need += instances * (PYTHON_BACKEND_REGION + size)
        largest = max(largest, (model.name, size), key=lambda pair: pair[1])
    note = f" ({largest[0]}'s response {largest[1] / (1 << 20):,.1f} MiB)" if largest[1] else ""
    if unknown:
        note += f"; not counted (sizes known only at run time): {', '.join(unknown)}"
    return need, note
