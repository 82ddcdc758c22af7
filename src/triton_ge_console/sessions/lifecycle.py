"""Stop, restart, attach and describe sessions: `down`, `restart`, `attach`, `status`."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import psutil

from triton_ge_console.repository.progress import hooks_of, ticking
from triton_ge_console.session_states import DEAD, NOT_ANSWERING, READY, STARTING, STOPPED
from triton_ge_console.sessions.act.control import (
    LIVE,
    NO_REPLY,
    ControlError,
    ModelState,
    ServerNotAnswering,
    TritonControl,
    controller_for,
)
from triton_ge_console.sessions.launcher import LaunchError, LaunchOptions, Notify, launch
from triton_ge_console.sessions.live import LiveSource
from triton_ge_console.sessions.observe.engine_poller import NOTHING_AT
from triton_ge_console.sessions.observe.generation import generation_row
from triton_ge_console.sessions.observe.health import LeakedEnd, instance_watch, leaked_in_words
from triton_ge_console.sessions.observe.snapshot import EngineMemory, ModelSnapshot
from triton_ge_console.sessions.server import paths
from triton_ge_console.sessions.server.access import session_reach, token_problem
from triton_ge_console.sessions.server.engines import ATTACHABLE, TRITON, default_metrics_url
from triton_ge_console.sessions.server.engines import label as engine_label
from triton_ge_console.sessions.server.events import SessionEvent, read_events, restarts
from triton_ge_console.sessions.server.process import group_alive, port_in_use, stop_process_group
from triton_ge_console.sessions.server.registry import (
    Registry,
    RegistryError,
    SessionNotFound,
    SessionRecord,
    effective_state,
    forget_token,
    log_tail,
    resolve_token,
    server_process_alive,
    session_group,
    store_token,
    validate_name,
)
from triton_ge_console.sessions.server.restart_policy import NEVER, exit_in_words
from triton_ge_console.sessions.server.server_log import EXIT_TIMEOUT
from triton_ge_console.sessions.server.shm import remove_shm_regions
from triton_ge_console.sessions.server.supervise import (
    EXIT_FILE,
    PID_FILE,
    read_number,
    stop_supervisor,
    supervisor_running,
)
from triton_ge_console.sessions.server.token_header import TOKEN_HEADER
from triton_ge_console.triton_terms import DEFAULT_PORTS, MODEL_READY, parse_endpoint

ORPHAN_GRACE_S = 1.0
HEALTH_WINDOW_S = 1.0  # how long `status` watches a model with failed requests for FAILING


@dataclass(frozen=True)
class StopResult:
    """What `down` did."""

    record: SessionRecord
    message: str
    exit_code: int | None = None
    ports_freed: bool = True
    recorded: bool = True  # the registry says what happened (a full or read-only state dir may not let it)

    @property
    def ok(self) -> bool:
        """Whether everything `down` does was done: ports free, the outcome recorded."""
        return self.ports_freed and self.recorded


def down(
    record: SessionRecord, registry: Registry, timeout: float = 15.0, forget: bool = False,
    notify: Notify | None = None,
) -> StopResult:
    """Stop a launched session's process group (SIGTERM, then SIGKILL), or just detach an attached one;
    `notify` hears what the stop waits for (a Feed's elapsed hook its time) while Triton unloads."""
    if record.attached:
        registry.remove(record.name)
        forget_token(record)
        return StopResult(record, f"detached from {record.http_url} (the server keeps running)")
    code: int | None = record.exit_code
    if record.session_dir is not None:  # first: its supervisor restarts nothing it stops
        stop_supervisor(record.session_dir)
        record = _following_restart(record, registry)
    state = effective_state(record)
    group = session_group(record)
    leaked = LeakedEnd([], [])
    if group is not None:
        # with the server gone, its orphaned stubs (they ignore SIGTERM) have nothing to finish: kill soon
        alive = server_process_alive(record)
        if alive:  # else Triton waits out its exit timeout for them
            leaked = end_leaked_stubs(record)
        grace = timeout if alive else ORPHAN_GRACE_S
        if alive and record.stop_requested_at is None:  # noted first: we may be killed before the end
            record = record.replace(stop_requested_at=time.time())
            with contextlib.suppress(OSError):  # a full or read-only state dir must not keep it running
                registry.save(record)
        waiting = _waiting_for(record) if alive and notify is not None else None
        if notify is not None and waiting is not None:
            notify(waiting)
        with ticking(f"stopping '{record.name}'", hooks_of(notify)[1] if waiting else None):
            code = stop_process_group(group, grace)
            _wait_exit_recorded(record, timeout=2.0)
    code = server_exit_code(record) if server_exit_code(record) is not None else code
    freed = _wait_ports_free(record, timeout=10.0)
    regions = remove_shm_regions(record.session_dir) if record.session_dir is not None else 0
    forget_token(record)
    stopped = record.replace(state=STOPPED, stopped_at=time.time(), exit_code=code)
    recorded, record_note = _record_stopped(stopped, registry, forget)
    what = "was already stopped" if state == STOPPED else "was dead" if state == DEAD else "stopped"
    notes = [_exit_timeout_note(record)] if code not in (None, 0) else []
    notes += [f"removed {regions} shared-memory region(s) it left"] if regions else []
    notes += [f"ended {len(leaked.ended)} leaked stub process(es) of model instances Triton no longer "
              f"served: {leaked_in_words(leaked.ended)}"] if leaked.ended else []
    notes += [f"still running after SIGKILL: {leaked_in_words(leaked.alive)}"] if leaked.alive else []
    notes += [] if freed else ["some ports are still in use"]
    notes += [record_note]
    forgotten = "" if not forget else " and forgotten" if what == "stopped" else "; forgotten now"
    message = f"session '{record.name}' {what}{forgotten}" + "".join(f"; {note}" for note in notes if note)
    return StopResult(stopped, message, code, freed, recorded)


def _waiting_for(record: SessionRecord) -> str:
    """What a stop waits for, in words: Triton unloads every model it serves before it exits (the models
    it says are READY; those it started with when it does not answer)."""
    try:
        ready = [m.name for m in controller_for(record, timeout=2.0).index() if m.state == MODEL_READY]
    except ControlError:
        ready = list(record.models)
    names = sorted(dict.fromkeys(ready))
    plural = "" if len(names) == 1 else "s"
    what = f"unload {len(names)} model{plural} ({', '.join(names)})" if names else "exit"
    return f"stopping '{record.name}': waiting for tritonserver (pid {record.pid}) to {what}…"


def _record_stopped(stopped: SessionRecord, registry: Registry, forget: bool) -> tuple[bool, str | None]:
    """Record the stop (or forget the session): (whether the registry now says what is true, a note).
    A full state dir still gets the record; one that takes no write at all is said, with what it reads."""
    try:
        if forget:
            registry.remove(stopped.name)
            return True, None
        return True, registry.save_ended(stopped)
    except OSError as exc:
        where = registry.path_for(stopped.name)
        if forget:
            return False, f"its record {where} could not be removed ({exc.strerror or exc})"
        if not where.exists():
            return False, f"its record could not be written ({exc.strerror or exc}), so it is forgotten"
        return False, (f"its record {where} could not be updated ({exc.strerror or exc}): status reads it "
                       f"dead until ge-console down {stopped.name} runs again with room to write")


def end_leaked_stubs(record: SessionRecord) -> LeakedEnd:
    """End the Python stubs of model generations the session's server no longer serves (a reload of a
    model one of whose instances had died leaves the others running for good); those ended."""
    watch = instance_watch(session_reach(record))
    return watch.end_leaked() if watch is not None else LeakedEnd([], [])


def _following_restart(record: SessionRecord, registry: Registry) -> SessionRecord:
    """The record as it is now: a supervisor may have restarted the server since the caller read it."""
    with contextlib.suppress(SessionNotFound, RegistryError, OSError):
        current = registry.load(record.name)
        if current.pid != record.pid and current.state != STOPPED:
            return current
    return record


def _exit_timeout_note(record: SessionRecord) -> str | None:
    """Why Triton exited non-zero on a stop, when its log says: a model it could not unload in time."""
    if any(EXIT_TIMEOUT in line for line in log_tail(record, 5)):
        return "Triton's exit timeout expired with a model still unloading (as one whose instance died does)"
    return None


def down_unreadable(
    name: str, registry: Registry, problem: Exception, timeout: float = 15.0, forget: bool = False
) -> tuple[str, bool]:
    """Stop a session whose file is unreadable, by its supervisor's pid file; (message, stopped or forgot)."""
    group = _group_from_pid_file(paths.session_dir(name))
    if group is not None:
        stop_process_group(group, timeout)
    if forget:
        registry.remove(name)
    did = "stopped" if group is not None else "had nothing running"
    if forget:
        return f"session '{name}' {did} and forgotten (its session file was unreadable: {problem})", True
    return (
        f"session '{name}' {did}; its session file is unreadable ({problem}): "
        f"ge-console down {name} --forget removes it",
        group is not None,
    )


def _group_from_pid_file(workdir: Path) -> int | None:
    """The process group of the server a session dir's supervisor started, if anything of it still runs."""
    pid = read_number(workdir / PID_FILE)
    if pid is None or not group_alive(pid):
        return None
    try:
        cwd = Path(psutil.Process(pid).cwd())
    except psutil.NoSuchProcess:  # the leader is gone but its group lives on: a pgid is never reused
        return pid
    except psutil.Error:
        return None
    return pid if cwd == workdir.resolve() else None  # the supervisor runs the server in the session dir


def server_exit_code(record: SessionRecord) -> int | None:
    """How the server ended, as its supervisor recorded it (negative: killed by that signal)."""
    if record.session_dir is None or record.attached:
        return None
    return read_number(record.session_dir / EXIT_FILE)


def _wait_exit_recorded(record: SessionRecord, timeout: float) -> None:
    """Give the supervisor a moment to record how the server ended (it ends what the server left first),
    while there is a supervisor to do it."""
    deadline = time.monotonic() + timeout
    while (record.session_dir is not None and server_exit_code(record) is None
           and supervisor_running(record.session_dir) and time.monotonic() < deadline):
        time.sleep(0.02)


def recorded_exit_code(record: SessionRecord, timeout: float = 2.0) -> int | None:
    """How a dead server ended, once its supervisor has recorded it (None: not recorded)."""
    _wait_exit_recorded(record, timeout)
    return server_exit_code(record)


def _wait_ports_free(record: SessionRecord, timeout: float) -> bool:
    """Wait until nothing listens on the session's ports any more."""
    endpoints = [_endpoint(url) for url in (record.http_url, record.grpc_url, record.metrics_url) if url]
    busy = [(host, port) for host, port in endpoints if port]
    deadline = time.monotonic() + timeout
    while any(port_in_use(port, host) for host, port in busy):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def restart(
    record: SessionRecord,
    registry: Registry,
    notify: Notify | None = None,
    timeout: float = 180.0,
    env: Mapping[str, str] | None = None,
) -> SessionRecord:
    """Stop a launched session and start it again from the same spec or repository, on the same ports.

    `env` adds to this start's server environment only (CANN plog, dump_graph, profiling switches).
    If the new start fails the session is kept, stopped, with the failure noted (and its token reference).
    """
    if record.attached:
        raise LaunchError(f"session '{record.name}' is attached: restart its server where it runs")
    source = record.spec or record.repository
    if source is None:
        raise LaunchError(f"session '{record.name}' records no spec or repository to restart from")
    token = resolve_token(record.token_ref)  # before the stop: `down` removes the token file
    if record.token_ref and not token:
        raise LaunchError(f"session '{record.name}' was started with a token, removed when it stopped: "
                          f"start it again with ge-console up ... --token")
    earlier = _stop_for_restart(record, registry)
    options = LaunchOptions(
        source=source,
        name=record.name,
        tritonserver=record.explicit_tritonserver,
        listen=record.listen,
        token=token,
        public_health=record.public_health,
        http_port=_port(record.http_url),
        grpc_port=_port(record.grpc_url),
        metrics_port=_port(record.metrics_url),
        models=record.models if record.spec is None else record.chosen_models,
        timeout=timeout,
        env=dict(env or {}),
        restart=record.restart,
    )
    try:
        return launch(options, registry, notify)
    except BaseException as exc:
        with contextlib.suppress(OSError):  # keep the original error even if the registry cannot be written
            registry.save(earlier.replace(last_error=str(exc) or type(exc).__name__))
        raise


def _stop_for_restart(record: SessionRecord, registry: Registry) -> SessionRecord:
    """Stop what still runs of a session; the stopped record is what a failed restart falls back to."""
    if effective_state(record) in (STARTING, READY) or session_group(record) is not None:
        return down(record, registry).record
    return record.replace(state=STOPPED, stopped_at=record.stopped_at or time.time())


def attach(
    url: str,
    name: str,
    registry: Registry,
    metrics_url: str | None = None,
    grpc_url: str | None = None,
    token: str | None = None,
    token_header: str = TOKEN_HEADER,
    engine: str = TRITON,
    ca_file: Path | None = None,
) -> SessionRecord:
    """Register a running server we did not start; it is watched and controlled, never killed."""
    validate_name(name)
    if engine != TRITON:
        return attach_engine(url, name, registry, engine, metrics_url=metrics_url, token=token,
                             ca_file=ca_file)
    _refuse_name_taken(name, registry)
    if token is not None and (problem := token_problem(token)):
        raise LaunchError(problem)
    http_url = _server_not_attached(url, registry)
    grpc_url = parse_endpoint(grpc_url, "--grpc-url", ("grpc",)).netloc if grpc_url else None
    metrics_url = parse_endpoint(metrics_url, "--metrics-url", path_allowed=True).url if metrics_url else None
    models = _serving_models(TritonControl(http_url, token, token_header=token_header, timeout=10.0))
    workdir = paths.session_dir(name)
    record = SessionRecord(
        name=name, pid=None, started_at=time.time(), http_url=http_url.rstrip("/"), grpc_url=grpc_url,
        metrics_url=metrics_url or _default_metrics_url(http_url), repository=None, spec=None,
        backend_dir=None, log_path=None, token_ref=store_token(workdir, token) if token else None,
        attached=True, session_dir=workdir, state=READY, models=models, token_header=token_header)
    registry.save(record)
    return record


def _refuse_name_taken(name: str, registry: Registry) -> None:
    """LaunchError when a session of that name still runs (or starts)."""
    if registry.exists(name) and effective_state(registry.load(name)) not in (DEAD, STOPPED):
        raise LaunchError(
            f"session '{name}' already exists; ge-console down {name} first or pick another --name")


def _server_not_attached(url: str, registry: Registry) -> str:
    """The server's URL as given, parsed; LaunchError when it is no URL or a running session is attached
    to that server already."""
    http_url = parse_endpoint(url).url
    _refuse_attached_twice(http_url, registry)
    return http_url


def attach_engine(url: str, name: str, registry: Registry, engine: str, metrics_url: str | None = None,
                  token: str | None = None, ca_file: Path | None = None) -> SessionRecord:
    """Register a running vLLM or MindIE server: watched (its health, models and metrics), never
    controlled; LaunchError when it does not answer as one."""
    if engine not in ATTACHABLE:
        raise LaunchError(f"--engine {engine!r}: expected one of {', '.join((TRITON, *ATTACHABLE))}")
    _refuse_name_taken(name, registry)
    if ca_file is not None and not ca_file.is_file():
        raise LaunchError(f"--ca {ca_file}: no such file")
    http_url = _server_not_attached(url, registry)
    given = parse_endpoint(metrics_url, "--metrics-url", path_allowed=True).url if metrics_url else None
    workdir = paths.session_dir(name)
    record = SessionRecord(
        name=name, pid=None, started_at=time.time(), http_url=http_url, grpc_url=None,
        metrics_url=given or default_metrics_url(engine, http_url), repository=None, spec=None,
        backend_dir=None, log_path=None, attached=True, session_dir=workdir, state=READY,
        token_header="Authorization", engine=engine, ca_file=ca_file.resolve() if ca_file else None,
        token_ref=store_token(workdir, token) if token else None)  # its form: engines.token_header
    source = LiveSource.from_record(record, npu_smi=None, sample_traces=False)
    try:
        snapshot = source.poll()
    finally:
        source.close()
    if not snapshot.live:
        forget_token(record)
        error = snapshot.error or "—"
        raise LaunchError(error if error.startswith(NOTHING_AT)
                          else f"{http_url}: no healthy {engine_label(engine)} server there ({error})")
    record = record.replace(models=tuple(m.name for m in snapshot.models))
    registry.save(record)
    return record


def _refuse_attached_twice(http_url: str, registry: Registry) -> None:
    """LaunchError naming the running attached session already at this server (however its URL is spelled):
    a second one would show and count the same server twice."""
    for record in registry.scan()[0]:
        if (record.attached and effective_state(record) not in (DEAD, STOPPED)
                and _same_server(record.http_url, http_url)):
            raise LaunchError(f"{record.http_url} is already attached as session '{record.name}': use -s "
                              f"{record.name}, or ge-console down {record.name} to attach it anew")


def _same_server(one: str, other: str) -> bool:
    """Whether two normalised endpoint URLs reach the same server (localhost is 127.0.0.1)."""
    def key(url: str) -> tuple[str, str | None, int | None]:
        parsed = parse_endpoint(url, strict=False)
        host = "127.0.0.1" if parsed.host == "localhost" else parsed.host
        return parsed.scheme, host, parsed.port
    return key(one) == key(other)


def _serving_models(control: TritonControl) -> tuple[str, ...]:
    """The models a server we attach to has READY; LaunchError if it does not answer as Triton."""
    if not control.live():
        refused = control.access_problem()  # a Triton that wants a (different) token says so
        raise LaunchError(f"{control.http_url}: "
                          f"{refused or 'no Triton server answers there (GET /v2/health/live failed)'}")
    try:
        return tuple(dict.fromkeys(m.name for m in control.index() if m.state == MODEL_READY))
    except ControlError as exc:
        raise LaunchError(f"{control.http_url}: cannot read the repository index: {exc}") from None


def _default_metrics_url(http_url: str) -> str | None:
    """Triton's default metrics endpoint beside a default HTTP port (8000 → 8002), else unknown."""
    endpoint = parse_endpoint(http_url, strict=False)
    if endpoint.port == DEFAULT_PORTS["http"] and endpoint.host:
        return f"{endpoint.scheme}://{replace(endpoint, port=DEFAULT_PORTS['metrics']).netloc}/metrics"
    return None


@dataclass(frozen=True)
class SessionStatus:
    """A session as `status` reports it."""

    record: SessionRecord
    state: str
    models: tuple[dict[str, Any], ...] = ()
    error: str | None = None
    log_tail: tuple[str, ...] = field(default=())
    exit_code: int | None = None  # how the server ended, when it has
    events: tuple[SessionEvent, ...] = ()  # this run's crashes and restarts, oldest first
    note: str | None = None  # what the server does not give, in words (MindIE's monitoring off)
    engine_memory: tuple[EngineMemory, ...] = ()  # vllm-ascend's NPU memory per worker, when reported

    def to_dict(self) -> dict[str, Any]:
        """The JSON `status --json` prints."""
        r = self.record
        return {
            "name": r.name,
            "state": self.state,
            "pid": r.pid,
            "http_url": r.http_url,
            "grpc_url": r.grpc_url,
            "metrics_url": r.metrics_url,
            "repository": _text(r.repository),
            "spec": _text(r.spec),
            "attached": r.attached,
            "discovered_by": r.discovered_by,
            "engine": r.engine,
            "ca_file": _text(r.ca_file),
            "started_at": r.started_at,
            "log_path": _text(r.log_path),
            "backend_dir": _text(r.backend_dir),
            "tritonserver": r.tritonserver,
            "exit_code": self.exit_code if self.exit_code is not None else r.exit_code,
            "models": list(self.models),
            "error": self.error,
            "note": self.note,
            "engine_memory": [dataclasses.asdict(memory) for memory in self.engine_memory],
            "log_tail": list(self.log_tail),
            "restart": None if r.attached else r.restart or NEVER,
            "restarts": len(restarts(self.events)),
            "events": [event.to_dict() for event in self.events],
        }


def session_status(record: SessionRecord, timeout: float = 5.0) -> SessionStatus:
    """State and models of a session, asking its server; a dead one comes with its log's last lines."""
    status = _session_status(record, timeout)
    return dataclasses.replace(status, events=read_events(None if record.attached else record.session_dir))


def _session_status(record: SessionRecord, timeout: float) -> SessionStatus:
    """State and models of a session, without its events."""
    state = effective_state(record)
    if state == STOPPED:
        return SessionStatus(record, state, error=record.last_error)
    if state == DEAD:
        end_leftovers(record)
        code = recorded_exit_code(record)
        return SessionStatus(
            record, state, error=_death(code), log_tail=tuple(log_tail(record)), exit_code=code
        )
    if record.engine != TRITON:
        return _engine_status(record, state)
    try:
        entries = controller_for(record, timeout).index()
    except ServerNotAnswering as exc:
        return SessionStatus(record, NOT_ANSWERING, error=f"{exc}{_stopped_note(record)}")
    except ControlError as exc:
        # a launched server still starting may not answer yet; an attached one that is not even live is dead
        return SessionStatus(record, DEAD if attached_gone(record, timeout) else state, error=str(exc))
    models = tuple(_status_row(m) for m in observe_models(record, timeout) or entries)
    wanted_ready = all(
        any(m["name"] == name and m["state"] == MODEL_READY for m in models) for name in record.models
    )
    return SessionStatus(record, READY if state == READY or wanted_ready else state, models)


def end_leftovers(record: SessionRecord) -> bool:
    """End what a dead server left running (Python stubs a crash orphaned, if its supervisor could not);
    whether anything was left."""
    leftover = session_group(record) if not record.attached else None
    if leftover is not None:
        stop_process_group(leftover, ORPHAN_GRACE_S)
    return leftover is not None


def _stopped_note(record: SessionRecord) -> str:
    """How to resume a launched server its process shows stopped (SIGSTOP, Ctrl+Z), when it is."""
    if record.attached or record.pid is None or not server_process_alive(record):
        return ""
    with contextlib.suppress(psutil.Error):
        if psutil.Process(record.pid).status() == psutil.STATUS_STOPPED:
            return f"; its process is stopped (a SIGSTOP): kill -CONT {record.pid} resumes it"
    return ""


def _engine_status(record: SessionRecord, state: str, window_s: float = HEALTH_WINDOW_S) -> SessionStatus:
    """A vLLM or MindIE session's status: two polls a window apart, so tokens/s and requests/s (counter
    deltas) are known; dead when it does not answer; the reason its figures are missing, if they are."""
    source = LiveSource.from_record(record, npu_smi=None, sample_traces=False)
    try:
        snapshot = source.poll()
        if snapshot.live:
            time.sleep(window_s)  # the window itself: a counter rate needs time to pass
            snapshot = source.poll()
    finally:
        source.close()
    if not snapshot.live:
        return SessionStatus(record, DEAD, error=snapshot.error)
    return SessionStatus(record, state, tuple(_status_row(m) for m in snapshot.models), error=snapshot.error,
                         note=snapshot.note, engine_memory=snapshot.engine_memory)


def attached_gone(record: SessionRecord, timeout: float = 5.0) -> bool:
    """Whether an attached session's server no longer answers even its liveness check (we hold no
    process of it: asking is the only way to know), so `ls` and `status` both call it dead."""
    if record.attached and record.engine != TRITON:
        source = LiveSource.from_record(record, npu_smi=None, sample_traces=False, engine_timeout=timeout)
        try:
            return not source.poll().live
        finally:
            source.close()
    return record.attached and not controller_for(record, timeout).live()


def listed_state(record: SessionRecord, timeout: float = 2.0) -> str:
    """A session's state as `ls` shows it: effective_state, not answering for a server that sends no reply
    within the timeout (hung), and dead for an attached server gone."""
    state = effective_state(record)
    if state not in (STARTING, READY):
        return state
    if record.engine != TRITON:  # a vLLM or MindIE server: its own health, not Triton's
        return DEAD if attached_gone(record, timeout) else state
    reply = controller_for(record, timeout).liveness()
    if reply == NO_REPLY:
        return NOT_ANSWERING
    return DEAD if record.attached and reply != LIVE else state


def observe_models(record: SessionRecord, timeout: float = 5.0,
                   window_s: float = HEALTH_WINDOW_S) -> tuple[ModelSnapshot, ...]:
    """The session's models with their health; where one poll cannot say how a model is now, it is
    watched for one more poll window (see _needs_window). Empty when the poll failed."""
    source = LiveSource.from_record(record, npu_smi=None, sample_traces=False)
    try:
        snapshot = source.poller.poll()
        if any(_needs_window(m) for m in snapshot.models):
            time.sleep(window_s)  # the window itself: a counter rate needs time to pass
            snapshot = source.poller.poll()
    finally:
        source.poller.close()
    return snapshot.models if snapshot.live else ()


def _needs_window(model: ModelSnapshot) -> bool:
    """Whether a second reading is needed: FAILING by counters takes two, and so do a generating model's
    token percentiles (one reading gives them since load, not of what it does now)."""
    figures = model.generation
    generating = figures is not None and bool(figures.running or figures.waiting)
    return bool(model.failure_total and not model.failing) or generating


def _status_row(model: ModelSnapshot | ModelState) -> dict[str, Any]:
    """One model for `status`: its state and health, why it is not serving (if it is not), and its failed
    requests by Triton's reason with those that timed out in the queue (None: not read)."""
    row: dict[str, Any] = {"name": model.name, "version": model.version, "state": model.state, "health": None,
           "reason": model.reason, "failures_by_reason": None, "timed_out_total": None, "generation": None,
           "success_total": None, "failure_total": None, "request_rate": None, "latency_p50_ms": None,
           "latency_p99_ms": None}
    if isinstance(model, ModelSnapshot):
        row.update(health=model.health, failures_by_reason=[list(pair) for pair in model.failures_by_reason],
                   timed_out_total=model.timed_out_total, generation=generation_row(model.generation),
                   success_total=model.success_total, failure_total=model.failure_total,
                   request_rate=model.request_rate,
                   latency_p50_ms=model.latency.p50_ms, latency_p99_ms=model.latency.p99_ms)
    return row


def _death(code: int | None) -> str:
    """How a dead server ended, in words."""
    if code is None:
        return "server process is gone (exit code unknown)"
    return f"server {exit_in_words(code)}"


def _text(path: Path | None) -> str | None:
    """A path as text for JSON."""
    return str(path) if path is not None else None


def _port(url: str | None) -> int | None:
    """The port of an http URL or host:port."""
    return parse_endpoint(url, schemes=("tcp",), strict=False).port if url else None


def _endpoint(url: str) -> tuple[str, int | None]:
    """Host and port of an http URL or host:port (an IPv6 host without its brackets)."""
    endpoint = parse_endpoint(url, schemes=("tcp",), strict=False)
    return endpoint.host or "127.0.0.1", endpoint.port
