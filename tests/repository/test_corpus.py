"""Every real config.pbtxt in the shared corpus parses, survives a write/read round trip and validates."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import CORPUS
from triton_ge_console.repository import pbtxt
from triton_ge_console.repository.validate import validate_path

CORPUS_FILES = sorted(CORPUS.rglob("config.pbtxt"))


def _id(path: Path) -> str:
    """Test id: the config's folder relative to the corpus."""
    return str(path.parent.relative_to(CORPUS))


def test_corpus_is_complete() -> None:
    """The corpus the issue promises is there: 87 configs, the CANN npu_ge examples among them."""
    assert len(CORPUS_FILES) == 87
    assert sum(1 for p in CORPUS_FILES if "npu-ge-configs" in p.parts) == 5


@pytest.mark.parametrize("path", CORPUS_FILES, ids=_id)
def test_corpus_config_round_trips(path: Path) -> None:
    """parse → dumps → parse gives an equal message, and dumping again changes nothing."""
    config = pbtxt.load(path)
    text = pbtxt.dumps(config)
    again = pbtxt.loads(text, path)
    assert again == config
    assert pbtxt.dumps(again) == text


@pytest.mark.parametrize("path", CORPUS_FILES, ids=_id)
def test_corpus_config_validates(path: Path) -> None:
    """Judged as a config alone, no corpus file has an error (warnings, e.g. KIND_GPU, are allowed)."""
    report = validate_path(path)
    assert report.ok, "\n".join(str(p) for p in report.errors)
    assert all(p.file == str(path) for p in report.problems)


def test_npu_ge_examples_are_clean() -> None:
    """CANN's own npu_ge examples (device_ids, DEVICEIDS, static_model, profiling, ge.*) raise nothing."""
    for path in (p for p in CORPUS_FILES if "npu-ge-configs" in p.parts):
        assert validate_path(path).problems == (), path


def test_corpus_kind_gpu_is_a_warning_with_position() -> None:
    """A KIND_GPU group is valid config, but reported: Triton refuses it on a machine without a GPU."""
    path = CORPUS / "triton-configs/python-models/add_sub_gpu/config.pbtxt"
    (problem,) = validate_path(path).problems
    assert problem.severity == "warning"
    assert (problem.line, problem.field) == (63, "instance_group[0].kind")
    assert "has kind KIND_GPU" in problem.message
