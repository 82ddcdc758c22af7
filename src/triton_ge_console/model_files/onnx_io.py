"""Read a model's inputs and outputs from its ONNX graph, so an operator need not repeat them in the spec."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import onnx

from triton_ge_console.errors import GeConsoleError
from triton_ge_console.model_files.tensors import TensorSpec

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

_NOT_TENSORS = {"sequence_type": "a sequence", "map_type": "a map", "optional_type": "an optional",
                "sparse_tensor_type": "a sparse tensor"}  # TypeProto's other kinds of value

TRAINING_DOMAIN = "ai.onnx.preview.training"
MIN_OPSET = 7  # the oldest ai.onnx opset ONNX Runtime guarantees (older ones fail for want of kernels)


class Named(Protocol):
    """A tensor by name and Triton data type (a TensorSpec, or the glue's TensorInfo)."""

    @property
    def name(self) -> str: ...

    @property
    def data_type(self) -> str: ...


class OnnxReadError(GeConsoleError, ValueError):
    """An ONNX file that cannot be read, or uses a type Triton cannot carry."""


def triton_type(elem_type: int, tensor: str = "") -> str:
    """Triton's data type name for an ONNX element type the glue serves."""
    name = (onnx.TensorProto.DataType.Name(elem_type) if elem_type in onnx.TensorProto.DataType.values()
            else str(elem_type))
    where = f"'{tensor}': " if tensor else ""
    try:
        return ONNX_TO_TRITON[elem_type]
    except KeyError:
        raise OnnxReadError(f"{where}ONNX element type {name} has no Triton data type; cast it in the "
                            "graph to one Triton carries (e.g. FLOAT, INT64)") from None


def _tensor_spec(value: onnx.ValueInfoProto) -> TensorSpec:
    """One graph input/output as a TensorSpec with full dims (-1 where the dim is symbolic or unknown)."""
    kind = value.type.WhichOneof("value")
    if kind != "tensor_type":
        what = _NOT_TENSORS.get(kind or "", "an untyped value")
        raise OnnxReadError(f"'{value.name}' is {what}, not a tensor: Triton carries only tensors; "
                            "return tensors from the graph")
    tensor_type = value.type.tensor_type
    data_type = triton_type(tensor_type.elem_type, value.name)
    if not tensor_type.HasField("shape"):
        return TensorSpec(value.name, data_type, (), ranked=False)
    dims = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in tensor_type.shape.dim)
    if any(d == 0 or d < -1 for d in dims):  # Triton's dims are >= 1, or -1 for a variable one
        raise OnnxReadError(f"'{value.name}' is shaped {list(dims)}: Triton serves no dimension of size 0 "
                            "or below; make it symbolic (a name) or a size >= 1 in the graph")
    return TensorSpec(value.name, data_type, dims)


def _names_problem(tensors: tuple[TensorSpec, ...], kind: str) -> None:
    """Refuse a graph whose inputs or outputs Triton could not tell apart: unnamed, or one name twice."""
    names = [t.name for t in tensors]
    if "" in names:
        raise OnnxReadError(f"an ONNX {kind} has no name: Triton finds tensors by name; name it in the graph")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise OnnxReadError(f"ONNX {kind} '{twice[0]}' is listed more than once: Triton takes one tensor per "
                            "name; list it once in the graph")


def strings_beside_bf16(inputs: Sequence[Named], outputs: Sequence[Named]) -> str | None:
    """Why ONNX Runtime's Python API cannot run a graph taking a STRING input and giving a BF16 output
    (its numpy bridge has no bfloat16, so a BF16 output comes back only from run_with_ort_values, whose
    inputs are all OrtValues; OrtValue.ortvalue_from_numpy refuses strings, "only supported from non-string
    numpy arrays", and so does an IOBinding), or None."""
    text = next((t.name for t in inputs if t.data_type == "STRING"), None)
    half = next((t.name for t in outputs if t.data_type == "BF16"), None)
    if text is None or half is None:
        return None
    return (f"input '{text}' is STRING and output '{half}' BF16: ONNX Runtime, which runs the model "
            "without an NPU, hands a BF16 output back only from a run whose inputs are all OrtValues, and "
            f"an OrtValue holds no strings; cast '{half}' to FLOAT in the graph")


def graph_io(model: onnx.ModelProto) -> tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]]:
    """Inputs (initializers excluded) and outputs of a model's main graph, with the batch dim included; a
    model ONNX Runtime cannot run for its opset is refused here, so no build writes it."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    if opset is not None and opset < MIN_OPSET:
        raise OnnxReadError(f"ONNX opset {opset}: ONNX Runtime, which runs the model without an NPU, "
                            f"guarantees opset {MIN_OPSET} and later only; convert it first "
                            "(onnx.version_converter.convert_version(model, 17))")
    if any(node.domain == TRAINING_DOMAIN for node in model.graph.node):  # imported is not used
        raise OnnxReadError(f"uses {TRAINING_DOMAIN} operators (a training graph): inference runtimes do not "
                            "run them; export the inference graph")
    initializers = {init.name for init in model.graph.initializer}
    inputs = tuple(_tensor_spec(v) for v in model.graph.input if v.name not in initializers)
    outputs = tuple(_tensor_spec(v) for v in model.graph.output)
    _names_problem(inputs, "input")
    _names_problem(outputs, "output")
    problem = strings_beside_bf16(inputs, outputs)
    if problem:
        raise OnnxReadError(problem)
    return inputs, outputs


def graph_defaults(model: onnx.ModelProto) -> tuple[TensorSpec, ...]:
    """Inputs that have an initializer: defaults a request may override. Like Triton's onnxruntime backend,
    served only when a config declares them (older exporters list every weight so)."""
    initializers = {init.name for init in model.graph.initializer}
    defaults = []
    for value in model.graph.input:
        if value.name in initializers:
            with contextlib.suppress(OnnxReadError):  # a type no request could carry: never overridable
                defaults.append(dataclasses.replace(_tensor_spec(value), optional=True))
    return tuple(defaults)


def read_onnx_io(path: Path) -> tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]]:
    """graph_io of an ONNX file, without loading external weight files."""
    return graph_io(load_graph(path))


def load_graph(path: Path) -> onnx.ModelProto:
    """An ONNX file without its external weight files; an unreadable one is an OnnxReadError."""
    try:
        model = onnx.load(str(path), load_external_data=False)
    except (OSError, onnx.onnx_cpp2py_export.checker.ValidationError) as exc:
        raise OnnxReadError(f"{path}: cannot read ONNX: {exc}") from None
    except Exception as exc:  # protobuf's DecodeError and friends: the file is not an ONNX model
        raise OnnxReadError(f"{path}: not an ONNX model ({type(exc).__name__}: {exc})") from None
    return model


def triton_dims(dims: tuple[int, ...], max_batch_size: int) -> tuple[int, ...]:
    """Config dims for full ONNX dims: with max_batch_size > 0 Triton's dims exclude the batch dim."""
    return dims[1:] if max_batch_size > 0 else dims


def for_config(tensor: TensorSpec, max_batch_size: int) -> TensorSpec:
    """A graph tensor as config.pbtxt declares it: the batch dim dropped when Triton batches; a scalar
    (ONNX shape []) of a non-batching model as dims [1], which the glue squeezes and expands for the model
    (Triton has no scalar tensors); a batching model's batch-only tensor (ONNX [N]) as dims [1] with
    `reshape: []`, which Triton applies itself; a tensor of unknown rank as dims [-1].
    (serving_problem says which graph tensors cannot be served at all.)"""
    if not tensor.ranked:
        return dataclasses.replace(tensor, dims=(-1,))
    dims = triton_dims(tensor.dims, max_batch_size)
    if dims:
        return dataclasses.replace(tensor, dims=dims)
    return dataclasses.replace(tensor, dims=(1,), reshape=() if max_batch_size > 0 else None)


def is_scalar(tensor: TensorSpec) -> bool:
    """An ONNX scalar (shape []), as opposed to a tensor of unknown rank."""
    return tensor.ranked and not tensor.dims


def serving_problem(tensor: TensorSpec, kind: str, max_batch_size: int) -> str | None:
    """Why Triton cannot serve this graph input/output with this max_batch_size, or None when it can:
    a batching model needs a variable leading (batch) dim on every tensor, to split a batch by request."""
    if max_batch_size <= 0 or (tensor.ranked and tensor.dims and tensor.dims[0] == -1):
        return None
    shape = "a scalar (shape [])" if is_scalar(tensor) else (
        "of unknown rank" if not tensor.ranked else f"shaped {list(tensor.dims)}")
    return (f"is {max_batch_size} but ONNX {kind} '{tensor.name}' is {shape}, with no variable batch dim "
            "for Triton to batch along; use max_batch_size: 0")


def how_served(tensor: TensorSpec, max_batch_size: int) -> str:
    """How a graph tensor whose shape Triton cannot write as is gets served ("" for the others), for
    messages that refuse another mapping."""
    if not tensor.ranked:
        return (f"; '{tensor.name}' has no shape in the ONNX (any rank): serve it as dims [-1], the glue "
                "passes whatever rank it gets")
    if is_scalar(tensor) and max_batch_size <= 0:
        return (f"; '{tensor.name}' is a scalar in the ONNX (shape []): Triton has no scalar tensors, so it "
                "is served as dims [1] (no reshape) and the ge glue hands the model a scalar")
    if max_batch_size > 0 and len(tensor.dims) == 1:
        return (f"; '{tensor.name}' is the batch alone in the ONNX (shape [N]): it is served as dims [1] "
                "with reshape { shape: [] }, which Triton applies itself (or dims [1] alone: the ge glue "
                "squeezes it)")
    return ""
