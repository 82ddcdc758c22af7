"""Model snapshots kept as plain tuples, which the garbage collector stops tracking.

Fifteen minutes of 100 models at 1 s are 90,000 model snapshots. As dataclass objects, each full garbage
collection walks every one of them (100-150 ms, every few minutes); a plain tuple holding only numbers,
strings and other such tuples is untracked after the first collection it survives, so the history costs
collections nothing. A packed model is rebuilt into an equal ModelSnapshot when read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from triton_ge_console.sessions.snapshot import Latency, ModelSnapshot, version_key

PackedModel = tuple[object, ...]  # ModelSnapshot's fields in order, its latency as a tuple of Latency's

_LATENCY = [field.name == "latency" for field in dataclasses.fields(ModelSnapshot)].index(True)
_FIELDS = tuple(field.name for field in dataclasses.fields(ModelSnapshot))
_LATENCY_FIELDS = tuple(field.name for field in dataclasses.fields(Latency))


def pack_model(model: ModelSnapshot) -> PackedModel:
    """A model snapshot as a plain tuple (equal snapshots pack equal)."""
    values = [getattr(model, name) for name in _FIELDS]
    latency = model.latency
    values[_LATENCY] = tuple(getattr(latency, name) for name in _LATENCY_FIELDS)
    return tuple(values)


def unpack_model(packed: PackedModel) -> ModelSnapshot:
    """The ModelSnapshot a tuple was packed from."""
    values = list(packed)
    values[_LATENCY] = Latency(*packed[_LATENCY])  # type: ignore[misc]
    return ModelSnapshot(*values)  # type: ignore[arg-type]


def find_model(packed: Sequence[PackedModel], name: str) -> ModelSnapshot | None:
    """The named model's newest version among packed models, as ServerSnapshot.model finds it."""
    matches = [model for model in packed if model[0] == name]
    if not matches:
        return None
    return unpack_model(max(matches, key=lambda model: version_key(str(model[1]))))
