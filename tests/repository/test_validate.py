"""validate_path over a repository, one model folder or one config file; report shapes and positions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.models import write_model, write_one_node
from triton_ge_console.errors import GeConsoleError
from triton_ge_console.repository.validate import ValidationReport, validate_config_text, validate_path

GOOD = 'name: "{name}"\nbackend: "python"\nmax_batch_size: 4\n'


def _model(repository: Path, name: str, config: str | None, versions: tuple[str, ...] = ("1",)) -> Path:
    """A model folder with version folders holding model.py, and config.pbtxt unless config is None."""
    text = None if config is None else config.replace("{name}", name)
    return write_model(repository, name, text, "# model\n", "model.py", versions)


def test_repository_reports_every_model(tmp_path: Path) -> None:
    """A repository is judged model by model; problems name each model's own config file."""
    _model(tmp_path, "good", GOOD)
    _model(tmp_path, "bad", GOOD + "dynamic_batching { preferred_batch_size: [ 16 ] }\n")
    report = validate_path(tmp_path)
    assert report.models == ("bad", "good")
    (problem,) = report.problems
    assert problem.file == str(tmp_path / "bad" / "config.pbtxt")
    assert (problem.line, problem.column) == (4, 44)
    assert not report.ok


def test_model_folder_name_must_match(tmp_path: Path) -> None:
    """Triton refuses a model named differently from its folder; a config judged alone is not held to it."""
    folder = _model(tmp_path, "folder_name", 'name: "config_name"\nbackend: "python"\n')
    (problem,) = validate_path(folder).problems
    assert problem.message == (
        "unexpected directory name 'folder_name' for model 'config_name', directory name must "
        "equal model name"
    )
    assert (problem.line, problem.field) == (1, "name")
    assert validate_path(folder / "config.pbtxt").ok


def test_model_needs_a_version_folder(tmp_path: Path) -> None:
    """No numeric version folder (or none the version policy selects) means nothing to load."""
    folder = _model(tmp_path, "m", GOOD, versions=())
    assert validate_path(folder).errors[0].message == (
        "at least one version must be available under the version policy of model 'm'"
    )
    specific = _model(
        tmp_path, "s", GOOD + "version_policy { specific { versions: [ 3 ] } }\n", versions=("1", "2")
    )
    assert validate_path(specific).errors[0].field == "version_policy"


def test_backend_is_inferred_from_model_files(tmp_path: Path) -> None:
    """Without backend, Triton infers it from model.py; a config alone only gets a warning."""
    folder = _model(tmp_path, "m", 'name: "m"\n')
    assert validate_path(folder).problems == ()
    (problem,) = validate_path(folder / "config.pbtxt").problems
    assert problem.severity == "warning" and problem.field == "backend"


def test_backend_that_cannot_be_inferred_is_an_error(tmp_path: Path) -> None:
    """No backend, no platform, no recognisable model file: Triton's own error."""
    folder = tmp_path / "m"
    (folder / "1").mkdir(parents=True)
    (folder / "config.pbtxt").write_text('name: "m"\n', encoding="utf-8")
    assert (
        validate_path(folder)
        .errors[0]
        .message.startswith("Invalid model name: Could not determine backend for model 'm'")
    )


def test_folder_without_config_and_empty_repository_are_warnings(tmp_path: Path) -> None:
    """A model folder with no config.pbtxt, and a repository with no models, are reported but not errors."""
    _model(tmp_path, "noconfig", None)
    report = validate_path(tmp_path)
    assert report.ok and report.warnings[0].file == str(tmp_path / "noconfig")
    empty = tmp_path / "empty_repo"
    empty.mkdir()
    (empty / ".hidden").mkdir()
    assert "empty" in validate_path(empty).warnings[0].message


def test_syntax_error_has_file_line_and_column(tmp_path: Path) -> None:
    """A config protobuf cannot parse is one error positioned where text_format stopped."""
    folder = _model(tmp_path, "m", 'name: "m"\nbackend: "python"\nmax_batch_size: eight\n')
    (problem,) = validate_path(folder).problems
    assert (problem.file, problem.line, problem.column) == (str(folder / "config.pbtxt"), 3, 17)
    assert "max_batch_size" in problem.message
    assert str(problem).startswith(f"{folder / 'config.pbtxt'}:3:17: ")


def test_unknown_field_is_a_syntax_error() -> None:
    """A field model_config.proto does not have is rejected with its position."""
    (problem,) = validate_config_text('name: "m"\nbackend: "python"\n  max_batch: 4\n', "c.pbtxt").problems
    assert (problem.line, problem.column) == (3, 3)
    assert "max_batch" in problem.message


@pytest.mark.parametrize(("text", "meant"), [
    ('name: "m"\nmax_bach_size: 4\n', "max_batch_size"),
    ('name: "m"\ndynamic_batching { prefered_batch_size: [ 2 ] }\n', "preferred_batch_size"),
])
def test_an_unknown_field_names_the_one_it_resembles(text: str, meant: str) -> None:
    """One typo, one error: protobuf's refusal (in its words) plus the field of that message it resembles."""
    (problem,) = validate_config_text(text, "c.pbtxt").problems
    assert "has no field named" in problem.message and problem.message.endswith(f'Did you mean "{meant}"?')
    (far,) = validate_config_text('name: "m"\nzzz: 4\n', "c.pbtxt").problems
    assert "Did you mean" not in far.message


def test_missing_path_raises() -> None:
    """A path that does not exist is the caller's mistake, reported by exception."""
    with pytest.raises(GeConsoleError, match=r"^/nonexistent/repo: no such file or directory$") as refused:
        validate_path(Path("/nonexistent/repo"))
    assert isinstance(refused.value, OSError)  # a GeConsoleError that callers catching an OSError still get


def test_report_to_dict_is_json(tmp_path: Path) -> None:
    """to_dict is plain JSON with counts, ok, models and every problem."""
    _model(tmp_path, "m", 'name: "m"\nbackend: "python"\n\nmax_batch_size: -2\n')
    report = validate_path(tmp_path)
    data = json.loads(json.dumps(report.to_dict()))
    assert data["ok"] is False and data["errors"] == 1 and data["models"] == ["m"]
    assert data["problems"][0] == {
        "severity": "error",
        "file": str(tmp_path / "m" / "config.pbtxt"),
        "line": 4,
        "column": 1,
        "field": "max_batch_size",
        "message": "'max_batch_size' must be non-negative value for m",
    }


def test_report_is_immutable() -> None:
    """Reports are values the console can keep and compare."""
    report = validate_config_text(GOOD.format(name="m"), "m/config.pbtxt")
    assert isinstance(report, ValidationReport) and report.ok and report.problems == ()
    with pytest.raises(AttributeError):
        report.path = "x"  # type: ignore[misc]


def test_ensemble_over_a_model_without_declared_io(tmp_path: Path) -> None:
    """An npu_ge model may leave its inputs to the ONNX: the glue's auto_complete_config reads them (as at
    load), so the ensemble mapping onto them is judged and passes; a missing composing model is refused."""
    npu = tmp_path / "npu"
    write_one_node(npu / "1" / "model.onnx")
    (npu / "config.pbtxt").write_text('name: "npu"\nbackend: "npu_ge"\nmax_batch_size: 8\n'
                                    'parameters { key: "device_ids" value { string_value: "0" } }\n',
                                    encoding="utf-8")
    step = (
        'step [ { model_name: "%s" model_version: -1 input_map { key: "x" value: "A" }\n'
        'output_map { key: "y" value: "B" } } ]'
    )
    ensemble = (
        'name: "{name}"\nplatform: "ensemble"\nmax_batch_size: 8\n'
        'input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        'output [ { name: "B" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
    )
    _model(tmp_path, "e", ensemble + "ensemble_scheduling { " + step % "npu" + " }\n", versions=("1",))
    _model(tmp_path, "e_gone", ensemble + "ensemble_scheduling { " + step % "gone" + " }\n", versions=("1",))
    report = validate_path(tmp_path)
    assert [(p.file, p.line, p.message) for p in report.problems] == [
        (str(tmp_path / "e_gone" / "config.pbtxt"), 6,
         "ensemble e_gone contains models that are not available or ambiguous: gone"),
    ]  # fmt: skip


def test_inputs_whose_json_numbers_triton_would_wrap_are_named(tmp_path: Path) -> None:
    """Over HTTP JSON Triton casts each number to the input's declared type unchecked (its
    src/http_server.cc, ReadDataFromJsonHelper): validate says so at each narrower-than-64-bit integer
    input, and only there (INT64, UINT64 and floats arrive as sent or are refused)."""
    inputs = ", ".join(f'{{ name: "{kind.lower()}" data_type: TYPE_{kind} dims: [ 1 ] }}'
                       for kind in ("INT32", "INT64", "UINT8", "FP32", "INT8", "UINT64", "BOOL"))
    output = 'output [ { name: "y" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'  # Triton writes it as sent
    _model(tmp_path, "m", GOOD + f"input [ {inputs} ]\n" + output)
    report = validate_path(tmp_path)
    wrapped = [(p.severity, p.line, p.field, p.message) for p in report.problems
               if "JSON" in p.message]
    said = ("over HTTP/REST JSON Triton reads each number as {read} and casts it to {kind} unchecked "
            "(its src/http_server.cc, ReadDataFromJsonHelper): a number {outside} arrives wrapped "
            "({example} as 5). Send it as binary data or over gRPC, or export the model with an INT64 input "
            "(the declared type must be the model's)")
    signed = "a 64-bit integer"
    assert wrapped == [
        ("warning", 4, "input[0].data_type", said.format(
            read=signed, kind="TYPE_INT32", outside=f"outside {-(2**31)}..{2**31 - 1}", example=2**32 + 5)),
        ("warning", 4, "input[2].data_type", said.format(
            read="an unsigned 64-bit integer (a negative one is refused)", kind="TYPE_UINT8",
            outside="above 255", example=261)),
        ("warning", 4, "input[4].data_type", said.format(
            read=signed, kind="TYPE_INT8", outside="outside -128..127", example=261)),
    ]
    assert report.ok
