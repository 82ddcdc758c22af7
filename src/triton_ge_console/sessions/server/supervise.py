"""A tiny parent for a session's tritonserver, so its exit code is known after the CLI that started it exits.

`python -m triton_ge_console.sessions.server.supervise SESSION_DIR -- TRITONSERVER ARGS...` starts the server
as the leader of a new process group (so its pid is its group id, and `down` stops it with its Python stubs),
writes its pid to `server.pid`, waits, writes the exit code (negative: killed by that signal) to
`server.exit`, and exits. The supervisor stays outside the server's group, so group signals never reach it;
a SIGTERM sent to the supervisor itself is forwarded to the server's group (how a server whose pid file
was never read is still stopped). While the server runs, the supervisor keeps its shared-memory regions
0600 (Triton's Python backend creates them 0644 whatever the umask).

While it runs, the supervisor also reads the server log as it grows and keeps an index of its models' loads
beside it (`server_log.keep_load_index`), so a new reader (`status`) reads only what came after.

Once the server has ended, whatever of its group is left (Python stubs a crash orphaned, which can hang on
a lock the dead server held) is killed at once, before the exit is recorded.

With `--restart on-crash --session NAME` the supervisor is also the session's watcher: it outlives the
`up` that started it, so it is the one process that sees every crash. A server that crashed (any exit but
0) and that no one asked to stop (`down` leaves STOP_FILE first) is started again with the same command
line after the backoff of `restart_policy`, each crash and restart appended to the session's events and
the session's record pointed at the new server.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from triton_ge_console.files import write_atomic
from triton_ge_console.sessions.server.events import (
    CRASHED,
    GAVE_UP,
    RESTARTED,
    SERVING,
    clear_events,
    record_event,
)
from triton_ge_console.sessions.server.paths import PRIVATE_UMASK, open_private
from triton_ge_console.sessions.server.restart_policy import ON_CRASH, Backoff, crashed, exit_in_words
from triton_ge_console.sessions.server.server_log import FATAL, LogTail, keep_load_index
from triton_ge_console.sessions.server.shm import remove_shm_regions

PID_FILE = "server.pid"
LOG_NAME = "server.log"
LOG_GENERATIONS = 5  # earlier runs' logs kept as server.log.1 (the last) to server.log.5
EXIT_FILE = "server.exit"
STOP_FILE = "server.stop"  # `down` leaves it before stopping: the server's end is no crash to restart
SUPERVISOR_PID_FILE = "supervisor.pid"


def main(argv: list[str]) -> int:
    """Run the command, record its pid and exit code (restarting it on a crash if asked); 2: usage."""
    parsed = _parse(argv)
    if parsed is None:
        print("usage: supervise SESSION_DIR [--restart on-crash --session NAME] -- COMMAND [ARGS...]",
              file=sys.stderr)
        return 2
    folder, session, command = parsed
    write_atomic(folder / SUPERVISOR_PID_FILE, f"{os.getpid()}\n")
    forward = _Forwarder()
    signal.signal(signal.SIGTERM, forward.handle)
    threading.Thread(target=keep_load_index, args=(folder / LOG_NAME,), daemon=True).start()
    _Supervisor(folder, command, forward, session).run()
    return 0


def _parse(argv: list[str]) -> tuple[Path, str | None, list[str]] | None:
    """SESSION_DIR, the session to restart on a crash (None: never) and the command; None: bad usage."""
    if "--" not in argv or argv.index("--") < 1 or argv.index("--") == len(argv) - 1:
        return None
    split = argv.index("--")
    options, command = argv[1:split], argv[split + 1:]
    if not options:
        return Path(argv[0]), None, command
    if len(options) == 4 and options[:2] == ["--restart", ON_CRASH] and options[2] == "--session":
        return Path(argv[0]), options[3], command
    return None


@dataclass
class _Supervisor:
    """One session's server, run (and, with a session to restart, run again after each crash)."""

    folder: Path
    command: list[str]
    forward: _Forwarder
    session: str | None  # None: never restart
    backoff: Backoff = field(default_factory=Backoff)

    def run(self) -> None:
        """Run the server until it ends for good: a clean exit, a stop, a crash not restarted."""
        restart = 0
        while True:
            started = time.monotonic()
            code = self._run_once(restart)
            if code is None or self.session is None or not crashed(code) or self._stopping():
                return
            delay = self.backoff.next_delay(time.monotonic() - started)
            if delay is None:
                self._say(GAVE_UP, f"server {exit_in_words(code)}; gave up after {self.backoff.limit} "
                                   f"restarts in a row (it stays dead: ge-console restart {self.session})")
                return
            restart = self.backoff.restarts
            self._say(CRASHED, f"server {exit_in_words(code)}; restarting in {delay:g}s "
                               f"(restart {restart} of {self.backoff.limit})")
            if not self._wait_unless_stopped(delay):
                return
            (self.folder / EXIT_FILE).unlink(missing_ok=True)

    def _run_once(self, restart: int) -> int | None:
        """Start the server, wait for it to end, end what it left; its exit code (None: could not start)."""
        try:
            server = subprocess.Popen(self.command, start_new_session=True)
        except OSError as exc:
            print(f"cannot start {self.command[0]}: {exc}", file=sys.stderr, flush=True)
            write_atomic(self.folder / EXIT_FILE, "127\n")
            return None
        self.forward.attach(server.pid)
        write_atomic(self.folder / PID_FILE, f"{server.pid}\n")
        ended = threading.Event()
        guard = threading.Thread(target=guard_shared_memory, args=(server.pid, ended), daemon=True)
        guard.start()
        if restart and self.session is not None:
            self._follow(server, restart)
        code = server.wait()
        ended.set()
        end_group(server.pid)  # a crash's orphaned stubs: nothing of them is worth waiting for
        remove_shm_regions(self.folder)  # a killed server or stub leaves its regions behind
        write_atomic(self.folder / EXIT_FILE, f"{code}\n")
        return code

    def _follow(self, server: subprocess.Popen[bytes], restart: int) -> None:
        """A restarted server: said, its session pointed at it, and said again once it serves."""
        from triton_ge_console.sessions.server.restarted import follow_restart

        assert self.session is not None
        self._say(RESTARTED, f"server restarted (pid {server.pid}; restart {restart} of "
                             f"{self.backoff.limit})")
        follow_restart(self.session, server, lambda line: self._say(SERVING, line))
        if self._stopping():  # a `down` that came while it started: this server stops too
            self.forward.handle(signal.SIGTERM, None)

    def _say(self, kind: str, message: str) -> None:
        """An event: in the session's events and, for whoever reads the server log, in it."""
        record_event(self.folder, kind, message)
        print(f"ge-console supervisor: {message}", flush=True)

    def _stopping(self) -> bool:
        """Whether the operator asked the session to stop (`down`'s file, or a SIGTERM to the supervisor)."""
        return self.forward.pending or (self.folder / STOP_FILE).exists()

    def _wait_unless_stopped(self, delay: float) -> bool:
        """Wait out a restart's delay; False when a stop was asked for meanwhile."""
        deadline = time.monotonic() + delay
        while time.monotonic() < deadline:
            if self._stopping():
                return False
            time.sleep(0.05)
        return not self._stopping()


def end_group(group: int, timeout: float = 5.0) -> None:
    """SIGKILL what is left of a process group whose leader has ended, and wait until it is gone."""
    from triton_ge_console.sessions.server.process import group_alive

    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while group_alive(group) and time.monotonic() < deadline:
        time.sleep(0.01)


SHM_GUARD_INTERVAL_S = 0.2


def guard_shared_memory(pid: int, ended: threading.Event) -> None:
    """Keep the server's /dev/shm regions 0600 while it runs.

    Triton's Python backend creates its regions 0644 whatever the umask (boost.interprocess sets the mode
    explicitly); the server maps every region it creates, so its own maps list them all.
    """
    while not ended.wait(SHM_GUARD_INTERVAL_S):
        for path in mapped_shm(pid):
            with contextlib.suppress(OSError):
                info = os.stat(path)
                if info.st_uid == os.getuid() and info.st_mode & 0o077:
                    os.chmod(path, 0o600)


def mapped_shm(pid: int) -> set[str]:
    """The /dev/shm files process pid has mapped (empty once it is gone)."""
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as maps:
            lines = maps.read().splitlines()
    except OSError:
        return set()
    found = set()
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5].startswith("/dev/shm/") and not fields[5].endswith(" (deleted)"):
            found.add(fields[5])
    return found


class _Forwarder:
    """Passes a SIGTERM aimed at the supervisor on to the server's group, even one sent before the spawn."""

    def __init__(self) -> None:
        self.group: int | None = None
        self.pending = False

    def handle(self, _signum: int, _frame: object) -> None:
        """Forward now if the server exists, else once it does."""
        self.pending = True
        self._send()

    def attach(self, group: int) -> None:
        """The server's group is known: deliver a SIGTERM that came early."""
        self.group = group
        if self.pending:
            self._send()

    def _send(self) -> None:
        """SIGTERM the server's group (Python stubs included)."""
        if self.group is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.group, signal.SIGTERM)


def stop_supervisor(folder: Path, timeout: float = 5.0) -> None:
    """Tell the session's supervisor that its server's end is asked for (so it restarts nothing), and wait
    for one that waits out a restart's delay to leave."""
    with contextlib.suppress(OSError):
        (folder / STOP_FILE).touch(mode=0o600)
    deadline = time.monotonic() + timeout
    while supervisor_running(folder) and time.monotonic() < deadline:
        if read_number(folder / PID_FILE) is not None and not (folder / EXIT_FILE).exists():
            return  # it runs a server: stopping that server ends it
        time.sleep(0.02)


def supervisor_running(folder: Path) -> bool:
    """Whether the supervisor of the session in folder still runs."""
    pid = read_number(folder / SUPERVISOR_PID_FILE)
    return pid is not None and _is_supervisor(pid, folder)


def _is_supervisor(pid: int, folder: Path) -> bool:
    """Whether pid is (still) the supervisor of the session in folder."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            args = cmdline.read().split(b"\0")
    except OSError:
        return False
    return SUPERVISOR_MODULE.encode() in args and str(folder).encode() in args


def read_number(path: Path) -> int | None:
    """An integer from one of the files above, None when absent or unreadable."""
    try:
        return int(path.read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return None


SUPERVISOR_MODULE = "triton_ge_console.sessions.server.supervise"


def rotate_log(log_path: Path, generations: int = LOG_GENERATIONS) -> None:
    """Keep earlier runs' logs: server.log becomes server.log.1, .1 becomes .2, and so on."""
    if not log_path.exists():
        return
    for number in range(generations - 1, 0, -1):
        older = log_path.with_name(f"{log_path.name}.{number}")
        if older.exists():
            os.replace(older, log_path.with_name(f"{log_path.name}.{number + 1}"))
    os.replace(log_path, log_path.with_name(f"{log_path.name}.1"))


class SupervisedServer:
    """A tritonserver run under the supervisor, leading its own process group, logging to a file."""

    def __init__(
        self, binary: Path, args: list[str], env: dict[str, str], log_path: Path, workdir: Path,
        restart_session: str | None = None,
    ) -> None:
        restart = ["--restart", ON_CRASH, "--session", restart_session] if restart_session else []
        self.command = [sys.executable, "-m", SUPERVISOR_MODULE, str(workdir), *restart, "--", str(binary),
                        *args]
        self.env = env
        self.log_path = log_path
        self.workdir = workdir
        self.popen: subprocess.Popen[bytes] | None = None
        self.pid: int | None = None
        self._log = LogTail(log_path, start=0)

    def start(self, timeout: float = 30.0) -> None:
        """Spawn supervisor and server; returns once the server's pid is known (or it failed to start)."""
        for name in (PID_FILE, EXIT_FILE, STOP_FILE, SUPERVISOR_PID_FILE):
            (self.workdir / name).unlink(missing_ok=True)
        clear_events(self.workdir)  # a new run: its restarts are counted afresh
        rotate_log(self.log_path)
        with open(open_private(self.log_path), "ab") as log:
            self.popen = subprocess.Popen(
                self.command,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.workdir,
                env=self.env,
                start_new_session=True,
                umask=PRIVATE_UMASK,  # inherited by the server and its stubs: what they create is private
            )
        deadline = time.monotonic() + timeout
        while self.pid is None and not self.exited() and time.monotonic() < deadline:
            self.pid = read_number(self.workdir / PID_FILE)
            time.sleep(0.01)

    def exited(self) -> bool:
        """Whether the server has ended (or the supervisor could not start it)."""
        return (self.workdir / EXIT_FILE).exists() or (
            self.popen is not None and self.popen.poll() is not None
        )

    def fatal_line(self) -> str | None:
        """A line the server logged since the last call that means it cannot come up (read incrementally)."""
        for line in self._log.read_lines():
            if any(marker in line for marker in FATAL):
                return line.strip()[:500]
        return None

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server's group (SIGTERM, then SIGKILL) and wait for the supervisor to finish."""
        from triton_ge_console.sessions.server.process import stop_process_group

        with contextlib.suppress(OSError):  # asked for: no crash to restart
            (self.workdir / STOP_FILE).touch(mode=0o600)
        if self.pid is None:  # start() gave up before the pid file appeared: it may have since
            self.pid = read_number(self.workdir / PID_FILE)
        if self.pid is not None:
            stop_process_group(self.pid, timeout)
        elif self.popen is not None and self.popen.poll() is None:
            self.popen.terminate()  # the supervisor forwards it to the server's group, if there is one yet
        self._wait_supervisor(timeout)
        leftover = read_number(self.workdir / PID_FILE)
        if leftover is not None and leftover != self.pid:  # spawned while we were stopping
            stop_process_group(leftover, timeout)
        remove_shm_regions(self.workdir)  # stubs killed with the group leave their regions (a failed start)

    def _wait_supervisor(self, timeout: float) -> None:
        """Wait for the supervisor to exit (it does once the server has); kill it if it hangs."""
        if self.popen is None:
            return
        try:
            self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()

    def exit_code(self) -> int | None:
        """The server's exit code once it has ended."""
        return read_number(self.workdir / EXIT_FILE)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
