"""Checks every config.pbtxt set must pass, shared by our own configs and the external corpus."""

from __future__ import annotations

from pathlib import Path

from triton_ge_console.repository import pbtxt
from triton_ge_console.repository.validate import validate_path


def config_files(folder: Path) -> list[Path]:
    """Every config.pbtxt under folder, in a stable order (so test ids are stable)."""
    return sorted(folder.rglob("config.pbtxt"))


def assert_round_trips(path: Path) -> None:
    """parse → dumps → parse gives an equal message, and dumping again changes nothing."""
    config = pbtxt.load(path)
    text = pbtxt.dumps(config)
    again = pbtxt.loads(text, path)
    assert again == config
    assert pbtxt.dumps(again) == text


def assert_validates(path: Path) -> None:
    """Judged as a config alone, no error (warnings, e.g. KIND_GPU, are allowed), each naming this file."""
    report = validate_path(path)
    assert report.ok, "\n".join(str(p) for p in report.errors)
    assert all(p.file == str(path) for p in report.problems)


def assert_npu_ge_clean(paths: list[Path]) -> None:
    """npu_ge configs (device_ids, DEVICEIDS, static_model, profiling, ge.*) have no error; their only
    warnings are what the real npu_ge never reads from model parameters, which CANN's own examples carry:
    DEVICEIDS (so, no device_ids: every NPU) and ge.* options (read only from --backend-config)."""
    assert paths, "no npu_ge configs to check"
    for path in paths:
        report = validate_path(path)
        assert report.errors == (), path
        for problem in report.warnings:
            assert (problem.field == 'parameters["DEVICEIDS"]' or problem.message.startswith(
                ("GE option 'ge.", "no device_ids: npu_ge runs a full copy"))), (path, problem)


def assert_kind_gpu_warning(path: Path, line: int) -> None:
    """A KIND_GPU group is valid config, but reported at its line: Triton refuses it without a GPU."""
    (problem,) = validate_path(path).problems
    assert problem.severity == "warning"
    assert (problem.line, problem.field) == (line, "instance_group[0].kind")
    assert "has kind KIND_GPU" in problem.message
