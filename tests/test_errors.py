"""The error base (errors.py): every project error is a GeConsoleError, which `cli.py` prints as one
`ge-console: error:` line; any other exception reaching it is a bug and keeps its traceback."""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from triton_ge_console.errors import GeConsoleError, PathError, user_path

SRC = Path(__file__).resolve().parent.parent / "src" / "triton_ge_console"
CLI = [sys.executable, "-m", "triton_ge_console.cli"]
SPEC = "models:\n  - name: m\n    backend: ge\n    source: demo:llama\n"


def ge_console(*argv: str, cwd: Path, code: str | None = None) -> subprocess.CompletedProcess[str]:
    """The real CLI in a process (or `code` run before its main), in cwd."""
    command = CLI + list(argv) if code is None else [
        sys.executable, "-c", f"{code}\nimport sys\nfrom triton_ge_console.cli import main\n"
                              f"sys.exit(main({list(argv)!r}))"]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120, env=dict(os.environ))


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    """The single stderr line of a user error: exit 1, no traceback, no second line."""
    lines = result.stderr.splitlines()
    assert result.returncode == 1 and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith("ge-console: error: "), lines
    return lines[0]


def test_every_project_error_class_derives_from_the_base() -> None:
    """Each `class ...Error` of the package is a GeConsoleError, so cli.py reports it as one line."""
    errors: list[tuple[str, str]] = []
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module = ".".join(("triton_ge_console", *path.relative_to(SRC).with_suffix("").parts))
        errors += [(module, node.name) for node in tree.body
                   if isinstance(node, ast.ClassDef) and node.name.endswith("Error")]
    assert len(errors) > 30
    outside = [f"{module}.{name}" for module, name in errors
               if not issubclass(getattr(importlib.import_module(module), name), GeConsoleError)]
    assert outside == []


def test_an_unexpected_internal_error_shows_its_traceback(tmp_path: Path) -> None:
    """A ValueError no one raised on purpose is a bug: its traceback, not one line hiding it."""
    bug = ("import triton_ge_console.repository.starter as starter\n"
           "def broken(path, force=False):\n    raise ValueError('an internal slip')\n"
           "starter.write_starter = broken")
    result = ge_console("init", "deploy.yaml", cwd=tmp_path, code=bug)
    assert result.returncode == 1 and "Traceback" in result.stderr, result.stderr
    assert "ValueError: an internal slip" in result.stderr and "ge-console: error:" not in result.stderr


def test_a_file_the_user_named_that_the_os_refuses_is_one_line_naming_it(tmp_path: Path) -> None:
    (tmp_path / "deploy.yaml").write_text(SPEC, encoding="utf-8")
    (tmp_path / "afile").write_text("", encoding="utf-8")
    line = one_line(ge_console("build", "deploy.yaml", "-o", "afile/repo", cwd=tmp_path))
    assert "afile/repo" in line and "the repository is unchanged" in line
    line = one_line(ge_console("k8s", "render", "deploy.yaml", "-o", "afile/manifests", cwd=tmp_path))
    assert line == "ge-console: error: afile/manifests: not a directory"
    line = one_line(ge_console("build", "missing.yaml", "-o", "repo", cwd=tmp_path))
    assert "missing.yaml" in line and "no such file or directory" in line.lower()


@pytest.mark.parametrize(("argv", "said"), [
    (["attach", "[::1", "--name", "x"], "URL '[::1': expected http://HOST:PORT"),
    (["attach", "http://127.0.0.1:1/v2", "--name", "x"], "an endpoint has no path"),
    (["status", "nosuch"], "no session named 'nosuch'"),
    (["up", "deploy.yaml", "--name", "bad/name"], "bad session name 'bad/name'"),
    (["load", "m"], "no sessions"),
])
def test_user_errors_stay_one_line(tmp_path: Path, argv: list[str], said: str) -> None:
    (tmp_path / "deploy.yaml").write_text(SPEC, encoding="utf-8")
    assert said in one_line(ge_console(*argv, cwd=tmp_path))


def test_user_path_names_the_path_and_keeps_the_os_error() -> None:
    with pytest.raises(PathError) as refused, user_path("/no/such/dir/x"):
        Path("/no/such/dir/x").read_text(encoding="utf-8")
    assert str(refused.value) == "/no/such/dir/x: no such file or directory"
    assert isinstance(refused.value, OSError) and refused.value.errno == 2
