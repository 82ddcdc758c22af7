"""Whether Triton may batch an ONNX model: the batch dim of its inputs followed through the graph to every
output. Triton joins requests along dim 0 of every input and splits the answer along dim 0 of every output,
so an output whose batch lies elsewhere (time-major) or nowhere, and any op that works across the batch
(a reduction, softmax or normalisation over it, a MatMul contracting it, a Concat, Split, Gather or Slice
along it, training-mode BatchNorm) would hand one request another's answer. Where the graph cannot tell,
batch_probe runs the model on the CPU."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from triton_ge_console.model_files import batch_probe

BATCH = "__ge_console_batch__"  # the one name every input's dim 0 is given before shape inference
ADVICE = ("serve it with max_batch_size: 0 (each request whole, as sent), or re-export it with the batch in "
          "dim 0 of every input and output and no op across it")

ELEMENTWISE = frozenset({
    "Abs", "Acos", "Acosh", "Add", "And", "Asin", "Asinh", "Atan", "Atanh", "BitShift", "BitwiseAnd",
    "BitwiseNot", "BitwiseOr", "BitwiseXor", "Cast", "CastLike", "Ceil", "Celu", "Clip", "Cos", "Cosh",
    "Div", "Dropout", "Elu", "Equal", "Erf", "Exp", "Expand", "Floor", "Gelu", "Greater", "GreaterOrEqual",
    "HardSigmoid", "HardSwish", "Identity", "IsInf", "IsNaN", "LeakyRelu", "Less", "LessOrEqual", "Log",
    "Max", "Mean", "Min", "Mish", "Mod", "Mul", "Neg", "Not", "Or", "PRelu", "Pow",
    "Reciprocal", "Relu", "Round", "Selu", "Shrink", "Sigmoid", "Sign", "Sin", "Sinh", "Softplus",
    "Softsign", "Sqrt", "Sub", "Sum", "Tan", "Tanh", "ThresholdedRelu", "Where", "Xor"})
# ops that need the batch in dim 0 (N of NCHW) and work across every other dim of their first input
SAMPLE_OPS = frozenset({
    "AveragePool", "BatchNormalization", "Conv", "ConvInteger", "ConvTranspose", "DepthToSpace",
    "GlobalAveragePool", "GlobalLpPool", "GlobalMaxPool", "GroupNormalization", "InstanceNormalization",
    "LpPool", "LRN", "MaxPool", "SpaceToDepth"})
MOVERS = frozenset({"Transpose", "Squeeze", "Unsqueeze"})  # move the batch dim, never its values
REDUCTIONS = frozenset({
    "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin",
    "ReduceProd", "ReduceSum", "ReduceSumSquare"})
RECURRENT = frozenset({"GRU", "LSTM", "RNN"})
# inputs that give a shape, axes or sizes (not data): a value computed from the batch size is fine there
SHAPE_SLOTS = {"Reshape": {1}, "Expand": {1}, "ConstantOfShape": {0}, "Slice": {1, 2, 3, 4}, "Tile": {1},
               "Unsqueeze": {1}, "Squeeze": {1}, "Resize": {1, 2, 3}, "Pad": {1, 2, 3}, "Split": {1},
               "CumSum": {1}, "TopK": {1}, **{r: {1} for r in REDUCTIONS}}


@dataclass(frozen=True)
class State:
    """What a tensor holds with respect to the batch: `kind` clean (nothing of any sample), batched (the
    samples apart, along `axis`), shape (a shape vector whose entry `axis` is the batch size), size (a value
    computed from the batch size), mixed (samples combined: `why`) or unknown (the graph cannot tell:
    `why`)."""

    kind: str
    axis: int = -1
    why: str = ""


CLEAN = State("clean")
SIZE = State("size")


@dataclass(frozen=True)
class _Graph:
    """What the rules read of the graph besides states: inferred shapes, small constants, the opset."""

    shapes: dict[str, tuple[str | int | None, ...]]
    consts: dict[str, np.ndarray]
    opset: int

    def rank(self, name: str) -> int:
        """A tensor's inferred rank (0 when unknown)."""
        return len(self.shapes.get(name, ())) if name else 0


@dataclass(frozen=True)
class Verdict:
    """What the graph says: problems (each names the output or node and why), or why it cannot tell."""

    problems: tuple[str, ...] = ()
    unsure: str | None = None


def graph_verdict(model: onnx.ModelProto) -> Verdict:
    """Follow the inputs' batch dim (dim 0) through the graph to every output."""
    inferred = _infer(model)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)
    graph = _Graph(_shapes(inferred), _constants(inferred), opset)
    initializers = {init.name for init in inferred.graph.initializer}
    states: dict[str, State] = {v.name: State("batched", 0) for v in inferred.graph.input
                                if v.name not in initializers}
    for node in inferred.graph.node:
        results = _node_states(node, [states.get(name, CLEAN) if name else CLEAN for name in node.input],
                               graph)
        states.update(zip(node.output, results, strict=False))
    problems, unsure = [], None
    for output in inferred.graph.output:
        problem, doubt = _output_problem(output.name, states.get(output.name, CLEAN),
                                         graph.shapes.get(output.name))
        problems += [problem] if problem else []
        unsure = unsure or doubt
    return Verdict(tuple(dict.fromkeys(problems)), None if problems else unsure)


def _infer(model: onnx.ModelProto) -> onnx.ModelProto:
    """ONNX shape inference (with shape data propagated) after naming every input's dim 0 BATCH, so the
    batch can be found by name in every inferred shape. Neither the weights nor an exporter's value_info
    (often batch 1, which would stand over the inferred shapes) are copied."""
    skeleton = onnx.ModelProto(ir_version=model.ir_version)
    skeleton.opset_import.extend(model.opset_import)
    skeleton.functions.extend(model.functions)
    graph = skeleton.graph
    graph.node.extend(model.graph.node)
    graph.input.extend(model.graph.input)
    graph.output.extend(model.graph.output)
    for init in model.graph.initializer:  # shape inference reads no weight values; the small ones are kept
        if init.data_location == onnx.TensorProto.EXTERNAL or _size(init) <= 64:
            graph.initializer.append(init)
        else:
            graph.initializer.add(name=init.name, data_type=init.data_type, dims=init.dims)
    for value in skeleton.graph.input:
        dims = value.type.tensor_type.shape.dim
        if value.type.HasField("tensor_type") and dims:
            dims[0].Clear()
            dims[0].dim_param = BATCH
    for value in skeleton.graph.output:  # inferred afresh: an exporter's own names would stay otherwise
        if value.type.HasField("tensor_type"):
            value.type.tensor_type.ClearField("shape")
    try:
        return onnx.shape_inference.infer_shapes(skeleton, data_prop=True)
    except Exception:  # an op the checker rejects: the graph's own shapes, then the probe decides
        return skeleton


def _size(tensor: onnx.TensorProto) -> int:
    """Element count of an initializer."""
    return int(np.prod(tensor.dims)) if tensor.dims else 1


def _shapes(model: onnx.ModelProto) -> dict[str, tuple[str | int | None, ...]]:
    """Each tensor's inferred dims: an int, a dim name, or None when unknown."""
    found: dict[str, tuple[str | int | None, ...]] = {}
    graph = model.graph
    for value in (*graph.input, *graph.value_info, *graph.output):
        tensor_type = value.type.tensor_type
        if value.type.HasField("tensor_type") and tensor_type.HasField("shape"):
            found[value.name] = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                                      for d in tensor_type.shape.dim)
    for init in graph.initializer:
        found[init.name] = tuple(init.dims)
    return found


def _constants(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """Small integer tensors known without running the graph: initializers and Constant nodes (axes,
    starts, ends, pads, repeats, indices)."""
    found = {}
    tensors = [(i.name, i) for i in model.graph.initializer]
    tensors += [(n.output[0], a.t) for n in model.graph.node if n.op_type == "Constant" for a in n.attribute
                if a.name == "value"]
    for name, tensor in tensors:
        if tensor.data_type in (onnx.TensorProto.INT64, onnx.TensorProto.INT32) and _size(tensor) <= 64 \
                and tensor.data_location != onnx.TensorProto.EXTERNAL:
            found[name] = numpy_helper.to_array(tensor)
    return found


def _output_problem(name: str, state: State, shape: Sequence[str | int | None] | None
                    ) -> tuple[str | None, str | None]:
    """Why Triton cannot split this output by request, or why the graph cannot tell."""
    shown = _shown(shape)
    if state.kind == "mixed":
        return f"output '{name}' mixes the requests Triton joins: {state.why}", None
    if state.kind == "batched" and state.axis != 0:
        return (f"output '{name}'{shown} carries the batch in dim {state.axis}, not dim 0: Triton splits "
                "joined requests' answers along dim 0, so each would get a slice of all of them"), None
    if state.kind == "clean" and not (shape and shape[0] == BATCH):
        return (f"output '{name}'{shown} does not follow the batch (it is computed without the inputs' "
                "samples): Triton splits it along dim 0 as if it did"), None
    if state.kind in ("size", "shape"):
        return None, f"output '{name}' is computed from the batch size"
    if state.kind == "unknown":
        return None, state.why
    return None, None


def _shown(shape: Sequence[str | int | None] | None) -> str:
    """' [time, batch, 4]': an inferred shape for messages, the batch as 'batch', unknown dims as '?'."""
    if not shape:
        return ""
    dims = ["batch" if d == BATCH else "?" if d is None else str(d) for d in shape]
    return f" [{', '.join(dims)}]"


def _node_states(node: onnx.NodeProto, inputs: list[State], graph: _Graph) -> list[State]:
    """The state of each output of one node, from its inputs' states."""
    where = f"node '{node.name or node.output[0]}' ({node.op_type})"
    slots = SHAPE_SLOTS.get(node.op_type, set())
    data = [s for i, s in enumerate(inputs) if i not in slots]
    for kind in ("mixed", "unknown"):
        carried = next((s for s in inputs if s.kind == kind), None)
        if carried is not None:
            return [carried] * len(node.output)
    if node.op_type == "Shape":
        return [_shape_of(node, inputs[0])]
    if node.op_type in ("Gather", "Slice") and inputs[0].kind == "shape":
        return [_part_of_shape(node, inputs[0], graph.consts)]
    if all(s.kind == "clean" for s in data):
        if any(inputs[i].kind in ("shape", "size") for i in slots if i < len(inputs)):
            return [_shaped_by_batch(node, graph, out, where) for out in node.output]
        return [CLEAN] * len(node.output)
    if not any(s.kind == "batched" for s in data):
        return [SIZE] * len(node.output)
    if any(s.kind in ("size", "shape") for s in data):
        return [State("unknown", why=f"{where} combines the samples with a value computed from the batch "
                                     "size")] * len(node.output)
    found = _batched(node, inputs, graph, where)
    if isinstance(found, State):
        return [found] * len(node.output)
    return [_at(graph.shapes.get(out), where) if out else CLEAN for out in node.output]


def _shaped_by_batch(node: onnx.NodeProto, graph: _Graph, out: str, where: str) -> State:
    """Values without any sample's, sized by the batch: ConstantOfShape and Expand repeat the same values
    along the batch (each sample's row alike), so they follow it like a sample's; anything else (a table
    sliced or reshaped to the batch's size) may differ row by row, so it counts as computed from the batch
    size (a value a sample must not be combined with unchecked)."""
    if node.op_type in ("ConstantOfShape", "Expand") and out:
        return _at(graph.shapes.get(out), where)
    return SIZE


def _shape_of(node: onnx.NodeProto, state: State) -> State:
    """Shape of a batched tensor: a vector holding the batch size at the batch's position."""
    if state.kind != "batched":
        return CLEAN if state.kind == "clean" else SIZE
    start = next((a.i for a in node.attribute if a.name == "start"), 0)
    if start < 0:
        return SIZE  # counted from the end: not followed
    return State("shape", state.axis - start) if start <= state.axis else CLEAN


def _part_of_shape(node: onnx.NodeProto, state: State, consts: dict[str, np.ndarray]) -> State:
    """Entries picked from a shape vector by constant indices: clean unless the batch size is among them."""
    if node.op_type == "Gather":
        picked = consts.get(node.input[1])
        return SIZE if picked is None or state.axis in picked.reshape(-1) else CLEAN
    bounds = [consts.get(name) for name in node.input[1:3]]
    if bounds[0] is None or bounds[1] is None or len(node.input) > 4:  # steps: not followed
        return SIZE
    start, end = int(bounds[0].reshape(-1)[0]), int(bounds[1].reshape(-1)[0])
    if start < 0 or end < 0:
        return SIZE
    return State("shape", state.axis - start) if start <= state.axis < end else CLEAN


def _at(shape: Sequence[str | int | None] | None, where: str) -> State:
    """A batched result: its batch axis as shape inference placed it."""
    found = [i for i, d in enumerate(shape or ()) if d == BATCH]
    if len(found) == 1:
        return State("batched", found[0])
    if len(found) > 1:
        return State("mixed", why=f"{where} pairs every sample with every other (the batch in dims "
                                  f"{found[0]} and {found[1]} of its result)")
    return State("unknown", why=f"shape inference cannot place the batch after {where}")


def _axes(node: onnx.NodeProto, rank: int, consts: dict[str, np.ndarray], default: list[int] | None
          ) -> list[int] | None:
    """The axes a node works along (attribute `axis`/`axes`, else its axes input), normalised; None when
    they are not known without running the graph."""
    attrs = _attrs(node)
    if "axes" in attrs:
        found = list(attrs["axes"])
    elif "axis" in attrs:
        found = [attrs["axis"]]
    elif node.op_type in REDUCTIONS and len(node.input) > 1 and node.input[1]:
        given = consts.get(node.input[1])
        if given is None:
            return None
        found = [int(a) for a in given.reshape(-1)]
        if not found and attrs.get("noop_with_empty_axes", 0):
            return []
    elif node.op_type in REDUCTIONS and attrs.get("noop_with_empty_axes", 0):
        return []  # no axes given, and told to be the identity then
    elif node.op_type in ("CumSum",):
        given = consts.get(node.input[1])
        if given is None:
            return None
        found = [int(given.reshape(-1)[0])]
    elif default is None:
        return list(range(rank))
    else:
        found = default
    return [a % rank if rank else a for a in found]


def _batched(node: onnx.NodeProto, inputs: list[State], graph: _Graph, where: str) -> State | None:
    """A mixed or unknown state when the op works across the batch or cannot be followed; None when the
    samples stay apart (their axis is then read from the output's inferred shape)."""
    if node.domain not in ("", "ai.onnx"):  # another domain's op of the same name may do anything
        return State("unknown", why=f"{where}: an op of domain {node.domain}, not followed by this check")
    if node.op_type in ELEMENTWISE or node.op_type in MOVERS:
        return None  # broadcasting two batch dims against each other shows as BATCH twice in the result
    rule = RULES.get(node.op_type)
    if rule is not None:
        return rule(node, inputs, graph, where)
    if node.op_type in AXIS_DEFAULTS:
        return _along_axes(node, inputs, graph, where)
    return State("unknown", why=f"{where}: an op this check does not follow")


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    """A node's attributes by name, as Python values."""
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _sample_op(node: onnx.NodeProto, inputs: list[State], graph: _Graph, where: str) -> State | None:
    """Conv, pooling, inference-mode normalisation: each sample on its own when the batch is dim 0 (N)."""
    first = inputs[0]
    if node.op_type == "BatchNormalization" and (_attrs(node).get("training_mode", 0) or
                                                 sum(bool(o) for o in node.output) > 1):
        return State("mixed", why=f"{where} normalises in training mode, over the batch")
    if first.kind != "batched" or first.axis != 0 or any(s.kind == "batched" for s in inputs[1:]):
        return State("mixed", why=f"{where} works across dim {first.axis} of its input, where the batch "
                                  "is (it needs the batch in dim 0)")
    return None


def _recurrent(node: onnx.NodeProto, inputs: list[State], graph: _Graph, where: str) -> State | None:
    """LSTM, GRU, RNN step along their time dim (0, or 1 with layout 1): the batch must not be it."""
    time_axis = 1 if _attrs(node).get("layout", 0) else 0
    if inputs[0].kind == "batched" and inputs[0].axis == time_axis:
        return State("mixed", why=f"{where} runs its recurrence along dim {time_axis}, where the batch "
                                  "is: each sample's state would carry into the next")
    return None


def _gemm(node: onnx.NodeProto, inputs: list[State], graph: _Graph, where: str) -> State | None:
    """Gemm sums over A's dim 1 and B's dim 0 (swapped by transA, transB): the batch must be in neither."""
    attrs = _attrs(node)
    contracted = [1 - attrs.get("transA", 0), attrs.get("transB", 0)]
    for state, axis in zip(inputs[:2], contracted, strict=True):
        if state.kind == "batched" and state.axis == axis:
            return State("mixed", why=f"{where} sums over the batch (contracting dim {axis})")
    return None


def _resize(node: onnx.NodeProto, inputs: list[State], graph: _Graph, where: str) -> State | None:
    """Resize scales the batch dim by 1 when that dim is still the batch in its result."""
    first, after = inputs[0], graph.shapes.get(node.output[0], ())
    if first.kind == "batched" and first.axis < len(after) and after[first.axis] == BATCH:
        return None
    return State("unknown", why=f"{where} may scale the batch dim")


def _along_axes(node: onnx.NodeProto, inputs: list[State], graph: _Graph, where: str) -> State | None:
    """Ops working along some axes (AXIS_DEFAULTS: attribute, input, or the op's default): mixed when the
    batch is one of them."""
    op, first = node.op_type, inputs[0]
    if op == "Gather" and first.kind != "batched":
        return None  # a table looked up by batched indices: each sample its own rows
    rank = graph.rank(node.input[0])
    default = AXIS_DEFAULTS[op]
    if op in COERCED and graph.opset < 13:
        default = [1]  # opset < 13: axis 1 and every dim after it
    axes = _axes(node, rank, graph.consts, default)
    if axes is None:
        return State("unknown", why=f"{where}: its axes are computed in the graph")
    if axes and (op == "LayerNormalization" or (op in COERCED and graph.opset < 13)):
        axes = list(range(axes[0], rank))  # the axis and every dim after it
    batched_axes = {s.axis for s in inputs if s.kind == "batched"}
    across = sorted(batched_axes & set(axes)) if first.kind == "batched" or op == "Concat" else []
    if across:
        verb = {"Concat": "joins tensors along", "Split": "splits along", "Gather": "picks entries along",
                "GatherElements": "picks entries along"}.get(op, "works across")
        return State("mixed", why=f"{where} {verb} dim {across[0]}, the batch")
    return None


def _matmul(node: onnx.NodeProto, inputs: list[State], graph: _Graph, where: str) -> State | None:
    """MatMul sums over A's last dim and B's second-to-last: the batch must be in neither."""
    for index, contracted in ((0, -1), (1, -2)):
        state = inputs[index]
        rank = graph.rank(node.input[index])
        if state.kind == "batched" and rank and (rank == 1 or state.axis == contracted % rank):
            return State("mixed", why=f"{where} sums over the batch (it contracts dim {state.axis} of input "
                                      f"'{node.input[index]}')")
    return None


def _reshape(node: onnx.NodeProto, inputs: list[State], graph: _Graph, where: str) -> State | None:
    """A reshape keeps each sample's values apart when as many values precede the batch dim before as
    after (one at dim 0, as a batch dim 0 stays dim 0)."""
    first = inputs[0]
    before, after = graph.shapes.get(node.input[0]), graph.shapes.get(node.output[0])
    if BATCH not in (after or ()) and before is not None and first.kind == "batched":
        after = _reshaped(before, first.axis, graph.consts.get(node.input[1]) if node.op_type == "Reshape"
                          else None) or after
        if after is not None:
            graph.shapes[node.output[0]] = after  # where ONNX's inference stopped
    found = [i for i, d in enumerate(after or ()) if d == BATCH]
    if first.kind != "batched" or before is None or len(found) != 1:
        return State("unknown", why=f"{where} reshapes the batch dim (shape inference cannot tell whether "
                                    "samples stay apart)")
    lead_in, lead_out = before[:first.axis], after[:found[0]] if after else ()
    if all(isinstance(d, int) for d in (*lead_in, *lead_out)):
        if math.prod(int(d) for d in lead_in if d is not None) == math.prod(
                int(d) for d in lead_out if d is not None):
            return None
        return State("mixed", why=f"{where} reshapes dim {first.axis}, the batch, into dim {found[0]}, "
                                  "interleaving the samples")
    return State("unknown", why=f"{where} reshapes around the batch dim by sizes known only at run time")


def _reshaped(before: tuple[str | int | None, ...], axis: int, target: np.ndarray | None
              ) -> tuple[str | int | None, ...] | None:
    """A constant reshape's result where the one -1 stands for exactly the batch (every other size known
    and equal in number), e.g. [N, 2048] to [-1, 2048, 1]; else None."""
    if target is None or list(target.reshape(-1)).count(-1) != 1:
        return None
    dims = [before[i] if t == 0 and i < len(before) else int(t) for i, t in enumerate(target.reshape(-1))]
    known = [d for i, d in enumerate(before) if i != axis]
    if not all(isinstance(d, int) for d in (*known, *dims)):
        return None
    if math.prod(int(d) for d in known if d is not None) != -math.prod(int(d) for d in dims if d is not None):
        return None
    return tuple(BATCH if d == -1 else d for d in dims)


def _slice_like(node: onnx.NodeProto, inputs: list[State], graph: _Graph, where: str) -> State | None:
    """Slice, Pad or Tile leave the batch alone when its dim is sliced whole, padded by 0 or repeated once."""
    first = inputs[0]
    if first.kind != "batched":
        return State("unknown", why=f"{where} is shaped by batched values")
    given = [graph.consts.get(name) if name else None for name in node.input[1:]]
    rank = graph.rank(node.input[0])
    if node.op_type == "Slice":
        starts, ends = given[0], given[1]
        axes = given[2] if len(given) > 2 and given[2] is not None else None
        steps = given[3] if len(given) > 3 else None
        if starts is None or ends is None or (len(given) > 2 and node.input[3] and axes is None):
            return State("unknown", why=f"{where}: its bounds are computed in the graph")
        listed = [int(a) for a in axes.reshape(-1)] if axes is not None else list(range(len(starts)))
        if any(a < 0 for a in listed) and not rank:
            return State("unknown", why=f"{where} slices a dim counted from the end of an unknown rank")
        for k, axis in enumerate(listed):
            whole = starts[k] == 0 and ends[k] >= 2**31 - 1 and (steps is None or steps[k] == 1)
            if axis % max(rank, 1) == first.axis and not whole:
                return State("mixed", why=f"{where} slices dim {first.axis}, the batch (keeping some "
                                          "samples)")
        return None
    amounts = given[0]
    if amounts is None:
        return State("unknown", why=f"{where}: its sizes are computed in the graph")
    flat = amounts.reshape(-1)
    if node.op_type == "Tile":
        if flat[first.axis] != 1:
            return State("mixed", why=f"{where} repeats dim {first.axis}, the batch")
        return None
    half = len(flat) // 2
    if len(node.input) > 3 and node.input[3]:
        return State("unknown", why=f"{where} pads the axes given by an input")
    if half and (flat[first.axis] or flat[first.axis + half]):
        return State("mixed", why=f"{where} pads dim {first.axis}, the batch")
    return None


Rule = Callable[[onnx.NodeProto, list[State], _Graph, str], State | None]
RULES: dict[str, Rule] = {
    **{op: _sample_op for op in SAMPLE_OPS}, **{op: _recurrent for op in RECURRENT},
    "MatMul": _matmul, "Gemm": _gemm, "Reshape": _reshape, "Flatten": _reshape, "Resize": _resize,
    "Upsample": _resize, "Slice": _slice_like, "Pad": _slice_like, "Tile": _slice_like,
}
COERCED = frozenset({"Softmax", "LogSoftmax", "Hardmax"})  # before opset 13: axis 1 and every dim after it
AXIS_DEFAULTS: dict[str, list[int] | None] = {  # None: every axis, or those an input gives
    "Softmax": [-1], "LogSoftmax": [-1], "Hardmax": [-1], "LayerNormalization": [-1], "ArgMax": [0],
    "ArgMin": [0], "Concat": None, "Split": [0], "Gather": [0], "GatherElements": [0], "TopK": [-1],
    "LpNormalization": [-1], "Trilu": [-2, -1], "MeanVarianceNormalization": [0, 2, 3], "CumSum": None,
    **{r: None for r in REDUCTIONS},
}


@dataclass(frozen=True)
class Batching:
    """Why Triton cannot batch a model (each problem a sentence ending in what to do), or why that was not
    checked (the graph could not tell and the probe did not run)."""

    problems: tuple[str, ...] = ()
    not_checked: str | None = None


def check_batching(model: onnx.ModelProto, source: Path | bytes, max_batch_size: int) -> Batching:
    """The graph's verdict, and where it cannot tell, the probe's: for a model served with max_batch_size."""
    said = f"is {max_batch_size} but Triton cannot batch this model"
    verdict = graph_verdict(model)
    if verdict.problems:
        return Batching(tuple(f"{said}: {problem}; {ADVICE}" for problem in verdict.problems))
    if verdict.unsure is None:
        return Batching()
    found = batch_probe.probe(source)
    how = f"(run on the CPU, a random sample alone and joined with others, as {verdict.unsure})"
    if found.skipped:
        return Batching(not_checked=f"max_batch_size {max_batch_size}: whether joined requests stay apart "
                                    f"was not checked: {verdict.unsure}, and {found.skipped}; serve it with "
                                    "max_batch_size: 0 unless you know it batches along dim 0")
    return Batching(tuple(f"{said}: {problem} {how}; {ADVICE}" for problem in found.problems))
