"""Shared by the spec tests: what loading a spec refuses, as the messages a user reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from triton_ge_console.repository.spec.load import SpecError, load_spec


def refused(path: Path) -> list[str]:
    """The problems load_spec reports for a spec that must not load, with the path shortened to its name."""
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    return [str(p).replace(str(path), path.name) for p in caught.value.problems]
