"""TritonControl against a real tritonserver: what Triton did is verified, failures carry Triton's words."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as triton_http

from tests.conftest import RunningServer, run_triton
from tests.models import write_echo_model
from tests.waiting import wait_until
from triton_ge_console.backend_glue.distribution import TritonDistribution
from triton_ge_console.sessions.act.control import TritonControl, client_url, config_differences, merge_config
from triton_ge_console.sessions.observe.health import stub_instances


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module's model repository: echo (loaded), spare and grouped (not loaded)."""
    repo = tmp_path_factory.mktemp("control") / "repo"
    for name in ("echo", "spare", "grouped"):
        write_echo_model(repo, name)
    return repo


@pytest.fixture(scope="module")
def server(triton_dist: TritonDistribution, python_backends: Path,
           repository: Path) -> Iterator[RunningServer]:
    """One server with the echo model loaded, shared by this module's tests."""
    with run_triton(triton_dist, repository, python_backends, models=("echo",),
                    extra=("--exit-timeout-secs=3",)) as running:
        yield running


@pytest.fixture
def control(server: RunningServer) -> TritonControl:
    """A controller reading the server's log for details."""
    return TritonControl(server.http_url, log_path=server.log_path)


def infer(server: RunningServer, model: str = "echo") -> np.ndarray:
    """One request of ones; returns the output."""
    client = triton_http.InferenceServerClient(server.http_hostport)
    try:
        data = triton_http.InferInput("INPUT0", [1, 4], "FP32")
        data.set_data_from_numpy(np.ones((1, 4), dtype=np.float32))
        result = client.infer(model, [data])
        return result.as_numpy("OUTPUT0")
    finally:
        client.close()


def test_index_lists_every_model_with_its_state(control: TritonControl) -> None:
    states = {(m.name, m.state) for m in control.index()}
    assert ("echo", "READY") in states
    assert any(name == "spare" for name, _ in states)


def test_unknown_model_is_one_clear_line(control: TritonControl) -> None:
    result = control.load("nope")
    assert not result.ok
    assert result.message.startswith("unknown model 'nope': not in the server's repository")
    assert "echo" in result.message and "\n" not in result.message


def test_reload_with_an_override_is_verified_in_the_running_config(control: TritonControl,
                                                                   server: RunningServer) -> None:
    result = control.reload("echo", json.dumps({"parameters": {"scale": {"string_value": "3"}}}))
    assert result.ok, result.message
    assert control.model_config("echo")["parameters"]["scale"]["string_value"] == "3"
    assert infer(server).tolist() == [[3.0] * 4]


def test_reload_of_a_broken_config_reports_triton_error_and_keeps_the_old_model(
        control: TritonControl, server: RunningServer) -> None:
    before = infer(server).tolist()
    result = control.reload("echo", json.dumps({"parameters": {"scale": None}}))
    assert not result.ok
    assert "reload echo failed" in result.message and "Triton kept version 1 serving" in result.message
    assert infer(server).tolist() == before


def instances_on_disk(model_dir: Path, count: int) -> None:
    """Set the model's instance_group count in its config.pbtxt (an operator's edit)."""
    config = model_dir / "config.pbtxt"
    text = config.read_text(encoding="utf-8").split("instance_group")[0]
    config.write_text(text + f"instance_group [ {{ count: {count} kind: KIND_CPU }} ]\n", encoding="utf-8")


def running_instances(server: RunningServer, model: str) -> int:
    """How many instance processes of the model's version 1 the server runs now."""
    assert server.process.pid is not None
    return len(stub_instances(server.process.pid).get((model, "1"), ()))


def test_a_plain_reload_serves_the_config_on_disk(control: TritonControl, server: RunningServer,
                                                 repository: Path) -> None:
    model_dir = repository / "grouped"
    instances_on_disk(model_dir, 3)
    loaded = control.load("grouped")
    assert loaded.ok, loaded.message
    wait_until(lambda: running_instances(server, "grouped") == 3, what="3 instances running")
    first = control.reload("grouped")  # nothing changed: a new instance from the running config
    assert first.ok, first.message
    instances_on_disk(model_dir, 1)
    result = control.reload("grouped")
    assert result.ok, result.message
    assert control.model_config("grouped")["instance_group"][0]["count"] == 1
    wait_until(lambda: running_instances(server, "grouped") == 1, timeout=30, what="1 instance running")
    assert result.message == ("reload grouped: new instance of version 1 READY; "
                              "now serving instance_group[0].count 3 → 1")
    assert control.reload("grouped").message.endswith("; its config is unchanged")
    assert control.unload("grouped").ok


def test_an_invalid_override_value_shows_the_log_detail(control: TritonControl) -> None:
    result = control.reload("echo", json.dumps({"max_batch_size": "many"}))
    assert not result.ok
    assert "failed to poll" in result.message
    assert "max_batch_size" in result.message


def test_override_that_is_not_json_is_refused(control: TritonControl) -> None:
    result = control.reload("echo", "{max_batch_size: 2")
    assert not result.ok and "not JSON" in result.message


def test_load_and_unload_are_confirmed_by_the_index(control: TritonControl) -> None:
    loaded = control.load("spare")
    assert loaded.ok, loaded.message
    assert any(m.name == "spare" and m.state == "READY" for m in control.index())
    assert not control.reload("nope").ok
    unloaded = control.unload("spare")
    assert unloaded.ok, unloaded.message
    assert not any(m.name == "spare" and m.state == "READY" for m in control.index())
    assert not control.reload("spare").ok


def test_an_unreachable_server_gives_a_failed_result_not_an_exception(tmp_path: Path) -> None:
    from triton_ge_console.sessions.server.process import free_port

    result = TritonControl(f"http://127.0.0.1:{free_port()}").load("echo")
    assert not result.ok and "unreachable" in result.message


def test_helpers() -> None:
    assert client_url("https://host:1234") == ("host:1234", True)
    assert client_url("127.0.0.1:80") == ("127.0.0.1:80", False)
    with pytest.raises(ValueError):
        client_url("http://noport")
    assert merge_config({"a": {"b": 1, "c": 2}, "d": 1}, {"a": {"b": 5}}) == {"a": {"b": 5, "c": 2}, "d": 1}
    assert config_differences({"max_batch_size": 4}, {"max_batch_size": 8}) == ["max_batch_size is 8, not 4"]
    assert config_differences({"p": {"x": "1"}}, {"p": {"x": "1", "y": 2}}) == []
