"""An ONNX's external-data files (weights kept beside a protobuf that stops at 2 GB): which tensors name
which files, and whether each file is there, long enough and inside the model's folder."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import onnx
from onnx.external_data_helper import ExternalDataInfo


@dataclass(frozen=True)
class ExternalRef:
    """One tensor's bytes in an external file: `location` (relative to the ONNX), offset and length."""

    tensor: str
    location: str
    offset: int
    length: int | None  # None: to the end of the file
    size: int | None = None  # bytes its dims and type need (None: strings, whose size only the data tells)


def _graph_tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    """Every tensor a graph holds: initializers, sparse ones, node attributes, and those of subgraphs."""
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("t"):
                yield attribute.t
            yield from attribute.tensors
            if attribute.HasField("g"):
                yield from _graph_tensors(attribute.g)
            for subgraph in attribute.graphs:
                yield from _graph_tensors(subgraph)


def external_refs(model: onnx.ModelProto) -> list[ExternalRef]:
    """The external-data references of a model loaded without its external data."""
    refs = []
    for tensor in _graph_tensors(model.graph):
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        info = ExternalDataInfo(tensor)
        length = int(info.length) if info.length not in (None, "") else None
        refs.append(ExternalRef(tensor.name, str(info.location), int(info.offset or 0), length,
                                tensor_bytes(tensor)))
    return refs


_SUB_BYTE = {getattr(onnx.TensorProto, name) for name in ("INT4", "UINT4", "FLOAT4E2M1")
             if hasattr(onnx.TensorProto, name)}  # two elements a byte


def tensor_bytes(tensor: onnx.TensorProto) -> int | None:
    """The bytes a tensor's dims and element type take (what ONNX Runtime reads when no length is
    given), or None for strings and types onnx does not know."""
    count = math.prod(tensor.dims)
    if tensor.data_type in _SUB_BYTE:
        return (count + 1) // 2
    if tensor.data_type == onnx.TensorProto.STRING:
        return None
    try:
        return count * onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    except (KeyError, ValueError, TypeError):
        return None


def read_external_refs(onnx_path: Path) -> list[ExternalRef]:
    """external_refs of an ONNX file (its weights are not read); OSError/DecodeError propagate."""
    return external_refs(onnx.load(str(onnx_path), load_external_data=False))


def escapes(location: str) -> bool:
    """Whether a location leaves the ONNX's folder: absolute, or climbing out with '..'."""
    path = PurePosixPath(location.replace("\\", "/"))
    if path.is_absolute() or location.startswith("\\") or (len(location) > 1 and location[1] == ":"):
        return True
    depth = 0
    for part in path.parts:
        depth += -1 if part == ".." else 0 if part == "." else 1
        if depth < 0:
            return True
    return False


def ref_problem(ref: ExternalRef, onnx_path: Path, root: Path | None = None) -> str | None:
    """What is wrong with one reference, in a sentence naming the tensor, or None. The file must stay in
    `root` (default: the ONNX's folder) or in the ONNX's own folder, links followed."""
    said = f"{onnx_path}: tensor '{ref.tensor}': external data '{ref.location}'"
    if not ref.location or escapes(ref.location):
        return f"{said} is outside the model's folder (it must be a relative path below {onnx_path.parent})"
    target = onnx_path.parent / ref.location
    root = onnx_path.parent if root is None else root
    if (where := outside(target, (root, onnx_path.parent))) is not None:
        return (f"{said} is a link to {where}, outside the model's folder {root}: "
                "copy the file into the folder instead")
    try:
        size = os.stat(target).st_size
    except OSError:
        return f"{said} is missing (no file {target})"
    if not target.is_file():
        return f"{said} is not a file ({target})"
    end = ref.offset + max(ref.length or 0, ref.size or 0)
    if size < end:
        return f"{said} is too short: {size} bytes, the tensor needs bytes {ref.offset}..{end}"
    return None


def outside(target: Path, roots: tuple[Path, ...]) -> Path | None:
    """Where target really is (links followed) when that is inside none of the roots (links followed: a
    version folder may be a link to where its files are), else None."""
    real = Path(os.path.realpath(target))
    return None if any(real.is_relative_to(os.path.realpath(root)) for root in roots) else real


def _beyond_onnx_runtime(refs: list[ExternalRef], onnx_path: Path) -> list[str]:
    """Each data file that ONNX Runtime 1.24 and later refuse to load: one whose real path, links followed,
    is under neither the ONNX's folder nor the real ONNX file's folder (its tensorprotoutils.cc
    ValidateExternalDataPath: 'External data path escapes model directory')."""
    folders = (onnx_path.parent, Path(os.path.realpath(onnx_path)).parent)
    found = []
    for ref in refs:
        if not escapes(ref.location) and (where := outside(onnx_path.parent / ref.location, folders)):
            found.append(f"{onnx_path}: tensor '{ref.tensor}': external data '{ref.location}' is a link to "
                         f"{where}, outside the ONNX's folder {onnx_path.parent}: ONNX Runtime 1.24 and "
                         "later refuse to load it ('External data path escapes model directory', its "
                         "tensorprotoutils.cc ValidateExternalDataPath), so CPU emulation would fail: keep "
                         "the file beside the ONNX")
    return list(dict.fromkeys(found))


def check_external_data(onnx_path: Path, root: Path | None = None) -> list[str]:
    """Every problem with an ONNX's external data, one sentence each (an unreadable ONNX is not one);
    the files must stay inside `root` (default: the ONNX's folder)."""
    return external_data_findings(onnx_path, root)[0]


def external_data_findings(onnx_path: Path, root: Path | None = None) -> tuple[list[str], list[str]]:
    """check_external_data's problems and, when there are none, the files ONNX Runtime 1.24 and later
    would refuse (inside `root` but outside the ONNX's own folder), from one read of the ONNX."""
    try:
        refs = read_external_refs(onnx_path)
    except Exception:  # not an ONNX: the graph reader reports it
        return [], []
    problems = list(dict.fromkeys(p for ref in refs if (p := ref_problem(ref, onnx_path, root)) is not None))
    return problems, [] if problems else _beyond_onnx_runtime(refs, onnx_path)


def external_files(onnx_path: Path) -> dict[str, Path]:
    """Each distinct location (normalised posix path, relative to the ONNX) → the file it names."""
    files: dict[str, Path] = {}
    for ref in read_external_refs(onnx_path):
        rel = os.path.normpath(ref.location.replace("\\", "/"))
        files.setdefault(PurePosixPath(rel).as_posix(), onnx_path.parent / rel)
    return files


def external_bytes(onnx_path: Path) -> int:
    """Bytes of the external-data files an ONNX names (0 when none or unreadable): the weights' size."""
    try:
        return sum(os.stat(p).st_size for p in external_files(onnx_path).values())
    except Exception:
        return 0
