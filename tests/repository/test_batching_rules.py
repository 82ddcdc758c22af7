"""build and validate refuse max_batch_size > 0 for a model Triton cannot batch (its batch not in dim 0 of
an output, or an op across the batch), naming the tensor or node and what to do; unbatched they serve."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.models import across_batch_model, batch_at_model, six_wide_model, time_major_model, write_model
from tests.repository.spec_helpers import refused
from triton_ge_console.cli import main
from triton_ge_console.repository.spec.load import load_spec
from triton_ge_console.repository.validate import validate_path

SPEC = "models:\n  - name: m\n    backend: ge\n    source: model.onnx\n    max_batch_size: {mbs}\n"
MODELS = {"time_major": time_major_model, "batch_mean": lambda: across_batch_model("batch_mean")}
HAND_WRITTEN = ('backend: "ge"\nmax_batch_size: {mbs}\n'
                'dynamic_batching {{ max_queue_delay_microseconds: 1000 }}\n')


@pytest.mark.parametrize("model", sorted(MODELS))
def test_build_refuses_batching_a_model_that_would_mix_requests(tmp_path: Path, model: str) -> None:
    """One line per output at the spec's max_batch_size, naming it and the way out."""
    (tmp_path / "model.onnx").write_bytes(MODELS[model]())
    (tmp_path / "deploy.yaml").write_text(SPEC.format(mbs=4), encoding="utf-8")
    problems = refused(tmp_path / "deploy.yaml")
    assert problems
    assert all(p.startswith("deploy.yaml:5:") and "models[0].max_batch_size" in p for p in problems)
    expected = {"time_major": ("output 'logits' [time, batch, 4] carries the batch in dim 1",
                               "output 'probs' [time, batch, 4] carries the batch in dim 1"),
                "batch_mean": ("output 'y' mixes the requests Triton joins: node 'm' (ReduceMean)",)}[model]
    assert len(problems) == len(expected)
    for problem, said in zip(problems, expected, strict=True):
        assert said in problem and "use max_batch_size: 0" not in problem and "max_batch_size: 0 (" in problem


@pytest.mark.parametrize("model", sorted(MODELS))
def test_the_same_model_unbatched_builds(tmp_path: Path, model: str) -> None:
    """max_batch_size 0: each request whole, as sent; nothing to refuse."""
    (tmp_path / "model.onnx").write_bytes(MODELS[model]())
    (tmp_path / "deploy.yaml").write_text(SPEC.format(mbs=0), encoding="utf-8")
    assert load_spec(tmp_path / "deploy.yaml").models[0].max_batch_size == 0


@pytest.mark.parametrize("model", sorted(MODELS))
def test_validate_refuses_a_hand_written_batching_config(tmp_path: Path, model: str) -> None:
    """The same refusal for a config.pbtxt written by hand, at its max_batch_size line."""
    write_model(tmp_path, model, HAND_WRITTEN.format(mbs=4), MODELS[model]())
    report = validate_path(tmp_path)
    errors = [p for p in report.errors if "Triton cannot batch this model" in p.message]
    assert errors and all(p.line == 2 for p in errors), [str(p) for p in report.problems]
    unbatched = HAND_WRITTEN.format(mbs=0).replace("dynamic_batching", "# ")
    write_model(tmp_path, model, unbatched, MODELS[model]())
    assert validate_path(tmp_path).errors == ()


@pytest.mark.parametrize("position", (0, 1, 2))
def test_generated_graphs_with_the_batch_at_each_position(tmp_path: Path, position: int) -> None:
    """y with the batch in dim 0 builds batched (tests/backend_glue/test_batching_invariant.py serves it);
    in dim 1 or 2 the build is refused naming the dim."""
    (tmp_path / "model.onnx").write_bytes(batch_at_model(position))
    (tmp_path / "deploy.yaml").write_text(SPEC.format(mbs=4), encoding="utf-8")
    if position == 0:
        assert load_spec(tmp_path / "deploy.yaml").models[0].max_batch_size == 4
        return
    (problem,) = refused(tmp_path / "deploy.yaml")
    assert f"carries the batch in dim {position}, not dim 0" in problem


def test_build_and_validate_say_when_batching_could_not_be_checked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A graph the check cannot follow, which does not run on random inputs: built (nothing proved wrong),
    with a note on stderr naming the model and why; validate warns the same at max_batch_size."""
    (tmp_path / "model.onnx").write_bytes(six_wide_model())
    (tmp_path / "deploy.yaml").write_text(SPEC.format(mbs=4), encoding="utf-8")
    assert main(["build", str(tmp_path / "deploy.yaml"), "-o", str(tmp_path / "repo")]) == 0
    err = capsys.readouterr().err
    assert "ge-console build: note: model m: max_batch_size 4: whether joined requests stay apart was not " \
           "checked: node 'six_wide' (Reshape) reshapes" in err
    assert "and the model did not run on random inputs" in err and "serve it with max_batch_size: 0" in err
    report = validate_path(tmp_path / "repo")
    assert report.errors == ()
    (said,) = [w for w in report.warnings if "was not checked" in w.message]
    assert said.line == 2 and "the model did not run on random inputs" in said.message


@pytest.mark.parametrize("backend", ("ge", "npu_ge"))
def test_validate_says_batching_was_not_checked_without_an_onnx(tmp_path: Path, backend: str) -> None:
    """An OM (ge) or a TensorFlow .pb (npu_ge) with no ONNX beside it: the graph the check reads is not
    there, so validate warns at max_batch_size that it was not checked (it said nothing: taken as passed);
    unbatched there is nothing to say."""
    om = 'parameters { key: "om_model_path" value: { string_value: "model.om" } }\n'
    model_file, extra = ("model.om", om) if backend == "ge" else ("model.pb", "")
    config = f'backend: "{backend}"\nmax_batch_size: MBS\n' + extra
    files = {f"1/{model_file}": b"not read"}
    write_model(tmp_path, "m", config.replace("MBS", "4"), None, files=files)
    said = [(p.severity, p.line, p.message) for p in validate_path(tmp_path).problems
            if "not checked" in p.message]
    assert said == [("warning", 2, "max_batch_size 4: whether joined requests stay apart was not "
                     "checked: version folder 1 has no ONNX (the graph this check reads); serve it with "
                     "max_batch_size: 0 unless you know it batches along dim 0, or set onnx_model_path to "
                     "the ONNX it was made from")]
    write_model(tmp_path, "m", config.replace("MBS", "0"), None, files=files)
    assert not [p for p in validate_path(tmp_path).problems if "not checked" in p.message]
