"""What a dead run leaves behind is cleaned by the next one: shared memory, old figures."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from tests.sessions.helpers import group_processes
from tests.sessions.observe.test_figures import EVENTS
from tests.waiting import wait_until
from triton_ge_console.cli import main
from triton_ge_console.sessions.observe.trace import TraceCollector
from triton_ge_console.sessions.server.registry import Registry
from triton_ge_console.sessions.server.shm import SHM_DIR, SHM_PREFIX_FILE


def regions_of(session_dir: Path) -> list[Path]:
    """The /dev/shm regions named with the session's current run prefix."""
    prefix = (session_dir / SHM_PREFIX_FILE).read_text(encoding="ascii").strip()
    return sorted(SHM_DIR.glob(f"{prefix}*"))


@pytest.mark.server
def test_up_after_the_supervisor_and_server_were_killed_removes_the_dead_runs_shared_memory(
        echo_repo: Path) -> None:
    assert main(["up", str(echo_repo), "--name", "leaky", "--timeout", "120"]) == 0
    record = Registry().load("leaky")
    assert record.pid is not None and record.session_dir is not None
    dead_run = regions_of(record.session_dir)
    assert dead_run, "the echo model's stub maps its regions"
    supervisor = psutil.Process(record.pid).parent()
    assert supervisor is not None and "supervise" in " ".join(supervisor.cmdline())
    supervisor.kill()  # nothing is left to clean up after the server
    os.killpg(record.pid, signal.SIGKILL)
    wait_until(lambda: not group_processes(record.pid))
    try:
        assert all(region.exists() for region in dead_run), "nobody removed them"
        assert main(["up", str(echo_repo), "--name", "leaky", "--timeout", "120"]) == 0
        assert [region for region in dead_run if region.exists()] == []
    finally:
        for region in dead_run:
            region.unlink(missing_ok=True)
    assert regions_of(record.session_dir), "the new run has its own"


def test_traces_written_minutes_ago_are_not_the_last_minute(tmp_path: Path) -> None:
    """A trace file a previous run wrote five minutes ago gives no figures now, read now or not."""
    old = tmp_path / "trace.json.0"
    old.write_text(json.dumps(EVENTS), encoding="utf-8")
    os.utime(old, (time.time() - 300, time.time() - 300))
    collector = TraceCollector(tmp_path / "trace.json")
    assert collector.update() == 2, "read"
    assert collector.latency("m", "1") is None


@pytest.mark.server
def test_up_clears_the_trace_files_an_earlier_run_left(echo_repo: Path, state_dir: Path) -> None:
    session_dir = state_dir / "runs" / "traced"
    session_dir.mkdir(parents=True)
    left = [session_dir / name for name in ("trace.json", "trace.json.0", "trace.json.7")]
    for path in left:
        path.write_text(json.dumps(EVENTS), encoding="utf-8")
    assert main(["up", str(echo_repo), "--name", "traced", "--timeout", "120"]) == 0
    assert [path for path in left if path.exists()] == []
