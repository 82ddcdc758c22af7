"""What ge-console touches stays its own: a user's model files and folders are never changed."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.models import dense_model
from triton_ge_console.cli import main
from triton_ge_console.sessions.server.registry import Registry

SPEC = "models:\n  - {name: m, backend: ge, source: m.onnx, max_batch_size: 4}\n"


def mode(path: Path) -> int:
    """A path's permission bits."""
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.mark.server
def test_up_leaves_a_linked_source_file_as_it_was(tmp_path: Path) -> None:
    source = tmp_path / "m.onnx"
    source.write_bytes(dense_model())
    source.chmod(0o644)
    (tmp_path / "deploy.yaml").write_text(SPEC, encoding="utf-8")
    assert main(["up", str(tmp_path / "deploy.yaml"), "--name", "linked", "--timeout", "120"]) == 0
    record = Registry().load("linked")
    assert record.session_dir is not None
    served = record.session_dir / "repository" / "m" / "1" / "model.onnx"
    assert served.stat().st_ino == source.stat().st_ino, "the source is linked, not copied"
    assert mode(source) == 0o644
    assert mode(record.session_dir) == 0o700, "the session stays private by its folder"
    assert main(["down", "linked"]) == 0
    assert mode(source) == 0o644


HAND_WRITTEN = 'name: "m"\nbackend: "onnxruntime"\nmax_batch_size: 2\n'


def _spec_with_source(folder: Path) -> Path:
    """deploy.yaml serving m.onnx as model m."""
    (folder / "m.onnx").write_bytes(dense_model())
    (folder / "deploy.yaml").write_text(SPEC, encoding="utf-8")
    return folder / "deploy.yaml"


def test_build_refuses_to_replace_a_model_folder_it_did_not_make(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = _spec_with_source(tmp_path)
    config = tmp_path / "repo" / "m" / "config.pbtxt"
    config.parent.mkdir(parents=True)
    config.write_text(HAND_WRITTEN, encoding="utf-8")
    assert main(["build", str(spec), "-o", str(tmp_path / "repo")]) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path / 'repo' / 'm'}: a model folder no ge-console build made" in err, err
    assert "--force" in err and "Traceback" not in err
    assert config.read_text(encoding="utf-8") == HAND_WRITTEN
    assert main(["build", str(spec), "-o", str(tmp_path / "repo"), "--force"]) == 0
    assert "m  (1 file linked) replaced a model folder no build made" in capsys.readouterr().out
    assert config.read_text(encoding="utf-8") != HAND_WRITTEN
    assert main(["build", str(spec), "-o", str(tmp_path / "repo")]) == 0, "now it is the build's own"
    assert "unchanged  m" in capsys.readouterr().out


@pytest.mark.parametrize(("make", "said"), [
    (lambda path: (path.symlink_to(path.with_name("other.onnx")),
                   path.with_name("other.onnx").symlink_to(path)), "a symlink loop"),
    (lambda path: os.mkfifo(path), "a named pipe, not a file"),
    (lambda path: path.mkdir(), "a folder, not a file"),
    (lambda path: None, "no such file"),
])
def test_a_model_source_that_is_no_regular_file_is_named_for_what_it_is(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], make: Callable[[Path], object], said: str,
) -> None:
    make(tmp_path / "m.onnx")
    (tmp_path / "deploy.yaml").write_text(SPEC, encoding="utf-8")
    assert main(["build", str(tmp_path / "deploy.yaml"), "-o", str(tmp_path / "repo")]) == 1
    err = capsys.readouterr().err
    assert f"models[0].source: {said}: {tmp_path / 'm.onnx'}" in err, err


def _loose(tree: Path) -> list[str]:
    """Entries of a session's tree open to group or others (a linked user's file keeps its own mode)."""
    found = []
    for entry in (tree, *tree.rglob("*")):
        info = entry.lstat()
        shared = not stat.S_ISDIR(info.st_mode) and info.st_nlink > 1
        if not stat.S_ISLNK(info.st_mode) and not shared and mode(entry) & 0o077:
            found.append(f"{oct(mode(entry))} {entry.relative_to(tree)}")
    return found


@pytest.mark.server
def test_a_rebuild_after_a_spec_edit_keeps_the_repository_private(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = _spec_with_source(tmp_path)
    assert main(["up", str(spec), "--name", "edited", "--timeout", "120"]) == 0
    record = Registry().load("edited")
    assert record.session_dir is not None and record.repository is not None
    assert _loose(record.session_dir) == []
    spec.write_text(SPEC.replace("max_batch_size: 4", "max_batch_size: 2"), encoding="utf-8")
    capsys.readouterr()
    assert main(["reload", "--changed"]) == 0
    assert "max_batch_size 4 → 2" in capsys.readouterr().out
    assert (record.repository / "m" / "config.pbtxt").read_text(encoding="utf-8").count("max_batch_size: 2")
    assert _loose(record.session_dir) == [], "700/600 as up made them"
