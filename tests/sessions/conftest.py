"""Sessions tests keep their registry in a tmp state dir and stop every server they start."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from triton_ge_console.sessions.launcher import LaunchOptions, launch
from triton_ge_console.sessions.lifecycle import down
from triton_ge_console.sessions.server.paths import STATE_DIR_ENV
from triton_ge_console.sessions.server.registry import Registry, SessionRecord


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point $GE_CONSOLE_STATE_DIR at a fresh tmp dir for every test; stop whatever a test launched there."""
    root = tmp_path / "state"
    monkeypatch.setenv(STATE_DIR_ENV, str(root))
    with stopping_sessions(Registry(root / "sessions")):
        yield root


@contextlib.contextmanager
def stopping_sessions(registry: Registry) -> Iterator[Registry]:
    """On exit (even after a failure) stop every launched session in registry, stubs and all."""
    try:
        yield registry
    finally:
        records, _errors = registry.scan()
        for record in records:
            if not record.attached and record.tritonserver is not None:  # launched, not a hand-made record
                down(record, registry, timeout=10.0)


@contextlib.contextmanager
def module_state_dir(factory: pytest.TempPathFactory, name: str) -> Iterator[Path]:
    """A state dir shared by a module's tests (its sessions outlive one test); each session started in it
    is stopped at the end."""
    root = factory.mktemp(name)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(STATE_DIR_ENV, str(root / "state"))
        with stopping_sessions(Registry()):
            yield root


@dataclass(frozen=True)
class ModuleSessions:
    """Sessions `up` once for a module's tests from one spec, and the state dir they are registered in."""

    spec: Path
    state_dir: Path
    records: tuple[SessionRecord, ...]


@contextlib.contextmanager
def module_sessions(factory: pytest.TempPathFactory, name: str, write_spec: Callable[[Path], Path],
                    *launches: Mapping[str, Any]) -> Iterator[ModuleSessions]:
    """`up SPEC` once per `launches` (LaunchOptions' fields beside the spec) in a module's state dir; every
    session stopped at the end whatever happens."""
    with module_state_dir(factory, name) as root:
        spec = write_spec(root / "spec")
        registry = Registry()
        defaults = {"source": spec, "timeout": 240, "exit_timeout_s": 2}
        records = tuple(launch(LaunchOptions(**{**defaults, **options}), registry) for options in launches)
        yield ModuleSessions(spec, root / "state", records)
