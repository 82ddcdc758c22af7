"""The state dir fills up (a real tmpfs of a few KB, filled to ENOSPC): what `down` did stays recorded."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.sessions.conftest import stopping_sessions
from triton_ge_console.cli import main
from triton_ge_console.session_states import STOPPED
from triton_ge_console.sessions.server.registry import Registry

FILLER = "filler"


@pytest.fixture
def small_sessions_dir(state_dir: Path) -> Iterator[Path]:
    """The registry's folder on a tmpfs of 64 KiB (needs root, as CI runs); its sessions stopped, then
    unmounted."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    folder = state_dir / "sessions"
    folder.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(folder)], check=True)
    try:
        yield folder
    finally:
        (folder / FILLER).unlink(missing_ok=True)  # room to stop them, before the unmount hides them
        with stopping_sessions(Registry(folder)):
            pass
        subprocess.run(["umount", "-l", str(folder)], check=True)


def fill(folder: Path) -> Path:
    """A file that takes every free byte of folder's filesystem; it raised ENOSPC when written."""
    filler = folder / FILLER
    with filler.open("wb", buffering=0) as out, contextlib.suppress(OSError):
        while True:
            out.write(b"\0" * 4096)
    probe = folder / "probe"
    with pytest.raises(OSError) as full:
        probe.write_bytes(b"\0" * 4096)
    probe.unlink(missing_ok=True)
    assert full.value.errno == errno.ENOSPC
    return filler


@pytest.mark.server
def test_down_on_a_full_state_dir_stops_the_server_and_records_it_stopped(
        echo_repo: Path, small_sessions_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["up", str(echo_repo), "--name", "full", "--timeout", "120"]) == 0
    pid = Registry().load("full").pid
    filler = fill(small_sessions_dir)
    capsys.readouterr()
    assert main(["down", "full"]) == 0
    out, err = capsys.readouterr()
    assert "session 'full' stopped" in out and "(No space left on device)" in out, (out, err)
    assert "its record took the place of the old one" in out, out
    assert pid is not None and not psutil.pid_exists(pid)
    assert Registry().load("full").state == STOPPED
    assert main(["status", "full", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["state"] == STOPPED
    filler.unlink()
    assert main(["down", "full"]) == 0
    assert "session 'full' was already stopped" in capsys.readouterr().out
