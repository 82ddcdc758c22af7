"""The validator agrees with a real tritonserver: every config it rejects, Triton rejects with the same words.

One server (module scope) loads a repository of broken Python-backend models; each case compares the
validator's error with the reason Triton gives for that model.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import RunningServer, run_triton
from triton_ge_console.backend_glue.distribution import TritonDistribution
from triton_ge_console.repository.validate import validate_path

MODEL_PY = """class TritonPythonModel:
    def initialize(self, args):
        pass

    def execute(self, requests):
        return []
"""
IO = (
    'input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
    'output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
)

# model folder → config body after name/backend (or the whole config when it starts with 'name:')
BROKEN = {
    "bad_dims": 'input [ { name: "IN" data_type: TYPE_FP32 dims: [ 0 ] } ]\n',
    "no_type": 'input [ { name: "IN" dims: [ 4 ] } ]\n',
    "bad_reshape": 'input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ 3 ] } } ]\n',
    "negative_batch": "max_batch_size: -1\n",
    "preferred_too_big": "max_batch_size: 4\ndynamic_batching { preferred_batch_size: [ 8 ] }\n",
    "priority_default": "max_batch_size: 4\n"
    "dynamic_batching { priority_levels: 2 default_priority_level: 5 }\n",
    "sequence_control": IO + 'max_batch_size: 2\nsequence_batching { control_input [ { name: "S" control [ '
    "{ kind: CONTROL_SEQUENCE_START } ] } ] }\n",
    "cpu_with_gpus": IO + "instance_group [ { kind: KIND_CPU gpus: [ 0 ] } ]\n",
    "scheduling_not_ensemble": IO + 'ensemble_scheduling { step [ { model_name: "x" } ] }\n',
    "wrong_dir": 'name: "other_name"\nbackend: "python"\n',
}
TRITON_PREFIX = re.compile(r"^(Invalid argument|Internal): ")


def _ensemble(step_model: str, in_key: str = "IN", out_key: str = "OUT", in_type: str = "TYPE_FP32",
              in_dims: str = "4", max_batch_size: int = 4) -> str:  # fmt: skip
    """An ensemble of one step feeding its input A to step_model and its output B back."""
    return (
        f'platform: "ensemble"\nmax_batch_size: {max_batch_size}\n'
        f'input [ {{ name: "A" data_type: {in_type} dims: [ {in_dims} ] }} ]\n'
        'output [ { name: "B" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        f'ensemble_scheduling {{ step [ {{ model_name: "{step_model}" model_version: -1\n'
        f'  input_map {{ key: "{in_key}" value: "A" }}\n'
        f'  output_map {{ key: "{out_key}" value: "B" }} }} ] }}\n'
    )


# Ensembles over the "good" model (max_batch_size 4, IN/OUT FP32 [4]); judged with the whole repository.
ENSEMBLES = {
    "e_missing": _ensemble("not_in_repo"),
    "e_invalid_step": _ensemble("negative_batch"),
    "e_failed_step": _ensemble("bad_dims"),
    "e_batch": _ensemble("good", max_batch_size=8),
    "e_no_input": _ensemble("good", in_key="NOPE"),
    "e_no_output": _ensemble("good", out_key="NOPE"),
    "e_type": _ensemble("good", in_type="TYPE_INT32"),
    "e_shape": _ensemble("good", in_dims="3"),
}


def _write_model(repository: Path, name: str, body: str) -> None:
    """A Python-backend model folder with version 1 and the given config."""
    folder = repository / name
    (folder / "1").mkdir(parents=True)
    if "ensemble" not in body:
        (folder / "1" / "model.py").write_text(MODEL_PY, encoding="utf-8")
    backend = "" if body.startswith("platform:") else 'backend: "python"\n'
    head = "" if body.startswith("name:") else f'name: "{name}"\n{backend}'
    (folder / "config.pbtxt").write_text(head + body, encoding="utf-8")


def _python_backend_dir(dist: TritonDistribution, root: Path) -> Path:
    """A backend directory holding Triton's Python backend and the stub built for this interpreter."""
    python_dir = root / "python"
    python_dir.mkdir(parents=True)
    assert dist.python_backend_dir is not None
    for name in ("libtriton_python.so", "triton_python_backend_utils.py"):
        os.symlink(dist.python_backend_dir / name, python_dir / name)
    stub = dist.stub_for()
    assert stub is not None
    shutil.copy(stub, python_dir / "triton_python_backend_stub")
    return root


def _repository_index(server: RunningServer) -> list[dict[str, str]]:
    """Triton's model repository index: state and reason per model."""
    request = urllib.request.Request(f"{server.http_url}/v2/repository/index", data=b"{}", method="POST")
    with urllib.request.urlopen(request, timeout=5) as response:
        return list(json.load(response))


def _settled_index(server: RunningServer, timeout: float = 90.0) -> list[dict[str, str]]:
    """The index once every model that loads has finished loading (succeeded or failed)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        index = _repository_index(server)
        loaded = [m for m in index if m.get("state")]
        if loaded and all(m["state"] in ("READY", "UNAVAILABLE") for m in loaded):
            return index
        time.sleep(0.1)
    raise AssertionError(f"models still loading after {timeout}s: {_repository_index(server)}")


@pytest.fixture(scope="module")
def triton_reasons(
    triton_dist: TritonDistribution, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, dict[str, str]]]:
    """(repository, model → Triton's reason for refusing it), from one server run."""
    root = tmp_path_factory.mktemp("triton_rules")
    repository = root / "repo"
    models = {
        **BROKEN,
        **ENSEMBLES,
        "good": IO + "max_batch_size: 4\ndynamic_batching { }\n",
        "e_good": _ensemble("good"),
        "dup_input": IO + 'input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]\n',
    }
    for name, body in models.items():
        _write_model(repository, name, body)
    backends = _python_backend_dir(triton_dist, root / "backends")
    with run_triton(triton_dist, repository, backends, models=tuple(models)) as server:
        index = _settled_index(server)
        reasons = {m["name"]: TRITON_PREFIX.sub("", m.get("reason", "")) for m in index}
        for name, message in re.findall(
            r"Poll failed for model directory '([^']+)': (.*)\"$", server.log(), re.M
        ):
            reasons[name] = message
        for name, message in re.findall(
            r"load failed for model '([^']+)': (.*?)(?:\\n|\"$)", server.log(), re.M
        ):
            reasons.setdefault(name, message)
            reasons[name] = reasons[name] or message
        reasons["good"] = next(m["state"] for m in index if m["name"] == "good")
        for loaded in ("e_good", "dup_input"):
            reasons[loaded] = next(m["state"] for m in index if m["name"] == loaded)
        yield repository, reasons


@pytest.mark.parametrize("model", sorted(BROKEN))
def test_validator_error_is_tritons_reason(triton_reasons: tuple[Path, dict[str, str]], model: str) -> None:
    """The validator rejects the model folder with exactly the reason the server gives."""
    repository, reasons = triton_reasons
    report = validate_path(repository / model)
    assert not report.ok
    assert reasons[model], f"Triton gave no reason for {model}"
    assert report.errors[0].message == reasons[model]


@pytest.mark.parametrize("ensemble", sorted(ENSEMBLES))
def test_ensemble_error_is_tritons_reason(triton_reasons: tuple[Path, dict[str, str]], ensemble: str) -> None:
    """Judging the repository, an ensemble's first error is what Triton says when it refuses the ensemble."""
    repository, reasons = triton_reasons
    config_path = str(repository / ensemble / "config.pbtxt")
    errors = [p for p in validate_path(repository).errors if p.file == config_path]
    assert reasons[ensemble], f"Triton gave no reason for {ensemble}"
    assert errors[0].message == reasons[ensemble]
    assert errors[0].line is not None


def test_model_triton_loads_is_valid(triton_reasons: tuple[Path, dict[str, str]]) -> None:
    """The control model loads in Triton, and the validator finds nothing wrong with it."""
    repository, reasons = triton_reasons
    assert (reasons["good"], reasons["e_good"]) == ("READY", "READY")
    assert validate_path(repository / "good").problems == ()
    assert [p for p in validate_path(repository).problems if "e_good" in p.file] == []


def test_duplicate_tensor_names_load_in_triton_but_are_errors_here(
    triton_reasons: tuple[Path, dict[str, str]],
) -> None:
    """The one deliberate difference: Triton loads a model declaring input IN twice; the validator refuses it,
    as no request can feed both."""
    repository, reasons = triton_reasons
    assert reasons["dup_input"] == "READY"
    (problem,) = validate_path(repository / "dup_input").errors
    assert problem.message.startswith("model input 'IN' is specified more than once")
