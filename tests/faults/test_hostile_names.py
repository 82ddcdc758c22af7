"""A name from user input holding terminal escapes or a right-to-left override is printed escaped."""

from __future__ import annotations

from pathlib import Path

import pytest

from triton_ge_console.cli import main

HOSTILE = "\x1b[2J\x1b[31mevil\u202egnp.exe"
SHOWN = "\\x1b[2J\\x1b[31mevil\\u202egnp.exe"


def raw_controls(text: str) -> list[str]:
    """The control and format characters in printed text (none may reach the terminal)."""
    return [c for c in text if not c.isprintable() and c != "\n"]


def test_a_spec_model_name_is_escaped_in_builds_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "deploy.yaml"
    escaped_yaml = HOSTILE.encode("unicode_escape").decode("ascii").replace("\\x1b", "\\e")
    spec.write_text(f'models:\n  - {{name: "{escaped_yaml}", backend: ge, source: demo:bert}}\n',
                    encoding="utf-8")
    assert main(["build", str(spec), "-o", str(tmp_path / "repo")]) == 1
    err = capsys.readouterr().err
    assert SHOWN in err and raw_controls(err) == [], err


def test_a_config_name_is_escaped_in_validates_report(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "repo" / "m" / "config.pbtxt"
    config.parent.mkdir(parents=True)
    config.write_text(f'name: "{HOSTILE}"\nbackend: "python"\n', encoding="utf-8")
    main(["validate", str(tmp_path / "repo")])
    out, err = capsys.readouterr()
    assert SHOWN in out + err and raw_controls(out + err) == [], out + err


@pytest.mark.server
def test_an_unknown_model_name_is_escaped(echo_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["up", str(echo_repo), "--name", "hostile", "--timeout", "120"]) == 0
    capsys.readouterr()
    assert main(["reload", HOSTILE]) == 1
    out, err = capsys.readouterr()
    assert f"unknown model '{SHOWN}'" in err and raw_controls(out + err) == [], err
