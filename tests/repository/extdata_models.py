"""Small ONNX models with their weights in external-data files (one file, or one per tensor)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

WIDTH = 256  # 256x256 FP32 weights: 256 KiB a tensor
OLD_NS = 1_000_000_000_000_000_000  # an mtime (2001) far enough back for the digest cache to trust


def ext_model(layers: int = 4, seed: int = 0) -> onnx.ModelProto:
    """y = x @ W0 @ W1 ... with x [-1, WIDTH] FP32, every W an initializer."""
    rng = np.random.default_rng(seed)
    weights = [numpy_helper.from_array((rng.standard_normal((WIDTH, WIDTH)) / 16).astype(np.float32), f"w{i}")
               for i in range(layers)]
    names = ["x", *[f"h{i}" for i in range(layers - 1)], "y"]
    nodes = [helper.make_node("MatMul", [names[i], f"w{i}"], [names[i + 1]]) for i in range(layers)]
    graph = helper.make_graph(
        nodes, "ext", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, WIDTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, WIDTH])], weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def save_ext(path: Path, one_file: bool = True, location: str | None = None, layers: int = 4,
             seed: int = 0) -> Path:
    """Save ext_model at path with its weights external (in `location`, or one file per tensor)."""
    model = ext_model(layers, seed)
    where = location or f"{path.name}.data"
    (path.parent / where).parent.mkdir(parents=True, exist_ok=True)
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=one_file,
                    location=where if one_file else None, size_threshold=0)
    return path


def age(*paths: Path) -> None:
    """Give files an old mtime, as model files a user copied in long ago have."""
    for path in paths:
        os.utime(path, ns=(OLD_NS, OLD_NS))


def set_location(onnx_path: Path, location: str) -> None:
    """Point every external tensor of a saved ONNX at another location (weights untouched)."""
    model = onnx.load(str(onnx_path), load_external_data=False)
    for tensor in model.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = location
    onnx.save_model(model, str(onnx_path))
