"""One `models[i]` entry of a spec → ModelSpec, with every problem positioned."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from triton_ge_console.repository import demo_models, onnx_io
from triton_ge_console.repository.spec_nodes import Reader, join, suggest, unknown_key_message
from triton_ge_console.repository.spec_tensors import LocatedTensor, check_against_graph, tensors
from triton_ge_console.repository.spec_types import (
    GE_BACKENDS,
    DynamicBatchingSpec,
    InstanceGroupSpec,
    ModelSpec,
    TensorSpec,
)

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
)
BATCHING_KEYS = ("preferred_batch_size", "max_queue_delay_microseconds")
INSTANCE_KEYS = ("count", "device_ids")
THRESHOLD_KEYS = ("queue_depth", "p99_ms")
# Parameters the GE backends read; others pass through (Triton ignores what a backend does not read), but a
# near-miss of one of these is almost surely a typo and is reported.
KNOWN_PARAMETERS = (
    "om_model_path",
    "onnx_model_path",
    "static_model",
    "profiling",
    "execution_mode",
    "intra_op_thread_count",
    "inter_op_thread_count",
    "npu_memory_gib",
)
EXECUTION_MODES = ("auto", "npu", "cpu")
# Safe as one directory name in every repository: Triton's name rules plus no separators, no dot-dirs.
MODEL_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")
GraphIO = tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]]


@dataclass(frozen=True)
class Source:
    """Where a model's files come from."""

    source: str
    onnx_path: Path | None
    om_path: Path | None
    graph: GraphIO | None  # inputs/outputs of the ONNX, when there is one to read


def model_name_problem(name: str) -> str | None:
    """Why a model name cannot be a repository folder, or None when it can."""
    if "/" in name or "\\" in name:
        return "must not contain a path separator"
    if ".." in name:
        return "must not contain '..'"
    if not MODEL_NAME.match(name):
        return "may hold only letters, digits, '_', '-' and '.', and must not start with '.' or '-'"
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
    values = {key: entry[1] for key, entry in entries.items()}
    name = _name(reader, values.get("name"), join(path, "name"))
    backend = _backend(reader, values.get("backend"), join(path, "backend"))
    source = _source(reader, values, path, base_dir, backend)
    versions = _versions(reader, values.get("versions"), join(path, "versions"))
    mbs_node = values.get("max_batch_size")
    max_batch = reader.integer(mbs_node, join(path, "max_batch_size"), 0) if mbs_node is not None else 0
    io = _io(reader, values, path, source, max_batch)
    batching = _batching(reader, values.get("dynamic_batching"), join(path, "dynamic_batching"), max_batch)
    group = _instance_group(reader, values.get("instance_group"), join(path, "instance_group"))
    parameters = _parameters(reader, values.get("parameters"), join(path, "parameters"))
    thresholds = _thresholds(reader, values.get("thresholds"), join(path, "thresholds"))
    _check_static(reader, parameters, values, path)
    if len(reader.problems.items) > before or None in (name, backend, source, versions, max_batch, io, group):
        return None
    assert name and backend and source and versions is not None and max_batch is not None and io and group
    return ModelSpec(
        name=name,
        backend=backend,
        source=source.source,
        onnx_path=source.onnx_path,
        om_path=source.om_path,
        versions=versions,
        max_batch_size=max_batch,
        inputs=io[0],
        outputs=io[1],
        dynamic_batching=batching,
        instance_group=group,
        parameters=tuple(parameters.items()),
        thresholds=thresholds,
    )


def _name(reader: Reader, node: yaml.Node | None, path: str) -> str | None:
    """A model name that is safe as a folder name."""
    if node is None:
        return None
    name = reader.text(node, path)
    problem = model_name_problem(name) if name is not None else None
    if problem:
        reader.problems.add(node, path, f"'{name}' {problem}")
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
    if not target.is_file():
        reader.problems.add(node, path, f"no such file: {target}")
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
    return Source(raw, onnx_path, om_path, _graph(reader, node, join(path, "source"), raw, onnx_path))


def _graph(reader: Reader, node: yaml.Node, path: str, raw: str, onnx_path: Path | None) -> GraphIO | None:
    """The ONNX graph's inputs/outputs, if the model has an ONNX."""
    try:
        if demo_models.is_demo(raw):
            return onnx_io.graph_io(demo_models.demo_proto(raw))
        return onnx_io.read_onnx_io(onnx_path) if onnx_path is not None else None
    except onnx_io.OnnxReadError as exc:
        reader.problems.add(node, path, str(exc))
        return None


def _versions(reader: Reader, node: yaml.Node | None, path: str) -> tuple[int, ...] | None:
    """Version numbers (folder names): positive, unique; default [1]."""
    if node is None:
        return (1,)
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
        if node is not None and declared is not None and graph is not None and max_batch is not None:
            check_against_graph(reader, declared, graph, max_batch, (node, join(path, key)), key == "inputs")
        sides.append(_side(reader, values, path, key, declared, graph, max_batch, source))
    if graph_batch_problem := _batch_dim_problem(source, max_batch):
        reader.problems.add(values.get("max_batch_size"), join(path, "max_batch_size"), graph_batch_problem)
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
        return tuple(t.spec for t in declared)
    if values.get(key) is None and graph is not None and max_batch is not None:
        return tuple(onnx_io.for_config(t, max_batch) for t in graph)
    if values.get(key) is None and source is not None and source.graph is None and source.om_path is not None:
        reader.problems.add(
            values.get("source"),
            join(path, key),
            "is required: an .om model without 'onnx:' has no graph to read it from",
        )
    return ()


def _batch_dim_problem(source: Source | None, max_batch: int | None) -> str | None:
    """With max_batch_size > 0 every ONNX input needs a variable leading (batch) dim."""
    if source is None or source.graph is None or not max_batch:
        return None
    for tensor in source.graph[0]:
        if not tensor.dims or tensor.dims[0] != -1:
            return (
                f"is {max_batch} but ONNX input '{tensor.name}' has no variable batch dim "
                f"(dims {list(tensor.dims)}); use max_batch_size: 0"
            )
    return None


def _batching(
    reader: Reader, node: yaml.Node | None, path: str, max_batch: int | None
) -> DynamicBatchingSpec | None:
    """Dynamic batching: `{}`/true for defaults, or preferred sizes and a queue delay."""
    if node is None or (isinstance(node, yaml.ScalarNode) and reader.value(node) is False):
        return None
    if max_batch == 0:
        reader.problems.add(node, path, "needs max_batch_size > 0 (Triton batches along the first dim)")
    if isinstance(node, yaml.ScalarNode) and reader.value(node) in (True, None):
        return DynamicBatchingSpec()
    entries = reader.mapping(node, path, BATCHING_KEYS)
    if entries is None:
        return None
    preferred: tuple[int, ...] = ()
    if "preferred_batch_size" in entries:
        pref_node = entries["preferred_batch_size"][1]
        preferred = reader.int_list(pref_node, join(path, "preferred_batch_size"), 1) or ()
        too_big = [size for size in preferred if max_batch and size > max_batch]
        if too_big:
            reader.problems.add(
                pref_node,
                join(path, "preferred_batch_size"),
                f"{too_big[0]} is larger than max_batch_size {max_batch}",
            )
    delay = 0
    if "max_queue_delay_microseconds" in entries:
        delay = (
            reader.integer(
                entries["max_queue_delay_microseconds"][1], join(path, "max_queue_delay_microseconds"), 0
            )
            or 0
        )
    return DynamicBatchingSpec(preferred, delay)


def _instance_group(reader: Reader, node: yaml.Node | None, path: str) -> InstanceGroupSpec | None:
    """Instance count and NPU device ids."""
    if node is None:
        return InstanceGroupSpec()
    entries = reader.mapping(node, path, INSTANCE_KEYS)
    if entries is None:
        return None
    count: int | None = 1
    device_ids: tuple[int, ...] | None = (0,)
    if "count" in entries:
        count = reader.integer(entries["count"][1], join(path, "count"), 1)
    if "device_ids" in entries:
        device_ids = reader.int_list(entries["device_ids"][1], join(path, "device_ids"), 0)
        if device_ids is not None and not device_ids:
            reader.problems.add(
                entries["device_ids"][1], join(path, "device_ids"), "must list at least one id"
            )
            device_ids = None
    return InstanceGroupSpec(count, device_ids) if count is not None and device_ids is not None else None


def _parameters(reader: Reader, node: yaml.Node | None, path: str) -> dict[str, str]:
    """GE parameters as strings, in spec order; a near-miss of a known key is a problem."""
    if node is None:
        return {}
    entries = reader.mapping(node, path)
    params: dict[str, str] = {}
    for key, (key_node, value_node) in (entries or {}).items():
        key_path = join(path, key)
        if key in ("device_ids", "DEVICEIDS"):
            reader.problems.add(key_node, key_path, "set NPUs with instance_group.device_ids")
            continue
        if (
            key not in KNOWN_PARAMETERS
            and not key.startswith("ge.")
            and suggest(key, KNOWN_PARAMETERS).startswith("; did you mean")
        ):
            reader.problems.add(key_node, key_path, unknown_key_message(key, KNOWN_PARAMETERS))
            continue
        value = reader.scalar_text(value_node, key_path)
        if key == "execution_mode" and value is not None and value not in EXECUTION_MODES:
            reader.problems.add(
                value_node, key_path, f"unknown mode '{value}'{suggest(value, EXECUTION_MODES)}"
            )
        elif value is not None:
            params[key] = value
    return params


def _thresholds(reader: Reader, node: yaml.Node | None, path: str) -> tuple[tuple[str, float], ...]:
    """Console colouring thresholds."""
    if node is None:
        return ()
    entries = reader.mapping(node, path, THRESHOLD_KEYS) or {}
    found = [
        (key, reader.number(value, join(path, key), positive=True)) for key, (_, value) in entries.items()
    ]
    return tuple((key, value) for key, value in found if value is not None)


def _check_static(
    reader: Reader, parameters: dict[str, str], values: dict[str, yaml.Node], path: str
) -> None:
    """GE's static_model and Triton's dynamic batching exclude each other."""
    static = parameters.get("static_model", "0").lower() in ("1", "true", "yes", "on")
    batching = values.get("dynamic_batching")
    if (
        static
        and batching is not None
        and not (isinstance(batching, yaml.ScalarNode) and reader.value(batching) is False)
    ):
        reader.problems.add(
            batching,
            join(path, "dynamic_batching"),
            "cannot be used with parameters.static_model (GE's static graph needs fixed shapes)",
        )
