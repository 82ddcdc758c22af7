"""No server outlives a launch that failed after the spawn, even when its pid was never read."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import psutil
import pytest

from tests.models import write_echo_model
from tests.waiting import wait_until
from triton_ge_console.sessions.launcher import LaunchOptions, launch
from triton_ge_console.sessions.server.paths import session_dir
from triton_ge_console.sessions.server.registry import Registry
from triton_ge_console.sessions.server.server_log import LoadTimes, indexed_up_to
from triton_ge_console.sessions.server.supervise import (
    EXIT_FILE,
    LOG_NAME,
    PID_FILE,
    SupervisedServer,
    read_number,
)


def running(text: str) -> list[psutil.Process]:
    """Live processes whose command line contains text."""
    return [p for p in psutil.process_iter(["cmdline", "status"])
            if text in " ".join(p.info["cmdline"] or []) and p.info["status"] != psutil.STATUS_ZOMBIE]


def sleeper(workdir: Path, marker: str) -> SupervisedServer:
    """A supervised long-running child whose command line carries marker."""
    workdir.mkdir(parents=True, exist_ok=True)
    code = f"import time  # {marker}\ntime.sleep(600)"
    return SupervisedServer(Path(sys.executable), ["-c", code], dict(os.environ), workdir / "log", workdir)


def test_stop_after_start_gave_up_before_the_pid_file_still_stops_the_server(tmp_path: Path) -> None:
    server = sleeper(tmp_path / "run", "ge-test-no-pid-yet")
    try:
        server.start(timeout=0)  # gives up at once: the pid is not known yet
        assert server.pid is None
        wait_until(lambda: running("ge-test-no-pid-yet"))
    finally:
        server.stop(timeout=10)
    assert not running("ge-test-no-pid-yet")


def test_sigterm_to_the_supervisor_reaches_the_servers_group(tmp_path: Path) -> None:
    server = sleeper(tmp_path / "run", "ge-test-forwarded")
    try:
        server.start()
        assert server.pid is not None and server.popen is not None
        server.popen.send_signal(signal.SIGTERM)
        assert server.popen.wait(timeout=30) == 0
        assert read_number(tmp_path / "run" / EXIT_FILE) == -signal.SIGTERM
        assert (tmp_path / "run" / PID_FILE).exists()
    finally:
        server.stop(timeout=10)
    assert not running("ge-test-forwarded")


def test_a_failure_right_after_the_spawn_leaves_no_server(tmp_path: Path) -> None:
    write_echo_model(tmp_path / "repo", "echo")
    unwritable = tmp_path / "registry-is-a-file"
    unwritable.write_text("")
    with pytest.raises(OSError):  # saving the record fails once tritonserver is already running
        launch(LaunchOptions(source=tmp_path / "repo", name="orphan", timeout=120), Registry(unwritable))
    assert not running(str(session_dir("orphan")))


def bytes_read() -> int:
    """Bytes this process has read so far (the kernel's rchar: every read(2), from the page cache or not)."""
    line = next(line for line in Path("/proc/self/io").read_text().splitlines() if line.startswith("rchar:"))
    return int(line.split()[1])


def test_a_fresh_process_reads_a_large_log_s_loads_from_where_the_supervisor_got(tmp_path: Path) -> None:
    """status starts a new process each time: it takes the loads the supervisor has read up to where it got,
    and reads only the log after that, not the whole log (up to 64 MiB) from its start."""
    workdir = tmp_path / "run"
    workdir.mkdir()
    filler = 24 << 20
    said = tmp_path / "said.log"  # what the server says: a load, then a long log
    said.write_text('I1207 16:31:13.501880 1 model_lifecycle.cc:472] "loading: echo:1"\n'
                    "I1207 16:31:17.448945 1 model_lifecycle.cc:839] \"successfully loaded 'echo'\"\n"
                    + ("I1207 16:31:18.000000 1 http_server.cc:1] " + "x" * 58 + "\n") * (filler // 100))
    code = f"import shutil, sys, time\nshutil.copyfileobj(open({str(said)!r}, 'rb'), sys.stdout.buffer)\n" \
           "sys.stdout.flush()\ntime.sleep(600)\n"
    server = SupervisedServer(Path(sys.executable), ["-c", code], dict(os.environ), workdir / LOG_NAME,
                              workdir)
    log = workdir / LOG_NAME
    try:
        server.start()
        wait_until(lambda: log.stat().st_size >= filler, what="the server logged its filler")
        size = log.stat().st_size
        wait_until(lambda: indexed_up_to(log) == size, what="the supervisor read the whole log")
        before = bytes_read()
        served = LoadTimes(log).served_since()
        read = bytes_read() - before
    finally:
        server.stop(timeout=10)
    assert served == LoadTimes(log, resume=False).served_since() and ("echo", "1") in served
    assert read < 1 << 20, f"read {read} bytes of a {size}-byte log"
