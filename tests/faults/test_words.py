"""The words of `reload`, `down --forget`, `watch` and `--token` say what is true and exit as the 0/1/2 rule
of docs/reference/errors.md says (0 ok, 1 failure, 2 usage)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.sessions.helpers import write_ge_spec
from tests.waiting import wait_until
from triton_ge_console.cli import main
from triton_ge_console.session_states import READY
from triton_ge_console.sessions.act.control import TritonControl
from triton_ge_console.sessions.act.watch import watch_spec
from triton_ge_console.sessions.server.registry import SessionRecord


@pytest.mark.server
def test_sessions_named_by_nobody_are_a_usage_error_and_stopped_ones_are_said_stopped(
        echo_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("repo", "t2"):
        assert main(["up", str(echo_repo), "--name", name, "--timeout", "120"]) == 0
    capsys.readouterr()
    assert main(["bench", "echo", "--max-windows", "1"]) == 2  # the same condition, the same code
    bench_err = capsys.readouterr().err
    assert main(["reload", "echo"]) == 2
    err = capsys.readouterr().err
    assert "2 running sessions serve echo (repo, t2)" in err and "name one" in err, (err, bench_err)
    for name in ("repo", "t2"):
        assert main(["down", name]) == 0
    capsys.readouterr()
    assert main(["reload", "echo"]) == 1
    err = capsys.readouterr().err
    assert "name one" not in err, err
    assert "no session runs (repo, t2 are stopped)" in err and "ge-console restart NAME" in err, err
    assert main(["down", "--forget"]) == 0
    out = capsys.readouterr().out
    assert "already stopped and forgotten" not in out, out
    assert "session 'repo' was already stopped; forgotten now" in out, out


def test_an_empty_token_is_said_empty(echo_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["up", str(echo_repo), "--token", ""]) == 1
    err = capsys.readouterr().err
    assert "the token is empty" in err and "printable ASCII without spaces" not in err, err


def test_a_broken_save_in_two_writes_is_said_not_applied_once(tmp_path: Path) -> None:
    """An editor's save can reach the disk in two writes some tens of ms apart (truncate, then the text):
    one save, one verdict."""
    spec = write_ge_spec(tmp_path / "spec")
    record = SessionRecord(name="gesession", pid=None, started_at=time.time(), http_url="http://127.0.0.1:9",
                           grpc_url=None, metrics_url=None, repository=tmp_path / "repository", spec=spec,
                           backend_dir=None, log_path=None, token_ref=None, attached=False,
                           session_dir=None, state=READY)
    lines: list[str] = []
    stop = threading.Event()
    watcher = threading.Thread(target=watch_spec, args=(record, TritonControl(record.http_url), lines.append),
                               kwargs={"stop_event": stop})
    watcher.start()
    try:
        wait_until(lambda: any(line.startswith("watching") for line in lines))
        broken = spec.read_text(encoding="utf-8").replace("max_batch_size: 8", "max_batch_size: lots")
        with spec.open("w", encoding="utf-8") as out:  # truncated now
            out.flush()
            time.sleep(0.12)
            out.write(broken)
        wait_until(lambda: any("spec not applied" in line for line in lines))
        time.sleep(1.0)  # what a second verdict would take to come: nothing else happens meanwhile
    finally:
        stop.set()
        watcher.join(timeout=30)
    assert sum("spec not applied" in line for line in lines) == 1, lines
    assert any("max_batch_size" in line for line in lines if line.startswith("error:")), lines
