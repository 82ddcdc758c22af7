"""Turn Triton's list of requests into as few executions as possible, and back again.

Requests whose inputs share every non-batch shape form one group: one concatenation per input, one
execution, then the outputs are sliced back (views, no copies). A request that does not fit the model
fails alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from triton_ge_console.backend_glue.executor import TRITON_TO_NUMPY, TensorInfo

Feeds = dict[str, np.ndarray]


@dataclass(frozen=True)
class Group:
    """Requests (by index) executed together, with each one's batch size."""

    indices: tuple[int, ...]
    sizes: tuple[int, ...]


def _shape_fits(shape: tuple[int, ...], dims: tuple[int, ...]) -> bool:
    """Whether a concrete shape matches model dims (-1 matches anything); plain loop, per request."""
    if len(shape) != len(dims):
        return False
    for size, dim in zip(shape, dims, strict=True):  # noqa: SIM110 (no generator per request)
        if dim != -1 and dim != size:
            return False
    return True


def _not_text(array: np.ndarray) -> str | None:
    """Why a STRING tensor is not text, or None: checked per request, so a batch merged with it never
    fails for it (ONNX strings are text, decoded once the batch runs)."""
    for value in array.flat:
        if isinstance(value, bytes):
            try:
                value.decode("utf-8")
            except UnicodeDecodeError as exc:
                return f"a STRING element is not UTF-8 ({exc.reason}); ONNX strings are text"
    return None


def request_error(feeds: dict[str, np.ndarray | None], inputs: Sequence[TensorInfo],
                  batched: bool) -> str | None:
    """Why this request cannot run on the model, or None when it can (on the request path: no
    generators or sets built when every input fits)."""
    batch: int | None = None
    disagree = False
    for info in inputs:
        array = feeds.get(info.name)
        if array is None:
            return f"input {info.name} is missing (the model needs {', '.join(i.name for i in inputs)})"
        if array.dtype != TRITON_TO_NUMPY[info.data_type]:
            return f"input {info.name} has dtype {array.dtype}, the model needs {info.data_type}"
        shape = array.shape
        if info.ranked and not _shape_fits(shape, info.dims):
            return f"input {info.name} has shape {list(shape)}, the model needs {list(info.dims)} (-1: any)"
        if info.data_type == "STRING" and (problem := _not_text(array)) is not None:
            return f"input {info.name}: {problem}"
        if batched:
            if not shape:
                return f"input {info.name} has no batch dimension"
            if batch is None:
                batch = shape[0]
            elif shape[0] != batch:
                disagree = True
    return "inputs disagree on the batch size (first dimension)" if disagree else None


def group_requests(requests: Sequence[Feeds], names: Sequence[str], batched: bool) -> list[Group]:
    """Group runnable requests by their non-batch shapes, keeping arrival order within a group."""
    groups: dict[object, list[int]] = {}
    for index, feeds in enumerate(requests):
        key: object = tuple(feeds[n].shape[1:] for n in names) if batched else index
        groups.setdefault(key, []).append(index)
    result = []
    for indices in groups.values():
        sizes = tuple(int(requests[i][names[0]].shape[0]) if batched else 1 for i in indices)
        result.append(Group(tuple(indices), sizes))
    return result


def merge(requests: Sequence[Feeds], group: Group, names: Sequence[str]) -> Feeds:
    """One feed dict for a group: the request's own arrays when alone, else one concatenate per input."""
    if len(group.indices) == 1:
        return requests[group.indices[0]]
    return {n: np.concatenate([requests[i][n] for i in group.indices], axis=0) for n in names}


def split(outputs: Feeds, group: Group) -> list[Feeds]:
    """Slice each output back into per-request views along the batch dimension."""
    if len(group.indices) == 1:
        return [outputs]
    pieces: list[Feeds] = [{} for _ in group.indices]
    for name, array in outputs.items():
        start = 0
        for piece, size in zip(pieces, group.sizes, strict=True):
            piece[name] = array[start:start + size]
            start += size
    return pieces
