"""Fixtures for the glue's tests: the fake `acl` (tests/fakes/acl), importable only while a test needs it."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from triton_ge_console.backend_glue import acl_executor

FAKES = Path(__file__).resolve().parent.parent / "fakes"


@pytest.fixture
def fake_acl(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """A fresh fake AscendCL runtime, as a new process would see it; forgotten again afterwards."""
    monkeypatch.syspath_prepend(str(FAKES))
    monkeypatch.setattr(acl_executor, "_initialized", False)
    import acl

    acl._state.reset()
    yield acl
    for name in [n for n in sys.modules if n == "acl" or n.startswith("acl.")]:
        del sys.modules[name]


CANN_VERSIONS = ("cann-8.0-910b", "cann-6.0.0-910", "cann-7.0-310")


@pytest.fixture(params=CANN_VERSIONS)
def any_cann(request: pytest.FixtureRequest, fake_acl: ModuleType) -> ModuleType:
    """The fake acl as each CANN version and card it imitates (tests/fakes/acl/_versions.py)."""
    fake_acl._versions.apply(request.param)
    return fake_acl


@contextlib.contextmanager
def server_env(**values: str) -> Iterator[None]:
    """Environment variables a tritonserver started inside inherits (its stubs too); restored after."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
