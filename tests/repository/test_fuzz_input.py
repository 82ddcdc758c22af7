"""Fuzzing the readers of untrusted files: a spec and a config.pbtxt end in a result or our own located error.

Any bytes or any YAML structure given to the spec loader end in a DeploymentSpec or a SpecError whose
problems name the file; any config text given to `validate` ends in a report; the CLI on them exits 0, 1 or
2 without a traceback. Examples are bounded so the whole module runs in seconds.
"""

from __future__ import annotations

import contextlib
import io
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triton_ge_console.cli import main
from triton_ge_console.repository.spec.load import SpecError, load_spec
from triton_ge_console.repository.validate import validate_path

FUZZ = settings(max_examples=30, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

SPEC_WORDS = ["name", "server", "models", "backend", "source", "onnx", "inputs", "outputs", "dims",
              "data_type", "max_batch_size", "versions", "instance_group", "count", "device_ids",
              "parameters", "om_model_path", "dynamic_batching", "preferred_batch_size", "http_port",
              "metrics", "interval_ms", "listen", "extra_args", "thresholds", "backend_config", "ge",
              "npu_ge", "FP32", "INT64", "model.onnx", "x.om", "../../etc/passwd"]
SCALARS = (st.none() | st.booleans() | st.integers() | st.integers(min_value=2**62, max_value=2**70)
           | st.floats() | st.text(max_size=12) | st.sampled_from(SPEC_WORDS))
KEYS = st.sampled_from(SPEC_WORDS) | st.text(max_size=8)
STRUCTURES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=5),
    max_leaves=30)
SPEC_SHAPED = st.fixed_dictionaries(
    {"models": st.lists(st.dictionaries(KEYS, STRUCTURES, max_size=7), max_size=2)},
    optional={"server": st.dictionaries(KEYS, STRUCTURES, max_size=5), "name": SCALARS})

PBTXT_WORDS = ['name:', '"m"', 'backend:', '"ge"', '"python"', 'max_batch_size:', '8', '-1', '0',
               '99999999999999999999', 'input', 'output', '[', ']', '{', '}', '<', '>', ',', 'dims:',
               'data_type:', 'TYPE_FP32', 'parameters', 'key:', 'value:', 'string_value:', '"om_model_path"',
               '"../../x.om"', 'instance_group', 'count:', 'kind:', 'KIND_GPU', 'dynamic_batching',
               'version_policy', 'model_warmup', '#', '"', "'", '\\', 'sequence_batching', 'state']
PBTXT = st.lists(st.sampled_from(PBTXT_WORDS), max_size=60).map(" ".join)


def check_spec(path: Path) -> None:
    """The loader returns a spec or raises SpecError naming the file; nothing else escapes."""
    try:
        load_spec(path)
    except SpecError as exc:
        assert exc.problems and all(p.file == str(path) and p.line >= 0 for p in exc.problems), exc.problems


def cli_exit(argv: list[str]) -> int:
    """Exit code of an in-process CLI run; any exception other than argparse's exit fails the test."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = int(exc.code or 0)
    assert "Traceback" not in err.getvalue(), err.getvalue()
    assert code in (0, 1, 2), (code, err.getvalue())
    return code


def written(folder: Path, name: str, data: bytes) -> Path:
    """data written to folder/name."""
    path = folder / name
    path.write_bytes(data)
    return path


@FUZZ
@given(data=st.binary(max_size=3000) | st.text(max_size=2000).map(str.encode))
def test_any_bytes_as_a_spec(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = written(Path(folder), "deploy.yaml", data)
        check_spec(path)
        cli_exit(["build", str(path), "-o", str(Path(folder) / "repo")])


@FUZZ
@given(document=SPEC_SHAPED | STRUCTURES)
def test_any_yaml_structure_as_a_spec(document: Any) -> None:
    text = yaml.safe_dump(document, allow_unicode=True)
    with tempfile.TemporaryDirectory() as folder:
        path = written(Path(folder), "deploy.yaml", text.encode())
        check_spec(path)
        cli_exit(["build", str(path), "-o", str(Path(folder) / "repo")])


@FUZZ
@given(data=PBTXT.map(str.encode) | st.binary(max_size=2000))
def test_any_config_text_to_validate(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        model = Path(folder) / "m"
        (model / "1").mkdir(parents=True)
        written(model, "config.pbtxt", data)
        report = validate_path(model)
        assert all(p.file for p in report.problems)
        cli_exit(["validate", str(model)])
        cli_exit(["validate", str(model / "config.pbtxt"), "--json"])


@pytest.mark.parametrize("text", ["{" * 5000, "a {" * 3000, "input [" * 3000, "input {" * 3000,
                                  "x" * 3_000_000], ids=["braces", "fields", "lists", "messages", "3MB"])
def test_validate_survives_deep_and_huge_config_text(tmp_path: Path, text: str) -> None:
    model = tmp_path / "m"
    (model / "1").mkdir(parents=True)
    written(model, "config.pbtxt", text.encode())
    report = validate_path(model)
    assert not report.ok and len(str(report.errors[0].message)) < 400
    assert cli_exit(["validate", str(model)]) == 1
