"""Read a model's inputs and outputs from its ONNX graph, so an operator need not repeat them in the spec."""

from __future__ import annotations

from pathlib import Path

import onnx

from triton_ge_console.repository.spec.types import TensorSpec

# ONNX TensorProto element type → Triton data type (without the TYPE_ prefix).
ONNX_TO_TRITON: dict[int, str] = {
    onnx.TensorProto.BOOL: "BOOL",
    onnx.TensorProto.UINT8: "UINT8",
    onnx.TensorProto.UINT16: "UINT16",
    onnx.TensorProto.UINT32: "UINT32",
    onnx.TensorProto.UINT64: "UINT64",
    onnx.TensorProto.INT8: "INT8",
    onnx.TensorProto.INT16: "INT16",
    onnx.TensorProto.INT32: "INT32",
    onnx.TensorProto.INT64: "INT64",
    onnx.TensorProto.FLOAT16: "FP16",
    onnx.TensorProto.FLOAT: "FP32",
    onnx.TensorProto.DOUBLE: "FP64",
    onnx.TensorProto.BFLOAT16: "BF16",
    onnx.TensorProto.STRING: "STRING",  # config.pbtxt's TYPE_STRING; BYTES on the wire
}
TRITON_TO_ONNX: dict[str, int] = {triton: elem for elem, triton in ONNX_TO_TRITON.items()}

# Every data type Triton's model config accepts (model_config.proto's DataType, minus TYPE_INVALID).
TRITON_DATA_TYPES: tuple[str, ...] = (
    "BOOL",
    "UINT8",
    "UINT16",
    "UINT32",
    "UINT64",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "FP16",
    "FP32",
    "FP64",
    "STRING",
    "BF16",
)


class OnnxReadError(ValueError):
    """An ONNX file that cannot be read, or uses a type Triton cannot carry."""


def triton_type(elem_type: int) -> str:
    """Triton's data type name for an ONNX element type."""
    try:
        return ONNX_TO_TRITON[elem_type]
    except KeyError:
        name = (
            onnx.TensorProto.DataType.Name(elem_type)
            if elem_type in onnx.TensorProto.DataType.values()
            else str(elem_type)
        )
        raise OnnxReadError(f"ONNX element type {name} has no Triton data type") from None


def _tensor_spec(value: onnx.ValueInfoProto) -> TensorSpec:
    """One graph input/output as a TensorSpec with full dims (-1 where the dim is symbolic or unknown)."""
    tensor_type = value.type.tensor_type
    dims = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in tensor_type.shape.dim)
    return TensorSpec(value.name, triton_type(tensor_type.elem_type), dims)


def graph_io(model: onnx.ModelProto) -> tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]]:
    """Inputs (initializers excluded) and outputs of a model's main graph, with the batch dim included."""
    initializers = {init.name for init in model.graph.initializer}
    inputs = tuple(_tensor_spec(v) for v in model.graph.input if v.name not in initializers)
    outputs = tuple(_tensor_spec(v) for v in model.graph.output)
    return inputs, outputs


def read_onnx_io(path: Path) -> tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]]:
    """graph_io of an ONNX file, without loading external weight files."""
    try:
        model = onnx.load(str(path), load_external_data=False)
    except (OSError, onnx.onnx_cpp2py_export.checker.ValidationError) as exc:
        raise OnnxReadError(f"{path}: cannot read ONNX: {exc}") from None
    except Exception as exc:  # protobuf's DecodeError and friends: the file is not an ONNX model
        raise OnnxReadError(f"{path}: not an ONNX model ({type(exc).__name__}: {exc})") from None
    return graph_io(model)


def triton_dims(dims: tuple[int, ...], max_batch_size: int) -> tuple[int, ...]:
    """Config dims for full ONNX dims: with max_batch_size > 0 Triton's dims exclude the batch dim."""
    return dims[1:] if max_batch_size > 0 else dims


def for_config(tensor: TensorSpec, max_batch_size: int) -> TensorSpec:
    """A graph tensor as config.pbtxt declares it (batch dim dropped when Triton batches)."""
    return TensorSpec(tensor.name, tensor.data_type, triton_dims(tensor.dims, max_batch_size))
