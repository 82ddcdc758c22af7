"""A spec with thousands of problems prints the first 20 and counts the rest."""

from __future__ import annotations

from pathlib import Path

import pytest

from triton_ge_console.cli import main

DUPLICATES = 5000


def duplicate_keys_spec(folder: Path) -> Path:
    """A spec repeating one key DUPLICATES times (each repeat is a problem)."""
    lines = ["models:", "  - name: m", "    backend: ge", "    source: demo:bert"]
    path = folder / "deploy.yaml"
    path.write_text("\n".join([*lines, *["    max_batch_size: 4"] * DUPLICATES]) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("command", [["build", "-o", "repo"], ["up", "--name", "many"]])
def test_problems_beyond_the_first_20_are_counted_not_listed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]) -> None:
    spec = duplicate_keys_spec(tmp_path)
    verb, *rest = command
    assert main([verb, str(spec), *[str(tmp_path / a) if a == "repo" else a for a in rest]]) == 1
    err = capsys.readouterr().err
    assert len(err) < 20 * 300, f"{len(err)} characters"
    assert err.count("duplicate") <= 20 and f"and {DUPLICATES - 1 - 20} more problems" in err, err[-500:]
