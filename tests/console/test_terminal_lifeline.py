"""A console in a terminal stops the server it started when the terminal closes (SIGHUP) or it is killed
(SIGTERM), as quitting does: the server is not left running behind a console that is gone."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import select
import signal
import struct
import sys
import termios
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from tests.models import write_echo_model
from tests.sessions.test_races import killing_strays, servers_under
from triton_ge_console.session_states import READY
from triton_ge_console.sessions.server.paths import STATE_DIR_ENV
from triton_ge_console.sessions.server.registry import Registry, effective_state

ALT_SCREEN_ON = b"\x1b[?1049h"  # an app (re)starts drawing on the terminal's alternate screen


@dataclass
class PseudoTerminal:
    """A ge-console on a pseudo-terminal of its own: its pid and the terminal's fd (None once closed)."""

    pid: int
    fd: int | None

    def close(self) -> None:
        """Close the terminal as a terminal window closing does: the console's side hangs up."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


@contextlib.contextmanager
def in_a_terminal(state_dir: Path, *args: str) -> Iterator[PseudoTerminal]:
    """`ge-console ARGS` on a 200x50 pseudo-terminal of its own; killed afterwards if still there, and the
    terminal closed (unless the test closed it)."""
    env = {**os.environ, STATE_DIR_ENV: str(state_dir), "TERM": "xterm-256color"}
    pid, fd = pty.fork()
    if pid == 0:  # the child: the console, its stdin/stdout the terminal (never pytest going on)
        try:
            os.execve(sys.executable, [sys.executable, "-m", "triton_ge_console.cli", *args], env)
        finally:
            os._exit(127)
    terminal = PseudoTerminal(pid, fd)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
    try:
        yield terminal
    finally:
        with contextlib.suppress(ChildProcessError):  # reaped by the test already: its pid may be reused
            if os.waitpid(pid, os.WNOHANG)[0] == 0:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        terminal.close()


def drain_until(terminal: PseudoTerminal, condition: Callable[[], bool], timeout: float,
                seen: bytearray | None = None) -> bool:
    """Whether condition() holds within timeout seconds, reading what the console draws meanwhile (into
    `seen`, if given: a terminal nobody reads fills up and blocks the console's writes)."""
    assert terminal.fd is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        readable, _, _ = select.select([terminal.fd], [], [], 0.05)
        if readable:
            with contextlib.suppress(OSError):  # EIO once the console has closed its side
                drawn = os.read(terminal.fd, 65536)
                if seen is not None:
                    seen += drawn
    return condition()


def ended(pid: int) -> bool:
    """Whether the child has ended (a zombie, not reaped yet)."""
    return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


@pytest.mark.server
@pytest.mark.parametrize("signum", [signal.SIGHUP, signal.SIGTERM], ids=["terminal-closed", "killed"])
def test_a_console_in_a_terminal_stops_its_server_when_it_is_ended(tmp_path: Path, signum: int) -> None:
    write_echo_model(tmp_path / "repo", "echo")
    registry = Registry(tmp_path / "sessions")
    repository = str(tmp_path / "repo")

    def ready() -> bool:
        return registry.exists("tty") and effective_state(registry.load("tty")) == READY

    with killing_strays(tmp_path), in_a_terminal(tmp_path, "console", repository, "--name", "tty") as tty:
        assert drain_until(tty, ready, 120.0), "the console's server never became ready"
        os.kill(tty.pid, signum)
        assert drain_until(tty, lambda: ended(tty.pid), 40.0), "the console did not end"
        assert os.waitstatus_to_exitcode(os.waitpid(tty.pid, 0)[1]) == 0, "it did not end as quitting ends it"
        assert not servers_under(tmp_path), "the server the console started was left running"
    assert registry.load("tty").state == "stopped"


@pytest.mark.server
def test_a_second_hangup_during_the_stop_does_not_cut_it_short(tmp_path: Path) -> None:
    """A closed terminal sends SIGHUP more than once (the kernel, the shell): one arriving while the console
    stops its server (a model slow to unload) lets the stop finish."""
    write_echo_model(tmp_path / "repo", "echo", unload_s=4)
    registry = Registry(tmp_path / "sessions")
    repository = str(tmp_path / "repo")

    def ready() -> bool:
        return registry.exists("tty") and effective_state(registry.load("tty")) == READY

    def told_to_stop() -> bool:
        log = registry.load("tty").log_path
        return log is not None and "Signal (15) received" in log.read_text(encoding="utf-8")

    with killing_strays(tmp_path), in_a_terminal(tmp_path, "console", repository, "--name", "tty") as tty:
        assert drain_until(tty, ready, 120.0), "the console's server never became ready"
        os.kill(tty.pid, signal.SIGHUP)
        assert drain_until(tty, told_to_stop, 40.0), "the console did not stop its server"
        os.kill(tty.pid, signal.SIGHUP)
        assert drain_until(tty, lambda: ended(tty.pid), 40.0), "the console did not end"
        assert os.waitstatus_to_exitcode(os.waitpid(tty.pid, 0)[1]) == 0, "it did not end as quitting ends it"
        assert not servers_under(tmp_path), "the server the console started was left running"
    assert registry.load("tty").state == "stopped"


@pytest.mark.server
def test_a_console_suspended_with_ctrl_z_resumes_on_sigcont_and_still_quits(tmp_path: Path) -> None:
    """Only a SIGCONT after a suspension restarts the screen (a closing terminal's SIGCONT must not)."""
    write_echo_model(tmp_path / "repo", "echo")
    registry = Registry(tmp_path / "sessions")
    seen = bytearray()

    def ready() -> bool:
        return registry.exists("tty") and effective_state(registry.load("tty")) == READY and b"echo" in seen

    def redrawn() -> bool:
        return ALT_SCREEN_ON in seen and b"echo" in seen

    repository = str(tmp_path / "repo")
    with killing_strays(tmp_path), in_a_terminal(tmp_path, "console", repository, "--name", "tty") as tty:
        assert drain_until(tty, ready, 120.0, seen), "the console's server never became ready"
        os.kill(tty.pid, signal.SIGTSTP)
        assert drain_until(tty, lambda: psutil.Process(tty.pid).status() == psutil.STATUS_STOPPED, 20.0)
        seen.clear()
        os.kill(tty.pid, signal.SIGCONT)
        assert drain_until(tty, redrawn, 20.0, seen), "the screen did not come back"
        assert tty.fd is not None
        os.write(tty.fd, b"q")
        assert drain_until(tty, lambda: ended(tty.pid), 40.0), "the console did not quit"
        assert os.waitstatus_to_exitcode(os.waitpid(tty.pid, 0)[1]) == 0
        assert not servers_under(tmp_path), "the server the console started was left running"
