"""Model health from what a model does, not only what Triton's repository index says.

Triton keeps a model READY when the process running its instance has died (a Python-based backend's
stub killed or crashed): every request then fails with "Stub process '<instance>' is not healthy". So a
READY model is FAILING when one of its instance processes is gone (on this machine, where the server's
processes can be seen) or when it failed every request over the last poll interval.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triton_ge_console.sessions.server.server_log import LoadTimes
from triton_ge_console.sessions.server.supervise import PID_FILE, read_number
from triton_ge_console.triton_terms import FAILING, HEALTH_OK, MODEL_READY, NOT_READY

if TYPE_CHECKING:
    from triton_ge_console.sessions.server.access import SessionReach

STUB_NAME = "triton_python_backend_stub"
KILL_SEEN_S = 5.0  # how long a SIGKILLed stub may take to be seen gone (instant when the host is idle)
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


ConfigOf = Callable[[str], Mapping[str, Any] | None]  # a model's running config (None: unknown now)


def stub_processes(config: Mapping[str, Any], stub_backends: frozenset[str]) -> int:
    """How many stub processes a running config asks for: one per instance of a stub backend's model (an
    instance group's count, on each of its GPUs for KIND_GPU); none for other backends."""
    if str(config.get("backend") or "") not in stub_backends:
        return 0
    total = 0
    for group in config.get("instance_group") or ():
        devices = len(group.get("gpus") or ()) if group.get("kind") == "KIND_GPU" else 1
        total += int(group.get("count") or 1) * max(devices, 1)
    return total


@dataclass(frozen=True)
class LeakedEnd:
    """What ending leaked stubs did: those seen gone, and those still running after SIGKILL."""

    ended: list[tuple[ModelKey, Instance]]
    alive: list[tuple[ModelKey, Instance]]


class InstanceWatch:
    """Says which READY model versions have fewer instance processes than their running config asks for.

    Instance names and counts change with every reconfiguration (a reload with one instance names it
    `m_0`, with two `m_0_0` and `m_0_1`; a later reload with one may call it `m_0_0`), and Triton ends the
    old instances a second or two after the new ones serve. So the stubs are counted against the running
    config, asked again whenever a version's processes changed since the last look (a reload or a death),
    and listed again after asking: the config a new set of processes serves is never older than them.
    Names are only for the message: those running when the version was last whole and gone now.
    """

    def __init__(self, server_pid: Callable[[], int | None],
                 stub_backends: frozenset[str] = frozenset({"python"}), log_path: Path | None = None) -> None:
        self.server_pid = server_pid  # asked at every look: a restarted session has a new server
        self.stub_backends = stub_backends
        self._loads = LoadTimes(log_path) if log_path is not None else None  # which generation serves
        self._asked: dict[ModelKey, int] = {}  # stub processes the running config asks for
        self._listed: dict[ModelKey, frozenset[int]] = {}  # the pids its count was last checked against
        self._whole: dict[ModelKey, frozenset[str]] = {}  # instance names when it last had them all

    def dead(self, ready: Iterable[ModelKey], config_of: ConfigOf) -> dict[ModelKey, str]:
        """Why each READY model version short of instance processes is failing (none said when its config
        cannot be read: nothing is known)."""
        pid = self.server_pid()
        if pid is None:
            return {}
        ready = list(ready)
        alive = self._serving(pid)
        listed = {key: _pids(alive, key) for key in ready}
        changed = [key for key in ready if key not in self._asked or self._listed.get(key) != listed[key]]
        self._listed.update(listed)  # before asking: a change after it is seen at the next look
        if changed:
            self._ask(changed, config_of)
            alive = self._serving(pid)
        self._forget(set(ready))
        reasons = {}
        for key in ready:
            reason = self._shortfall(key, alive.get(key, ()))
            if reason is not None:
                reasons[key] = reason
        return reasons

    def _serving(self, pid: int) -> dict[ModelKey, tuple[Instance, ...]]:
        """The stub processes of the generation Triton serves now, by model version."""
        return self._split(stub_instances(pid))[0]

    def _split(self, alive: Mapping[ModelKey, tuple[Instance, ...]]
               ) -> tuple[dict[ModelKey, tuple[Instance, ...]], list[tuple[ModelKey, Instance]]]:
        """The stubs of the generation Triton serves, and those of earlier generations (leaked, or ending):
        a stub started before the load Triton serves began (its log says when) belongs to an earlier one."""
        since = self._loads.served_since() if self._loads is not None else {}
        serving: dict[ModelKey, tuple[Instance, ...]] = {}
        earlier: list[tuple[ModelKey, Instance]] = []
        for key, instances in alive.items():
            began = since.get(key)
            current = tuple(i for i in instances if began is None or not _started_before(i.pid, began))
            serving[key] = current
            earlier += [(key, instance) for instance in instances if instance not in current]
        return serving, earlier

    def earlier_generations(self, model: str | None = None) -> list[tuple[ModelKey, Instance]]:
        """Stub processes of model generations Triton no longer serves (all models', or one's)."""
        pid = self.server_pid()
        if pid is None:
            return []
        return [(key, i) for key, i in self._split(stub_instances(pid))[1] if model in (None, key[0])]

    def end_leaked(self, model: str | None = None, grace_s: float = 0.0) -> LeakedEnd:
        """End the stubs of earlier generations still running after grace_s (Triton ends those of a
        generation it unloads within a second or two; one of a generation whose unload hangs, never);
        a stub counts as ended only once it is seen gone, so a message can say so."""
        deadline = time.monotonic() + grace_s
        leaked = self.earlier_generations(model)
        while leaked and time.monotonic() < deadline:
            time.sleep(0.1)
            leaked = self.earlier_generations(model)
        for _key, instance in leaked:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(instance.pid, signal.SIGKILL)
        gone_by = time.monotonic() + KILL_SEEN_S
        alive = list(leaked)
        while alive and time.monotonic() < gone_by:
            alive = [(key, instance) for key, instance in alive if _runs(instance.pid)]
            if alive:
                time.sleep(0.05)
        return LeakedEnd([pair for pair in leaked if pair not in alive], alive)

    def _ask(self, keys: list[ModelKey], config_of: ConfigOf) -> None:
        """Learn how many stub processes each model's running config asks for now (one ask per model)."""
        configs = {name: config_of(name) for name in sorted({name for name, _ in keys})}
        for key in keys:
            config = configs[key[0]]
            if config is None:
                self._asked.pop(key, None)
                self._listed.pop(key, None)  # asked again next time
            else:
                self._asked[key] = stub_processes(config, self.stub_backends)

    def _forget(self, ready: set[ModelKey]) -> None:
        """Drop what was kept about versions no longer READY (a version loaded again starts afresh)."""
        for kept in (self._asked, self._listed, self._whole):
            for key in [key for key in kept if key not in ready]:
                del kept[key]

    def _shortfall(self, key: ModelKey, running: tuple[Instance, ...]) -> str | None:
        """Why a version is short of instance processes, or None when it runs all its config asks for."""
        asked = self._asked.get(key)
        names = frozenset(instance.name for instance in running)
        if asked is None or len(running) >= asked:
            if asked is not None:
                self._whole[key] = names
            return None
        gone = ", ".join(sorted(self._whole.get(key, frozenset()) - names))
        if gone:
            return f"instance process gone: {gone} (killed or crashed; {len(running)} of {asked} running)"
        return f"{len(running)} of {asked} instance processes running (killed or crashed)"


def _runs(pid: int) -> bool:
    """Whether pid still runs (a zombie has ended: only its parent's wait is left)."""
    import psutil  # here: as in stub_instances

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _started_before(pid: int, moment: float) -> bool:
    """Whether process pid started before `moment` (epoch seconds), from its start in clock ticks since boot
    (exact, unlike a create time over /proc/stat's btime) and the boot clock now."""
    from triton_ge_console.sessions.server.registry import process_start_ticks  # here: as psutil above

    ticks = process_start_ticks(pid)
    if ticks is None:
        return False
    booted_at = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
    return booted_at + ticks / os.sysconf("SC_CLK_TCK") < moment


def leaked_in_words(leaked: Iterable[tuple[ModelKey, Instance]]) -> str:
    """'echo_0_0 (pid 123) of echo version 1', for messages."""
    return ", ".join(f"{i.name} (pid {i.pid}) of {key[0]} version {key[1]}" for key, i in leaked)


def _pids(alive: Mapping[ModelKey, tuple[Instance, ...]], key: ModelKey) -> frozenset[int]:
    """The pids of a version's instance processes."""
    return frozenset(instance.pid for instance in alive.get(key, ()))


def stub_backends(backend_dir: Path | None) -> frozenset[str]:
    """Backends whose instances run in Python stubs: Triton's Python backend and every Python-based
    backend in the backend dir (a folder holding a `model.py`)."""
    found = {"python"}
    if backend_dir is not None and backend_dir.is_dir():
        found |= {folder.name for folder in backend_dir.iterdir() if (folder / "model.py").is_file()}
    return frozenset(found)


def instance_watch(reach: SessionReach) -> InstanceWatch | None:
    """The instance watch of a session whose server runs on this machine (None: attached, or no pid)."""
    if not reach.local or reach.pid is None:
        return None
    folder, launched_pid = reach.session_dir, reach.pid

    def server_pid() -> int | None:
        """The pid its supervisor recorded for the server now running (a restart writes a new one)."""
        recorded = read_number(folder / PID_FILE) if folder is not None else None
        return recorded if recorded is not None else launched_pid

    return InstanceWatch(server_pid, stub_backends(reach.backend_dir), reach.log_path)


def model_health(state: str, dead: str | None, request_rate: float | None,
                 failure_rate: float | None) -> tuple[str, str | None]:
    """A model version's health and why it is not OK (None when it is)."""
    if state != MODEL_READY:
        return NOT_READY, None
    if dead is not None:
        return FAILING, dead
    if failure_rate and not request_rate:
        return FAILING, f"every request failed since the last poll ({failure_rate:.1f}/s, none succeeded)"
    return HEALTH_OK, None
