"""The GE checks agree with the GE glue running in a real tritonserver: every model the validator accepts
loads, every model it rejects does not (CPU emulation here; one module-scoped server)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import tritonclient.http as httpclient

from tests.conftest import run_triton
from tests.models import write_one_node
from tests.waiting import wait_until
from triton_ge_console.backend_glue.distribution import TritonDistribution
from triton_ge_console.backend_glue.installer import install_backend_dir
from triton_ge_console.repository.validate import validate_path

IO = (
    'max_batch_size: 8\ninput [ { name: "%s" data_type: %s dims: [ %s ] } ]\n'
    'output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
)


def _param(key: str, value: str) -> str:
    """One parameters entry."""
    return f'parameters {{ key: "{key}" value: {{ string_value: "{value}" }} }}\n'


# model → (backend, extra config, whether version 1 holds model.onnx (or BROKEN), expected: validator ok /
# Triton READY)
NOT_ONNX = "not an ONNX model (DecodeError: Error parsing message with type 'onnx.ModelProto')"
BROKEN = "broken"  # version 1 holds a model.onnx that is not an ONNX model
MODELS: dict[str, tuple[str, str, bool | str, bool]] = {
    "ge_onnx": ("ge", IO % ("x", "TYPE_FP32", "4"), True, True),
    "ge_om_fallback": ("ge", IO % ("x", "TYPE_FP32", "4") + _param("om_model_path", "absent.om"), True, True),
    "ge_io_from_onnx": ("ge", "max_batch_size: 8\n", True, True),
    "npu_ge_onnx": ("npu_ge", IO % ("x", "TYPE_FP32", "4") + _param("device_ids", "0,1"), True, True),
    "ge_nothing": ("ge", IO % ("x", "TYPE_FP32", "4"), False, False),
    "npu_ge_empty": ("npu_ge", IO % ("x", "TYPE_FP32", "4"), False, False),
    "ge_wrong_input": ("ge", IO % ("pixels", "TYPE_FP32", "4"), True, False),
    "ge_bad_device_ids": ("ge", IO % ("x", "TYPE_FP32", "4") + _param("device_ids", "4,x"), True, False),
    "ge_npu_without_om": (
        "ge",
        IO % ("x", "TYPE_FP32", "4") + _param("om_model_path", "absent.om") + _param("execution_mode", "npu"),
        True,
        False,
    ),
    "ge_wrong_dims": ("ge", IO % ("x", "TYPE_FP32", "5"), True, False),
    "ge_wrong_type": ("ge", IO % ("x", "TYPE_INT64", "4"), True, False),
    "ge_bad_mode": ("ge", IO % ("x", "TYPE_FP32", "4") + _param("execution_mode", "gpu"), True, False),
    # no inputs or outputs: the glue's auto_complete_config reads them from an ONNX that is not one
    "ge_autocomplete_broken": ("ge", "max_batch_size: 8\n", BROKEN, False),
}


def _states(url: str, models: tuple[str, ...], timeout: float = 180.0) -> dict[str, str]:
    """Each model's state once none is still loading."""
    client = httpclient.InferenceServerClient(url)

    def settled() -> dict[str, str] | None:
        index = {e["name"]: e.get("state", "") for e in client.get_model_repository_index()}
        return index if all(index.get(m) in ("READY", "UNAVAILABLE") for m in models) else None

    return wait_until(settled, timeout, interval=0.2, what="models to finish loading")


@pytest.fixture(scope="module")
def loaded(triton_dist: TritonDistribution, tmp_path_factory: pytest.TempPathFactory) -> Iterator[
        tuple[Path, dict[str, str]]]:  # fmt: skip
    """(repository, model → Triton state) after loading every model once."""
    root = tmp_path_factory.mktemp("ge_rules")
    repository = root / "repo"
    for name, (backend, extra, with_onnx, _) in MODELS.items():
        (repository / name / "1").mkdir(parents=True)
        if with_onnx == BROKEN:
            (repository / name / "1" / "model.onnx").write_bytes(b"not a model")
        elif with_onnx:
            write_one_node(repository / name / "1" / "model.onnx")
        config = f'name: "{name}"\nbackend: "{backend}"\ninstance_group [ {{ kind: KIND_CPU }} ]\n{extra}'
        (repository / name / "config.pbtxt").write_text(config, encoding="utf-8")
    install_backend_dir(root / "backends", triton_dist)
    with run_triton(triton_dist, repository, root / "backends", models=tuple(MODELS)) as server:
        states = _states(server.http_hostport, tuple(MODELS))
        yield repository, states | {f"{m}:log": server.log() for m in ("ge_autocomplete_broken",)}


@pytest.mark.parametrize("model", sorted(MODELS))
def test_validator_verdict_matches_the_glue(loaded: tuple[Path, dict[str, str]], model: str) -> None:
    """Accepted by the validator ⇔ READY in Triton with the GE glue."""
    repository, states = loaded
    expected_ok = MODELS[model][3]
    report = validate_path(repository / model)
    assert report.ok is expected_ok, [str(p) for p in report.problems]
    assert states[model] == ("READY" if expected_ok else "UNAVAILABLE")


def test_glue_auto_complete_refusal_is_tritons(loaded: tuple[Path, dict[str, str]]) -> None:
    """The glue's own auto_complete_config, run offline by the validator, fails with the words Triton logs
    when it runs it at load."""
    repository, states = loaded
    (problem,) = validate_path(repository / "ge_autocomplete_broken").errors
    onnx = repository / "ge_autocomplete_broken" / "1" / "model.onnx"
    assert problem.message == f"OnnxReadError: {onnx}: {NOT_ONNX}"
    log = states["ge_autocomplete_broken:log"]
    assert "load failed for model 'ge_autocomplete_broken': version 1 is at UNAVAILABLE state: " in log
    assert problem.message in log
