"""Session lifecycle races and leftovers (issue 14): concurrent `up`, corrupt files, failed starts."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.models import write_echo_model
from triton_ge_console.cli import main
from triton_ge_console.sessions.launcher import LaunchError, LaunchOptions, launch
from triton_ge_console.sessions.server.paths import STATE_DIR_ENV
from triton_ge_console.sessions.server.registry import Registry

CLI = [sys.executable, "-m", "triton_ge_console.cli"]


@pytest.fixture
def echo_repo(tmp_path: Path) -> Path:
    """A repository with one Python-backend model."""
    write_echo_model(tmp_path / "repo", "echo")
    return tmp_path / "repo"


def servers_under(state_dir: Path) -> list[psutil.Process]:
    """Live tritonservers started for sessions of this state dir (their backend dir lies in it)."""
    return [
        process for process in psutil.process_iter(["cmdline", "status", "name"])
        if "tritonserver" in (process.info["name"] or "") and process.info["status"] != psutil.STATUS_ZOMBIE
        and f"--backend-directory={state_dir}" in " ".join(process.info["cmdline"] or [])
    ]


@contextlib.contextmanager
def killing_strays(state_dir: Path) -> Iterator[None]:
    """Whatever a test leaves running of this state dir's servers (an orphan is the bug) is killed after."""
    try:
        yield
    finally:
        for process in servers_under(state_dir):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)


@pytest.mark.server
def test_two_concurrent_ups_of_one_name_start_exactly_one_server(echo_repo: Path, state_dir: Path) -> None:
    env = {**os.environ, STATE_DIR_ENV: str(state_dir)}
    command = [*CLI, "up", str(echo_repo), "--name", "twin", "--timeout", "120"]
    with killing_strays(state_dir):
        both = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for _ in range(2)]
        outcomes = [(p.wait(timeout=180), *p.communicate()) for p in both]
        codes = sorted(code for code, _out, _err in outcomes)
        assert codes == [0, 1], outcomes
        refused = next(err for code, _out, err in outcomes if code == 1)
        assert "session 'twin'" in refused and "Traceback" not in refused, refused
        assert len(servers_under(state_dir)) == 1


def broken_repo(folder: Path) -> Path:
    """A repository whose only model fails in initialize (its config lacks the `scale` parameter)."""
    config = write_echo_model(folder, "echo") / "config.pbtxt"
    config.write_text(config.read_text().replace('key: "scale"', 'key: "other"'))
    return folder


def up(*args: object) -> int:
    """`ge-console up ...` in-process."""
    return main(["up", *(str(a) for a in args), "--timeout", "120"])


@pytest.mark.server
def test_a_failed_up_leaves_no_backends_and_keeps_a_stopped_sessions_record_and_logs(
        echo_repo: Path, tmp_path: Path, state_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = broken_repo(tmp_path / "broken")
    assert up(broken, "--name", "fresh") == 1
    assert not (state_dir / "runs" / "fresh" / "backends").exists()
    assert Registry().names() == []
    assert up(echo_repo, "--name", "old") == 0
    assert main(["down", "old"]) == 0
    stopped = Registry().load("old")
    assert stopped.log_path is not None
    first_log = stopped.log_path.read_text()
    capsys.readouterr()
    assert up(broken, "--name", "old") == 1
    out = capsys.readouterr().out
    assert "session 'old' was stopped: starting it anew" in out and "server.log.1" in out
    assert Registry().load("old") == stopped, "the stopped session is still listed as it was"
    assert not (state_dir / "runs" / "old" / "backends").exists()
    assert stopped.log_path.with_name("server.log.1").read_text() == first_log
    assert up(echo_repo, "--name", "old") == 0
    assert stopped.log_path.with_name("server.log.2").read_text() == first_log
    assert "KeyError" in stopped.log_path.with_name("server.log.1").read_text()


def test_up_refuses_a_timeout_that_cannot_wait(echo_repo: Path, state_dir: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as usage:
        main(["up", str(echo_repo), "--name", "hasty", "--timeout", "0"])
    assert usage.value.code == 2
    assert "--timeout: 0 must be a positive number of seconds" in capsys.readouterr().err
    with pytest.raises(LaunchError, match="--timeout -1: must be a positive number"):
        launch(LaunchOptions(source=echo_repo, name="hasty", timeout=-1))
    assert not (state_dir / "runs" / "hasty").exists() and Registry().names() == []
