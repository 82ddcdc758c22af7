"""The session registry: one YAML file per session in the state dir, so all consoles see the same sessions."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import yaml

from triton_ge_console.arg_types import UsageError
from triton_ge_console.errors import GeConsoleError, InputError
from triton_ge_console.files import write_atomic
from triton_ge_console.session_states import DEAD, READY, STARTING, STOPPED
from triton_ge_console.sessions.server import paths
from triton_ge_console.sessions.server.engines import ATTACHABLE, TRITON
from triton_ge_console.sessions.server.process import group_alive
from triton_ge_console.sessions.server.server_log import last_lines
from triton_ge_console.sessions.server.token_header import TOKEN_HEADER

# Triton checks a restricted gRPC protocol's header under this prefix (HTTP uses the key as given).
GRPC_HEADER_PREFIX = "triton-grpc-protocol-"


def grpc_token_header(header: str = TOKEN_HEADER) -> str:
    """The metadata key a gRPC client sends the token under."""
    return f"{GRPC_HEADER_PREFIX}{header}"


_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class RegistryError(GeConsoleError, ValueError):
    """A session file is unreadable or malformed; the message names the file (and line, where known)."""


class SessionNotFound(GeConsoleError, LookupError):
    """No session with that name (or no unique session when none was named)."""


class SessionStopped(SessionNotFound):
    """The session exists but its server is stopped or dead, so it cannot answer."""


class SessionAmbiguous(SessionNotFound, UsageError):
    """No session was named and several could be meant: a usage error (exit 2), as for `bench`."""


class SessionBusy(GeConsoleError, RuntimeError):
    """Another ge-console process is starting this session right now."""


@dataclass(frozen=True)
class SessionRecord:
    """One session as stored: where its server answers and what it was started from."""

    name: str
    pid: int | None
    started_at: float
    http_url: str
    grpc_url: str | None
    metrics_url: str | None
    repository: Path | None
    spec: Path | None
    backend_dir: Path | None
    log_path: Path | None
    token_ref: str | None  # "env:NAME" or "file:/path" (a 0600 file); never the token itself
    attached: bool
    session_dir: Path | None
    state: str = STARTING  # as recorded: starting | ready | stopped
    pid_create_time: float | None = None  # psutil create_time of pid, to tell pid reuse apart
    pid_start_ticks: int | None = None  # pid's start in clock ticks since boot (exact; older records lack it)
    exit_code: int | None = None  # when the server's exit was observed
    stopped_at: float | None = None
    # when `down` asked the server to stop: once the server is gone the session reads stopped, even if
    # whoever asked was killed before recording the end (a kernel Jupyter gave up on, a killed console)
    stop_requested_at: float | None = None
    models: tuple[str, ...] = ()  # the models the session loads at start
    chosen_models: tuple[str, ...] = ()  # up SPEC --model: the spec's models it serves (empty: all)
    tritonserver: str | None = None  # the binary it runs
    tritonserver_origin: str | None = None  # how the binary was found
    explicit_tritonserver: str | None = None  # --tritonserver as given, reused by restart
    listen: str = "127.0.0.1"
    token_header: str = TOKEN_HEADER
    public_health: bool = False  # the token guards every Triton API but health (liveness/readiness)
    last_error: str | None = None  # why the last (re)start failed; the session was kept, stopped
    discovered_by: str | None = None  # "k8s:NAMESPACE/SELECTOR": a pod found there (leaves with the pod)
    restart: str | None = None  # "on-crash": its supervisor restarts a server that crashed (None: never)
    engine: str = TRITON  # triton | vllm | mindie (the last two only attached: sessions.server.engines)
    ca_file: Path | None = None  # the CA that signs an HTTPS server's certificate (attach --ca)

    def replace(self, **changes: Any) -> SessionRecord:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)


_PATH_FIELDS = ("repository", "spec", "backend_dir", "log_path", "session_dir", "ca_file")
_REQUIRED = ("name", "started_at", "http_url")
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "name": (str,),
    "pid": (int,),
    "started_at": (int, float),
    "http_url": (str,),
    "grpc_url": (str,),
    "metrics_url": (str,),
    "token_ref": (str,),
    "attached": (bool,),
    "state": (str,),
    "pid_create_time": (int, float),
    "pid_start_ticks": (int,),
    "exit_code": (int,),
    "stopped_at": (int, float),
    "stop_requested_at": (int, float),
    "models": (list,),
    "chosen_models": (list,),
    "tritonserver": (str,),
    "tritonserver_origin": (str,),
    "explicit_tritonserver": (str,),
    "listen": (str,),
    "token_header": (str,),
    "public_health": (bool,),
    "last_error": (str,),
    "discovered_by": (str,),
    "restart": (str,),
    "engine": (str,),
    **{name: (str,) for name in _PATH_FIELDS},
}


def record_to_dict(record: SessionRecord) -> dict[str, Any]:
    """Plain YAML/JSON-able data for a record."""
    data: dict[str, Any] = {}
    for field in dataclasses.fields(record):
        value = getattr(record, field.name)
        if isinstance(value, Path):
            value = str(value)
        elif isinstance(value, tuple):
            value = list(value)
        data[field.name] = value
    return data


def record_from_dict(data: Any, source: Path) -> SessionRecord:
    """Validate plain data read from `source` into a record, or raise a RegistryError naming the field."""
    if not isinstance(data, dict):
        raise RegistryError(f"{source}: not a session file (expected a mapping of fields)")
    for required in _REQUIRED:
        if data.get(required) is None:
            raise RegistryError(f"{source}: missing field '{required}'")
    known = {f.name for f in dataclasses.fields(SessionRecord)}
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key not in known or value is None:
            continue
        expected = _FIELD_TYPES.get(key)
        sneaky_bool = bool not in (expected or ()) and isinstance(value, bool)
        if expected and (not isinstance(value, expected) or sneaky_bool):
            raise RegistryError(f"{source}: field '{key}' has a bad value {value!r}")
        values[key] = _field_value(key, value)
    if values.get("state", STARTING) not in (STARTING, READY, STOPPED):
        raise RegistryError(f"{source}: field 'state' must be one of starting, ready, stopped")
    if values.get("engine", TRITON) not in (TRITON, *ATTACHABLE):
        raise RegistryError(f"{source}: field 'engine' must be one of {', '.join((TRITON, *ATTACHABLE))}")
    for optional in ("pid", "grpc_url", "metrics_url", "token_ref", *_PATH_FIELDS):
        values.setdefault(optional, None)
    values.setdefault("attached", False)
    return SessionRecord(**values)


def _field_value(key: str, value: Any) -> Any:
    """Convert a YAML value to the record's field type."""
    if key in _PATH_FIELDS:
        return Path(value)
    if key in ("models", "chosen_models"):
        return tuple(str(item) for item in value)
    return value


def validate_name(name: str) -> str:
    """A session name safe as a file name, or a ValueError saying what is allowed."""
    if not _NAME_PATTERN.match(name):
        raise InputError(f"bad session name {name!r}: use letters, digits, '.', '_' or '-' (up to 64)")
    return name


class Registry:
    """Session files under one folder (the state dir's `sessions/` unless given)."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else paths.registry_dir()

    def path_for(self, name: str) -> Path:
        """The YAML file of session `name`."""
        return self.root / f"{validate_name(name)}.yaml"

    def save(self, record: SessionRecord) -> Path:
        """Write a record atomically (readers never see half a file)."""
        target = self.path_for(record.name)
        paths.private_dir(self.root)
        text = yaml.safe_dump(record_to_dict(record), sort_keys=False)
        write_atomic(target, text)
        return target

    def save_ended(self, record: SessionRecord) -> str | None:
        """Save the record of a server that no longer runs, even on a full disk: the old record's own blocks
        make room for it (unlinked first, so a reader finds it absent for a moment, never torn or false).
        A note when room had to be made; OSError when even that failed (the session is then unrecorded)."""
        try:
            self.save(record)
            return None
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT) or not self.exists(record.name):
                raise
            full = f"{self.root} is full ({exc.strerror})"
        self.remove(record.name)
        self.save(record)
        return f"{full}: its record took the place of the old one"

    @contextlib.contextmanager
    def name_lock(self, name: str) -> Iterator[None]:
        """Hold the session name for one start at a time (a flock, released even if the holder is killed)."""
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / f".{validate_name(name)}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
                raise SessionBusy(
                    f"session '{name}' is being started by another ge-console (pid {holder}); "
                    f"wait for it, or pick another --name"
                ) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def exists(self, name: str) -> bool:
        """Whether a session file with this name exists."""
        return self.path_for(name).is_file()

    def load(self, name: str) -> SessionRecord:
        """Read one session, raising SessionNotFound or a RegistryError naming the file."""
        path = self.path_for(name)
        if not path.is_file():
            raise SessionNotFound(f"no session named '{name}' (see: ge-console ls)")
        return read_record(path)

    def named_or_serving(self, name: str | None) -> SessionRecord:
        """resolve(name), or when no session is so named the one running session that serves a model so
        named (`status MODEL`)."""
        if not name or self.path_for(name).is_file():
            return self.resolve(name)
        live = [r for r in self.scan()[0] if effective_state(r) in (STARTING, READY)]
        if not any(serves(r, name) for r in live):
            running = f" (running: {', '.join(r.name for r in live)})" if live else ""
            raise SessionNotFound(f"no session named '{name}' and no running session serves a model so named"
                                  f"{running}")
        return _serving(live, name)

    def names(self) -> list[str]:
        """Names of all stored sessions, sorted."""
        if not self.root.is_dir():
            return []
        return sorted(p.stem for p in self.root.glob("*.yaml") if _NAME_PATTERN.match(p.stem))

    def scan(self) -> tuple[list[SessionRecord], list[RegistryError]]:
        """Every readable session, plus one error per corrupt file (so one bad file hides nothing else)."""
        records: list[SessionRecord] = []
        errors: list[RegistryError] = []
        for name in self.names():
            try:
                records.append(read_record(self.path_for(name)))
            except RegistryError as exc:
                errors.append(exc)
        return records, errors

    def list(self) -> list[SessionRecord]:
        """Every session; raises the first RegistryError if any file is corrupt."""
        records, errors = self.scan()
        if errors:
            raise errors[0]
        return records

    def remove(self, name: str) -> None:
        """Forget a session (its session dir is left for the logs)."""
        with contextlib.suppress(FileNotFoundError):
            self.path_for(name).unlink()

    def resolve(self, name: str | None, running: bool = False, model: str | None = None) -> SessionRecord:
        """The named session, or when none is named the only one running (or the only one there is).
        `running`: the caller needs a server that runs (load, reload, bench), so naming a stopped one is
        no way out when none runs. `model`: the verb names one, so of several running sessions the one
        that serves it."""
        if name:
            return self.load(name)
        records, errors = self.scan()
        states = {r.name: effective_state(r) for r in records}
        live = [r for r in records if states[r.name] in (STARTING, READY)]
        if model and len(live) > 1:
            return _serving(live, model)
        if len(live) == 1:
            return live[0]
        if len(records) == 1 and not errors and not live:
            return records[0]
        if not records and not errors:
            raise SessionNotFound("no sessions (start one with: ge-console up SPEC)")
        if not live and errors:
            raise errors[0]
        if live:
            names = ", ".join(r.name for r in live)
            raise SessionAmbiguous(f"{len(live)} running sessions ({names}): name one")
        if running:
            raise SessionStopped(f"no session runs ({_in_states(states)}): start one with "
                                 f"ge-console restart NAME, or ge-console up SPEC")
        raise SessionAmbiguous(f"no session runs among {', '.join(states)}: name one")


def serves(record: SessionRecord, model: str) -> bool:
    """Whether the session serves the model or can load it: it loaded it at start, or its repository here
    has the model's folder."""
    return model in record.models or (record.repository is not None and (record.repository / model).is_dir())


def _serving(live: list[SessionRecord], model: str) -> SessionRecord:
    """The one running session that serves model; SessionAmbiguous or SessionNotFound naming the others."""
    serving = [r for r in live if serves(r, model)]
    if len(serving) == 1:
        return serving[0]
    if serving:
        raise SessionAmbiguous(f"{len(serving)} running sessions serve {model} "
                               f"({', '.join(r.name for r in serving)}): name one with -s NAME")
    raise SessionNotFound(f"no running session serves {model} (running: {', '.join(r.name for r in live)})")


def _in_states(states: dict[str, str]) -> str:
    """Sessions by state in words: 'repo, t2 are stopped; old is dead'."""
    groups: dict[str, list[str]] = {}
    for name, state in states.items():
        groups.setdefault(state, []).append(name)
    return "; ".join(f"{', '.join(names)} {'is' if len(names) == 1 else 'are'} {state}"
                     for state, names in groups.items())


def require_running(record: SessionRecord) -> SessionRecord:
    """The record if its server can take requests, else SessionStopped saying how to start it again."""
    state = effective_state(record)
    if state in (DEAD, STOPPED):
        raise SessionStopped(
            f"session '{record.name}' is {state} (start it again with: ge-console restart {record.name})"
        )
    return record


def read_record(path: Path) -> SessionRecord:
    """Parse one session file, turning YAML errors into one line with file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RegistryError(f"{path}: cannot read session file: {exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise RegistryError(f"{path}: {where}corrupt session file: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise RegistryError(f"{path}: corrupt session file: {exc}") from None
    return record_from_dict(data, path)


BOOT_TIME_JITTER_S = 1.5  # /proc/stat's btime, under psutil's create_time, moves a second as the clock is set


def process_create_time(pid: int) -> float | None:
    """When process pid started (psutil's epoch seconds), or None if there is no such live process."""
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        return float(process.create_time())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


def process_start_ticks(pid: int) -> int | None:
    """When process pid started, in clock ticks since boot (/proc/PID/stat's starttime): unlike a wall-clock
    create time it never moves, so it tells a reused pid apart exactly; None if no such live process."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(") ", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] == "Z" else int(fields[19])  # state is field 3, starttime field 22


def server_process_alive(record: SessionRecord) -> bool:
    """Whether the record's pid still runs and is the same process (not a reused pid)."""
    if record.pid is None:
        return False
    if record.pid_start_ticks is not None:
        return process_start_ticks(record.pid) == record.pid_start_ticks
    created = process_create_time(record.pid)
    if created is None:
        return False
    # a record from before start ticks were kept: the boot time under create_time moves by a second
    return record.pid_create_time is None or abs(created - record.pid_create_time) < BOOT_TIME_JITTER_S


def session_group(record: SessionRecord) -> int | None:
    """The session's process group (led by the server) if anything of it still runs, never a reused pid's."""
    group = record.pid
    if group is None or not group_alive(group):
        return None
    if server_process_alive(record):
        return group
    # Linux never hands out a pid still used as a process group id: a free leader pid means the group is ours.
    return group if process_create_time(group) is None else None


def effective_state(record: SessionRecord) -> str:
    """starting | ready | dead | stopped, reading dead when a launched server's process is gone unasked."""
    if record.state == STOPPED or record.attached:
        return record.state
    if server_process_alive(record):
        return record.state
    return STOPPED if record.stop_requested_at is not None else DEAD


def log_tail(record: SessionRecord, lines: int = 10) -> list[str]:
    """The last non-empty lines of the session's server log (empty when there is none here)."""
    return last_lines(record.log_path, lines)


def store_token(directory: Path, token: str) -> str:
    """Keep a token in a 0600 file in the session dir; returns its reference."""
    paths.private_dir(directory)
    path = directory / "token"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(token)
    os.chmod(path, 0o600)
    return f"file:{path}"


def resolve_token(token_ref: str | None) -> str | None:
    """The token a reference points at ("env:NAME" or "file:/path"), None if unset or unreadable."""
    if not token_ref:
        return None
    kind, _, where = token_ref.partition(":")
    if kind == "env":
        return os.environ.get(where) or None
    if kind == "file":
        try:
            return Path(where).read_text(encoding="utf-8").strip() or None
        except OSError:
            return None
    return None


def forget_token(record: SessionRecord) -> None:
    """Remove the session's token file (`down`): a stopped session keeps no secret on disk."""
    kind, _, where = (record.token_ref or "").partition(":")
    if kind == "file" and record.session_dir is not None and Path(where).parent == record.session_dir:
        with contextlib.suppress(OSError):
            Path(where).unlink()
