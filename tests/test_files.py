"""The one atomic-write helper: complete files only, private by default, nothing left behind on failure."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from triton_ge_console.files import write_atomic


def test_replaces_the_whole_file_privately(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    target.write_text("old, longer contents")
    write_atomic(target, '{"a": 1}')
    assert target.read_text() == '{"a": 1}'
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_mode_is_set_before_the_file_appears(tmp_path: Path) -> None:
    target = tmp_path / "model.py"
    write_atomic(target, b"print()\n", mode=0o755)
    assert stat.S_IMODE(target.stat().st_mode) == 0o755


def test_a_failed_write_keeps_the_old_file_and_no_temp(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "registry.yaml"
    target.write_text("kept")

    def refuse(_src: str, _dst: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="disk full"):
        write_atomic(target, "new")
    assert target.read_text() == "kept"
    assert [p.name for p in tmp_path.iterdir()] == ["registry.yaml"]
