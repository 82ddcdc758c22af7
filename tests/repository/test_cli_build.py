"""`ge-console init` and `ge-console build`: outputs and exit codes 0 (ok), 1 (failure), 2 (usage)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from triton_ge_console.cli import main
from triton_ge_console.repository import pbtxt
from triton_ge_console.repository.starter import STARTER_SPEC


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run the CLI in-process; argparse usage errors become their exit code."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _console_script() -> list[str]:
    """The installed `ge-console` entry point (falls back to running the module)."""
    exe = shutil.which("ge-console") or str(Path(sys.executable).parent / "ge-console")
    return [exe] if Path(exe).exists() else [sys.executable, "-m", "triton_ge_console.cli"]


def test_init_writes_the_starter_and_refuses_to_overwrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """init PATH writes the commented starter (0); again without --force is a failure (1)."""
    target = tmp_path / "deploy.yaml"
    code, out, _ = _run(["init", str(target)], capsys)
    assert code == 0 and f"wrote {target}" in out
    assert target.read_text(encoding="utf-8") == STARTER_SPEC
    target.write_text("# mine\n")
    code, _, err = _run(["init", str(target)], capsys)
    assert code == 1
    assert err.strip() == f"ge-console: error: {target} already exists (use --force to overwrite)"
    assert target.read_text() == "# mine\n"
    code, _, _ = _run(["init", str(target), "--force"], capsys)
    assert code == 0 and target.read_text(encoding="utf-8") == STARTER_SPEC


def test_init_into_a_folder_and_into_a_missing_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder gets deploy.yaml inside; a path whose folder does not exist fails with one line (1)."""
    code, _, _ = _run(["init", str(tmp_path)], capsys)
    assert code == 0 and (tmp_path / "deploy.yaml").is_file()
    code, _, err = _run(["init", str(tmp_path / "no" / "such" / "x.yaml")], capsys)
    assert code == 1 and err.startswith("ge-console: error: cannot write ") and "No such file" in err
    assert len(err.strip().splitlines()) == 1


def test_init_usage_error_exits_2() -> None:
    """init without PATH is a usage error: exit 2 from the real console script."""
    result = subprocess.run(
        [*_console_script(), "init"], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 2
    assert "the following arguments are required: PATH" in result.stderr


def test_init_then_build_then_rebuild(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The starter builds (0) into the seed repository; a rebuild reports every model unchanged."""
    spec = tmp_path / "deploy.yaml"
    repo = tmp_path / "repo"
    assert _run(["init", str(spec)], capsys)[0] == 0
    code, out, err = _run(["build", str(spec), "-o", str(repo)], capsys)
    assert code == 0, err
    assert out.splitlines() == [
        "added      llama_model",
        "added      bert_model",
        f"{repo}: 2 added, 0 updated, 0 unchanged, 0 removed",
    ]
    assert pbtxt.load(repo / "llama_model" / "config.pbtxt").max_batch_size == 8
    code, out, _ = _run(["build", str(spec), "-o", str(repo), "--json"], capsys)
    report = json.loads(out)
    assert code == 0 and report["ok"] is True
    assert report["unchanged"] == ["llama_model", "bert_model"]
    assert [m["status"] for m in report["models"]] == ["unchanged", "unchanged"]


def test_build_with_spec_errors_exits_1_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every problem is one stderr line with file:line:col; nothing is created."""
    spec = tmp_path / "deploy.yaml"
    spec.write_text(
        STARTER_SPEC.replace("max_batch_size: 8 ", "max_batch_size: -8").replace(
            "    backend: ge           #", "    backnd: ge           #"
        )
    )
    repo = tmp_path / "repo"
    code, out, err = _run(["build", str(spec), "-o", str(repo)], capsys)
    assert code == 1 and out == ""
    assert err.splitlines() == [  # the typo is read as `backend`: no "backend is required" after it
        f"ge-console: error: {spec}:26:5 models[0].backnd: unknown key 'backnd'; did you mean 'backend'?",
        f"ge-console: error: {spec}:30:21 models[0].max_batch_size: must be >= 0",
        f"ge-console: error: 2 problems in {spec}; nothing was written",
    ]
    assert not repo.exists()
    code, out, _ = _run(["build", str(spec), "-o", str(repo), "--json"], capsys)
    assert code == 1
    problems = json.loads(out)["problems"]
    assert [(p["line"], p["column"], p["field"]) for p in problems] == [
        (26, 5, "models[0].backnd"),
        (30, 21, "models[0].max_batch_size"),
    ]


def test_build_failures_exit_1_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A missing spec and an output that is a file are failures with one clear line, no traceback."""
    code, _, err = _run(["build", str(tmp_path / "nope.yaml"), "-o", str(tmp_path / "repo")], capsys)
    said = f"{tmp_path / 'nope.yaml'}: cannot read spec: No such file or directory"
    assert code == 1 and err.strip() == f"ge-console: error: {said}"
    spec = tmp_path / "deploy.yaml"
    spec.write_text(STARTER_SPEC)
    (tmp_path / "afile").write_text("x")
    code, _, err = _run(["build", str(spec), "-o", str(tmp_path / "afile")], capsys)
    assert code == 1 and err.strip() == (
        f"ge-console: error: {tmp_path / 'afile'} exists and is not a directory")


@pytest.mark.parametrize("argv", [["build"], ["build", "deploy.yaml"], ["build", "deploy.yaml", "-o"]])
def test_build_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Missing SPEC or -o REPO is a usage error (2) with argparse's usage line."""
    code, _, err = _run(argv, capsys)
    assert code == 2 and "usage: ge-console build" in err


def test_built_seed_repository_passes_validate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`ge-console build examples/seed.yaml -o repo` then `ge-console validate repo` succeeds."""
    seed = Path(__file__).resolve().parents[2] / "examples" / "seed.yaml"
    repo = tmp_path / "repo"
    assert _run(["build", str(seed), "-o", str(repo)], capsys)[0] == 0
    code, out, err = _run(["validate", str(repo)], capsys)
    assert code == 0, out + err
