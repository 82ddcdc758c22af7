"""A model over several NPUs in a spec: npu_ge's full copy on each, the tensor_parallel what-if of CPU
emulation, config parameters, and what cannot work."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from tests.repository.spec_helpers import refused
from triton_ge_console.repository.configgen import config_parameters
from triton_ge_console.repository.spec.load import load_spec

FAKES = Path(__file__).resolve().parents[1] / "fakes"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "deploy.yaml"
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def test_tensor_parallel_instances_and_parameters(tmp_path: Path) -> None:
    """Two instances of 2 NPUs each over [0..3]; the glue is told both the NPUs and the span."""
    path = _write(tmp_path, """
        models:
          - name: m
            backend: ge
            source: demo:llama
            max_batch_size: 4
            instance_group: {count: 2, device_ids: [0, 1, 2, 3], tensor_parallel: 2}
    """)
    (model,) = load_spec(path).models
    assert model.instance_group.instance_devices() == ((0, 1), (2, 3))
    params = config_parameters(model)
    assert params["device_ids"] == "0,1,2,3" and params["tensor_parallel"] == "2"


def test_npus_that_do_not_divide_or_repeat_are_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, """
        models:
          - name: a
            backend: ge
            source: demo:bert
            instance_group: {device_ids: [0, 1, 2], tensor_parallel: 2}
          - name: b
            backend: ge
            source: demo:bert
            instance_group: {device_ids: [1, 1], tensor_parallel: 2}
    """)
    assert refused(path) == [
        "deploy.yaml:5:62 models[0].instance_group.tensor_parallel: 2 NPUs per instance, "
        "but device_ids lists 3: list a multiple of 2",
        "deploy.yaml:9:34 models[1].instance_group.device_ids: lists an NPU twice: "
        "one instance cannot span the same NPU twice",
    ]


def test_a_shared_npu_over_its_capacity_is_refused(tmp_path: Path) -> None:
    """llama over NPUs 0-1 and bert over 1-2 each charge NPU 1 half their size: together too much."""
    path = _write(tmp_path, """
        server: {npu_memory_gib: 0.007}
        models:
          - name: llama
            backend: ge
            source: demo:llama
            instance_group: {device_ids: [0, 1], tensor_parallel: 2}
          - name: bert
            backend: ge
            source: demo:bert
            instance_group: {device_ids: [1, 2], tensor_parallel: 2}
    """)
    (problem,) = refused(path)
    assert problem.startswith("deploy.yaml:10:21 models[1].instance_group: "
                              "NPU 1 would hold 8.0 MiB of its 7.2 MiB")
    assert "(llama 4.1 MiB, bert 3.9 MiB)" in problem
    spread = path.read_text().replace("tensor_parallel: 2", "tensor_parallel: 1").replace("[1, 2]", "[2, 3]")
    path.write_text(spread.replace("0.007", "0.008"))
    assert [m.name for m in load_spec(path).models] == ["llama", "bert"]  # 8.1 MiB each NPU: fits in 8.2 MiB


def test_npus_the_host_lacks_are_refused_when_npu_smi_knows(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The recorded 310P3 duo card has 2 NPUs: a 4-NPU model cannot be served there."""
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("NPU_SMI_FAKE_LAYOUT", "310p3_duo")
    path = _write(tmp_path, """
        models:
          - name: m
            backend: ge
            source: demo:llama
            instance_group:
              device_ids: [0, 1, 2, 3]
              tensor_parallel: 4
    """)
    assert refused(path) == ["deploy.yaml:6:19 models[0].instance_group.device_ids: "
                               "NPU 2 does not exist: this host has 2 (ids 0-1)"]


REPO_SPEC = """
    models:
      - name: bert
        backend: ge
        source: demo:bert
        instance_group: {device_ids: [1, 2], tensor_parallel: 2}
      - name: llama
        backend: ge
        source: demo:llama
        instance_group: {device_ids: [0, 1], tensor_parallel: 2}
"""


def test_validate_refuses_the_same_in_a_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A built repository whose NPUs are over-committed (a smaller capacity set by hand) or missing."""
    from triton_ge_console.repository.build import build_repository
    from triton_ge_console.repository.validate import validate_path

    repo = tmp_path / "repo"
    build_repository(load_spec(_write(tmp_path, REPO_SPEC)), repo)
    assert validate_path(repo).errors == ()
    config = repo / "llama" / "config.pbtxt"
    smaller = 'parameters { key: "npu_memory_gib" value { string_value: "0.007" } }\n'
    config.write_text(config.read_text() + smaller)
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("NPU_SMI_FAKE_LAYOUT", "310p3_duo")
    problems = [(p.file.replace(str(repo), "repo"), p.field, p.message) for p in validate_path(repo).errors]
    where = 'parameters["device_ids"].value.string_value'
    assert problems == [
        ("repo/bert/config.pbtxt", where, "NPU 2 does not exist: this host has 2 (ids 0-1)"),
        ("repo/llama/config.pbtxt", where,
         "NPU 1 would hold 8.0 MiB of its 7.2 MiB (bert 3.9 MiB, llama 4.1 MiB)"),
    ]


NPU_GE_SPEC = """
    server: {npu_memory_gib: 0.009}
    models:
      - name: enc
        backend: npu_ge
        source: demo:bert
        instance_group: {device_ids: [0, 1, 2, 3]}
"""


def test_npu_ge_is_charged_a_full_copy_on_every_npu(tmp_path: Path) -> None:
    """npu_ge runs a full copy of the model on every NPU of device_ids (ModelInstanceState::InitDevices
    and CreateSessions in hicann/triton-inference-server-ge-backend): a 7.9 MiB model over four NPUs of
    9.2 MiB fits, the same on each; four instances over two NPUs open two GE sessions, two full copies, on
    each (CalculateDeviceExecBlock) and no longer fit; with a static graph the sessions share one copy."""
    from triton_ge_console.repository.spec.devices import device_loads

    spec = load_spec(_write(tmp_path, NPU_GE_SPEC))
    loads = device_loads(spec.models)
    assert sorted(loads) == [0, 1, 2, 3]
    assert len({held for entries in loads.values() for _, held in entries}) == 1
    path = _write(tmp_path, NPU_GE_SPEC.replace("[0, 1, 2, 3]}", "[0, 1], count: 4}"))
    problems = refused(path)
    assert len(problems) == 2 and "NPU 0 would hold 15.7 MiB of its 9.2 MiB (enc 15.7 MiB)" in problems[0]
    static = path.read_text().replace("count: 4}", "count: 4}\n    parameters: {static_model: 1}")
    path.write_text(static)
    assert [m.name for m in load_spec(path).models] == ["enc"]  # a static graph's sessions share one copy


def test_npu_ge_refuses_tensor_parallel_and_writes_no_rank_table(tmp_path: Path) -> None:
    """tensor_parallel is a CPU-emulation what-if of the ge glue: npu_ge never reads it (it replicates),
    so a spec refuses it; no rank table nor ge.exec.rankTableFile is written for any model."""
    path = _write(tmp_path, NPU_GE_SPEC.replace("[0, 1, 2, 3]}", "[0, 1, 2, 3], tensor_parallel: 2}"))
    (problem,) = refused(path)
    assert problem.startswith("deploy.yaml:6:65 models[0].instance_group.tensor_parallel: npu_ge does not "
                              "read it: it runs a full copy of the model on every NPU of device_ids")


def test_npu_ge_options_go_to_the_backend_config_only(tmp_path: Path) -> None:
    """ge.* as a model parameter is refused with where it belongs; session.* and graph.* pass on an npu_ge
    model (ModelState::Create hands them to SetOptions), not on the glue; in server.backend_config.npu_ge
    all three pass, as do npu_ge's own keys, and anything else there is refused."""
    path = _write(tmp_path, """
        server:
          backend_config:
            npu_ge: {ge.aicoreNum: "12|10", session.ge.exec.precision_mode_v2: fp16, static_model: "1",
                     device_exec_block: 2}
        models:
          - name: enc
            backend: npu_ge
            source: demo:bert
            parameters: {ge.aicoreNum: "12|10", static_model: "true", graph.ge.inputShape: "x:-1,3",
                         session.ge.exec.precision_mode_v2: fp16}
          - name: glue
            backend: ge
            source: demo:bert
            parameters: {graph.ge.inputShape: "x:-1,3"}
    """)
    problems = refused(path)
    assert len(problems) == 4
    assert problems[0].startswith("deploy.yaml:4:14 server.backend_config.npu_ge.device_exec_block: npu_ge "
                                  "reads from --backend-config only device_ids, device_exec_blocks")
    assert problems[0].endswith("did you mean 'device_exec_blocks'?")
    assert "models[0].parameters.ge.aicoreNum: GE option 'ge.aicoreNum' as a model parameter is read by " \
           "neither backend" in problems[1]
    assert "models[0].parameters.static_model: 'true': npu_ge reads static_model as an integer" in problems[2]
    assert "models[1].parameters.graph.ge.inputShape: GE option 'graph.ge.inputShape' is read only by " \
           "npu_ge" in problems[3]


def test_npu_ge_without_device_ids_is_charged_on_every_npu_of_the_host(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without device_ids native npu_ge sets up every NPU aclrtGetDeviceCount sees
    (ModelInstanceState::InitDevices): validate charges the model on each NPU npu-smi lists (two on the
    recorded 310P3 duo card), and says so."""
    from triton_ge_console.repository.build import build_repository
    from triton_ge_console.repository.validate import validate_path

    repo = tmp_path / "repo"
    build_repository(load_spec(_write(tmp_path, NPU_GE_SPEC)), repo)
    config = repo / "enc" / "config.pbtxt"
    small = 'parameters { key: "npu_memory_gib" value { string_value: "0.005" } }\n'
    ids = 'parameters {\n  key: "device_ids"\n  value {\n    string_value: "0,1,2,3"\n  }\n}\n'
    assert ids in config.read_text()
    config.write_text(config.read_text().replace(ids, small))
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("NPU_SMI_FAKE_LAYOUT", "310p3_duo")
    report = validate_path(repo)
    assert [p.message.split(" would hold")[0] for p in report.errors] == ["NPU 0", "NPU 1"]
    assert any("no device_ids: npu_ge runs a full copy of the model on every NPU" in p.message
               for p in report.warnings)


def test_npu_ge_naming_an_npu_twice_is_refused(tmp_path: Path) -> None:
    """npu_ge keeps device_ids as written (model_state.cpp ProcessDeviceIdsConfig and ParseParameterValue
    push every id) and sets up each entry (model_instance_state.cpp InitializeDeviceThreads calls
    CreateDeviceThreads per entry, device_exec_blocks GE sessions each): "0,0" loads the model onto NPU 0
    twice over, in silence. A spec refuses it, in a model and on the command line alike."""
    (problem,) = refused(_write(tmp_path, NPU_GE_SPEC.replace("[0, 1, 2, 3]}", "[0, 1, 0]}")))
    assert problem.startswith("deploy.yaml:6:34 models[0].instance_group.device_ids: NPU 0 is named 2 "
                              "times: npu_ge does not merge repeated ids"), problem
    path = _write(tmp_path, """
        server: {backend_config: {npu_ge: {device_ids: "6,6"}}}
        models:
          - {name: m, backend: npu_ge, source: "demo:bert"}
    """)
    (problem,) = refused(path)
    assert problem.startswith("deploy.yaml:1:48 server.backend_config.npu_ge.device_ids: NPU 6 is named 2 "
                              "times"), problem
