"""The benchmark scripts' command lines, read without running anything: each option means what its help
says."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _script(name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """A benchmark script as a module (its siblings importable, as when it runs)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module(name)


def _triton_cost_args(monkeypatch: pytest.MonkeyPatch, *argv: str) -> object:
    """triton_cost.py's reading of a command line."""
    script = _script("triton_cost", monkeypatch)
    monkeypatch.setattr(sys, "argv", ["triton_cost.py", *argv])
    return script.parse_args().pin


def test_triton_cost_reads_an_empty_pin_as_no_pinned_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--pin ""` (its help: "empty: no pinned table") pins nothing; CPU lists read as before."""
    assert _triton_cost_args(monkeypatch, "--pin", "") == ()
    assert _triton_cost_args(monkeypatch, "--pin", "2,3") == (2, 3)
    assert _triton_cost_args(monkeypatch) == (1,)


def test_triton_cost_refuses_a_pin_that_is_not_cpus_in_one_line(monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A pin that is not CPU ids is a usage error naming the option and what it takes."""
    with pytest.raises(SystemExit) as exit_:
        _triton_cost_args(monkeypatch, "--pin", "one")
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "triton_cost.py: error: argument --pin: 'one': expected CPU ids such as 1 or 2,3 "
        "(empty: no pinned table)")
