"""What a dead run leaves behind is cleaned by the next one: shared memory, old figures."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import psutil
import pytest

from tests.sessions.helpers import group_processes
from tests.waiting import wait_until
from triton_ge_console.cli import main
from triton_ge_console.sessions.registry import Registry
from triton_ge_console.sessions.shm import SHM_DIR, SHM_PREFIX_FILE


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
