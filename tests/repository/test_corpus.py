"""The external corpus (Triton's and CANN's real configs, ../shared/corpus): an extra suite, else skipped.

The folder sits beside the repository for developers and CI, not in a user's clone; set GE_CONSOLE_CORPUS
to read it from elsewhere (then its absence is a failure, not a skip).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.repository.config_checks import (
    assert_kind_gpu_warning,
    assert_npu_ge_clean,
    assert_round_trips,
    assert_validates,
    config_files,
)

CORPUS_ENV = "GE_CONSOLE_CORPUS"  # where CI keeps the external corpus, if not beside the repository
CORPUS = Path(os.environ.get(CORPUS_ENV) or ROOT.parent / "shared" / "corpus")  # may be absent: skipped

if not CORPUS.is_dir():
    if os.environ.get(CORPUS_ENV):
        raise FileNotFoundError(f"{CORPUS_ENV}={CORPUS}: no such folder")
    pytest.skip(f"external corpus not found at {CORPUS} (extra suite; set {CORPUS_ENV} to run it)",
                allow_module_level=True)

CORPUS_FILES = config_files(CORPUS)


def _id(path: Path) -> str:
    """Test id: the config's folder relative to the corpus."""
    return str(path.parent.relative_to(CORPUS))


def test_corpus_is_complete() -> None:
    """The corpus is all there: 87 configs, the CANN npu_ge examples among them."""
    assert len(CORPUS_FILES) == 87
    assert sum(1 for p in CORPUS_FILES if "npu-ge-configs" in p.parts) == 5


@pytest.mark.parametrize("path", CORPUS_FILES, ids=_id)
def test_corpus_config_round_trips(path: Path) -> None:
    """parse → dumps → parse gives an equal message, and dumping again changes nothing."""
    assert_round_trips(path)


@pytest.mark.parametrize("path", CORPUS_FILES, ids=_id)
def test_corpus_config_validates(path: Path) -> None:
    """Judged as a config alone, no corpus file has an error (warnings, e.g. KIND_GPU, are allowed)."""
    assert_validates(path)


def test_npu_ge_examples_are_clean() -> None:
    """CANN's own npu_ge examples load; they warn only where their parameters are never read (DEVICEIDS,
    ge.* as a model parameter), as hicann/triton-inference-server-ge-backend's model_state.cpp reads them."""
    assert_npu_ge_clean([p for p in CORPUS_FILES if "npu-ge-configs" in p.parts])


def test_corpus_kind_gpu_is_a_warning_with_position() -> None:
    """A KIND_GPU group is valid config, but reported: Triton refuses it on a machine without a GPU."""
    assert_kind_gpu_warning(CORPUS / "triton-configs/python-models/add_sub_gpu/config.pbtxt", line=63)
