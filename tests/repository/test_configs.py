"""Our own configs (tests/data/configs) parse, round-trip and validate: nothing read from outside the repo."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import DATA
from tests.repository.config_checks import (
    assert_kind_gpu_warning,
    assert_npu_ge_clean,
    assert_round_trips,
    assert_validates,
    config_files,
)

CONFIGS = DATA / "configs"
CONFIG_FILES = config_files(CONFIGS)


def _id(path: Path) -> str:
    """Test id: the config's folder name."""
    return path.parent.name


def test_the_set_covers_what_real_repositories_use() -> None:
    """The set is never empty and holds each kind the corpus has: npu_ge, python, onnx, ensemble."""
    texts = [p.read_text(encoding="utf-8") for p in CONFIG_FILES]
    assert len(CONFIG_FILES) == 12
    for needle in ('backend: "npu_ge"', "DEVICEIDS", "ge.aicoreNum", 'backend: "python"',
                   'platform: "ensemble"', 'platform: "onnxruntime_onnx"', "control_input", "decoupled",
                   "reshape", "optional",
                   "default_queue_policy", "version_policy", "iterative_sequence", "TYPE_BF16", "KIND_GPU"):
        assert any(needle in t for t in texts), needle


@pytest.mark.parametrize("path", CONFIG_FILES, ids=_id)
def test_config_round_trips(path: Path) -> None:
    """parse → dumps → parse gives an equal message, and dumping again changes nothing."""
    assert_round_trips(path)


@pytest.mark.parametrize("path", CONFIG_FILES, ids=_id)
def test_config_validates(path: Path) -> None:
    """Judged as a config alone, none of ours has an error."""
    assert_validates(path)


def test_npu_ge_configs_are_clean() -> None:
    """npu_ge configs with Chinese comments, repeated parameters blocks and no inputs raise nothing."""
    assert_npu_ge_clean([p for p in CONFIG_FILES if p.parent.name.startswith("npu_ge")])


def test_kind_gpu_is_a_warning_with_position() -> None:
    """A KIND_GPU group is valid config, but reported at its line and field."""
    assert_kind_gpu_warning(CONFIGS / "python_on_gpu/config.pbtxt", line=20)
