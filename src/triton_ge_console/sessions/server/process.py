"""Start and stop one tritonserver process: own process group, log file, readiness check, clean exit."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triton_ge_console.backend_glue.distribution import TritonDistribution
from triton_ge_console.errors import GeConsoleError
from triton_ge_console.sessions.server.paths import PRIVATE_UMASK, open_private
from triton_ge_console.sessions.server.server_log import log_cause


class ServerStartError(GeConsoleError, RuntimeError):
    """The server did not become ready; the message carries the cause read from its log."""


@dataclass(frozen=True)
class Ports:
    """The three ports a Triton server listens on."""

    http: int
    grpc: int
    metrics: int


def _address(host: str, port: int) -> tuple[int, tuple[Any, ...]]:
    """Family and socket address of host:port, so IPv6 listen addresses work as well as IPv4 ones."""
    family, _type, _proto, _name, sockaddr = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICSERV
    )[0]
    return family, sockaddr


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on host right now (in host's address family)."""
    family, sockaddr = _address(host, 0)
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind(sockaddr)
        return int(sock.getsockname()[1])


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something already listens on host:port."""
    family, sockaddr = _address(host, port)
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(sockaddr) == 0


def pick_ports(
    http: int = 0, grpc: int = 0, metrics: int = 0, host: str = "127.0.0.1", metrics_host: str | None = None
) -> Ports:
    """Ports for a server: the given ones, and free ones where 0 was given (metrics: on metrics_host)."""
    chosen: list[int] = []
    for wanted, where in ((http, host), (grpc, host), (metrics, metrics_host or host)):
        port = wanted or free_port(where)
        while port in chosen:
            port = free_port(where)
        chosen.append(port)
    return Ports(*chosen)


def triton_address(host: str, service: str) -> str:
    """A listen address as tritonserver takes it: its HTTP servers want `ipv6:ADDR`, gRPC wants `[ADDR]`."""
    if ":" not in host:
        return host
    return f"[{host}]" if service == "grpc" else f"ipv6:{host}"


def listen_host(address: str) -> str:
    """A tritonserver listen address back as a host (the inverse of triton_address)."""
    return address.removeprefix("ipv6:").removeprefix("[").removesuffix("]")


def server_args(
    repository: Path,
    backend_dir: Path,
    ports: Ports,
    host: str = "127.0.0.1",
    extra: tuple[str, ...] = (),
    metrics_host: str | None = None,
) -> list[str]:
    """tritonserver arguments for a server in explicit model-control mode (metrics on metrics_host)."""
    return [
        f"--model-repository={repository}",
        f"--backend-directory={backend_dir}",
        f"--http-address={triton_address(host, 'http')}",
        f"--grpc-address={triton_address(host, 'grpc')}",
        f"--metrics-address={triton_address(metrics_host or host, 'metrics')}",
        f"--http-port={ports.http}",
        f"--grpc-port={ports.grpc}",
        f"--metrics-port={ports.metrics}",
        "--model-control-mode=explicit",
        "--exit-on-error=false",
        "--strict-readiness=false",
        *extra,
    ]


class TritonProcess:
    """A tritonserver child in its own process group, logging to a file."""

    def __init__(self, dist: TritonDistribution, args: list[str], log_path: Path, cwd: Path) -> None:
        self.dist = dist
        self.args = args
        self.log_path = log_path
        self.cwd = cwd
        self.popen: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        """The server's pid once started."""
        return self.popen.pid if self.popen else None

    def start(self) -> None:
        """Spawn the server detached in a new session so its Python stubs can be stopped together."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.cwd.mkdir(parents=True, exist_ok=True)
        with open(open_private(self.log_path), "ab") as log:
            self.popen = subprocess.Popen(
                [str(self.dist.binary), *self.args],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.cwd,
                env=self.dist.environment(),
                start_new_session=True,
                umask=PRIVATE_UMASK,
            )

    def wait_ready(self, http_url: str, timeout: float = 60.0) -> None:
        """Block until /v2/health/live answers, or raise with the log's cause."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.popen is not None and self.popen.poll() is not None:
                raise ServerStartError(f"tritonserver exited with code {self.popen.returncode}: "
                                       f"{log_cause(self.log_path)}")
            if http_ok(f"{http_url}/v2/health/live"):
                return
            time.sleep(0.05)
        raise ServerStartError(f"tritonserver not live after {timeout:.0f}s: {log_cause(self.log_path)}")

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM the process group, SIGKILL it after timeout; returns the exit code."""
        if self.popen is None:
            return None
        return stop_process_group(self.popen.pid, timeout, self.popen)


def stop_process_group(pid: int, timeout: float, popen: subprocess.Popen[bytes] | None = None) -> int | None:
    """Stop a server and every process in its group (Python backend stubs included)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    code: int | None = None
    while time.monotonic() < deadline:
        code = popen.poll() if popen is not None else (None if _alive(pid) else 0)
        if code is not None and not _group_alive(pid):
            return code
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    if popen is not None:
        code = popen.wait(timeout=10)
    while _group_alive(pid) and time.monotonic() < deadline + 10:
        time.sleep(0.05)
    return code


def _alive(pid: int) -> bool:
    """Whether a process with this pid exists (and is not a zombie)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):  # gone, or exiting while read (ESRCH: ProcessLookupError)
        return False


def group_alive(pgid: int) -> bool:
    """Whether any process of group pgid still runs (a server's Python stubs can outlive it)."""
    return _group_alive(pgid)


def _group_alive(pgid: int) -> bool:
    """Whether any live process remains in process group pgid."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = (entry / "stat").read_text(encoding="ascii").split(") ", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
    return False


def http_ok(url: str, timeout: float = 1.0) -> bool:
    """Whether GET url answers 200."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False

