"""A tiny helper for writing ONNX graphs by hand with onnx.helper: named weights from a seeded RNG, layers."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8  # the IR version that goes with opset 17; every onnxruntime since 1.10 runs it


class GraphBuilder:
    """Accumulates nodes and initializers; every value gets a unique, readable name."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._counter = 0

    def fresh(self, hint: str) -> str:
        """A new value name."""
        self._counter += 1
        return f"{hint}_{self._counter}"

    def const(self, name: str, array: np.ndarray) -> str:
        """Add a constant (weight or literal) and return its name."""
        self.initializers.append(numpy_helper.from_array(array, name))
        return name

    def weight(self, name: str, shape: tuple[int, ...], scale: float | None = None) -> str:
        """A random float32 weight, scaled like a standard init (1/sqrt(fan_in)) unless told."""
        std = scale if scale is not None else 1.0 / np.sqrt(shape[0])
        return self.const(name, (self.rng.standard_normal(shape) * std).astype(np.float32))

    def op(self, op_type: str, *inputs: str, hint: str | None = None, **attrs: Any) -> str:
        """Add one single-output node; returns its output name."""
        output = self.fresh(hint or op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [output], **attrs))
        return output

    def multi(self, op_type: str, inputs: list[str], count: int, **attrs: Any) -> list[str]:
        """Add a node with several outputs."""
        outputs = [self.fresh(op_type.lower()) for _ in range(count)]
        self.nodes.append(helper.make_node(op_type, inputs, outputs, **attrs))
        return outputs

    def ints(self, name: str, values: list[int]) -> str:
        """An int64 1-D constant (shapes, axes), added once however often it is asked for."""
        if any(init.name == name for init in self.initializers):
            return name
        return self.const(name, np.array(values, dtype=np.int64))

    def scalar(self, name: str, value: float) -> str:
        """A float32 scalar constant."""
        return self.const(name, np.array(value, dtype=np.float32))

    def model(
        self,
        name: str,
        inputs: list[onnx.ValueInfoProto],
        outputs: list[onnx.ValueInfoProto],
        final: dict[str, str],
    ) -> onnx.ModelProto:
        """Finish the graph: rename the last values to the graph's output names, check it."""
        for node in self.nodes:
            node.output[:] = [final.get(out, out) for out in node.output]
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.initializers)
        model = helper.make_model(
            graph,
            producer_name="triton-ge-console",
            producer_version="1",
            opset_imports=[helper.make_opsetid("", OPSET)],
        )
        model.ir_version = IR_VERSION
        onnx.checker.check_model(model)
        return model


def tensor_info(name: str, elem_type: int, dims: list[int | str]) -> onnx.ValueInfoProto:
    """A graph input/output declaration; strings are symbolic dims."""
    return helper.make_tensor_value_info(name, elem_type, dims)


FLOAT = TensorProto.FLOAT
INT64 = TensorProto.INT64


def linear(g: GraphBuilder, x: str, prefix: str, n_in: int, n_out: int, bias: bool = False) -> str:
    """x @ W (+ b)."""
    y = g.op("MatMul", x, g.weight(f"{prefix}.weight", (n_in, n_out)), hint=prefix)
    if bias:
        y = g.op("Add", y, g.const(f"{prefix}.bias", np.zeros(n_out, dtype=np.float32)))
    return y


def rms_norm(g: GraphBuilder, x: str, prefix: str, hidden: int, eps: float = 1e-6) -> str:
    """RMSNorm as in LLaMA: x / sqrt(mean(x^2) + eps) * g."""
    mean_square = g.op("ReduceMean", g.op("Mul", x, x), axes=[-1], keepdims=1)
    rms = g.op("Sqrt", g.op("Add", mean_square, g.scalar(f"{prefix}.eps", eps)))
    gain = g.const(f"{prefix}.weight", np.ones(hidden, dtype=np.float32))
    return g.op("Mul", g.op("Div", x, rms), gain, hint=prefix)


def layer_norm(g: GraphBuilder, x: str, prefix: str, hidden: int) -> str:
    """LayerNormalization over the last axis (an opset 17 op)."""
    scale = g.const(f"{prefix}.weight", np.ones(hidden, dtype=np.float32))
    bias = g.const(f"{prefix}.bias", np.zeros(hidden, dtype=np.float32))
    return g.op("LayerNormalization", x, scale, bias, axis=-1, epsilon=1e-12, hint=prefix)


def split_heads(g: GraphBuilder, x: str, heads: int, head_dim: int) -> str:
    """[B, S, H] → [B, heads, S, head_dim]."""
    shape = g.ints("split_heads.shape", [0, 0, heads, head_dim])
    return g.op("Transpose", g.op("Reshape", x, shape), perm=[0, 2, 1, 3])


def merge_heads(g: GraphBuilder, x: str, hidden: int) -> str:
    """[B, heads, S, head_dim] → [B, S, H]."""
    shape = g.ints("merge_heads.shape", [0, 0, hidden])
    return g.op("Reshape", g.op("Transpose", x, perm=[0, 2, 1, 3]), shape)


def attention(g: GraphBuilder, q: str, k: str, v: str, head_dim: int, bias: str) -> str:
    """softmax(q k^T / sqrt(d) + bias) v, all [B, heads, S, d]; bias broadcasts over the scores."""
    scores = g.op("MatMul", q, g.op("Transpose", k, perm=[0, 1, 3, 2]))
    scaled = g.op("Mul", scores, g.scalar(g.fresh("attn.scale"), 1.0 / float(np.sqrt(head_dim))))
    probs = g.op("Softmax", g.op("Add", scaled, bias), axis=-1)
    return g.op("MatMul", probs, v)
