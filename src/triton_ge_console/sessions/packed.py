"""Model snapshots kept as plain tuples, which the garbage collector stops tracking.

Fifteen minutes of 100 models at 1 s are 90,000 model snapshots. As dataclass objects, each full garbage
collection walks every one of them (a long pause, every few minutes); a plain tuple holding only numbers,
strings and other such tuples is untracked after the first collection it survives, so the history costs
collections nothing. A packed model is rebuilt into an equal ModelSnapshot when read.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Sequence

from triton_ge_console.sessions.snapshot import Latency, ModelSnapshot, version_key

PackedModel = tuple[object, ...]  # ModelSnapshot's fields in order, its latency's fields in its place

_FIELDS = [field.name for field in dataclasses.fields(ModelSnapshot)]
_LATENCY_FIELDS = [field.name for field in dataclasses.fields(Latency)]
_LATENCY_START = _FIELDS.index("latency")
_LATENCY_END = _LATENCY_START + len(_LATENCY_FIELDS)
_NAME, _VERSION = _FIELDS.index("name"), _FIELDS.index("version")  # both before the latency fields
# one flat tuple per model, built in C: a poll of 100 models allocates 100 objects to keep, not 400
pack_model = operator.attrgetter(*_FIELDS[:_LATENCY_START], *(f"latency.{name}" for name in _LATENCY_FIELDS),
                                 *_FIELDS[_LATENCY_START + 1:])


def unpack_model(packed: PackedModel) -> ModelSnapshot:
    """The ModelSnapshot a tuple was packed from (pack_model: a model snapshot as a plain tuple)."""
    latency = Latency(*packed[_LATENCY_START:_LATENCY_END])  # type: ignore[arg-type]
    return ModelSnapshot(*packed[:_LATENCY_START], latency, *packed[_LATENCY_END:])  # type: ignore[arg-type,call-arg]


def find_model(packed: Sequence[PackedModel], name: str) -> ModelSnapshot | None:
    """The named model's newest version among packed models, as ServerSnapshot.model finds it."""
    matches = [model for model in packed if model[_NAME] == name]
    if not matches:
        return None
    return unpack_model(max(matches, key=lambda model: version_key(str(model[_VERSION]))))
