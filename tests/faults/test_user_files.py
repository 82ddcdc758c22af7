"""What ge-console touches stays its own: a user's model files and folders are never changed."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tests.backend_glue.models import dense_model
from triton_ge_console.cli import main
from triton_ge_console.sessions.registry import Registry

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
