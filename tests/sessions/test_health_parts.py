"""Model health's parts on real processes: stub processes found by command line, deaths noticed."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from triton_ge_console.sessions.health import (
    FAILING,
    NOT_READY,
    OK,
    STUB_NAME,
    Instance,
    InstanceWatch,
    model_health,
    stub_instances,
)

KEY = ("llama_model", "1")


def start_stub(tmp_path: Path, name: str) -> subprocess.Popen[bytes]:
    """A child with the command line Triton gives a stub: `<stub> <repo>/<model>/<version>/model.py
    <region> <size> <size> <parent pid> <backend dir> <ipc handle> <stub name>` (the model.py sleeps); the
    name is the instance's, or the model's for the auto-complete stub (python_backend's
    `StubLauncher::Launch`)."""
    model_py = tmp_path / "repository" / "llama_model" / "1" / "model.py"
    model_py.parent.mkdir(parents=True, exist_ok=True)
    model_py.write_text("import time\ntime.sleep(600)\n", encoding="utf-8")
    args = [str(tmp_path / STUB_NAME), str(model_py), "region", "1048576", "1048576", str(os.getpid()),
            "/backends/python", "336", name]
    return subprocess.Popen(args, executable=sys.executable)


@pytest.fixture
def stub(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """An instance stub of llama_model version 1."""
    process = start_stub(tmp_path, "llama_model_0")
    yield process
    process.kill()
    process.wait()


def test_the_auto_complete_stub_of_a_reload_is_no_instance_and_its_end_no_failure(
        tmp_path: Path, stub: subprocess.Popen[bytes]) -> None:
    watch = InstanceWatch(os.getpid)
    autocomplete = start_stub(tmp_path, "llama_model")  # what Triton starts while the model reloads
    try:
        assert stub_instances(os.getpid())[KEY] == (Instance("llama_model_0", stub.pid),)
        assert watch.dead({KEY: "ge"}) == {}
    finally:
        autocomplete.kill()
        autocomplete.wait()
    assert watch.dead({KEY: "ge"}) == {}  # it ended; the instance still runs: the model is whole


def test_a_stub_is_found_under_its_server_by_model_version_and_instance(
        stub: subprocess.Popen[bytes]) -> None:
    assert stub_instances(os.getpid())[KEY] == (Instance("llama_model_0", stub.pid),)


def test_a_dead_instance_makes_its_model_failing_until_a_new_one_runs(stub: subprocess.Popen[bytes]) -> None:
    watch = InstanceWatch(os.getpid)
    assert watch.dead({KEY: "ge"}) == {}
    stub.kill()
    stub.wait()
    reasons = watch.dead({KEY: "ge"})
    assert "instance process gone" in reasons[KEY]


def test_a_stub_backend_model_with_no_process_at_all_is_failing() -> None:
    watch = InstanceWatch(os.getpid, frozenset({"python", "ge"}))
    assert "no instance process running for its ge backend" in watch.dead({KEY: "ge"})[KEY]
    assert watch.dead({KEY: "onnxruntime"}) == {}  # a backend without stubs: nothing to see


def test_no_server_pid_means_nothing_is_known() -> None:
    assert InstanceWatch(lambda: None, frozenset({"ge"})).dead({KEY: "ge"}) == {}


def test_health_from_state_instances_and_counters() -> None:
    assert model_health("UNAVAILABLE", None, None, None) == (NOT_READY, None)
    assert model_health("READY", None, 3.0, 1.0) == (OK, None)
    assert model_health("READY", None, None, None) == (OK, None)
    gone = "instance process gone: m_0"
    assert model_health("READY", gone, 3.0, 0.0) == (FAILING, gone)
    health, reason = model_health("READY", None, 0.0, 2.0)
    assert health == FAILING and "every request failed" in str(reason)
