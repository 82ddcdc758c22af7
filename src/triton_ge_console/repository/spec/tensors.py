"""Model inputs/outputs in a spec: reading them, and holding them against the model's ONNX graph."""

from __future__ import annotations

import math
from dataclasses import dataclass

import yaml

from triton_ge_console.model_files.onnx_io import TRITON_DATA_TYPES, for_config, how_served
from triton_ge_console.model_files.tensors import TensorSpec
from triton_ge_console.repository.spec.nodes import Reader, join, short, suggest
from triton_ge_console.triton_terms import INT64_MAX

TENSOR_KEYS = ("name", "data_type", "dims")
MAX_ELEMENTS = INT64_MAX // 16  # so elements x the widest type x a batch still has room in an int64
DATA_TYPE_ALIASES = {
    "BYTES": "STRING",
    "FLOAT": "FP32",
    "FLOAT32": "FP32",
    "FLOAT16": "FP16",
    "HALF": "FP16",
    "DOUBLE": "FP64",
    "FLOAT64": "FP64",
    "BFLOAT16": "BF16",
}


@dataclass(frozen=True)
class LocatedTensor:
    """A tensor read from the spec, with the nodes to point at when it contradicts the ONNX graph."""

    spec: TensorSpec
    path: str
    node: yaml.Node
    name_node: yaml.Node
    type_node: yaml.Node
    dims_node: yaml.Node


def data_type(reader: Reader, node: yaml.Node, path: str) -> str | None:
    """A Triton data type; `FP32`, `TYPE_FP32` and `fp32` all mean TYPE_FP32."""
    raw = reader.text(node, path)
    if raw is None:
        return None
    name = raw.strip().upper().removeprefix("TYPE_")
    name = DATA_TYPE_ALIASES.get(name, name)
    if name not in TRITON_DATA_TYPES:
        reader.problems.add(node, path, f"unknown data type '{raw}'{suggest(name, TRITON_DATA_TYPES)}")
        return None
    return name


def dims(reader: Reader, node: yaml.Node, path: str) -> tuple[int, ...] | None:
    """Config dims: each an integer >= 1, or -1 for a variable-size dimension."""
    items = reader.sequence(node, path)
    if items is None:
        return None
    values: list[int] = []
    for i, item in enumerate(items):
        value = reader.integer(item, f"{path}[{i}]")
        if value is not None and value < 1 and value != -1:
            reader.problems.add(item, f"{path}[{i}]", "must be >= 1, or -1 for a variable-size dimension")
            value = None
        if value is None:
            return None
        values.append(value)
    elements = math.prod(v for v in values if v > 0)
    if elements > MAX_ELEMENTS:
        reader.problems.add(node, path, f"{short(elements)} elements: the tensor's byte size overflows int64")
        return None
    return tuple(values)


def tensor(reader: Reader, node: yaml.Node, path: str) -> LocatedTensor | None:
    """One `{name, data_type, dims}` entry."""
    entries = reader.mapping(node, path, TENSOR_KEYS)
    if entries is None:
        return None
    missing = [key for key in TENSOR_KEYS if key not in entries]
    for key in missing:
        reader.problems.add(node, join(path, key), "is required")
    if missing:
        return None
    name = reader.text(entries["name"][1], join(path, "name"))
    kind = data_type(reader, entries["data_type"][1], join(path, "data_type"))
    shape = dims(reader, entries["dims"][1], join(path, "dims"))
    if name is None or kind is None or shape is None:
        return None
    return LocatedTensor(
        TensorSpec(name, kind, shape),
        path,
        node,
        entries["name"][1],
        entries["data_type"][1],
        entries["dims"][1],
    )


def tensors(reader: Reader, node: yaml.Node, path: str) -> list[LocatedTensor] | None:
    """A list of tensors with unique names."""
    items = reader.sequence(node, path)
    if items is None:
        return None
    read = [tensor(reader, item, f"{path}[{i}]") for i, item in enumerate(items)]
    seen: set[str] = set()
    for located in read:
        if located is not None and located.spec.name in seen:
            reader.problems.add(
                located.name_node, join(located.path, "name"), f"duplicate tensor name '{located.spec.name}'"
            )
        elif located is not None:
            seen.add(located.spec.name)
    return None if any(t is None for t in read) else [t for t in read if t is not None]


def check_against_graph(
    reader: Reader,
    declared: list[LocatedTensor],
    graph: tuple[TensorSpec, ...],
    max_batch_size: int,
    where: tuple[yaml.Node, str],
    require_all: bool,
    defaults: tuple[TensorSpec, ...] = (),
) -> None:
    """Each declared tensor must exist in the ONNX graph with the same type and compatible dims (an input
    with a default only without batching: it has no batch dim for requests to stack along)."""
    by_name = {t.name: for_config(t, max_batch_size) for t in (*graph, *defaults)}
    graph_by_name = {t.name: t for t in (*graph, *defaults)}
    for located in declared:
        if max_batch_size > 0 and graph_by_name.get(located.spec.name, located.spec).optional:
            reader.problems.add(located.name_node, join(located.path, "name"),
                                f"'{located.spec.name}' has a default in the ONNX (an initializer): requests "
                                "may override it only without batching (max_batch_size: 0); leave it out "
                                "to serve the default")
            continue
        expected = by_name.get(located.spec.name)
        if expected is None:
            reader.problems.add(
                located.name_node,
                join(located.path, "name"),
                f"the ONNX graph has no tensor '{located.spec.name}'"
                f"{suggest(located.spec.name, tuple(by_name))}",
            )
            continue
        _compare(reader, located, expected, how_served(graph_by_name[located.spec.name], max_batch_size))
    if require_all:
        names = {t.spec.name for t in declared}
        for name in (t.name for t in graph):
            if name not in names:
                reader.problems.add(
                    where[0],
                    where[1],
                    f"ONNX input '{name}' is not declared (the model "
                    "needs every input; omit the list to read it from the ONNX)",
                )


def _compare(reader: Reader, located: LocatedTensor, expected: TensorSpec, served: str) -> None:
    """Report where a declared tensor contradicts the graph's own declaration (`served`: how a tensor
    Triton cannot write as is gets served, for the message)."""
    spec = located.spec
    if spec.data_type != expected.data_type:
        reader.problems.add(
            located.type_node,
            join(located.path, "data_type"),
            f"is {spec.data_type} but the ONNX graph says {expected.data_type}",
        )
    if not expected.ranked:
        return  # the model takes any rank
    if len(spec.dims) != len(expected.dims):
        reader.problems.add(
            located.dims_node,
            join(located.path, "dims"),
            f"has {len(spec.dims)} dims {list(spec.dims)} but the ONNX graph has "
            f"{len(expected.dims)}: {list(expected.dims)} (batch dim excluded when "
            f"max_batch_size > 0){served}",
        )
        return
    for i, (mine, theirs) in enumerate(zip(spec.dims, expected.dims, strict=True)):
        if theirs != -1 and mine != theirs:
            node = (
                located.dims_node.value[i]
                if isinstance(located.dims_node, yaml.SequenceNode)
                else located.dims_node
            )
            reader.problems.add(
                node,
                f"{join(located.path, 'dims')}[{i}]",
                f"is {mine} but the ONNX graph fixes it to {theirs}{served}",
            )
