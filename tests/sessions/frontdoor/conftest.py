"""The front door's modules each serve one session of their own (their `session` fixture) in a state dir of
their own, with the door in front of it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sessions.conftest import module_state_dir
from triton_ge_console.sessions.frontdoor.serve import RunningDoor, start_openai
from triton_ge_console.sessions.server.registry import SessionRecord


@pytest.fixture(scope="module")
def module_state(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Path]:
    """A state dir for the module's session, stopped at the end."""
    with module_state_dir(tmp_path_factory, request.module.__name__.rsplit(".", 1)[-1]) as root:
        yield root


@pytest.fixture(scope="module")
def door(session: SessionRecord) -> Iterator[RunningDoor]:
    """The front door over the module's `session`, on its own thread (as a notebook starts it)."""
    running = start_openai(session)
    yield running
    running.stop()
