"""model_warmup and sequence_batching.state: Triton's load-time errors in its words, at the right line, and
warnings (ours) for what Triton 2.51 loads but cannot work."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.models import write_model
from triton_ge_console.repository.validate import Problem, validate_config_text, validate_path, written_path

HEAD = 'name: "m"\nbackend: "python"\n'
IO = (
    'input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
    'output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
)
REQUEST = "[request id: <id_unknown>] "
NOTE = (
    "NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to be prepended "
    "to each input shape. If you want to specify the full shape including the batch dim in your input dims "
    "config, try setting max_batch_size to zero. See the model configuration docs for more info on "
    "max_batch_size."
)


def _warmup(
    value: str, key: str = "IN", sample: str = 'name: "w"\n    batch_size: 1', mbs: int = 4, io: str = IO
) -> str:
    """A config whose one warm-up sample (line 7) has one input (line 10), its value block on line 12 and
    the value's fields from line 13."""
    return (
        f"{HEAD}max_batch_size: {mbs}\n{io}model_warmup [\n  {{\n    {sample}\n    inputs {{\n"
        f'      key: "{key}"\n      value {{\n        {value}\n      }}\n    }}\n  }}\n]\n'
    )


def _state(state: str, initial: str | None = None, mbs: int = 4) -> str:
    """A config with one state (line 8); its initial_state, if any, on line 9, fields on line 10."""
    init = f"      initial_state {{\n        {initial}\n      }}\n" if initial is not None else ""
    body = f"sequence_batching {{\n  state [\n    {{ {state}\n{init}    }}\n  ]\n}}\n"
    return f"{HEAD}max_batch_size: {mbs}\n{IO}{body}"


STATE = 'input_name: "S_IN" output_name: "S_OUT" data_type: TYPE_FP32 dims: [ 4 ]'
FP32_4 = "data_type: TYPE_FP32 dims: [ 4 ]"

# (id, config text, line, field, Triton's message)
ERRORS = [
    (
        "warmup_wildcard",
        _warmup("data_type: TYPE_FP32\n        dims: [ -1 ]\n        zero_data: true"),
        14,
        'model_warmup[0].inputs["IN"].dims',
        "warmup setting expects all variable-size dimensions are specified for input 'IN'",
    ),
    (
        "warmup_no_data",
        _warmup(FP32_4),
        10,
        'model_warmup[0].inputs["IN"]',
        f"{REQUEST}warmup setting expects input 'IN' to have input_data_type set",
    ),
    (
        "warmup_missing_input",
        _warmup(f"{FP32_4} zero_data: true", key="NOPE"),
        10,
        "model_warmup[0].inputs",
        f"{REQUEST}expected 1 inputs but got 0 inputs for model 'm'. Got input(s) [], but missing required "
        "input(s) ['IN']. Please provide all required input(s).",
    ),
    (
        "warmup_missing_with_optional",
        _warmup(
            f"{FP32_4} zero_data: true",
            key="C",
            io='input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "B" data_type: TYPE_FP32 '
            'dims: [ 4 ] }, { name: "C" data_type: TYPE_FP32 dims: [ 4 ] optional: true } ]\n'
            + IO.split("\n")[1]
            + "\n",
        ),
        10,
        "model_warmup[0].inputs",
        f"{REQUEST}expected number of inputs between 2 and 3 but got 1 inputs for model 'm'. Got input(s) "
        "['C'], but missing required input(s) ['A','B']. Please provide all required input(s).",
    ),
    (
        "warmup_no_type",
        _warmup("dims: [ 4 ]\n        zero_data: true"),
        12,
        'model_warmup[0].inputs["IN"].data_type',
        f"{REQUEST}inference input 'IN' data-type is '<invalid>', but model 'm' expects 'FP32'",
    ),
    (
        "warmup_type",
        _warmup("data_type: TYPE_STRING\n        dims: [ 4 ] random_data: true"),
        13,
        'model_warmup[0].inputs["IN"].data_type',
        f"{REQUEST}inference input 'IN' data-type is 'BYTES', but model 'm' expects 'FP32'",
    ),
    (
        "warmup_shape_batching",
        _warmup("data_type: TYPE_FP32\n        dims: [ 1, 4 ] zero_data: true"),
        14,
        'model_warmup[0].inputs["IN"].dims',
        f"{REQUEST}unexpected shape for input 'IN' for model 'm'. Expected [-1,4], got [1,1,4]. {NOTE}",
    ),
    (
        "warmup_shape_not_batching",
        _warmup("data_type: TYPE_FP32\n        dims: [ 3 ] zero_data: true", mbs=0),
        14,
        'model_warmup[0].inputs["IN"].dims',
        f"{REQUEST}unexpected shape for input 'IN' for model 'm'. Expected [4], got [3]. ",
    ),
    (
        "warmup_no_dims",
        _warmup("data_type: TYPE_FP32 zero_data: true"),
        12,
        'model_warmup[0].inputs["IN"].dims',
        f"{REQUEST}unexpected shape for input 'IN' for model 'm'. Expected [-1,4], got [1]. {NOTE}",
    ),
    (
        "warmup_batch_over_max",
        _warmup(f"{FP32_4} zero_data: true", sample='name: "w"\n    batch_size: 8'),
        9,
        "model_warmup[0].batch_size",
        "warm-up batch_size 8 is more than the 4 request(s) a batch may hold (max_batch_size 4): Triton runs "
        "the sample's requests as one batch and the backend refuses it (Triton 2.51: \"failed to run warmup "
        "sample 'w': batch size 8 for '<instance>', max allowed is 4\"), so the model does not load; Triton "
        "2.51's Python backend may crash the server instead",
    ),
    (
        "state_two_initial",
        _state(
            STATE,
            f'name: "a" {FP32_4} zero_data: true }}\n      initial_state {{ name: "b" {FP32_4} '
            "zero_data: true",
        ),
        11,
        "sequence_batching.state[0].initial_state[1]",
        "initial_state field for state input 'S_IN' must contain exactly one or zero element. "
        "Found '2' elements.",
    ),
    (
        "state_initial_type",
        _state(STATE, 'name: "i"\n        data_type: TYPE_INT32 dims: [ 4 ] zero_data: true'),
        11,
        "sequence_batching.state[0].initial_state[0].data_type",
        "The data type used for 'initial_state' field of state 'S_IN' does not match the state data type.",
    ),
    (
        "state_initial_name",
        _state(STATE, f"{FP32_4} zero_data: true"),
        9,
        "sequence_batching.state[0].initial_state[0]",
        "Field 'name' must be set when using initial_state for state input 'S_IN'.",
    ),
    (
        "state_initial_rank",
        _state(STATE, 'name: "i" data_type: TYPE_FP32\n        dims: [ 2, 2 ] zero_data: true'),
        11,
        "sequence_batching.state[0].initial_state[0].dims",
        "Number of dimensions in 'initial_state' doesn't match the size of 'state' dimensions for state "
        "input 'S_IN'. 2 != 1",
    ),
    (
        "state_initial_wildcard",
        _state(
            STATE.replace("[ 4 ]", "[ -1 ]"),
            'name: "i" data_type: TYPE_FP32\n        dims: [ -1 ] zero_data: true',
        ),
        11,
        "sequence_batching.state[0].initial_state[0].dims[0]",
        "'initial_state' field for state input name 'S_IN' contains variable dimensions.",
    ),
    (
        "state_initial_dim",
        _state(STATE, 'name: "i" data_type: TYPE_FP32\n        dims: [ 3 ] zero_data: true'),
        11,
        "sequence_batching.state[0].initial_state[0].dims[0]",
        "'initial_state' dim for input name 'S_IN' doesn't match 'state' dim description. 3 != 4",
    ),
    (
        "state_initial_no_data",
        _state(STATE, f'name: "i" {FP32_4}'),
        9,
        "sequence_batching.state[0].initial_state[0]",
        "initial_state setting expects state'S_IN' to have state_data set",
    ),
    (
        "state_input_twice",
        f"{HEAD}max_batch_size: 4\n{IO}sequence_batching {{ state [\n"
        f'  {{ {STATE} initial_state {{ name: "a" {FP32_4} zero_data: true }} }},\n'
        f'  {{ {STATE.replace("S_OUT", "S_OUT2")} initial_state {{ name: "b" {FP32_4} zero_data: true }} }}\n'
        "] }\n",
        8,
        "sequence_batching.state[1].input_name",
        "State input name 'S_IN' specified more than once.",
    ),
]


def _problems(text: str) -> list[Problem]:
    """Problems validating text as a config alone."""
    return list(validate_config_text(text, "repo/m/config.pbtxt").problems)


@pytest.mark.parametrize(
    ("text", "line", "field", "message"), [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS]
)
def test_rule_rejects_with_tritons_wording(text: str, line: int, field: str, message: str) -> None:
    """Triton's message, the line and the field path where the mistake is written; the only error."""
    errors = [p for p in _problems(text) if p.severity == "error"]
    assert [(p.message, p.field, p.line) for p in errors] == [(message, field, line)]


# (id, config text, field, start of our warning): Triton 2.51 loads these
WARNINGS = [
    (
        "warmup_unnamed",
        _warmup(f"{FP32_4} zero_data: true", sample="batch_size: 1"),
        "model_warmup[0]",
        "warm-up sample has no 'name'",
    ),
    (
        "warmup_batch_zero",
        _warmup(f"{FP32_4} zero_data: true", sample='name: "w"'),
        "model_warmup[0].batch_size",
        "warm-up sample has batch_size 0 (the default): Triton skips it",
    ),
    (
        "state_no_input_name",
        _state(STATE.replace('input_name: "S_IN" ', "")),
        "sequence_batching.state[0].input_name",
        "state must specify 'input_name'",
    ),
    (
        "state_no_output_name",
        _state(STATE.replace('output_name: "S_OUT" ', "")),
        "sequence_batching.state[0].output_name",
        "state must specify 'output_name'",
    ),
    (
        "state_no_type",
        _state(STATE.replace("data_type: TYPE_FP32 ", "")),
        "sequence_batching.state[0].data_type",
        "state 'S_IN' must specify 'data_type'",
    ),
    (
        "state_no_dims",
        _state(STATE.replace(" dims: [ 4 ]", "")),
        "sequence_batching.state[0].dims",
        "state 'S_IN' must specify 'dims'",
    ),
    (
        "state_zero_dim",
        _state(STATE.replace("[ 4 ]", "[ 2, 0 ]")),
        "sequence_batching.state[0].dims[1]",
        "state 'S_IN' dimension must be integer >= 1, or -1",
    ),
    (
        "state_input_is_model_input",
        _state(STATE.replace("S_IN", "IN")),
        "sequence_batching.state[0].input_name",
        "state input_name 'IN' is also a model input",
    ),
    (
        "state_output_is_model_output",
        _state(STATE.replace("S_OUT", "OUT")),
        "sequence_batching.state[0].output_name",
        "state output_name 'OUT' is also a model output",
    ),
    (
        "state_output_twice",
        _state(f"{STATE} }},\n    {{ {STATE.replace('S_IN', 'S_IN2')}"),
        "sequence_batching.state[1].output_name",
        "state output_name 'S_OUT' is used by more than one state",
    ),
]


@pytest.mark.parametrize(("text", "field", "start"), [w[1:] for w in WARNINGS], ids=[w[0] for w in WARNINGS])
def test_what_triton_loads_but_cannot_work_is_a_warning(text: str, field: str, start: str) -> None:
    """No error (Triton loads it), one warning that says Triton loads it or skips it, at its field."""
    problems = _problems(text)
    assert [(p.severity, p.field) for p in problems] == [("warning", field)]
    assert problems[0].message.startswith(start)
    assert "Triton" in problems[0].message and problems[0].line is not None


def test_valid_warmup_and_state_pass() -> None:
    """Fixed dims filling wildcards, control and state inputs in warm-up, a -1 state dim, batch at the max."""
    control = (
        'control_input [ { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] '
        "} ] } ]\n"
    )
    good = [
        _warmup(f"{FP32_4} random_data: true", sample='name: "w" batch_size: 4'),
        _warmup(f"{FP32_4} zero_data: true", sample='name: "w" batch_size: 1', mbs=0),
        _warmup(
            "data_type: TYPE_FP32 dims: [ 3, 4 ] zero_data: true",
            io='input [ { name: "IN" data_type: TYPE_FP32 dims: [ -1, 4 ] } ]\n',
        ),
        HEAD
        + "max_batch_size: 2\n"
        + IO
        + "sequence_batching {\n"
        + control
        + f'state [ {{ {STATE.replace("[ 4 ]", "[ -1, 4 ]")} initial_state {{ name: "i" data_type: TYPE_FP32 '
        "dims: [ 2, 4 ] zero_data: true } } ] }\n"
        'model_warmup [ { name: "w" batch_size: 2 inputs [ { key: "IN" value { data_type: TYPE_FP32 '
        'dims: [ 4 ] zero_data: true } }, { key: "START" value { data_type: TYPE_INT32 dims: [ 1 ] '
        "zero_data: true } }, "
        '{ key: "S_IN" value { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } ] } ]\n',
        _warmup(f"{FP32_4} zero_data: true", io=""),  # IO from the model file: not compared
    ]
    for text in good:
        assert _problems(text) == [], text


def test_all_warmup_errors_are_reported_at_once() -> None:
    """Triton stops at the first; the validator lists every one, warm-up before state (Triton's order)."""
    text = _warmup("data_type: TYPE_INT32 dims: [ -1 ]", sample='name: "w" batch_size: 9').replace(
        "model_warmup",
        f"sequence_batching {{ state [ {{ {STATE} initial_state {{ {FP32_4} }} }} ] }}\nmodel_warmup",
    )
    fields = [p.field for p in _problems(text) if p.severity == "error"]
    assert fields == [
        'model_warmup[0].inputs["IN"].dims',
        'model_warmup[0].inputs["IN"]',
        'model_warmup[0].inputs["IN"].data_type',
        "model_warmup[0].batch_size",
        "sequence_batching.state[0].initial_state[0]",
        "sequence_batching.state[0].initial_state[0]",
    ]


def test_ensemble_warmup_is_left_to_the_ensemble_rule() -> None:
    """An ensemble's model_warmup is refused outright; its samples are not judged as requests."""
    text = (
        'name: "m"\nplatform: "ensemble"\nmax_batch_size: 4\n'
        'input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        'output [ { name: "B" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        'ensemble_scheduling { step [ { model_name: "x" input_map { key: "i" value: "A" } '
        'output_map { key: "o" value: "B" } } ] }\n'
        'model_warmup [ { batch_size: 9 inputs { key: "A" value { dims: [ -1 ] } } } ]\n'
    )
    assert [p.message for p in _problems(text)] == ["model_warmup can not be specified for ensemble 'm'"]


def _model_folder(tmp_path: Path, config: str, files: dict[str, bytes]) -> Path:
    """A model folder m with version 1 (model.py), the config and data files."""
    return write_model(tmp_path, "m", config, "", "model.py", files=files)


FILE_CASES = [
    (
        "warmup_missing",
        _warmup('data_type: TYPE_FP32 dims: [ 4 ]\n        input_data_file: "in.bin"'),
        {},
        14,
        'model_warmup[0].inputs["IN"].input_data_file',
        "failed to open text file for read {folder}/warmup/in.bin: No such file or directory",
    ),
    (
        "warmup_short",
        _warmup('data_type: TYPE_FP32 dims: [ 4 ]\n        input_data_file: "in.bin"'),
        {"warmup/in.bin": b"1234"},
        14,
        'model_warmup[0].inputs["IN"].input_data_file',
        f"{REQUEST}warmup setting expects 16 bytes, but the data provided from in.binonly has 4 bytes",
    ),
    (
        "state_missing",
        _state(STATE, f'name: "i" {FP32_4}\n        data_file: "s.bin"'),
        {},
        11,
        "sequence_batching.state[0].initial_state[0].data_file",
        "failed to open text file for read {folder}/initial_state/s.bin: No such file or directory",
    ),
    (
        "state_short",
        _state(STATE, f'name: "i" {FP32_4}\n        data_file: "s.bin"'),
        {"initial_state/s.bin": b"12"},
        11,
        "sequence_batching.state[0].initial_state[0].data_file",
        "initial_state setting expects 16 bytes, but the data provided from s.binonly has 2 bytes.",
    ),
]


@pytest.mark.parametrize(
    ("config", "files", "line", "field", "message"),
    [c[1:] for c in FILE_CASES],
    ids=[c[0] for c in FILE_CASES],
)
def test_data_files_are_checked_in_the_model_folder(
    tmp_path: Path, config: str, files: dict[str, bytes], line: int, field: str, message: str
) -> None:
    """Judging the model folder, a missing or short data file is Triton's error, with the path it reads."""
    folder = _model_folder(tmp_path, config, files)
    errors = validate_path(folder).errors
    assert [(p.message, p.field, p.line) for p in errors] == [(message.format(folder=folder), field, line)]


def test_data_files_enough_bytes_strings_and_config_alone_pass(tmp_path: Path) -> None:
    """A file with enough bytes passes; string data has no fixed size; a config alone cannot see files."""
    config = _warmup('data_type: TYPE_FP32 dims: [ 4 ]\n        input_data_file: "in.bin"')
    assert validate_path(_model_folder(tmp_path / "a", config, {"warmup/in.bin": bytes(20)})).problems == ()
    text = _warmup(
        'data_type: TYPE_STRING dims: [ 4 ] input_data_file: "s.txt"', io=IO.replace("FP32", "STRING", 1)
    )
    assert validate_path(_model_folder(tmp_path / "b", text, {"warmup/s.txt": b""})).problems == ()
    assert _problems(config) == []
    skipped = _warmup('data_type: TYPE_FP32 dims: [ 4 ] input_data_file: "gone"', sample='name: "w"')
    folder = _model_folder(tmp_path / "c", skipped, {})
    assert [p.severity for p in validate_path(folder).problems] == ["warning"]  # batch_size 0: never read


def test_written_path_puts_map_message_fields_under_value() -> None:
    """Map entries of messages hold their fields under `value`; scalar maps, lists and paths that already say
    `value` are left as they are."""
    assert written_path('model_warmup[0].inputs["IN"].dims') == 'model_warmup[0].inputs["IN"].value.dims'
    assert written_path('model_warmup[0].inputs["IN"]') == 'model_warmup[0].inputs["IN"]'
    assert written_path('parameters["a.b"].value.string_value') == 'parameters["a.b"].value.string_value'
    assert written_path('input["IN"].dims[0]') == 'input["IN"].dims[0]'
    assert (
        written_path('ensemble_scheduling.step[1].output_map["o"]')
        == 'ensemble_scheduling.step[1].output_map["o"]'
    )
    assert (
        written_path('dynamic_batching.priority_queue_policy["2"].timeout_action')
        == 'dynamic_batching.priority_queue_policy["2"].value.timeout_action'
    )
