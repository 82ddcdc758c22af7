"""npu_ge's block counts and --backend-config switches as its source reads them (hicann's
triton-inference-server-ge-backend: model_instance_state.cpp CalculateDeviceExecBlock, model_state.cpp
ParseCmdlineConfig): what would leave every request waiting, or read otherwise than it looks, is refused at
load with file, line and field, by validate, and by the glue's npu_ge emulation."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.repository.spec_helpers import refused
from triton_ge_console.backend_glue.settings import GlueConfigError, npu_ge_placement
from triton_ge_console.repository.rules.ge import check_ge_config
from triton_ge_console.repository.spec.load import load_spec


def _spec(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "deploy.yaml"
    path.write_text("name: lab\n" + textwrap.dedent(body).lstrip("\n"), encoding="utf-8")
    return path


def _blocks_spec(tmp_path: Path, value: str) -> Path:
    """A spec of one npu_ge model with device_exec_blocks set (its value on line 6, column 38)."""
    return _spec(tmp_path, f"""
        models:
          - name: m
            backend: npu_ge
            source: "demo:bert"
            parameters: {{device_exec_blocks: "{value}"}}
        """)


@pytest.mark.parametrize("value", ["0", "-2"])
def test_device_exec_blocks_that_open_no_session_are_refused_at_load(tmp_path: Path, value: str) -> None:
    """device_exec_blocks 0 or below (other than -1, npu_ge's default) opens no GE session: refused (loaded
    before, and npu_ge would have waited forever)."""
    path = _blocks_spec(tmp_path, value)
    (problem,) = refused(path)
    assert problem.startswith("deploy.yaml:6:38 ") and "models[0].parameters.device_exec_blocks" in problem
    assert (f"npu_ge opens device_exec_blocks GE sessions on each NPU as given (-1: its default): {value} "
            "opens none, so requests wait forever") in problem


def test_minus_one_is_npu_ges_default_and_loads(tmp_path: Path) -> None:
    path = _spec(tmp_path, """
        models:
          - {name: m, backend: npu_ge, source: "demo:bert", parameters: {device_exec_blocks: "-1"}}
        """)
    assert load_spec(path).models[0].parameters == (("device_exec_blocks", "-1"),)


def test_backend_config_switches_are_read_as_npu_ge_reads_its_command_line(tmp_path: Path) -> None:
    """Through --backend-config static_model is compared with "1" (so "01" leaves it off), profiling is
    handed to GE for any value ("false" does not keep it off), device_exec_blocks 0 opens no session."""
    path = _spec(tmp_path, """
        server:
          backend_config:
            npu_ge: {static_model: "01", profiling: "false", device_exec_blocks: "0", ge.graphRunMode: "0"}
        models:
          - {name: m, backend: npu_ge, source: "demo:bert"}
        """)
    problems = refused(path)
    assert len(problems) == 3
    assert "server.backend_config.npu_ge.static_model: npu_ge compares static_model from --backend-config " \
           "with the string '1'" in problems[0]
    assert "'false' does not keep it off; leave the key out" in problems[1]
    assert "GE sessions on each NPU as given (-1: its default): 0 opens none" in problems[2]


def test_validate_refuses_blocks_that_open_no_session() -> None:
    """A hand-written config.pbtxt gets the same refusal from validate."""
    from tritonclient.grpc import model_config_pb2 as mc

    config = mc.ModelConfig(name="m", backend="npu_ge")
    config.parameters["instance_exec_blocks"].string_value = "0"
    messages = [f.message for f in check_ge_config(config) if f.severity == "error"]
    assert any("instance_exec_blocks of its GE sessions, whatever device_exec_blocks is: 0 takes none" in m
               for m in messages), messages


def test_the_npu_ge_emulation_refuses_them_too() -> None:
    """The glue's npu_ge emulation refuses a count native npu_ge would load and never answer with (it
    charged the default number of copies before)."""
    config = {"parameters": {"device_exec_blocks": {"string_value": "0"}}}
    with pytest.raises(GlueConfigError, match="parameter device_exec_blocks: npu_ge opens device_exec_bl"):
        npu_ge_placement(config, {"device_ids": "0,1"}, 2, 0, "m")
    default = {"parameters": {"device_exec_blocks": {"string_value": "-1"}}}
    assert npu_ge_placement(default, {"device_ids": "0,1"}, 4, 0, "m") == ((0, 1), 2)


@pytest.mark.parametrize("value", ["true", "on", "yes"])
def test_a_backend_config_static_model_that_reads_on_but_is_not_1_is_refused(tmp_path: Path,
                                                                            value: str) -> None:
    """ParseCmdlineConfig turns the static graph on for the string "1" alone: "true" leaves it off as
    silently as "01" (only values std::stoi reads as 1 were refused)."""
    path = _spec(tmp_path, f"""
        server:
          backend_config:
            npu_ge: {{static_model: "{value}"}}
        models:
          - {{name: m, backend: npu_ge, source: "demo:bert"}}
        """)
    (problem,) = refused(path)
    assert "server.backend_config.npu_ge.static_model: npu_ge compares static_model from --backend-config " \
           f"with the string '1' (no integer reading there): '{value}' leaves the static graph off" in problem


@pytest.mark.parametrize("value", ["0", "-2"])
def test_build_refuses_device_exec_blocks_that_open_no_session_writing_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str) -> None:
    """`ge-console build` of such a spec exits 1 with one line naming file, line and field, and writes no
    repository."""
    from triton_ge_console.cli import main

    path = _blocks_spec(tmp_path, value)
    code = main(["build", str(path), "-o", str(tmp_path / "repo")])
    err = capsys.readouterr().err
    assert code == 1 and not (tmp_path / "repo").exists()
    assert "deploy.yaml:6:38 models[0].parameters.device_exec_blocks" in err and f"{value} opens none" in err


@pytest.mark.parametrize(("value", "refused_too"), [("0", True), ("-2", True), ("-1", False), ("3", False)])
def test_validate_refuses_device_exec_blocks_that_open_no_session(value: str, refused_too: bool) -> None:
    """validate of a hand-written npu_ge config.pbtxt: device_exec_blocks 0 or below is an error, -1 (the
    default) and a positive count are not."""
    from tritonclient.grpc import model_config_pb2 as mc

    config = mc.ModelConfig(name="m", backend="npu_ge")
    config.parameters["device_exec_blocks"].string_value = value
    errors = [f.message for f in check_ge_config(config) if f.severity == "error"]
    assert any(f"(-1: its default): {value} opens none" in m for m in errors) is refused_too, errors


def _scheduling_spec(tmp_path: Path, device: str, instance: str, count: int = 1, npus: str = "[0]") -> Path:
    """A spec of one npu_ge model with both block counts and its instance group (the counts on line 6)."""
    return _spec(tmp_path, f"""
        models:
          - name: m
            backend: npu_ge
            source: "demo:bert"
            parameters: {{device_exec_blocks: "{device}", instance_exec_blocks: "{instance}"}}
            instance_group: {{count: {count}, device_ids: {npus}}}
        """)


def test_instance_exec_blocks_is_read_for_every_execution_even_with_device_exec_blocks(
        tmp_path: Path) -> None:
    """With device_exec_blocks given, instance_exec_blocks no longer counts the sessions
    (CalculateDeviceExecBlock) but each execution still waits for that many idle ones (inference.cpp
    BatchSplicTasks, scheduler.cpp GetIdleInstances): more than device_exec_blocks x NPUs waits forever, a
    negative count takes every idle session (one instance runs; several crash when none is idle)."""
    (waits,) = refused(_scheduling_spec(tmp_path, "1", "2"))
    assert waits.startswith("deploy.yaml:6:65 models[0].parameters.instance_exec_blocks: ")
    assert "waits for 2 idle GE sessions for each execution, but opens 1 x 1 NPU = 1" in waits
    assert load_spec(_scheduling_spec(tmp_path, "1", "2", npus="[0, 1]")).models[0].name == "m"
    assert load_spec(_scheduling_spec(tmp_path, "2", "-1")).models[0].name == "m"
    (crashes,) = refused(_scheduling_spec(tmp_path, "2", "-1", count=2))
    assert "with 2 instances an execution that finds none idle reads the first of none" in crashes


def test_instance_exec_blocks_0_crashes_whatever_device_exec_blocks_is(tmp_path: Path) -> None:
    """0 asks for no session, gets none at once, and SetInferenceContext reads the first of none."""
    (problem,) = refused(_scheduling_spec(tmp_path, "2", "0"))
    assert "models[0].parameters.instance_exec_blocks" in problem
    assert "0 takes none and the first of none is read" in problem


@pytest.mark.parametrize(("device", "instance", "npus", "error"), [
    ("1", "2", "0", "but opens 1 x 1 NPU = 1"), ("1", "2", "0,1", None), ("2", "-1", "0", None),
    ("-1", "-1", "0", "opens no GE session"), ("3", "0", "0", "0 takes none")])
def test_validate_judges_instance_exec_blocks_with_the_sessions(device: str, instance: str, npus: str,
                                                                error: str | None) -> None:
    """validate of a hand-written config.pbtxt: the same judgement, its NPUs from device_ids."""
    from tritonclient.grpc import model_config_pb2 as mc

    config = mc.ModelConfig(name="m", backend="npu_ge")
    for key, value in (("device_exec_blocks", device), ("instance_exec_blocks", instance),
                       ("device_ids", npus)):
        config.parameters[key].string_value = value
    errors = [f.message for f in check_ge_config(config) if f.severity == "error"]
    assert (errors == []) if error is None else any(error in m for m in errors), errors


def test_the_npu_ge_emulation_judges_instance_exec_blocks_with_the_sessions() -> None:
    """The glue: a count that would wait forever is refused, a negative one with one instance runs."""
    config = {"parameters": {"instance_exec_blocks": {"string_value": "3"}}}
    with pytest.raises(GlueConfigError, match="waits for 3 idle GE sessions for each execution, but opens 1"):
        npu_ge_placement(config, {"device_ids": "0", "device_exec_blocks": "1"}, 1, 0, "m")
    negative = {"parameters": {"instance_exec_blocks": {"string_value": "-1"}}}
    two_npus = {"device_ids": "0,1", "device_exec_blocks": "2"}
    assert npu_ge_placement(negative, two_npus, 1, 0, "m") == ((0, 1), 2)


def test_the_counts_of_server_backend_config_are_judged_under_each_model(tmp_path: Path) -> None:
    """The model's counts over the command line's (ParseModelParametersConfig after DisposeConfig): a
    negative instance_exec_blocks from server.backend_config runs one instance over device_exec_blocks
    sessions, and crashes two, refused at the model naming the key it came from."""
    def spec(count: int) -> Path:
        return _spec(tmp_path, f"""
            server:
              backend_config:
                npu_ge: {{device_exec_blocks: "2", instance_exec_blocks: "-1"}}
            models:
              - {{name: m, backend: npu_ge, source: "demo:bert", instance_group: {{count: {count}}}}}
            """)
    assert load_spec(spec(1)).models[0].instance_group.count == 1
    (problem,) = refused(spec(2))
    assert problem.startswith("deploy.yaml:6:5 models[0].parameters.instance_exec_blocks: given in "
                              "server.backend_config.npu_ge: a negative instance_exec_blocks (-1)"), problem


@pytest.mark.parametrize(("value", "shown"), [("'1'", "1"), ("true", "1"), ("'True'", "True"),
                                              ("'on'", "on"), ("PipeUtilization", "PipeUtilization")])
def test_a_models_profiling_npu_ge_would_ignore_is_refused(tmp_path: Path, value: str, shown: str) -> None:
    """A model's profiling turns on for "dynamic" or "true" alone (model_state.cpp
    ParseModelParametersConfig, compared as written); any other value is ignored in silence, so a spec
    asking for it with "1", an unquoted true (written as 1), "True" or a mode name built a config that
    never profiled."""
    path = _spec(tmp_path, f"""
        models:
          - {{name: m, backend: npu_ge, source: "demo:bert", parameters: {{profiling: {value}}}}}
        """)
    (problem,) = refused(path)
    assert ("models[0].parameters.profiling: npu_ge turns profiling on only for 'dynamic' or 'true': "
            f"'{shown}' leaves it off") in problem
    assert "quote" in problem if value == "true" else "quote" not in problem


@pytest.mark.parametrize("value", ["dynamic", "'true'", "'false'", "'0'", "false"])
def test_a_models_profiling_that_is_on_or_reads_off_loads(tmp_path: Path, value: str) -> None:
    path = _spec(tmp_path, f"""
        models:
          - name: m
            backend: npu_ge
            source: "demo:bert"
            parameters: {{profiling: {value}, dump_graph: "1"}}
        """)
    assert dict(load_spec(path).models[0].parameters)["dump_graph"] == "1"


def test_validate_says_nothing_of_a_switch_that_reads_off() -> None:
    """validate warns of a switch value npu_ge ignores ('1' for profiling), not of one that asks for off."""
    from tritonclient.grpc import model_config_pb2 as mc

    def warnings(value: str) -> list[str]:
        config = mc.ModelConfig(name="m", backend="npu_ge")
        config.parameters["profiling"].string_value = value
        return [f.message for f in check_ge_config(config) if "profiling" in f.message]

    assert warnings("false") == [] and warnings("off") == []
    assert warnings("1") == ["npu_ge turns profiling on only for 'dynamic' or 'true': '1' leaves it off"]


def test_a_models_dump_switch_npu_ge_would_ignore_is_refused(tmp_path: Path) -> None:
    """dump_graph and dump_data turn on for "1" alone, by the same rule: "yes" was built in silence."""
    path = _spec(tmp_path, """
        models:
          - {name: m, backend: npu_ge, source: "demo:bert", parameters: {dump_data: "yes"}}
        """)
    (problem,) = refused(path)
    assert "parameters.dump_data: npu_ge turns dump_data on only for '1': 'yes' leaves it off" in problem
    assert problem.endswith("write '1' or leave the key out")


def test_a_count_the_servers_backend_config_decides_is_a_warning_in_validate(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """validate reads a config.pbtxt without tritonserver's --backend-config: an instance_exec_blocks that
    fails only with npu_ge's default device_exec_blocks (-1) is a warning saying so, not an error, so a
    repository that build wrote from a spec whose server.backend_config gives device_exec_blocks validates
    (it said 'device_exec_blocks -1 (its default) ... crashes' as an error); given in the config, an error."""
    from triton_ge_console.cli import main

    path = _spec(tmp_path, """
        server:
          backend_config:
            npu_ge: {device_exec_blocks: "2", device_ids: "0"}
        models:
          - name: m
            backend: npu_ge
            source: "demo:bert"
            parameters: {instance_exec_blocks: "-1"}
        """)
    assert main(["build", str(path), "-o", str(tmp_path / "repo")]) == 0
    capsys.readouterr()
    assert main(["validate", str(tmp_path / "repo")]) == 0
    out = capsys.readouterr()
    assert "0 error(s), 1 warning(s)" in out.out + out.err
    assert ("unless tritonserver's --backend-config=npu_ge,device_exec_blocks=N gives a positive count"
            in out.out + out.err)
