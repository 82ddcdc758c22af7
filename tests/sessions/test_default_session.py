"""The only running session is the default everywhere; stopped ones say so; corrupt ones still stop."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.models import write_echo_model
from tests.sessions.helpers import group_processes, write_ge_spec
from tests.sessions.test_races import killing_strays, up
from triton_ge_console.cli import main
from triton_ge_console.session_states import STOPPED
from triton_ge_console.sessions.loadgen.bench_shared import resolve_endpoint
from triton_ge_console.sessions.server.registry import Registry, SessionRecord

pytestmark = pytest.mark.server  # every test here starts a tritonserver


def hand_made(name: str, state: str = STOPPED, pid: int | None = None) -> SessionRecord:
    """A session record as an earlier `up` left it (no server of it runs)."""
    return SessionRecord(
        name=name, pid=pid, started_at=time.time(), http_url="http://127.0.0.1:1", grpc_url="127.0.0.1:2",
        metrics_url="http://127.0.0.1:3/metrics", repository=None, spec=None, backend_dir=None,
        log_path=None, token_ref=None, attached=False, session_dir=None, state=state)


def test_stopped_and_dead_sessions_leave_the_running_one_the_default(
        tmp_path: Path, state_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    registry = Registry()
    registry.save(hand_made("old"))
    registry.save(hand_made("crashed", state="ready", pid=2**22 + 7))  # its process is gone: dead
    with killing_strays(state_dir):
        assert up(write_ge_spec(tmp_path / "spec", name="live")) == 0
        live = registry.load("live")
        capsys.readouterr()
        assert main(["status", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["name"] == "live"
        assert main(["reload", "bert_model"]) == 0
        assert "reload bert_model" in capsys.readouterr().out
        assert main(["devices", "--json"]) == 0, capsys.readouterr().err
        assert json.loads(capsys.readouterr().out), "the glue's devices of the running session"
        assert resolve_endpoint(None, None, "grpc")[0] == live.grpc_url
        assert main(["ls", "--running", "--json"]) == 0
        assert [row["name"] for row in json.loads(capsys.readouterr().out)] == ["live"]
        assert main(["ls", "--json"]) == 0
        listed = sorted(row["name"] for row in json.loads(capsys.readouterr().out))
        assert listed == ["crashed", "live", "old"]
        for argv, said in ((["bench", "bert_model", "-s", "old"], "session 'old' is stopped"),
                           (["devices", "-s", "old"], "session 'old' is stopped"),
                           (["reload", "bert_model", "-s", "old"], "session 'old' is stopped"),
                           (["load", "bert_model", "--session", "crashed"], "session 'crashed' is dead")):
            assert main(argv) == 1, argv
            err = capsys.readouterr().err.strip()
            assert said in err and "\n" not in err and "Connection refused" not in err, (argv, err)
        assert main(["status", "-s", "old"]) == 0
        assert "session old: stopped" in capsys.readouterr().out
        assert main(["down", "--forget"]) == 0
        out = capsys.readouterr().out
        assert all(f"session '{name}'" in out for name in ("live", "old", "crashed")), out
        assert registry.names() == []
        assert live.pid is not None and not group_processes(live.pid)


def test_a_running_session_with_a_corrupt_file_can_still_be_stopped_and_forgotten(
        tmp_path: Path, state_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_echo_model(tmp_path / "repo", "echo")
    registry = Registry()
    with killing_strays(state_dir):
        assert up(tmp_path / "repo", "--name", "mangled") == 0
        record = registry.load("mangled")
        registry.path_for("mangled").write_text("name: mangled\nhttp_url: [oops\n")
        capsys.readouterr()
        assert main(["down", "mangled"]) == 0
        out = capsys.readouterr().out
        assert "session 'mangled' stopped; its session file is unreadable" in out and "--forget" in out
        assert record.pid is not None and not group_processes(record.pid)
        assert main(["down", "-s", "mangled"]) == 1
        assert "had nothing running" in capsys.readouterr().out
        assert main(["down", "--forget"]) == 1  # it cannot tell what the file was: it names it
        assert "mangled.yaml" in capsys.readouterr().err and registry.path_for("mangled").exists()
        assert main(["down", "mangled", "--forget"]) == 0
        assert registry.names() == [] and not registry.path_for("mangled").exists()
