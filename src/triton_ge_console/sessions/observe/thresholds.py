"""A session's console thresholds (the spec's per-model `thresholds`), read once for every view.

The console and the notebooks' dashboard colour a figure over its threshold alike; both read them here,
so neither reaches into the other's side.
"""

from __future__ import annotations

from triton_ge_console.sessions.server.registry import SessionRecord


def thresholds_of(record: SessionRecord | None) -> dict[str, dict[str, float]]:
    """The spec's per-model console thresholds, when the session came from a spec ({} otherwise)."""
    if record is None or record.spec is None or not record.spec.is_file():
        return {}
    from triton_ge_console.repository.spec.load import SpecError, load_spec

    try:
        spec = load_spec(record.spec)
    except (SpecError, OSError):
        return {}
    return {model.name: dict(model.thresholds) for model in spec.models}
