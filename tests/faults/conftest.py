"""Fault tests keep their sessions in a tmp state dir (stopped afterwards) and serve a tiny echo model."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.models import write_echo_model
from tests.sessions.conftest import state_dir

__all__ = ["echo_repo", "state_dir"]


@pytest.fixture
def echo_repo(tmp_path: Path) -> Path:
    """A repository holding one Python-backend echo model."""
    repository = tmp_path / "repo"
    write_echo_model(repository)
    return repository
