"""A model with two instances, one killed, then reloaded: Triton 2.51 never finishes unloading the replaced
instances, whose surviving stub runs on (a leaked stub). It must neither count as an instance of the model
Triton serves now nor outlive `reload` and `down` (real tritonserver, under traffic)."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import tritonclient.http as triton_http

from tests.faults.test_crashes import Traffic
from tests.models import write_echo_model
from tests.sessions.test_launch import hostport
from tests.waiting import wait_until
from triton_ge_console.cli import main
from triton_ge_console.sessions.observe.health import stub_instances
from triton_ge_console.sessions.server.registry import Registry, SessionRecord
from triton_ge_console.triton_terms import FAILING

pytestmark = pytest.mark.server
KEY = ("echo", "1")


@pytest.fixture
def twice(tmp_path: Path) -> Iterator[SessionRecord]:
    """A session serving the echo model with instance_group.count 2."""
    write_echo_model(tmp_path / "repo", instances=2)
    assert main(["up", str(tmp_path / "repo"), "--name", "twice", "--timeout", "120"]) == 0
    yield Registry().load("twice")


def stubs(record: SessionRecord) -> dict[int, str]:
    """The echo model's stub processes (any generation): pid -> instance name."""
    assert record.pid is not None
    return {instance.pid: instance.name for instance in stub_instances(record.pid).get(KEY, ())}


def running(pid: int) -> bool:
    """Whether pid runs (a zombie has ended)."""
    return psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE


def kill_one(record: SessionRecord, among: set[int]) -> int:
    """SIGKILL the lowest of `among` and wait until it is gone; its pid."""
    victim = min(among)
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: victim not in stubs(record), what="the killed stub gone")
    return victim


def new_generation(record: SessionRecord, old: set[int]) -> set[int]:
    """Wait for the two stubs of the generation a reload started; their pids."""
    def two_new() -> set[int] | None:
        new = set(stubs(record)) - old
        return new if len(new) == 2 else None

    return wait_until(two_new, what="two new stubs")


def echo_status(capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    """The echo model's row in `status --json`."""
    capsys.readouterr()
    main(["status", "twice", "--json"])
    models = json.loads(capsys.readouterr().out)["models"]
    row: dict[str, object] = next(m for m in models if m["name"] == "echo")
    return row


def half_dead(record: SessionRecord) -> tuple[set[int], int]:
    """Kill one of the model's two stubs: both stubs' pids, and the survivor's."""
    old = set(stubs(record))
    kill_one(record, old)
    (survivor,) = old & set(stubs(record))
    return old, survivor


def test_reload_ends_the_stub_its_half_dead_instances_leave(
        twice: SessionRecord, capsys: pytest.CaptureFixture[str]) -> None:
    with Traffic(twice):
        old, survivor = half_dead(twice)
        capsys.readouterr()
        assert main(["reload", "echo"]) == 0
        said = capsys.readouterr().out
        assert "ended 1 leaked stub process(es)" in said, said
        assert f"(pid {survivor}) of echo version 1" in said, said
        assert not running(survivor)
        new = set(stubs(twice))
        assert len(new) == 2 and not new & old
        kill_one(twice, new)
        row = echo_status(capsys)
    assert row["health"] == FAILING and "instance process" in str(row["reason"]), row
    capsys.readouterr()
    assert main(["down", "twice"]) == 0
    assert "leaked" not in capsys.readouterr().out, "the reload ended it"


def test_a_leaked_stub_does_not_hide_a_failing_model_and_down_ends_it(
        twice: SessionRecord, capsys: pytest.CaptureFixture[str]) -> None:
    with Traffic(twice):
        old, survivor = half_dead(twice)
        client = triton_http.InferenceServerClient(hostport(twice))
        try:  # a reload ge-console did not make (a fresh parameter: Triton loads a new generation)
            config = client.get_model_config("echo")
            config["parameters"]["by_hand"] = {"string_value": "1"}
            client.load_model("echo", config=json.dumps(config))
        finally:
            client.close()
        new = new_generation(twice, old)
        assert running(survivor), "Triton 2.51 leaves the replaced instances' surviving stub running"
        kill_one(twice, new)
        first, second = echo_status(capsys), echo_status(capsys)
    assert first["health"] == FAILING and "instance process" in str(first["reason"]), first
    assert second["health"] == FAILING, second
    capsys.readouterr()
    assert main(["down", "twice"]) == 0
    said = capsys.readouterr().out
    assert "ended 1 leaked stub process(es) of model instances Triton no longer served: " in said, said
    assert f"(pid {survivor}) of echo version 1" in said, said
    assert not running(survivor)
