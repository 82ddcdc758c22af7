"""A GE model's declared inputs and outputs against the ONNX graph it runs: the glue and CANN's npu_ge both
refuse a config that names a tensor the graph lacks, or gives it another type or shape."""

from __future__ import annotations

from pathlib import Path

import onnx
from tritonclient.grpc import model_config_pb2 as mc

from triton_ge_console.backend_glue.settings import model_file_candidates
from triton_ge_console.model_files import batch_axis, external_data
from triton_ge_console.model_files.onnx_io import (
    OnnxReadError,
    for_config,
    graph_defaults,
    graph_io,
    how_served,
    load_graph,
    read_onnx_io,
    serving_problem,
    triton_dims,
)
from triton_ge_console.model_files.tensors import TensorSpec
from triton_ge_console.repository.rules.findings import WILDCARD_DIM, Finding, error, warning


def onnx_of_version(onnx_text: str | None, version_dir: Path) -> Path | None:
    """The ONNX a version runs: onnx_model_path (version folder, then model folder) or the first *.onnx."""
    if onnx_text:
        return next((c for c in model_file_candidates(onnx_text, version_dir) if c.is_file()), None)
    found = sorted(p for p in version_dir.glob("*.onnx") if p.is_file())
    return found[0] if found else None


def check_external_data(onnx_path: Path, model_dir: Path) -> list[Finding]:
    """Each external-data file the ONNX names exists, is long enough and lies inside the model's folder,
    links followed (Triton's model folder: ONNX Runtime would read whatever a link points at); a warning
    where one lies outside the ONNX's own folder, which ONNX Runtime 1.24 and later refuse."""
    problems, refused = external_data.external_data_findings(onnx_path, model_dir)
    return [error("", problem) for problem in problems] + [warning("", said) for said in refused]


def check_graph(config: mc.ModelConfig, onnx_path: Path) -> list[Finding]:
    """The config against its ONNX graph, read once: declared inputs and outputs, then batching."""
    if not config.input and not config.output and config.max_batch_size <= 0:
        return []  # both backends read them from the ONNX
    try:
        model = load_graph(onnx_path)
        graph = graph_io(model)
    except OnnxReadError as exc:  # said here for a config that declares what the graph should have
        return [error("backend", str(exc))] if config.input or config.output else []
    findings = check_io_against_onnx(config, model, onnx_path)
    if not findings or all(f.severity != "error" for f in findings):
        findings += _batching(config, model, graph, onnx_path)
    return findings


def check_io_against_onnx(config: mc.ModelConfig, model: onnx.ModelProto, onnx_path: Path) -> list[Finding]:
    """Declared inputs/outputs exist in the graph with the same data type and compatible dims."""
    if not config.input and not config.output:
        return []  # both backends read them from the ONNX
    (graph_inputs, graph_outputs), defaults = graph_io(model), graph_defaults(model)
    findings = []
    for kind, declared, graph, extra in (
        ("input", config.input, graph_inputs, defaults),  # an input with a default may be declared
        ("output", config.output, graph_outputs, ()),
    ):
        by_name = {t.name: t for t in (*graph, *extra)}
        for i, io in enumerate(declared):
            tensor = by_name.get(io.name)
            if tensor is None:
                names = ", ".join(t.name for t in graph) or "none"
                findings.append(
                    error(
                        f"{kind}[{i}].name",
                        f"{kind} '{io.name}': {onnx_path} has no {kind} of that name (it has: {names})",
                    )
                )
                continue
            if tensor.optional and config.max_batch_size > 0:  # the glue refuses it at load
                findings.append(error(f"{kind}[{i}].name", f"input {io.name}: a default of {onnx_path} (an "
                                      "initializer) can be overridden only without batching "
                                      "(max_batch_size: 0)"))
                continue
            findings += _tensor_findings(f"{kind}[{i}]", kind, io, tensor, config.max_batch_size, onnx_path)
    return findings


def _batching(config: mc.ModelConfig, model: onnx.ModelProto,
              graph: tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]], onnx_path: Path) -> list[Finding]:
    """With max_batch_size > 0 Triton joins requests along dim 0 and splits the answers so: the graph
    must keep them apart (batch_axis). Only once every tensor has a variable leading dim (said elsewhere)."""
    if config.max_batch_size <= 0:
        return []
    if any(serving_problem(t, "tensor", config.max_batch_size) for t in (*graph[0], *graph[1])):
        return []  # said by check_io_against_onnx
    found = batch_axis.check_batching(model, onnx_path, config.max_batch_size)
    findings = [error("max_batch_size", f"{onnx_path}: {problem}") for problem in found.problems]
    if found.not_checked:
        findings.append(warning("max_batch_size", f"{onnx_path}: {found.not_checked}"))
    return findings


def check_decoder(onnx_path: Path) -> list[Finding]:
    """A decoupled `ge` model generates tokens: its ONNX must be a decoder with a KV cache (its request
    tensors are the glue's, not the graph's)."""
    from triton_ge_console.backend_glue.executor import TensorInfo
    from triton_ge_console.backend_glue.generate_batch import LayoutError, kv_layout

    try:
        inputs, outputs = ([TensorInfo(t.name, t.data_type, t.dims) for t in side]
                           for side in read_onnx_io(onnx_path))
        kv_layout(inputs, outputs)
    except (OnnxReadError, LayoutError) as exc:
        return [error("backend", f"decoupled (generate) model: {onnx_path}: {exc}")]
    return []


def _tensor_findings(
    where: str,
    kind: str,
    io: mc.ModelInput | mc.ModelOutput,
    tensor: TensorSpec,
    max_batch_size: int,
    onnx_path: Path,
) -> list[Finding]:
    """One declared tensor against its graph tensor: type, then (the ONNX giving a shape) rank and fixed
    dims."""
    found = _type_finding(where, kind, io, tensor, onnx_path)
    if found is None and tensor.ranked:  # no shape in the ONNX: the model takes any rank
        found = _dims_finding(where, kind, io, tensor, max_batch_size, onnx_path)
    return [found] if found is not None else []


def _type_finding(where: str, kind: str, io: mc.ModelInput | mc.ModelOutput, tensor: TensorSpec,
                  onnx_path: Path) -> Finding | None:
    """A declared type other than the graph's (STRING and BYTES are one)."""
    declared_type = mc.DataType.Name(io.data_type).removeprefix("TYPE_")
    graph_type = "BYTES" if tensor.data_type == "STRING" else tensor.data_type
    if io.data_type == mc.TYPE_INVALID or declared_type.replace("STRING", "BYTES") == graph_type:
        return None
    return error(f"{where}.data_type",
                 f"{kind} '{io.name}' is TYPE_{declared_type} here but TYPE_{graph_type} in {onnx_path}")


def _dims_finding(where: str, kind: str, io: mc.ModelInput | mc.ModelOutput, tensor: TensorSpec,
                  max_batch_size: int, onnx_path: Path) -> Finding | None:
    """Declared dims (reshaped, if they are) that the graph's, as Triton serves them, do not match."""
    declared = tuple(io.dims)
    if not declared or _dims_match(io, for_config(tensor, max_batch_size)):
        return None
    shown = (f"{list(declared)} reshaped to {list(io.reshape.shape)}" if io.HasField("reshape")
             else str(list(declared)))
    how = how_served(tensor, max_batch_size)
    if how:  # a shape Triton cannot write as the ONNX does: say the one mapping served
        return error(f"{where}.dims", f"{kind} '{io.name}' dims {shown}: not how {onnx_path} is "
                                      f"served:{how.removeprefix(';')}")
    batch = f" (max_batch_size {max_batch_size}: the batch axis is not listed)" if max_batch_size > 0 else ""
    return error(f"{where}.dims", f"{kind} '{io.name}' dims {shown} do not match "
                                  f"{list(triton_dims(tensor.dims, max_batch_size))} in {onnx_path}{batch}")


def _dims_match(io: mc.ModelInput | mc.ModelOutput, served: TensorSpec) -> bool:
    """Whether the model's side of a tensor (its reshape, else its dims) has the served graph's rank and
    fixed dims (-1 on either side matches any)."""
    declared = tuple(io.dims)
    # a scalar of a non-batching model: served dims [1] without reshape, the glue squeezes it
    # a batch-only tensor as dims [1] without Triton's reshape (by hand, auto-completed): the glue squeezes it
    if served.reshape == () and declared == (1,) and not io.HasField("reshape"):
        return True
    model_side = tuple(io.reshape.shape) if io.HasField("reshape") else declared
    graph_side = served.reshape if served.reshape is not None else served.dims
    return len(model_side) == len(graph_side) and all(
        a == b or WILDCARD_DIM in (a, b) for a, b in zip(model_side, graph_side, strict=False))
