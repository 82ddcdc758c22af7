"""`ls`, `status` and `down` agree with each other and with what happened."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from triton_ge_console.cli import main
from triton_ge_console.console.app import next_connection
from triton_ge_console.console.connection import Connection
from triton_ge_console.console.options import ConsoleOptions
from triton_ge_console.console.widgets.header import header_facts
from triton_ge_console.repository.inventory import config_diff
from triton_ge_console.session_states import NOT_ANSWERING
from triton_ge_console.sessions.live import LiveSource
from triton_ge_console.sessions.observe.stats import fetch_loaded_config
from triton_ge_console.sessions.server.registry import Registry
from triton_ge_console.triton_terms import RELOAD_PARAMETER


@pytest.mark.server
def test_an_attached_session_whose_server_is_gone_is_dead_in_ls_as_in_status(
        echo_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["up", str(echo_repo), "--name", "origin", "--timeout", "120"]) == 0
    assert main(["attach", Registry().load("origin").http_url, "--name", "remote"]) == 0
    assert main(["down", "origin"]) == 0
    capsys.readouterr()
    assert main(["status", "remote", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["state"] == "dead"
    assert main(["ls", "--json"]) == 0
    assert {row["name"]: row["state"] for row in json.loads(capsys.readouterr().out)}["remote"] == "dead"
    assert main(["ls", "--running"]) == 0
    assert "remote" not in capsys.readouterr().out


@pytest.mark.server
def test_down_forget_with_two_sessions_running_says_what_it_did_and_fails(
        echo_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("first", "old"):
        assert main(["up", str(echo_repo), "--name", name, "--timeout", "120"]) == 0
    assert main(["down", "old"]) == 0
    assert main(["attach", Registry().load("first").http_url, "--name", "second"]) == 0
    capsys.readouterr()
    assert main(["down", "--forget"]) == 1
    out, err = capsys.readouterr()
    assert "session 'old'" in out and "forgot" in out, out
    assert "2 sessions still run (first, second)" in err and "left running" in err, err
    assert {record.name for record in Registry().scan()[0]} == {"first", "second"}


@pytest.mark.server
def test_the_reloads_own_parameter_is_no_difference_between_disk_and_loaded_config(
        echo_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["up", str(echo_repo), "--name", "reloaded", "--timeout", "120"]) == 0
    assert main(["reload", "echo", "--config", '{"max_batch_size": 8}']) == 0  # the value on disk
    assert "new instance" in capsys.readouterr().out
    loaded = fetch_loaded_config(Registry().load("reloaded").http_url, "echo")
    assert loaded is not None and RELOAD_PARAMETER in loaded["parameters"], "the reload marked it"
    disk = (echo_repo / "echo" / "config.pbtxt").read_text(encoding="utf-8")
    assert config_diff(disk, loaded) == ["(no difference: Triton serves the file on disk)"]


@pytest.mark.server
def test_a_hung_server_reads_not_answering_in_status_ls_the_console_and_the_fleet(
        echo_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["up", str(echo_repo), "--name", "hung", "--timeout", "120"]) == 0
    record = Registry().load("hung")
    assert record.pid is not None
    os.kill(record.pid, signal.SIGSTOP)  # it keeps its ports: connections are taken, never answered
    try:
        capsys.readouterr()
        assert main(["status", "hung"]) == 1
        out = capsys.readouterr().out
        assert "session hung: not answering" in out and "no reply within" in out, out
        assert f"kill -CONT {record.pid}" in out, out
        assert main(["status", "hung", "--json"]) == 1
        assert json.loads(capsys.readouterr().out)["state"] == NOT_ANSWERING
        assert main(["ls", "--json"]) == 0
        assert {row["name"]: row["state"] for row in json.loads(capsys.readouterr().out)} == {
            "hung": NOT_ANSWERING}
        assert main(["status", "--all", "--json"]) == 1
        assert [row["health"] for row in json.loads(capsys.readouterr().out)] == [NOT_ANSWERING]
        snapshot = LiveSource.from_record(record, npu_smi=None, sample_traces=False).poll()
        assert snapshot.health == NOT_ANSWERING
        connection = next_connection(Connection("hung", 1.0), snapshot, ConsoleOptions())
        assert header_facts(connection).health == NOT_ANSWERING
    finally:
        os.kill(record.pid, signal.SIGCONT)
    assert main(["status", "hung"]) == 0
    assert "session hung: ready" in capsys.readouterr().out
