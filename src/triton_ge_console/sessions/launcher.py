"""Start a session's tritonserver detached (own process group, own log), and wait until its models are READY
and its metrics port answers.

On any failure the cause comes from Triton (its log or its repository index) and nothing is left running.
"""

from __future__ import annotations

import contextlib
import difflib
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from triton_ge_console.backend_glue.distribution import (
    DistributionError,
    TritonDistribution,
    find_distribution,
)
from triton_ge_console.backend_glue.installer import InstallError, install_backend_dir
from triton_ge_console.display import listed
from triton_ge_console.errors import GeConsoleError
from triton_ge_console.repository.build import BuildError, build_repository
from triton_ge_console.repository.progress import ElapsedHook, hooks_of
from triton_ge_console.repository.spec.load import SpecError, load_spec
from triton_ge_console.repository.spec.types import DeploymentSpec, ServerSpec
from triton_ge_console.session_states import DEAD, READY, STARTING, STOPPED
from triton_ge_console.sessions.act.control import ControlError, TritonControl, squeeze
from triton_ge_console.sessions.act.digests import record_loaded_digests
from triton_ge_console.sessions.observe.health import stub_backends
from triton_ge_console.sessions.observe.trace import TRACE_FILE_NAME, clear_trace_files, trace_server_args
from triton_ge_console.sessions.server import paths
from triton_ge_console.sessions.server.access import categories_in_words, restriction_argument, token_problem
from triton_ge_console.sessions.server.process import (
    Ports,
    http_ok,
    listen_host,
    pick_ports,
    port_in_use,
    server_args,
    stop_process_group,
)
from triton_ge_console.sessions.server.registry import (
    Registry,
    SessionBusy,
    SessionRecord,
    effective_state,
    process_create_time,
    process_start_ticks,
    session_group,
    store_token,
    validate_name,
)
from triton_ge_console.sessions.server.restart_policy import ON_CRASH, RESTART_POLICIES
from triton_ge_console.sessions.server.server_log import log_cause, port_taken, quoted_port
from triton_ge_console.sessions.server.shm import new_shm_prefix, shm_arguments
from triton_ge_console.sessions.server.supervise import (
    LOG_GENERATIONS,
    LOG_NAME,
    SupervisedServer,
    stop_supervisor,
)
from triton_ge_console.sessions.server.token_header import TOKEN_HEADER
from triton_ge_console.triton_args import extra_args_problem, last_option, port_option, switched_off
from triton_ge_console.triton_terms import MODEL_READY, MODEL_UNAVAILABLE, is_loopback, parse_endpoint

PORT_RACE_ATTEMPTS = 3
BACKENDS_DIR = "backends"
Notify = Callable[[str], None]


class LaunchError(GeConsoleError, RuntimeError):
    """A session could not be started; one line saying why (nothing was left running)."""


@dataclass(frozen=True)
class LaunchOptions:
    """What `ge-console up` was asked for; None means "from the spec, else the default"."""

    source: Path  # a spec file, or a model repository folder used in place
    name: str | None = None
    tritonserver: str | None = None
    listen: str | None = None
    token: str | None = None
    public_health: bool = False  # with a token: leave Triton's health category (live/ready) open
    http_port: int | None = None
    grpc_port: int | None = None
    metrics_port: int | None = None
    models: tuple[str, ...] = ()  # which models to serve (default: the spec's, or every model folder)
    timeout: float = 180.0
    exit_timeout_s: int = 10  # Triton's grace for in-flight requests on SIGTERM
    extra_args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)  # extra server environment (CANN diagnostics)
    restart: str | None = None  # "on-crash" or "never" (None: the spec's server.restart, else never)


@dataclass(frozen=True)
class _Plan:
    """Everything decided before the server starts."""

    name: str
    spec: DeploymentSpec | None
    repository: Path
    models: tuple[str, ...]
    chosen: tuple[str, ...]  # the spec's models `--model` named (empty: all)
    server: ServerSpec
    listen: str
    metrics_bind: str | None  # where Triton's metrics listen (None: turned off)
    restart: str  # never | on-crash


def launch(
    options: LaunchOptions, registry: Registry | None = None, notify: Notify | None = None
) -> SessionRecord:
    """Start a session and wait for it; raises LaunchError with the cause, leaving nothing running."""
    say = notify or (lambda _line: None)
    registry = registry or Registry()
    if not options.timeout > 0:  # a start that cannot wait at all would be killed while it sets up
        raise LaunchError(f"--timeout {options.timeout:g}: must be a positive number of seconds")
    plan = _plan(options)
    try:
        with registry.name_lock(plan.name):  # two `up` of one name: the second is refused, not started
            return _launch_locked(plan, options, registry, say)
    except SessionBusy as exc:
        raise LaunchError(str(exc)) from None


def _launch_locked(plan: _Plan, options: LaunchOptions, registry: Registry, say: Notify) -> SessionRecord:
    """Start the session while holding its name; a failed start leaves no backends and the old record."""
    previous = _refuse_running(registry, plan.name)
    dist = _distribution(options.tritonserver)
    say(f"tritonserver: {dist.binary} (found via {dist.origin})")
    workdir = paths.session_dir(plan.name)
    if plan.spec is None and _inside(workdir, plan.repository):
        raise LaunchError(
            f"the session dir {workdir} is inside the repository {plan.repository}; "
            f"set $GE_CONSOLE_STATE_DIR elsewhere"
        )
    if previous is not None:
        say(f"session '{plan.name}' was {effective_state(previous)}: starting it anew "
            f"(its last log is kept as {LOG_NAME}.1, older ones as .2 to .{LOG_GENERATIONS})")
    paths.private_dir(workdir)
    try:
        record = _set_up_and_start(plan, options, dist, workdir, registry, say)
    except BaseException:
        shutil.rmtree(workdir / BACKENDS_DIR, ignore_errors=True)
        if previous is not None:
            with contextlib.suppress(OSError):  # the stopped session stays listed, as it was
                registry.save(previous)
        raise
    record_loaded_digests(record)
    return record


def _set_up_and_start(
    plan: _Plan, options: LaunchOptions, dist: TritonDistribution, workdir: Path, registry: Registry,
    say: Notify,
) -> SessionRecord:
    """Install backends, build the repository, start the server and wait for it."""
    backend_dir = _backend_dir(workdir, dist, say)
    repository = _repository(plan, workdir, say)
    token_ref = store_token(workdir, options.token) if options.token else None
    paths.make_private(workdir)
    if not is_loopback(plan.listen):
        bind = plan.metrics_bind  # never exposed: _plan refuses that
        metrics = (f"metrics stay on {bind} (loopback only: no token guards them)" if bind
                   else "metrics are off")
        say(
            f"warning: exposing Triton on {plan.listen}; {categories_in_words(options.public_health)} need "
            f"the token (header {TOKEN_HEADER}); {metrics}"
        )
    return _start_retrying_port_races(
        plan, options, dist, _Dirs(repository, backend_dir, workdir), token_ref, registry, say
    )


def _start_retrying_port_races(
    plan: _Plan,
    options: LaunchOptions,
    dist: TritonDistribution,
    dirs: _Dirs,
    token_ref: str | None,
    registry: Registry,
    say: Notify,
) -> SessionRecord:
    """Start the server; a port picked free but taken before Triton bound it is picked again."""
    for attempt in range(1, PORT_RACE_ATTEMPTS + 1):
        ports = _ports(options, plan)
        try:
            return _start(plan, options, dist, ports, dirs, token_ref, registry, hooks_of(say)[1])
        except LaunchError as exc:
            taken = _picked_port_taken(str(exc), ports, options, plan)
            if taken is None:
                raise
            if attempt == PORT_RACE_ATTEMPTS:
                raise LaunchError(
                    f"{taken} was taken before tritonserver could bind it, on each of {PORT_RACE_ATTEMPTS} "
                    f"attempts with freshly picked ports: {exc}"
                ) from None
            say(f"{taken} was taken before tritonserver could bind it; retrying with freshly picked ports "
                f"(attempt {attempt + 1} of {PORT_RACE_ATTEMPTS})")
    raise AssertionError("unreachable")


def _picked_port_taken(cause: str, ports: Ports, options: LaunchOptions, plan: _Plan) -> str | None:
    """Which port ge-console picked (e.g. "http port 8000") Triton found taken, by its words; None when it
    was no port, or one the operator or the spec gave (another pick cannot help)."""
    if not port_taken(cause):
        return None
    port = quoted_port(cause)
    given = _given_ports(options, plan)
    if port is None:  # words without the port: a pick may help only if every port was picked
        return None if any(given.values()) else "a picked port"
    kinds = [kind for kind in given if getattr(ports, kind) == port and not given[kind]]
    return f"{kinds[0]} port {port}" if kinds else None


@dataclass(frozen=True)
class _Dirs:
    """The folders a session's server runs with."""

    repository: Path
    backend_dir: Path
    workdir: Path


def _start(
    plan: _Plan,
    options: LaunchOptions,
    dist: TritonDistribution,
    ports: Ports,
    dirs: _Dirs,
    token_ref: str | None,
    registry: Registry,
    elapsed: ElapsedHook | None = None,
) -> SessionRecord:
    """Spawn the server, register it as starting, and wait; on failure stop it and forget it."""
    clear_trace_files(dirs.workdir / TRACE_FILE_NAME)  # an earlier run's figures are not this run's
    args = _arguments(plan, options, dirs.repository, dirs.backend_dir, ports, dirs.workdir)
    args += shm_arguments(new_shm_prefix(dirs.workdir), stub_backends(dirs.backend_dir))
    ports = _served_ports(args)
    log_path = dirs.workdir / LOG_NAME
    env = _server_env(plan, options, dist, dirs)
    watched = plan.name if plan.restart == ON_CRASH else None
    server = SupervisedServer(dist.binary, args, env, log_path, dirs.workdir, restart_session=watched)
    try:  # from the spawn on: whatever fails (even saving the record), no server is left running
        server.start()
        record = _record(plan, options, dist, server, ports, dirs, token_ref)
        registry.save(record)
        _wait_ready(server, record, options, elapsed)
    except BaseException:
        server.stop()
        with contextlib.suppress(OSError):  # an unwritable registry must not hide the original error
            registry.remove(plan.name)
        raise
    record = record.replace(state=READY)
    registry.save(record)
    return record


def _server_env(plan: _Plan, options: LaunchOptions, dist: TritonDistribution, dirs: _Dirs) -> dict[str, str]:
    """The server's environment: the glue's device pool in the session folder, sized by the spec.

    The token (e.g. the variable `--token-env` named) is left out: Triton takes it on its command line.
    """
    env = dist.environment()
    env["GE_GLUE_RUN_DIR"] = str(dirs.workdir / "ge-glue")
    env["GE_NPU_MEMORY_GIB"] = f"{plan.server.npu_memory_gib:g}"
    env.update(options.env)
    if options.token:
        env = {key: value for key, value in env.items() if value != options.token}
    return env


def _given_ports(options: LaunchOptions, plan: _Plan) -> dict[str, int]:
    """The port of each kind the operator (over the spec) chose; 0: ge-console picks it."""
    return {
        "http": options.http_port if options.http_port is not None else plan.server.http_port,
        "grpc": options.grpc_port if options.grpc_port is not None else plan.server.grpc_port,
        "metrics": options.metrics_port if options.metrics_port is not None else plan.server.metrics_port,
    }


def _plan(options: LaunchOptions) -> _Plan:
    """Read the source (spec or repository) and settle name, models and listen address."""
    source = Path(options.source).expanduser()
    if not source.exists():
        raise LaunchError(f"{source}: no such spec file or model repository")
    spec = _spec(source) if source.is_file() else None
    repository = source.resolve() if spec is None else Path()
    chosen = tuple(dict.fromkeys(options.models)) if spec else ()
    if spec is not None:
        _refuse_unknown(chosen, tuple(m.name for m in spec.models), f"{source}: no model", "it has")
        spec = spec.only(chosen)
    models = tuple(m.name for m in spec.models) if spec else options.models or _repository_models(repository)
    if spec is None:
        _refuse_unknown(models, _repository_models(repository), f"{repository}: no model folder", "it has")
    name = options.name or (spec.name if spec else repository.name)
    try:
        validate_name(name)
    except ValueError as exc:
        raise LaunchError(str(exc)) from None
    server = spec.server if spec else ServerSpec()
    listen = options.listen or server.listen or "127.0.0.1"
    if problem := extra_args_problem(options.extra_args):  # the spec's were checked at its load
        raise LaunchError(problem)
    if options.token is not None and (problem := token_problem(options.token)):
        raise LaunchError(problem)
    if not is_loopback(listen) and not options.token:
        raise LaunchError(
            f"--listen {listen} would expose the server without access control: give --token "
            f"(Triton then restricts {categories_in_words(options.public_health)})"
        )
    metrics_bind = _metrics_bind((*server.extra_args, *options.extra_args), listen)
    if metrics_bind is not None and not is_loopback(metrics_bind):  # no token can lock them: refused
        raise LaunchError(
            f"tritonserver argument --metrics-address={metrics_bind}: would expose Triton's metrics, which "
            f"take no token; keep them on a loopback address (default {_metrics_host(listen)}) and reach "
            f"them through a tunnel or a proxy that checks access"
        )
    restart = options.restart or server.restart
    if restart not in RESTART_POLICIES:
        raise LaunchError(f"--restart {restart}: must be one of {', '.join(RESTART_POLICIES)}")
    return _Plan(name, spec, repository, models, chosen, server, listen, metrics_bind, restart)


def _refuse_unknown(named: tuple[str, ...], known: tuple[str, ...], missing: str, having: str) -> None:
    """A LaunchError for the first `--model` that is not among known, with the closest and every known."""
    for name in named:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            meant = f" (did you mean '{close[0]}'?)" if close else ""
            raise LaunchError(f"{missing} '{name}'{meant}; {having} {', '.join(known)}")


def _spec(path: Path) -> DeploymentSpec:
    """The deployment spec, or a LaunchError listing its problems on one line."""
    try:
        return load_spec(path)
    except SpecError as exc:
        raise LaunchError("; ".join(listed([str(problem) for problem in exc.problems]))) from None


def _repository_models(repository: Path) -> tuple[str, ...]:
    """Every model folder of a repository (Triton ignores hidden folders)."""
    models = tuple(sorted(p.name for p in repository.iterdir() if p.is_dir() and not p.name.startswith(".")))
    if not models:
        raise LaunchError(f"{repository}: no model folders (expected <repository>/<model>/config.pbtxt)")
    return models


def _refuse_running(registry: Registry, name: str) -> SessionRecord | None:
    """Refuse to reuse the name of a session that is still starting or running; the stopped one, if any."""
    if not registry.exists(name):
        return None
    current = registry.load(name)
    if effective_state(current) == DEAD and current.session_dir is not None:
        stop_supervisor(current.session_dir)  # one waiting to restart its crashed server: it restarts nothing
    leftover = session_group(current) if effective_state(current) == DEAD else None
    if leftover is not None:  # a dead server's orphaned stubs: nothing of them is worth waiting for
        stop_process_group(leftover, 1.0)
    if effective_state(current) not in (DEAD, STOPPED):
        where = "attached to" if current.attached else "serving"
        raise LaunchError(
            f"session '{name}' is already {where} {current.http_url}; "
            f"run ge-console down {name} first, or pick another --name"
        )
    return current


def _distribution(explicit: str | None) -> TritonDistribution:
    """The tritonserver to run, or a LaunchError saying where we looked."""
    try:
        return find_distribution(explicit)
    except DistributionError as exc:
        raise LaunchError(str(exc)) from None


def _backend_dir(workdir: Path, dist: TritonDistribution, say: Notify) -> Path:
    """The session's backend dir: Triton's Python backend plus the ge / npu_ge glue (or native npu_ge)."""
    try:
        report = install_backend_dir(workdir / BACKENDS_DIR, dist)
    except InstallError as exc:
        raise LaunchError(str(exc)) from None
    say(f"backends: {report.dest} (npu_ge: {report.npu_ge})")
    return report.dest


def _repository(plan: _Plan, workdir: Path, say: Notify) -> Path:
    """The repository Triton serves: built from the spec into the session dir, or the given one in place."""
    if plan.spec is None:
        say(f"repository: {plan.repository} (used in place)")
        return plan.repository
    try:
        report = build_repository(plan.spec, workdir / "repository", progress=hooks_of(say)[0])
    except BuildError as exc:
        raise LaunchError(str(exc)) from None
    say(f"repository: {report.repository} (built from {plan.spec.path})")
    return report.repository


def _ports(options: LaunchOptions, plan: _Plan) -> Ports:
    """Given ports (options over spec) must be free; the rest are picked free."""
    wanted = _given_ports(options, plan)
    probe_host, metrics_host = _local_host(plan.listen), _metrics_host(plan.listen)
    for kind, port in wanted.items():
        host = metrics_host if kind == "metrics" else probe_host
        if port and port_in_use(port, host):
            raise LaunchError(f"{kind} port {port} is already in use on {host}")
    return pick_ports(
        wanted["http"], wanted["grpc"], wanted["metrics"], host=probe_host, metrics_host=metrics_host
    )


def _local_host(listen: str) -> str:
    """The address this machine reaches a listen address at, in its family (wildcards: the loopback)."""
    return {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(listen, listen)


def _metrics_host(listen: str) -> str:
    """Metrics follow a loopback listen; an exposed server keeps them on 127.0.0.1 (no token guards them)."""
    return _local_host(listen) if is_loopback(listen) else "127.0.0.1"


def _arguments(
    plan: _Plan, options: LaunchOptions, repository: Path, backend_dir: Path, ports: Ports, workdir: Path
) -> list[str]:
    """tritonserver's command line for this session."""
    server = plan.server
    extra = [f"--load-model={model}" for model in plan.models]
    extra += [
        f"--metrics-interval-ms={server.metrics_interval_ms}",
        f"--exit-timeout-secs={options.exit_timeout_s}",
    ]
    if server.summary_latencies:
        extra.append("--metrics-config=summary_latencies=true")
    extra += [f"--backend-config={backend},{key}={value}" for backend, key, value in server.backend_config]
    if server.log_verbose:
        extra.append(f"--log-verbose={server.log_verbose}")
    extra += trace_server_args(workdir / TRACE_FILE_NAME)
    if options.token:
        restriction = restriction_argument(options.token, TOKEN_HEADER, options.public_health)
        extra += [f"--http-restricted-api={restriction}", f"--grpc-restricted-protocol={restriction}"]
    extra += [*server.extra_args, *options.extra_args]
    metrics = _metrics_host(plan.listen)
    return server_args(
        repository, backend_dir, ports, host=plan.listen, extra=tuple(extra), metrics_host=metrics
    )


def _record(
    plan: _Plan,
    options: LaunchOptions,
    dist: TritonDistribution,
    server: SupervisedServer,
    ports: Ports,
    dirs: _Dirs,
    token_ref: str | None,
) -> SessionRecord:
    """The registry entry of a just-started server."""
    host = _url_host(plan.listen)
    pid = server.pid
    metrics = _local_host(plan.metrics_bind) if plan.metrics_bind else None
    return SessionRecord(
        name=plan.name, pid=pid, started_at=time.time(), http_url=f"http://{host}:{ports.http}",
        grpc_url=f"{host}:{ports.grpc}",
        metrics_url=f"http://{_url_host(metrics)}:{ports.metrics}/metrics" if metrics else None,
        repository=dirs.repository, spec=plan.spec.path if plan.spec else None, backend_dir=dirs.backend_dir,
        log_path=server.log_path, token_ref=token_ref, attached=False, session_dir=dirs.workdir,
        state=STARTING, pid_create_time=process_create_time(pid) if pid else None,
        pid_start_ticks=process_start_ticks(pid) if pid else None, models=plan.models,
        chosen_models=plan.chosen,
        tritonserver=str(dist.binary), tritonserver_origin=dist.origin,
        explicit_tritonserver=options.tritonserver, listen=plan.listen, public_health=options.public_health,
        restart=plan.restart,
    )


def _served_ports(args: list[str]) -> Ports:
    """The ports tritonserver takes from its arguments: extra ones may override ours (checked by _plan:
    every port a number)."""
    http, grpc, metrics = (port_option(args, f"--{kind}-port") for kind in ("http", "grpc", "metrics"))
    if http is None or grpc is None or metrics is None:
        raise AssertionError("server_args always gives the three ports")
    return Ports(http, grpc, metrics)


def _metrics_bind(args: Sequence[str], listen: str) -> str | None:
    """Where Triton's metrics listen by its last word on them in args (None: turned off); without one,
    where ge-console puts them."""
    if switched_off(args, "--allow-metrics"):
        return None
    address = last_option(args, "--metrics-address")
    return listen_host(address) if address else _metrics_host(listen)


def _wait_ready(server: SupervisedServer, record: SessionRecord, options: LaunchOptions,
                elapsed: ElapsedHook | None = None) -> None:
    """Wait until every session model is READY and then (if Triton serves metrics) its metrics port
    answers, which Triton opens after the HTTP one: a console polling at once must find it; LaunchError
    with the cause if not, within the one --timeout."""
    deadline = time.monotonic() + options.timeout
    _wait_models(server, record, options, deadline, elapsed)
    if record.metrics_url:
        _wait_metrics(server, record.metrics_url, options, deadline, elapsed)


def _wait_models(server: SupervisedServer, record: SessionRecord, options: LaunchOptions, deadline: float,
                 elapsed: ElapsedHook | None) -> None:
    """Wait until the server answers and every session model is READY.
    Triton says nothing of a load's progress, so `elapsed` hears how long the wait has lasted."""
    started = time.monotonic()
    control = TritonControl(record.http_url, options.token, log_path=record.log_path, timeout=10.0)
    what = f"loading {', '.join(record.models) or 'models'}"
    while time.monotonic() < deadline:
        if elapsed is not None:
            elapsed(what, time.monotonic() - started)
        _check_running(server)
        try:
            states = {m.name: m for m in control.index() if m.name in record.models}
        except ControlError:
            states = {}  # not listening yet
        failed = [m for m in states.values() if m.state == MODEL_UNAVAILABLE and m.reason]
        if failed:
            first = failed[0]
            raise LaunchError(f"model '{first.name}' failed to load: {squeeze(first.reason or '')}")
        if len(states) == len(record.models) and all(m.state == MODEL_READY for m in states.values()):
            return
        time.sleep(0.05)
    raise LaunchError(f"models not READY after {options.timeout:.0f}s: {log_cause(server.log_path)}")


def _wait_metrics(server: SupervisedServer, metrics_url: str, options: LaunchOptions, deadline: float,
                  elapsed: ElapsedHook | None) -> None:
    """Wait until the metrics endpoint answers; the LaunchError names its port."""
    started = time.monotonic()
    port = parse_endpoint(metrics_url, strict=False, path_allowed=True).port
    what = f"waiting for metrics port {port}"
    while not http_ok(metrics_url):
        if time.monotonic() >= deadline:
            raise LaunchError(
                f"metrics port {port} did not answer within {options.timeout:.0f}s "
                f"({metrics_url}; the models are READY): {log_cause(server.log_path)}"
            )
        if elapsed is not None:
            elapsed(what, time.monotonic() - started)
        _check_running(server)
        time.sleep(0.05)


def _check_running(server: SupervisedServer) -> None:
    """Raise with the log's cause if the server exited while we waited."""
    if server.pid is None or server.exited():
        code = server.exit_code()
        raise LaunchError(f"tritonserver exited with code {code}: {log_cause(server.log_path)}")
    fatal = server.fatal_line()
    if fatal:
        raise LaunchError(f"the server cannot come up: {fatal}")


def _url_host(listen: str) -> str:
    """The host clients on this machine use for a listen address."""
    if listen in ("0.0.0.0", "::"):
        return "127.0.0.1"
    return f"[{listen}]" if ":" in listen else listen


def _inside(path: Path, folder: Path) -> bool:
    """Whether path is folder or below it."""
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True
