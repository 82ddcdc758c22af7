"""A tiny parent for a session's tritonserver, so its exit code is known after the CLI that started it exits.

`python -m triton_ge_console.sessions.server.supervise SESSION_DIR -- TRITONSERVER ARGS...` starts the server
as the leader of a new process group (so its pid is its group id, and `down` stops it with its Python stubs),
writes its pid to `server.pid`, waits, writes the exit code (negative: killed by that signal) to
`server.exit`, and exits. The supervisor stays outside the server's group, so group signals never reach it;
a SIGTERM sent to the supervisor itself is forwarded to the server's group (how a server whose pid file
was never read is still stopped). While the server runs, the supervisor keeps its shared-memory regions
0600 (Triton's Python backend creates them 0644 whatever the umask).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from triton_ge_console.files import write_atomic
from triton_ge_console.sessions.server.paths import PRIVATE_UMASK, open_private
from triton_ge_console.sessions.server.server_log import FATAL, LogTail
from triton_ge_console.sessions.server.shm import remove_shm_regions

PID_FILE = "server.pid"
LOG_NAME = "server.log"
LOG_GENERATIONS = 5  # earlier runs' logs kept as server.log.1 (the last) to server.log.5
EXIT_FILE = "server.exit"


def main(argv: list[str]) -> int:
    """Run the command, record its pid and exit code; 2 on a usage error."""
    if len(argv) < 3 or argv[1] != "--":
        print("usage: supervise SESSION_DIR -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    folder, command = Path(argv[0]), argv[2:]
    forward = _Forwarder()
    signal.signal(signal.SIGTERM, forward.handle)
    try:
        server = subprocess.Popen(command, start_new_session=True)
    except OSError as exc:
        print(f"cannot start {command[0]}: {exc}", file=sys.stderr, flush=True)
        write_atomic(folder / EXIT_FILE, "127\n")
        return 0
    forward.attach(server.pid)
    write_atomic(folder / PID_FILE, f"{server.pid}\n")
    ended = threading.Event()
    guard = threading.Thread(target=guard_shared_memory, args=(server.pid, ended), daemon=True)
    guard.start()
    code = server.wait()
    ended.set()
    remove_shm_regions(folder)  # a killed server or stub leaves its regions behind
    write_atomic(folder / EXIT_FILE, f"{code}\n")
    return 0


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
        self, binary: Path, args: list[str], env: dict[str, str], log_path: Path, workdir: Path
    ) -> None:
        self.command = [sys.executable, "-m", SUPERVISOR_MODULE, str(workdir), "--", str(binary), *args]
        self.env = env
        self.log_path = log_path
        self.workdir = workdir
        self.popen: subprocess.Popen[bytes] | None = None
        self.pid: int | None = None
        self._log = LogTail(log_path, start=0)

    def start(self, timeout: float = 30.0) -> None:
        """Spawn supervisor and server; returns once the server's pid is known (or it failed to start)."""
        for name in (PID_FILE, EXIT_FILE):
            (self.workdir / name).unlink(missing_ok=True)
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
