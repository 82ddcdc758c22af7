"""Sessions tests keep their registry in a tmp state dir, never the user's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from triton_ge_console.sessions.paths import STATE_DIR_ENV


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point $GE_CONSOLE_STATE_DIR at a fresh tmp dir for every test."""
    root = tmp_path / "state"
    monkeypatch.setenv(STATE_DIR_ENV, str(root))
    yield root
