"""A command cut short by another (a reload by `down`) ends in one clear line, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.models import write_echo_model
from tests.waiting import wait_until
from triton_ge_console.cli import main
from triton_ge_console.sessions.server.paths import STATE_DIR_ENV
from triton_ge_console.sessions.server.registry import Registry

CLI = [sys.executable, "-m", "triton_ge_console.cli"]


@pytest.mark.server
def test_a_reload_cut_short_by_down_ends_in_one_line(tmp_path: Path, state_dir: Path) -> None:
    write_echo_model(tmp_path / "repo", load_s=3.0)
    assert main(["up", str(tmp_path / "repo"), "--name", "cut", "--timeout", "120"]) == 0
    record = Registry().load("cut")
    assert record.log_path is not None
    loads = record.log_path.read_text(encoding="utf-8").count("loading: echo:")
    reload = subprocess.Popen([*CLI, "reload", "echo"], env={**os.environ, STATE_DIR_ENV: str(state_dir)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: record.log_path.read_text(encoding="utf-8").count("loading: echo:") > loads,
                   what="the reload's new instance loading")
        assert main(["down", "cut"]) == 0
        out, err = reload.communicate(timeout=60)
    finally:
        reload.kill()
        reload.wait()
    assert reload.returncode == 1, (out, err)
    assert "Traceback" not in err, err
    lines = [line for line in (out + err).splitlines() if line.strip() and "reloading echo" not in line]
    assert len(lines) == 1, lines
    assert "reload echo" in lines[0] and "the server closed the connection" in lines[0], lines
