"""Reading inputs/outputs from ONNX files, and the ONNX ↔ Triton data type mapping."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from tritonclient.grpc import model_config_pb2

from triton_ge_console.model_files.onnx_io import (
    ONNX_TO_TRITON,
    TRITON_DATA_TYPES,
    TRITON_TO_ONNX,
    OnnxReadError,
    for_config,
    read_onnx_io,
    triton_dims,
    triton_type,
)
from triton_ge_console.model_files.tensors import TensorSpec


def _model(elem_type: int = TensorProto.FLOAT) -> onnx.ModelProto:
    """y = x + w, with w also listed as a graph input (old exporters do that), symbolic and fixed dims."""
    weight = numpy_helper.from_array(np.ones((3,), dtype=np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        "g",
        [
            helper.make_tensor_value_info("x", elem_type, ["batch", 3]),
            helper.make_tensor_value_info("w", TensorProto.FLOAT, [3]),
        ],
        [helper.make_tensor_value_info("y", elem_type, ["batch", None])],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_every_mapped_type_is_a_triton_config_type() -> None:
    """Each mapped name is a real TYPE_* of model_config.proto, and the mapping inverts."""
    names = model_config_pb2.DataType.DESCRIPTOR.values_by_name
    config_types = {name.removeprefix("TYPE_") for name in names} - {"INVALID"}
    assert set(TRITON_DATA_TYPES) == config_types
    assert set(ONNX_TO_TRITON.values()) <= config_types
    assert all(ONNX_TO_TRITON[TRITON_TO_ONNX[name]] == name for name in TRITON_TO_ONNX)
    assert triton_type(TensorProto.FLOAT) == "FP32" and triton_type(TensorProto.STRING) == "STRING"


def test_unmapped_type_is_a_clear_error() -> None:
    """Complex numbers have no Triton type."""
    with pytest.raises(OnnxReadError, match="ONNX element type COMPLEX64 has no Triton data type"):
        triton_type(TensorProto.COMPLEX64)


def test_read_io_skips_initializers_and_marks_variable_dims(tmp_path: Path) -> None:
    """Inputs that are initializers are weights, not inputs; symbolic and unknown dims become -1."""
    path = tmp_path / "add.onnx"
    onnx.save(_model(), str(path))
    ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])  # a model ONNX Runtime accepts
    inputs, outputs = read_onnx_io(path)
    assert inputs == (TensorSpec("x", "FP32", (-1, 3)),)
    assert outputs == (TensorSpec("y", "FP32", (-1, -1)),)


def test_int64_model_and_batch_dim_dropping(tmp_path: Path) -> None:
    """Config dims drop the batch dim only when Triton batches (max_batch_size > 0)."""
    path = tmp_path / "int.onnx"
    onnx.save(_model(TensorProto.INT64), str(path))
    (x,), _ = read_onnx_io(path)
    assert x == TensorSpec("x", "INT64", (-1, 3))
    assert for_config(x, 8) == TensorSpec("x", "INT64", (3,))
    assert for_config(x, 0) == x
    assert triton_dims((-1, -1, 32000), 4) == (-1, 32000)


def test_unreadable_files_are_clear_errors(tmp_path: Path) -> None:
    """A missing file and bytes that are not a model name the file."""
    with pytest.raises(OnnxReadError, match=r"missing\.onnx: cannot read ONNX"):
        read_onnx_io(tmp_path / "missing.onnx")
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\xff\xfe not protobuf")
    with pytest.raises(OnnxReadError, match=r"garbage\.onnx: not an ONNX model"):
        read_onnx_io(garbage)
