"""Model health's parts on real processes: stub processes found by command line, deaths noticed."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from triton_ge_console.sessions.observe import health
from triton_ge_console.sessions.observe.health import (
    STUB_NAME,
    Instance,
    InstanceWatch,
    model_health,
    stub_instances,
    stub_processes,
)
from triton_ge_console.triton_terms import FAILING, NOT_READY
from triton_ge_console.triton_terms import HEALTH_OK as OK

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


def config(count: int = 1, backend: str = "ge", kind: str = "KIND_CPU",
           gpus: tuple[int, ...] = ()) -> dict[str, Any]:
    """A running config as Triton's /config gives it: one instance group."""
    group: dict[str, Any] = {"name": "llama_model_0", "kind": kind, "count": count, "gpus": list(gpus)}
    return {"name": "llama_model", "backend": backend, "instance_group": [group]}


class Configs:
    """A model's running config, counting how often it is asked for."""

    def __init__(self, running: dict[str, Any] | None) -> None:
        self.running = running
        self.asked = 0

    def __call__(self, model: str) -> dict[str, Any] | None:
        assert model == "llama_model"
        self.asked += 1
        return self.running


STUBS = frozenset({"python", "ge"})


def test_the_auto_complete_stub_of_a_reload_is_no_instance_and_its_end_no_failure(
        tmp_path: Path, stub: subprocess.Popen[bytes]) -> None:
    watch = InstanceWatch(os.getpid, STUBS)
    autocomplete = start_stub(tmp_path, "llama_model")  # what Triton starts while the model reloads
    try:
        assert stub_instances(os.getpid())[KEY] == (Instance("llama_model_0", stub.pid),)
        assert watch.dead([KEY], Configs(config())) == {}
    finally:
        autocomplete.kill()
        autocomplete.wait()
    assert watch.dead([KEY], Configs(config())) == {}  # it ended; the instance still runs: the model is whole


def test_a_stub_is_found_under_its_server_by_model_version_and_instance(
        stub: subprocess.Popen[bytes]) -> None:
    assert stub_instances(os.getpid())[KEY] == (Instance("llama_model_0", stub.pid),)


def test_a_dead_instance_makes_its_model_failing_until_a_new_one_runs(
        tmp_path: Path, stub: subprocess.Popen[bytes]) -> None:
    watch = InstanceWatch(os.getpid, STUBS)
    assert watch.dead([KEY], Configs(config())) == {}
    stub.kill()
    stub.wait()
    reasons = watch.dead([KEY], Configs(config()))
    assert reasons == {KEY: "instance process gone: llama_model_0 (killed or crashed; 0 of 1 running)"}
    fresh = InstanceWatch(os.getpid, STUBS).dead([KEY], Configs(config()))  # never saw it: no name to give
    assert fresh == {KEY: "0 of 1 instance processes running (killed or crashed)"}
    again = start_stub(tmp_path, "llama_model_0")  # what a reload starts
    try:
        assert watch.dead([KEY], Configs(config())) == {}
    finally:
        again.kill()
        again.wait()


def test_new_names_and_counts_of_a_reconfiguration_are_whole_and_a_lost_one_is_named(tmp_path: Path) -> None:
    """The notebook's tuning: one instance `llama_model_0`, then two named `llama_model_0_0` and `_0_1`."""
    watch = InstanceWatch(os.getpid, STUBS)
    configs = Configs(config(count=1))
    old = start_stub(tmp_path, "llama_model_0")
    new = [start_stub(tmp_path, f"llama_model_0_{n}") for n in range(2)]
    try:
        assert watch.dead([KEY], configs) == {}  # the old one still ends while the new ones serve
        configs.running = config(count=2)  # the swap; then Triton ends the old instance
        old.kill()
        old.wait()
        assert watch.dead([KEY], configs) == {}
        new[1].kill()
        new[1].wait()
        reasons = watch.dead([KEY], configs)
        assert reasons == {KEY: "instance process gone: llama_model_0_1 (killed or crashed; 1 of 2 running)"}
        asked = configs.asked
        assert watch.dead([KEY], configs) == reasons and configs.asked == asked, "asked only on a change"
    finally:
        for process in (old, *new):
            process.kill()
            process.wait()


def test_a_model_whose_config_cannot_be_read_or_runs_no_stubs_is_not_judged(
        stub: subprocess.Popen[bytes]) -> None:
    stub.kill()
    stub.wait()
    assert InstanceWatch(os.getpid, STUBS).dead([KEY], Configs(None)) == {}
    assert InstanceWatch(os.getpid, STUBS).dead([KEY], Configs(config(backend="onnxruntime"))) == {}


def test_no_server_pid_means_nothing_is_known() -> None:
    assert InstanceWatch(lambda: None, STUBS).dead([KEY], Configs(config())) == {}


def test_stub_processes_a_config_asks_for() -> None:
    assert stub_processes(config(count=3), STUBS) == 3
    assert stub_processes(config(count=2, kind="KIND_GPU", gpus=(0, 1)), STUBS) == 4
    assert stub_processes(config(kind="KIND_MODEL"), STUBS) == 1
    assert stub_processes(config(backend="onnxruntime"), STUBS) == 0


def test_health_from_state_instances_and_counters() -> None:
    assert model_health("UNAVAILABLE", None, None, None) == (NOT_READY, None)
    assert model_health("READY", None, 3.0, 1.0) == (OK, None)
    assert model_health("READY", None, None, None) == (OK, None)
    gone = "instance process gone: m_0"
    assert model_health("READY", gone, 3.0, 0.0) == (FAILING, gone)
    health, reason = model_health("READY", None, 0.0, 2.0)
    assert health == FAILING and "every request failed" in str(reason)


def leaked_watch(stub: subprocess.Popen[bytes]) -> InstanceWatch:
    """A watch whose earlier generation is `stub` while it runs (as a reload's log would place it)."""
    watch = InstanceWatch(os.getpid, STUBS)
    instance = Instance("llama_model_0", stub.pid)
    watch.earlier_generations = lambda model=None: [(KEY, instance)] if stub.poll() is None else []  # type: ignore[method-assign]
    return watch


def test_a_leaked_stub_is_said_ended_only_once_it_is_gone(stub: subprocess.Popen[bytes]) -> None:
    end = leaked_watch(stub).end_leaked("llama_model")
    assert end.ended == [(KEY, Instance("llama_model_0", stub.pid))] and end.alive == []
    assert stub.poll() is not None or psutil.Process(stub.pid).status() == psutil.STATUS_ZOMBIE


def test_a_leaked_stub_still_running_after_sigkill_is_said_alive_not_ended(
        stub: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(health, "KILL_SEEN_S", 0.3)
    monkeypatch.setattr(health, "_runs", lambda pid: True)  # seen running still: a kill not yet taken effect
    end = leaked_watch(stub).end_leaked("llama_model")
    assert end.ended == [] and end.alive == [(KEY, Instance("llama_model_0", stub.pid))]
