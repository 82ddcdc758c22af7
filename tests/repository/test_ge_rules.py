"""Checks for the GE backends: parameters, batching mode, device ids, and each version's model files."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.models import write_model, write_one_node
from triton_ge_console.repository.validate import Problem, validate_config_text, validate_path

NOT_ONNX = "not an ONNX model (DecodeError: Error parsing message with type 'onnx.ModelProto')"
GE_HEAD = 'name: "m"\nbackend: "ge"\nmax_batch_size: 8\n'
NPU_GE_HEAD = 'name: "m"\nbackend: "npu_ge"\nparameters { key: "device_ids" value: { string_value: "0" } }\n'


def _param(key: str, value: str) -> str:
    """One parameters entry in text form."""
    return f'parameters {{ key: "{key}" value: {{ string_value: "{value}" }} }}\n'


def _problems(text: str) -> list[Problem]:
    """Problems of text judged as a config alone."""
    return list(validate_config_text(text, "repo/m/config.pbtxt").problems)


def _model(tmp_path: Path, config: str, files: dict[str, str] | None = None, name: str = "m") -> Path:
    """A model folder with config.pbtxt and the given files (relative paths → content), no version folder."""
    return write_model(tmp_path, name, config, versions=(), files=files)


def test_static_model_with_dynamic_batching_is_an_error() -> None:
    """npu_ge's static graph (static_model 1) needs fixed shapes; the dynamic batcher makes them vary."""
    text = NPU_GE_HEAD + "dynamic_batching { }\n" + _param("static_model", "1")
    (problem,) = _problems(text)
    assert (problem.severity, problem.line, problem.field) == (
        "error",
        5,
        'parameters["static_model"].value.string_value',
    )
    assert "exclude each other" in problem.message


def test_static_model_off_with_dynamic_batching_is_fine() -> None:
    """static_model "0" (as in CANN's cnclip_full example) leaves dynamic batching allowed."""
    assert _problems(NPU_GE_HEAD + "dynamic_batching { }\n" + _param("static_model", "0")) == []


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "device_ids",
            "4,x",
            'device_ids \'4,x\' must be comma-separated non-negative integers, e.g. "0" or "4,5"',
        ),
        (
            "DEVICEIDS",
            "-1",
            'DEVICEIDS \'-1\' must be comma-separated non-negative integers, e.g. "0" or "4,5"',
        ),
        ("ort_spinning", "spin", "failed to convert ort_spinning 'spin' to boolean value"),
        ("execution_mode", "gpu", "execution_mode 'gpu' must be one of auto, npu, cpu"),
        ("intra_op_threads", "many", "intra_op_threads 'many' must be a non-negative integer"),
    ],
)
def test_bad_parameter_values(key: str, value: str, message: str) -> None:
    """Each GE parameter's value is checked, the error placed on the value's line."""
    (problem,) = _problems(GE_HEAD + "\n" + _param(key, value))
    assert (problem.severity, problem.message, problem.line) == ("error", message, 5)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("static_model", "true", "npu_ge reads static_model as an integer (std::stoi): 'true' fails the "
                                 "model's load; use 1 or 0"),
        ("device_exec_blocks", "two", "npu_ge reads device_exec_blocks as an integer (std::stoi): 'two' "
                                      "fails the model's load"),
        ("instance_exec_blocks", "", "npu_ge reads instance_exec_blocks as an integer (std::stoi): '' "
                                     "fails the model's load"),
    ],
)
def test_npu_ge_integers_are_read_as_std_stoi_does(key: str, value: str, message: str) -> None:
    """npu_ge's ParseModelParametersConfig reads these with std::stoi: text that is not an integer (even
    an empty value) throws and fails the load (hicann/triton-inference-server-ge-backend
    src/model_state.cpp)."""
    (problem,) = _problems(NPU_GE_HEAD + _param(key, value))
    assert (problem.severity, problem.message, problem.line) == ("error", message, 4)
    assert _problems(NPU_GE_HEAD + _param(key, " 2")) == []  # leading blanks are fine for stoi


def test_npu_ge_switches_turn_on_for_one_value_only() -> None:
    """dump_graph and dump_data switch on only for "1", profiling for "dynamic" or "true": anything else
    leaves them off, which is worth a warning."""
    (dump,) = _problems(NPU_GE_HEAD + _param("dump_graph", "true"))
    assert (dump.severity, dump.message) == ("warning", "npu_ge turns dump_graph on only for '1': 'true' "
                                                        "leaves it off")
    (profiling,) = _problems(NPU_GE_HEAD + _param("profiling", "on"))
    assert "only for 'dynamic' or 'true'" in profiling.message
    assert _problems(NPU_GE_HEAD + _param("dump_data", "1") + _param("profiling", "dynamic")) == []


def test_good_device_ids_in_both_spellings_for_ge() -> None:
    """The glue reads device_ids and DEVICEIDS; lists and single ids pass."""
    assert _problems(GE_HEAD + _param("device_ids", "4, 5,6")) == []
    assert _problems(GE_HEAD + _param("DEVICEIDS", "4")) == []


def test_npu_ge_reads_device_ids_only_and_without_them_uses_every_npu() -> None:
    """npu_ge never reads DEVICEIDS (only its first examples spelt it so) and, with no device_ids, sets up
    every NPU of the host (ModelInstanceState::InitDevices): both said as warnings."""
    problems = _problems('name: "m"\nbackend: "npu_ge"\n' + _param("DEVICEIDS", "4"))
    assert [p.severity for p in problems] == ["warning", "warning"]
    assert problems[0].message.startswith("npu_ge reads device_ids, never DEVICEIDS")
    assert "full copy of the model on every NPU of the host" in problems[1].message


def test_device_ids_and_deviceids_disagreeing_is_a_warning() -> None:
    """Both spellings with different lists: one of them is a mistake."""
    (problem,) = _problems(GE_HEAD + _param("device_ids", "0") + _param("DEVICEIDS", "1"))
    assert problem.severity == "warning"
    assert "disagree" in problem.message


def test_unknown_parameter_is_a_warning_with_did_you_mean() -> None:
    """A misspelt key is ignored by the backend: say so, and suggest the known one."""
    (problem,) = _problems(GE_HEAD + "\n\n" + _param("devices_ids", "0"))
    assert (problem.severity, problem.line, problem.field) == ("warning", 6, 'parameters["devices_ids"]')
    assert (
        problem.message
        == "unknown parameter 'devices_ids' for backend 'ge' (did you mean 'device_ids'?); it is ignored"
    )


def test_known_parameters_pass() -> None:
    """The glue's keys raise nothing on ge, npu_ge's raise nothing on npu_ge."""
    assert _problems(GE_HEAD + _param("inter_op_threads", "2") + _param("execution_mode", "CPU")
                     + _param("ort_spinning", "true") + _param("om_model_path", "model.om")) == []
    assert _problems(NPU_GE_HEAD + _param("device_exec_blocks", "2") + _param("instance_exec_blocks", "1")
                     + _param("static_model", "0") + _param("profiling", "dynamic")
                     + _param("dump_graph", "1") + _param("execution_mode", "cpu")) == []


@pytest.mark.parametrize("head", [GE_HEAD, NPU_GE_HEAD])
def test_ge_star_options_as_model_parameters_are_warned_with_where_they_belong(head: str) -> None:
    """npu_ge reads ge.* (GEInitialize's options) only from --backend-config (ModelState::ParseCmdlineConfig);
    as a model parameter no backend reads it."""
    (problem,) = _problems(head + _param("ge.aicoreNum", "x"))
    assert problem.severity == "warning" and problem.field == 'parameters["ge.aicoreNum"]'
    assert "only from --backend-config=npu_ge,ge.aicoreNum=<value>" in problem.message


def test_npu_ge_reads_session_and_graph_options_as_model_parameters() -> None:
    """npu_ge hands every model parameter to ModelState::SetOptions (ModelState::Create): session.* goes to
    each GE session, graph.* to Session::AddGraph, the prefix stripped (its own tuning guide sets
    graph.ge.inputShape so); on the glue, which runs a compiled OM, they are warned."""
    options = _param("session.ge.exec.precision_mode_v2", "fp16") + _param("graph.ge.inputShape", "x:-1,3")
    assert _problems(NPU_GE_HEAD + options) == []
    problems = _problems(GE_HEAD + options)
    assert [p.severity for p in problems] == ["warning", "warning"]
    assert all("read only by npu_ge" in p.message for p in problems)


def test_npu_ge_keys_on_ge_and_tensor_parallel_on_npu_ge() -> None:
    """npu_ge's keys do nothing on the glue (a warning); tensor_parallel on npu_ge is refused: npu_ge
    replicates a model on every NPU, no part of CANN splits one."""
    (static,) = _problems(GE_HEAD + _param("static_model", "1"))
    assert static.severity == "warning" and "read only by npu_ge" in static.message
    (parallel,) = _problems(NPU_GE_HEAD.replace('"0"', '"0,1"') + _param("tensor_parallel", "2"))
    assert parallel.severity == "error"
    assert "full copy of the model on every NPU of device_ids" in parallel.message


def test_other_backends_parameters_are_not_judged() -> None:
    """Parameters of non-GE backends belong to those backends."""
    assert _problems('name: "m"\nbackend: "python"\n' + _param("whatever", "x")) == []


def test_kind_gpu_is_an_error_for_ge_backends() -> None:
    """GE backends run on NPUs (or CPU emulation); a GPU instance group can never load."""
    problems = _problems(GE_HEAD + "instance_group [ { kind: KIND_GPU } ]\n")
    assert [p.severity for p in problems] == ["warning", "error"]
    assert problems[1].field == "instance_group[0].kind" and problems[1].line == 4
    assert "not GPUs" in problems[1].message


def test_ge_with_om_file_is_valid(tmp_path: Path) -> None:
    """om_model_path relative to the version folder (as the glue resolves it) that exists; batched with no
    ONNX beside it, the one thing said is that batching was not checked (test_batching_rules)."""
    folder = _model(tmp_path, GE_HEAD + _param("om_model_path", "llama.om"), {"1/llama.om": "om"})
    problems = validate_path(folder).problems
    said = [(p.severity, p.message.split(": whether")[0]) for p in problems]
    assert said == [("warning", "max_batch_size 8")]


def test_ge_with_onnx_only_runs_in_cpu_emulation(tmp_path: Path) -> None:
    """No OM at all, but an ONNX in the version folder: valid."""
    folder = _model(tmp_path, GE_HEAD)
    write_one_node(folder / "1" / "model.onnx")  # the glue's auto-complete reads its inputs and outputs
    assert validate_path(folder).problems == ()


def test_ge_with_missing_om_but_onnx_is_a_warning(tmp_path: Path) -> None:
    """An OM path that is not here (e.g. the article's NPU host path) falls back to CPU emulation."""
    folder = _model(tmp_path, GE_HEAD + _param("om_model_path", "/models/llama.om"))
    write_one_node(folder / "1" / "model.onnx")
    (problem,) = validate_path(folder).problems
    assert (problem.severity, problem.line, problem.file) == ("warning", 4, str(folder / "config.pbtxt"))
    assert "CPU emulation" in problem.message


def test_ge_without_om_or_onnx_is_an_error(tmp_path: Path) -> None:
    """Nothing to run: neither the OM nor an ONNX for CPU emulation."""
    folder = _model(tmp_path, GE_HEAD + _param("om_model_path", "missing.om"), {"1/README": "x"})
    (problem,) = validate_path(folder).errors
    assert problem.line == 4
    assert problem.message == (
        "backend 'ge' needs an .om or an ONNX to run: om_model_path 'missing.om' is not a "
        "file, and version folder 1 has no *.onnx (nor onnx_model_path) for CPU emulation"
    )


def test_ge_onnx_model_path_must_exist(tmp_path: Path) -> None:
    """onnx_model_path names a file that is not there."""
    folder = _model(tmp_path, GE_HEAD + _param("onnx_model_path", "gone.onnx"), {"1/model.onnx": "x"})
    (problem,) = validate_path(folder).errors
    assert problem.message.startswith("onnx_model_path 'gone.onnx' is not a file")


def test_ge_execution_mode_npu_needs_the_om(tmp_path: Path) -> None:
    """Forcing the NPU without an OM is an error even when an ONNX is there."""
    config = GE_HEAD + _param("om_model_path", "x.om") + _param("execution_mode", "npu")
    folder = _model(tmp_path, config)
    write_one_node(folder / "1" / "model.onnx")
    (problem,) = validate_path(folder).errors
    assert problem.message == "execution_mode npu: om_model_path 'x.om' is not a file"


def test_npu_ge_needs_onnx_or_pb_in_each_version(tmp_path: Path) -> None:
    """CANN's npu_ge compiles what it finds in each version folder; an empty one cannot load."""
    config = NPU_GE_HEAD + "version_policy { all { } }\n"
    folder = _model(tmp_path, config, {"1/model.onnx": "x", "2/graph.pb": "x", "3/notes.txt": "x"})
    report = validate_path(folder)
    (problem,) = report.errors
    assert problem.message == "backend 'npu_ge' needs a *.onnx or *.pb model in version folder 3; found none"
    assert problem.line == 2
    (pb_only,) = report.warnings
    assert pb_only.message.startswith("version folder 2 has only a TensorFlow *.pb")


def test_file_checks_are_skipped_for_a_config_alone(tmp_path: Path) -> None:
    """Judging only config.pbtxt cannot see the model files, so it does not ask for them."""
    folder = _model(tmp_path, NPU_GE_HEAD, {"1/notes.txt": "x"})
    assert validate_path(folder / "config.pbtxt").problems == ()
    assert not validate_path(folder).ok


@pytest.mark.parametrize(
    ("io", "field", "message"),
    [
        ('input [ { name: "pixels" data_type: TYPE_FP32 dims: [ 4 ] } ]', "input[0].name",
         "input 'pixels': {onnx} has no input of that name (it has: x)"),
        ('input [ { name: "x" data_type: TYPE_INT64 dims: [ 4 ] } ]', "input[0].data_type",
         "input 'x' is TYPE_INT64 here but TYPE_FP32 in {onnx}"),
        ('output [ { name: "y" data_type: TYPE_FP32 dims: [ 8, 4 ] } ]', "output[0].dims",
         "output 'y' dims [8, 4] do not match [4] in {onnx} "
         "(max_batch_size 8: the batch axis is not listed)"),
    ],
)  # fmt: skip
def test_declared_io_must_match_the_onnx(tmp_path: Path, io: str, field: str, message: str) -> None:
    """Names, types and dims a GE config declares are the ONNX graph's (batch axis dropped when batching)."""
    folder = _model(tmp_path, GE_HEAD + io + "\n")
    write_one_node(folder / "1" / "model.onnx")
    (problem,) = validate_path(folder).problems
    assert (problem.field, problem.line) == (field, 4)
    assert problem.message == message.format(onnx=folder / "1" / "model.onnx")


def test_unreadable_onnx_is_an_error(tmp_path: Path) -> None:
    """A *.onnx that is not an ONNX model cannot be served."""
    folder = _model(tmp_path, GE_HEAD + 'input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]\n',
                    {"1/model.onnx": "not a model"})  # fmt: skip
    glue, problem = validate_path(folder).errors  # the glue's auto-complete (outputs left out) fails first
    assert glue.message.startswith("OnnxReadError: ") and glue.message.endswith(NOT_ONNX)
    assert "not an ONNX model" in problem.message or "cannot read ONNX" in problem.message


def test_glue_auto_complete_runs_as_in_triton(tmp_path: Path) -> None:
    """A `ge` config without inputs and outputs is completed by the glue's own auto_complete_config (run
    offline as Triton's stub runs it); an unreadable ONNX is the glue's own refusal at load."""
    (tmp_path / "good").mkdir()
    folder = _model(tmp_path / "good", GE_HEAD + "dynamic_batching { }\n")
    write_one_node(folder / "1" / "model.onnx")
    assert validate_path(folder).problems == ()
    (tmp_path / "broken").mkdir()
    broken = _model(tmp_path / "broken", GE_HEAD, {"1/model.onnx": "not a model"})
    (problem,) = validate_path(broken).errors
    assert problem.field == "backend"
    assert problem.message == f"OnnxReadError: {broken / '1' / 'model.onnx'}: {NOT_ONNX}"


def test_npu_ge_naming_an_npu_twice_is_an_error() -> None:
    """npu_ge sets up each entry of device_ids as written, a repeated one again (model_state.cpp
    ProcessDeviceIdsConfig, model_instance_state.cpp InitializeDeviceThreads): refused, naming the NPU."""
    (problem,) = _problems('name: "m"\nbackend: "npu_ge"\n' + _param("device_ids", "0,1,0"))
    assert (problem.severity, problem.field) == ("error", 'parameters["device_ids"].value.string_value')
    assert problem.message.startswith("NPU 0 is named 2 times: npu_ge does not merge repeated ids")
    assert _problems(GE_HEAD + _param("device_ids", "0,0")) == []  # the glue's round-robin: 2 instances on 0
