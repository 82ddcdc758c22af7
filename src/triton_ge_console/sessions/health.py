"""Model health from what a model does, not only what Triton's repository index says.

Triton keeps a model READY when the process running its instance has died (a Python-based backend's
stub killed or crashed): every request then fails with "Stub process '<instance>' is not healthy". So a
READY model is FAILING when one of its instance processes is gone (on this machine, where the server's
processes can be seen) or when it failed every request over the last poll interval.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from triton_ge_console.sessions.supervise import PID_FILE, read_number

if TYPE_CHECKING:
    from triton_ge_console.sessions.registry import SessionRecord

OK, FAILING, NOT_READY = "OK", "FAILING", "NOT_READY"
STUB_NAME = "triton_python_backend_stub"
ModelKey = tuple[str, str]  # (model, version)


@dataclass(frozen=True)
class Instance:
    """One Python-backend instance process of a model version."""

    name: str  # Triton's instance name, e.g. "llama_model_0"
    pid: int


def stub_instances(server_pid: int) -> dict[ModelKey, tuple[Instance, ...]]:
    """The live stub processes of a tritonserver, by the model version whose folder each one runs.

    A stub's command line is `stub <repo>/<model>/<version>/model.py <shm region> ... <instance name> ...`
    (Triton's Python backend, `StubLauncher::Launch`); the instance name is its 9th argument. A stub named
    after the model itself is the AUTOCOMPLETE_STUB `StubLauncher::Launch` starts while the model loads
    (or reloads) and ends once the config is completed: seen during a reload and then gone, it made a
    reloaded model FAILING for good.
    """
    import psutil  # here: snapshots import this module, and `ge-console --help` must not load psutil

    try:
        children = psutil.Process(server_pid).children()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return {}
    found: dict[ModelKey, list[Instance]] = {}
    for child in children:
        try:
            args = child.cmdline()
            if child.status() == psutil.STATUS_ZOMBIE:
                continue
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if len(args) < 9 or Path(args[0]).name != STUB_NAME:
            continue
        folder = Path(args[1]).parent
        if args[8] == folder.parent.name:  # the auto-complete stub of a model (re)loading, not an instance
            continue
        found.setdefault((folder.parent.name, folder.name), []).append(Instance(args[8], child.pid))
    return {key: tuple(instances) for key, instances in found.items()}


class InstanceWatch:
    """Remembers the instance processes each READY model version had, and says which have since died.

    An instance counts as dead when a process was seen for it and none runs now, or when a model of a
    backend that runs stubs (`stub_backends`) has none at all; a reload starts new processes under the
    same instance names, which makes the model whole again.
    """

    def __init__(self, server_pid: Callable[[], int | None],
                 stub_backends: frozenset[str] = frozenset({"python"})) -> None:
        self.server_pid = server_pid  # asked at every look: a restarted session has a new server
        self.stub_backends = stub_backends
        self._seen: dict[ModelKey, set[str]] = {}

    def dead(self, ready: Mapping[ModelKey, str | None]) -> dict[ModelKey, str]:
        """Why each READY model version (with its backend, if known) that lost an instance is failing."""
        pid = self.server_pid()
        if pid is None:
            return {}
        alive = stub_instances(pid)
        self._seen = {key: names for key, names in self._seen.items() if key in ready}
        reasons = {}
        for key, backend in ready.items():
            running = {instance.name for instance in alive.get(key, ())}
            seen = self._seen.setdefault(key, set())
            seen |= running
            gone = ", ".join(sorted(seen - running))
            if gone:
                reasons[key] = f"instance process gone: {gone} (killed or crashed)"
            elif not running and backend in self.stub_backends:
                reasons[key] = f"no instance process running for its {backend} backend (killed or crashed)"
        return reasons


def stub_backends(backend_dir: Path | None) -> frozenset[str]:
    """Backends whose instances run in Python stubs: Triton's Python backend and every Python-based
    backend in the backend dir (a folder holding a `model.py`)."""
    found = {"python"}
    if backend_dir is not None and backend_dir.is_dir():
        found |= {folder.name for folder in backend_dir.iterdir() if (folder / "model.py").is_file()}
    return frozenset(found)


def instance_watch(record: SessionRecord) -> InstanceWatch | None:
    """The instance watch of a session whose server runs on this machine (None: attached, or no pid)."""
    if record.attached or record.pid is None:
        return None
    folder, launched_pid = record.session_dir, record.pid

    def server_pid() -> int | None:
        """The pid its supervisor recorded for the server now running (a restart writes a new one)."""
        recorded = read_number(folder / PID_FILE) if folder is not None else None
        return recorded if recorded is not None else launched_pid

    return InstanceWatch(server_pid, stub_backends(record.backend_dir))


def model_health(state: str, dead: str | None, request_rate: float | None,
                 failure_rate: float | None) -> tuple[str, str | None]:
    """A model version's health and why it is not OK (None when it is)."""
    if state != "READY":
        return NOT_READY, None
    if dead is not None:
        return FAILING, dead
    if failure_rate and not request_rate:
        return FAILING, f"every request failed since the last poll ({failure_rate:.1f}/s, none succeeded)"
    return OK, None
