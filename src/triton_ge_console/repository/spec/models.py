"""One `models[i]` entry of a spec → ModelSpec, with every problem positioned."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from triton_ge_console.files import not_a_file
from triton_ge_console.ge_backends import GE_BACKENDS
from triton_ge_console.model_files import batch_axis, external_data, onnx_io
from triton_ge_console.model_files.tensors import TensorSpec
from triton_ge_console.repository import demo_models
from triton_ge_console.repository.spec import options
from triton_ge_console.repository.spec.generate import read_generate
from triton_ge_console.repository.spec.nodes import INT32_MAX, Reader, describe, join, short, suggest
from triton_ge_console.repository.spec.tensors import LocatedTensor, check_against_graph, tensors
from triton_ge_console.repository.spec.types import ModelSpec

MODEL_KEYS = (
    "name",
    "backend",
    "source",
    "onnx",
    "versions",
    "max_batch_size",
    "inputs",
    "outputs",
    "dynamic_batching",
    "instance_group",
    "parameters",
    "thresholds",
    "generate",
)
# Safe as one directory name in every repository: Triton's name rules plus no separators, no dot-dirs.
MODEL_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")
NAME_MAX = 255  # the longest folder name Linux filesystems take (ext4, xfs, tmpfs, overlayfs)
GraphIO = tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]]


@dataclass(frozen=True)
class Source:
    """Where a model's files come from."""

    source: str
    onnx_path: Path | None
    om_path: Path | None
    graph: GraphIO | None  # inputs/outputs of the ONNX, when there is one to read
    defaults: tuple[TensorSpec, ...] = ()  # its inputs with initializers, served only when declared


def model_name_problem(name: str) -> str | None:
    """Why a model name cannot be a repository folder, or None when it can."""
    if "/" in name or "\\" in name:
        return "must not contain a path separator"
    if ".." in name:
        return "must not contain '..'"
    if not MODEL_NAME.match(name):
        return "may hold only letters, digits, '_', '-' and '.', and must not start with '.' or '-'"
    if len(name) > NAME_MAX:  # MODEL_NAME allows ASCII only: characters are bytes
        return (f"is too long: Triton serves a model from the folder of its name, and a folder name has at "
                f"most {NAME_MAX} characters")
    return None


def read_model(reader: Reader, node: yaml.Node, path: str, base_dir: Path | None) -> ModelSpec | None:
    """Read and check one model entry; None when it has problems (they are recorded)."""
    entries = reader.mapping(node, path, MODEL_KEYS)
    if entries is None:
        return None
    before = len(reader.problems.items)
    for key in ("name", "backend", "source"):
        if key not in entries:
            reader.problems.add(node, join(path, key), "is required")
    fields = _fields(reader, {key: entry[1] for key, entry in entries.items()}, path, base_dir)
    if len(reader.problems.items) > before or any(fields[key] is None for key in REQUIRED_FIELDS):
        return None
    source: Source = fields.pop("source")
    inputs, outputs = fields.pop("io")
    return ModelSpec(
        source=source.source,
        onnx_path=source.onnx_path,
        om_path=source.om_path,
        inputs=inputs,
        outputs=outputs,
        **fields,
    )


REQUIRED_FIELDS = ("name", "backend", "source", "versions", "max_batch_size", "io", "instance_group")


def _fields(reader: Reader, values: dict[str, yaml.Node], path: str, base_dir: Path | None) -> dict[str, Any]:
    """Every field of a model entry, read and checked (None where a field has a problem)."""
    backend = _backend(reader, values.get("backend"), join(path, "backend"))
    source = _source(reader, values, path, base_dir, backend)
    mbs_node = values.get("max_batch_size")
    max_batch = (
        reader.integer(mbs_node, join(path, "max_batch_size"), 0, INT32_MAX) if mbs_node is not None else 0
    )
    parameters = options.read_parameters(reader, values.get("parameters"), join(path, "parameters"),
                                         backend)
    options.check_static(reader, parameters, values, path, backend)
    options.check_blocks(reader, parameters, values, path, backend)
    options.check_npu_ge_group(reader, values, path, backend)
    return {
        "name": _name(reader, values.get("name"), join(path, "name")),
        "backend": backend,
        "source": source,
        "versions": _versions(reader, values.get("versions"), join(path, "versions")),
        "max_batch_size": max_batch,
        "io": _io(reader, values, path, source, max_batch),
        "dynamic_batching": options.read_batching(
            reader, values.get("dynamic_batching"), join(path, "dynamic_batching"), max_batch
        ),
        "instance_group": options.read_instance_group(
            reader, values.get("instance_group"), join(path, "instance_group"), backend
        ),
        "parameters": tuple(parameters.items()),
        "thresholds": options.read_thresholds(reader, values.get("thresholds"), join(path, "thresholds")),
        "generate": read_generate(reader, values, path, source.graph if source is not None else None,
                                  base_dir),
        "notes": _batching_notes(reader, values, path, source, max_batch),
    }


def _name(reader: Reader, node: yaml.Node | None, path: str) -> str | None:
    """A model name that is safe as a folder name."""
    if node is None:
        return None
    name = reader.text(node, path)
    problem = model_name_problem(name) if name is not None else None
    if problem:
        reader.problems.add(node, path, f"'{short(name)}' {problem}")
        return None
    return name


def _backend(reader: Reader, node: yaml.Node | None, path: str) -> str | None:
    """`ge` or `npu_ge`."""
    if node is None:
        return None
    backend = reader.text(node, path)
    if backend is not None and backend not in GE_BACKENDS:
        reader.problems.add(node, path, f"unknown backend '{backend}'{suggest(backend, GE_BACKENDS)}")
        return None
    return backend


def _file(
    reader: Reader, node: yaml.Node, path: str, base_dir: Path | None, suffixes: tuple[str, ...]
) -> Path | None:
    """A model file named relative to the spec's folder: it must exist and have a known suffix."""
    raw = reader.text(node, path)
    if raw is None:
        return None
    target = Path(raw).expanduser()
    if not target.is_absolute() and base_dir is not None:
        target = base_dir / target
    if target.suffix.lower() not in suffixes:
        reader.problems.add(
            node,
            path,
            f"'{raw}' must be a {' or '.join(suffixes)} file"
            + (f" or one of {', '.join(demo_models.demo_names())}" if ".om" in suffixes else ""),
        )
        return None
    problem = not_a_file(target)
    if problem is not None:
        reader.problems.add(node, path, f"{problem}: {target}")
        return None
    return target.resolve()


def _source(
    reader: Reader, values: dict[str, yaml.Node], path: str, base_dir: Path | None, backend: str | None
) -> Source | None:
    """The model's files: a demo, an ONNX, or an OM (with an optional ONNX for CPU emulation)."""
    node = values.get("source")
    onnx_node = values.get("onnx")
    if node is None:
        return None
    raw = reader.text(node, join(path, "source"))
    if raw is None:
        return None
    if demo_models.is_demo(raw):
        if raw not in demo_models.demo_names():
            reader.problems.add(
                node, join(path, "source"), f"unknown demo '{raw}'{suggest(raw, demo_models.demo_names())}"
            )
            return None
        onnx_path, om_path = None, None
    else:
        found = _file(reader, node, join(path, "source"), base_dir, (".onnx", ".om"))
        if found is None:
            return None
        onnx_path, om_path = (None, found) if found.suffix.lower() == ".om" else (found, None)
    if onnx_node is not None:
        if om_path is None:
            reader.problems.add(onnx_node, join(path, "onnx"), "only applies when source is an .om file")
            return None
        onnx_path = _file(reader, onnx_node, join(path, "onnx"), base_dir, (".onnx",))
        if onnx_path is None:
            return None
    if backend == "npu_ge" and onnx_path is None and not demo_models.is_demo(raw):
        reader.problems.add(
            node,
            join(path, "source"),
            "backend npu_ge compiles an ONNX online: give an .onnx source, or 'onnx:' beside the .om",
        )
        return None
    where = (onnx_node, join(path, "onnx")) if onnx_node is not None else (node, join(path, "source"))
    graph, defaults = _graph(reader, node, join(path, "source"), raw, onnx_path)
    if onnx_path is not None and graph is not None:
        for problem in external_data.check_external_data(onnx_path):
            reader.problems.add(where[0], where[1], problem)
    return Source(raw, onnx_path, om_path, graph, defaults)


def _graph(reader: Reader, node: yaml.Node, path: str, raw: str,
           onnx_path: Path | None) -> tuple[GraphIO | None, tuple[TensorSpec, ...]]:
    """The ONNX graph's inputs/outputs and its inputs with defaults, if the model has an ONNX."""
    try:
        if demo_models.is_demo(raw):
            model = demo_models.demo_proto(raw)
        elif onnx_path is not None:
            model = onnx_io.load_graph(onnx_path)
        else:
            return None, ()
        return onnx_io.graph_io(model), onnx_io.graph_defaults(model)
    except onnx_io.OnnxReadError as exc:
        reader.problems.add(node, path, str(exc))
        return None, ()


def _versions(reader: Reader, node: yaml.Node | None, path: str) -> tuple[int, ...] | None:
    """Version numbers (folder names): positive, unique; default [1]."""
    if node is None:
        return (1,)
    if not isinstance(node, yaml.SequenceNode):
        said = describe(reader.value(node))
        reader.problems.add(node, path, f"must be a list of version numbers, like [1], not {said}")
        return None
    versions = reader.int_list(node, path, 1)
    if versions is not None and len(set(versions)) != len(versions):
        reader.problems.add(node, path, "lists a version twice")
        return None
    if versions is not None and not versions:
        reader.problems.add(node, path, "must list at least one version")
        return None
    return versions


def _io(
    reader: Reader, values: dict[str, yaml.Node], path: str, source: Source | None, max_batch: int | None
) -> tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]] | None:
    """Inputs and outputs: declared ones checked against the ONNX, missing ones read from it."""
    sides: list[tuple[TensorSpec, ...]] = []
    for index, key in enumerate(("inputs", "outputs")):
        node = values.get(key)
        declared = tensors(reader, node, join(path, key)) if node is not None else None
        graph = source.graph[index] if source is not None and source.graph is not None else None
        defaults = source.defaults if source is not None and key == "inputs" else ()
        if node is not None and declared is not None and graph is not None and max_batch is not None:
            check_against_graph(reader, declared, graph, max_batch, (node, join(path, key)), key == "inputs",
                                defaults)
            graph = (*graph, *(d for d in defaults if d.name in {t.spec.name for t in declared}))
        sides.append(_side(reader, values, path, key, declared, graph, max_batch, source))
    return (sides[0], sides[1]) if source is not None and max_batch is not None else None


def _side(
    reader: Reader,
    values: dict[str, yaml.Node],
    path: str,
    key: str,
    declared: list[LocatedTensor] | None,
    graph: tuple[TensorSpec, ...] | None,
    max_batch: int | None,
    source: Source | None,
) -> tuple[TensorSpec, ...]:
    """The tensors of one side: as declared, else as the ONNX graph has them."""
    if declared is not None:
        served = {t.name: onnx_io.for_config(t, max_batch) for t in graph or () if max_batch is not None}
        return tuple(_as_served(t.spec, served.get(t.spec.name)) for t in declared)
    if values.get(key) is None and graph is not None and max_batch is not None:
        return tuple(onnx_io.for_config(t, max_batch) for t in graph)
    if values.get(key) is None and source is not None and source.graph is None and source.om_path is not None:
        reader.problems.add(
            values.get("source"),
            join(path, key),
            "is required: an .om model without 'onnx:' has no graph to read it from",
        )
    return ()


def _as_served(declared: TensorSpec, graph: TensorSpec | None) -> TensorSpec:
    """A declared tensor with what the graph adds to it: Triton's reshape of a batch-only tensor."""
    if graph is None or (graph.reshape is None and not graph.optional) or declared.dims != graph.dims:
        return declared
    return dataclasses.replace(declared, reshape=graph.reshape, optional=graph.optional)


def _batching_notes(reader: Reader, values: dict[str, yaml.Node], path: str, source: Source | None,
                    max_batch: int | None) -> tuple[str, ...]:
    """Refuse max_batch_size > 0 for a graph Triton cannot batch; a note when that could not be checked."""
    found = _batching(source, max_batch)
    for problem in found.problems:
        reader.problems.add(values.get("max_batch_size"), join(path, "max_batch_size"), problem)
    return (found.not_checked,) if found.not_checked else ()


def _batching(source: Source | None, max_batch: int | None) -> batch_axis.Batching:
    """With max_batch_size > 0 every ONNX input and output needs a variable leading (batch) dim, and the
    graph must keep joined requests apart along it (batch_axis)."""
    if source is None or source.graph is None or not max_batch:
        return batch_axis.Batching()
    for kind, side in zip(("input", "output"), source.graph, strict=True):
        for tensor in side:
            problem = onnx_io.serving_problem(tensor, kind, max_batch)
            if problem:
                return batch_axis.Batching((problem,))
    if demo_models.is_demo(source.source):
        model, runnable = demo_models.demo_proto(source.source), demo_models.demo_bytes(source.source)
        return batch_axis.check_batching(model, runnable, max_batch)
    if source.onnx_path is None:
        return batch_axis.Batching()
    try:
        model = onnx_io.load_graph(source.onnx_path)
    except onnx_io.OnnxReadError:
        return batch_axis.Batching()  # said where the graph was read
    return batch_axis.check_batching(model, source.onnx_path, max_batch)
