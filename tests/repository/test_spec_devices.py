"""One model over several NPUs (tensor_parallel) in a spec: config parameters, and what cannot work."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from tests.repository.spec_helpers import refused
from triton_ge_console.repository.configgen import config_parameters
from triton_ge_console.repository.rank_table import rank_table_problems
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
    models:
      - name: enc
        backend: npu_ge
        source: demo:bert
        instance_group: {device_ids: [0, 1, 2, 3], tensor_parallel: 2}
"""


def test_npu_ge_over_several_npus_gets_a_rank_table_that_validate_checks(tmp_path: Path) -> None:
    """npu_ge with tensor_parallel 2: the build writes HCCL's one-server rank table (version 1.0, physical
    device_id, rank_id from 0) into the model folder and names it in ge.exec.rankTableFile; validate accepts
    it, says what GE still needs per rank, and refuses a table HCCL would not take or that misses an NPU."""
    from triton_ge_console.repository.build import build_repository
    from triton_ge_console.repository.validate import validate_path

    repo = tmp_path / "repo"
    build_repository(load_spec(_write(tmp_path, NPU_GE_SPEC)), repo)
    table = json.loads((repo / "enc" / "rank_table.json").read_text())
    assert table == {"status": "completed", "version": "1.0", "server_count": "1", "server_list": [
        {"server_id": "node_0", "device": [{"device_id": str(i), "rank_id": str(i)} for i in range(4)]}]}
    assert 'key: "ge.exec.rankTableFile"' in (repo / "enc" / "config.pbtxt").read_text()
    report = validate_path(repo)
    assert report.errors == ()
    assert any("each rank's process needs its own ge.exec.rankId" in f.message for f in report.warnings)
    table["server_list"][0]["device"] = [{"device_id": "0", "rank_id": "0"},
                                         {"device_id": "1", "rank_id": "2"}]
    (repo / "enc" / "rank_table.json").write_text(json.dumps(table))
    messages = [f.message for f in validate_path(repo).errors]
    assert any("rank_ids [0, 2] are not 0..1, each once" in m for m in messages)
    assert any("lists no device_id 2 (device_ids [0, 1, 2, 3])" in m for m in messages)
    (repo / "enc" / "rank_table.json").unlink()
    assert any("rank_table.json does not exist" in f.message for f in validate_path(repo).errors)


def test_rank_table_rules_across_servers() -> None:
    """Across servers every device needs its NIC address (device_ip); server_count must match the list."""
    servers = [{"server_id": f"node_{s}", "device": [
        {"device_id": str(d), "device_ip": f"192.168.{s + 1}.{8 + d}", "rank_id": str(2 * s + d)}
        for d in range(2)]} for s in range(2)]
    table = {"status": "completed", "version": "1.0", "server_count": "2", "server_list": servers}
    assert rank_table_problems(json.dumps(table), None) == []
    del servers[1]["device"][0]["device_ip"]
    table["server_count"] = "3"
    assert rank_table_problems(json.dumps(table), None) == [
        "server_count '3' but server_list has 2"]
    table["server_count"] = "2"
    assert rank_table_problems(json.dumps(table), None) == [
        "device 0 has no device_ip (required across servers)"]
    assert rank_table_problems("{", None)[0].startswith("is not JSON")
