"""Request inputs for the load generator, built once from a model's metadata or from .npy files."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

from triton_ge_console.errors import GeConsoleError

# KServe v2 / Triton datatypes and the numpy dtype each one is carried in.
TRITON_DTYPES: dict[str, Any] = {
    "BOOL": np.bool_,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
    "BF16": ml_dtypes.bfloat16,  # as tritonclient carries BF16 (numpy has no bfloat16)
    "BYTES": np.object_,
}

# Integer inputs are usually ids (tokens, classes): keep them small so any embedding table accepts them.
ID_RANGE = 100
SHAPE_PATTERN = re.compile(r"^(?P<name>[^:]+):(?P<dims>\d+(?:[x,]\d+)*)$")


class LoadSpecError(GeConsoleError, ValueError):
    """The load asked for is inconsistent (bad shape, unknown input, bad file): a usage error."""


@dataclass(frozen=True)
class ServedTensor:
    """One model input or output as the server's metadata describes it."""

    name: str
    datatype: str
    shape: tuple[int, ...]  # -1 for a dynamic dimension; includes the batch dimension when batching


@dataclass(frozen=True)
class ModelSignature:
    """What the generator needs to know about a model to build requests for it."""

    name: str
    inputs: tuple[ServedTensor, ...]
    outputs: tuple[ServedTensor, ...]
    max_batch_size: int
    config_digest: str | None = None  # sha256 of the config the server reports, protocol-independent
    config: Mapping[str, Any] = field(default_factory=dict, compare=False)  # as the server reports it


@dataclass(frozen=True)
class RequestTensor:
    """One prebuilt input: its array (batch dimension included where the model batches)."""

    name: str
    datatype: str
    array: np.ndarray


def parse_shape_option(text: str) -> tuple[str, tuple[int, ...]]:
    """`name:1x3x224x224` (or `name:1,3,224,224`) to (name, dims), without the batch dimension."""
    match = SHAPE_PATTERN.match(text.strip())
    if match is None:
        raise LoadSpecError(f"--shape {text!r}: expected NAME:DIMS such as 'input:3x224x224'")
    dims = tuple(int(d) for d in re.split(r"[x,]", match["dims"]))
    if any(d <= 0 for d in dims):
        raise LoadSpecError(f"--shape {text!r}: every dimension must be a positive integer")
    return match["name"], dims


def parse_input_option(text: str) -> tuple[str, Path]:
    """`name=path.npy` to (name, path); the file must exist."""
    name, sep, path_text = text.partition("=")
    if not sep or not name or not path_text:
        raise LoadSpecError(f"--input {text!r}: expected NAME=FILE.npy")
    path = Path(path_text)
    if not path.is_file():
        raise LoadSpecError(f"--input {text!r}: no such file {path}")
    return name, path


def signature_from_metadata(metadata: Mapping[str, Any], config: Mapping[str, Any]) -> ModelSignature:
    """A ModelSignature from v2 metadata and config JSON (HTTP ints or gRPC JSON strings alike)."""
    return ModelSignature(
        name=str(metadata.get("name", "")),
        inputs=tuple(_tensor_spec(t) for t in metadata.get("inputs", ())),
        outputs=tuple(_tensor_spec(t) for t in metadata.get("outputs", ())),
        max_batch_size=int(config.get("max_batch_size", 0) or 0),
        config_digest=config_digest(config),
        config=dict(config),
    )


def config_digest(config: Mapping[str, Any]) -> str | None:
    """sha256 of the model config as a ModelConfig message (HTTP and gRPC JSON differ, the message not)."""
    from google.protobuf import json_format
    from tritonclient.grpc import model_config_pb2

    if not config:
        return None
    try:
        message = json_format.ParseDict(dict(config), model_config_pb2.ModelConfig(),
                                        ignore_unknown_fields=True)
    except json_format.ParseError:
        return None
    return hashlib.sha256(message.SerializeToString(deterministic=True)).hexdigest()


def _tensor_spec(data: Mapping[str, Any]) -> ServedTensor:
    """One tensor entry of v2 metadata."""
    shape = tuple(int(d) for d in data.get("shape", ()))
    return ServedTensor(str(data["name"]), str(data["datatype"]), shape)


def build_inputs(
    signature: ModelSignature,
    batch_size: int = 1,
    shapes: Mapping[str, Sequence[int]] | None = None,
    files: Mapping[str, Path] | None = None,
    seed: int = 0,
) -> tuple[RequestTensor, ...]:
    """Every input the model takes, generated or loaded once, checked against the model's signature."""
    shapes = dict(shapes or {})
    files = dict(files or {})
    _check_batch_size(signature, batch_size)
    known = {t.name for t in signature.inputs}
    for option, names in (("--shape", shapes), ("--input", files)):
        unknown = sorted(set(names) - known)
        if unknown:
            raise LoadSpecError(f"{option} {unknown[0]}: model {signature.name!r} has no such input "
                                f"(inputs: {', '.join(sorted(known)) or 'none'})")
    rng = np.random.default_rng(seed)
    tensors = []
    for spec in signature.inputs:
        if spec.name in files:
            array = _load_file(spec, files[spec.name], signature.max_batch_size, batch_size)
        else:
            dims = full_shape(spec, signature.max_batch_size, batch_size, shapes.get(spec.name))
            array = random_array(spec.datatype, dims, rng)
        tensors.append(RequestTensor(spec.name, spec.datatype, array))
    return tuple(tensors)


def _check_batch_size(signature: ModelSignature, batch_size: int) -> None:
    """Batch sizes the model can take: 1 without batching, up to max_batch_size with it."""
    if batch_size < 1:
        raise LoadSpecError(f"--batch-size {batch_size}: must be at least 1")
    if signature.max_batch_size == 0 and batch_size > 1:
        raise LoadSpecError(f"--batch-size {batch_size}: model {signature.name!r} does not batch "
                            "(max_batch_size 0)")
    if batch_size > signature.max_batch_size > 0:
        raise LoadSpecError(f"--batch-size {batch_size}: above the model's max_batch_size "
                            f"{signature.max_batch_size}")


def full_shape(spec: ServedTensor, max_batch_size: int, batch_size: int,
               given: Sequence[int] | None) -> tuple[int, ...]:
    """The request shape: batch dimension first when batching, -1 dims from `given` or 1."""
    dims = spec.shape[1:] if max_batch_size > 0 else spec.shape
    if given is not None:
        if len(given) != len(dims):
            raise LoadSpecError(f"--shape {spec.name}: {len(given)} dims given, the model's input has "
                                f"{len(dims)} {_dims_text(dims)} (without the batch dimension)")
        for wanted, fixed in zip(given, dims, strict=True):
            if fixed != -1 and wanted != fixed:
                raise LoadSpecError(f"--shape {spec.name}: {_dims_text(given)} does not fit the "
                                    f"model's {_dims_text(dims)}")
        dims = tuple(given)
    filled = tuple(1 if d == -1 else d for d in dims)
    return (batch_size, *filled) if max_batch_size > 0 else filled


def _dims_text(dims: Sequence[int]) -> str:
    """Dims as an operator writes them, e.g. [-1x3]."""
    return "[" + "x".join(str(d) for d in dims) + "]"


def random_array(datatype: str, dims: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Data of the right type: floats in [0, 1), small non-negative ints, booleans, short strings."""
    dtype = TRITON_DTYPES.get(datatype)
    if dtype is None:
        raise LoadSpecError(f"input datatype {datatype} is not supported by the load generator")
    if datatype == "BYTES":
        values = rng.integers(0, 10**6, size=dims)
        return np.vectorize(lambda v: str(v).encode(), otypes=[np.object_])(values)
    if datatype == "BOOL":
        return rng.integers(0, 2, size=dims).astype(np.bool_)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(0, ID_RANGE, size=dims).astype(dtype)
    return rng.random(size=dims).astype(dtype)


def _load_file(spec: ServedTensor, path: Path, max_batch_size: int, batch_size: int) -> np.ndarray:
    """An input from .npy: cast to the model's type, batch dimension added when the file lacks it."""
    try:
        array = np.load(path, allow_pickle=spec.datatype == "BYTES")
    except (OSError, ValueError) as exc:
        raise LoadSpecError(f"--input {spec.name}={path}: not a readable .npy file ({exc})") from exc
    if spec.datatype == "BYTES":
        array = array.astype(np.object_)
    else:
        try:
            array = array.astype(TRITON_DTYPES[spec.datatype], casting="same_kind")
        except (TypeError, KeyError) as exc:
            raise LoadSpecError(f"--input {spec.name}={path}: {array.dtype} data cannot feed a "
                                f"{spec.datatype} input") from exc
    rank = len(spec.shape)
    if max_batch_size > 0 and array.ndim == rank - 1:
        array = np.stack([array] * batch_size)
    skip = 1 if max_batch_size > 0 else 0  # the batch dimension may be any size up to max_batch_size
    pairs = list(zip(spec.shape, array.shape, strict=False))[skip:]
    if array.ndim != rank or any(fixed not in (-1, actual) for fixed, actual in pairs):
        raise LoadSpecError(f"--input {spec.name}={path}: shape {_dims_text(array.shape)} does not fit "
                            f"the model's {_dims_text(spec.shape)}")
    return np.ascontiguousarray(array)
