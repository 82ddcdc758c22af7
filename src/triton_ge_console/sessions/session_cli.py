"""`ge-console up | down | restart | attach | ls | status`: a session's life.

Only the arguments are declared at import; each handler imports the work (tritonclient, the builder, psutil)
when its verb runs, so `ge-console --help` and the other areas' commands start quickly. A user error is raised
and reported once, by cli.py. The model verbs (load, unload, reload, watch) are in act/act_cli.py.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triton_ge_console.arg_types import error_line, port_number, seconds
from triton_ge_console.errors import GeConsoleError, InputError
from triton_ge_console.repository.spec.types import RESTART_POLICIES
from triton_ge_console.sessions.server.token_header import TOKEN_HEADER

if TYPE_CHECKING:
    from triton_ge_console.sessions.lifecycle import StopResult
    from triton_ge_console.sessions.server.registry import Registry, SessionRecord

UP_EPILOG = """\
exposing a server (--listen other than loopback):
  a token is required; Triton then restricts every API to it: inference, metadata, health,
  model-repository, model-config, shared-memory, statistics, logging and trace (--public-health
  leaves liveness/readiness open for load balancers). Metrics stay on 127.0.0.1 (Triton cannot
  protect them with a token); reach them through an SSH tunnel or a scraper on this host.
  `down` removes the session's token file.
  Triton only takes the token on its command line, so local users can read it (ps,
  /proc/PID/cmdline). Prefer --token-env VAR over --token: it keeps the token out of
  ge-console's own command line and your shell history:
    GE_TOKEN=... ge-console up repo --listen 0.0.0.0 --token-env GE_TOKEN
"""

def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the session commands."""
    _add_up(subparsers)
    _add_down(subparsers)
    _add_validate_session(subparsers.choices["validate"])
    attach_parser = subparsers.add_parser(
        "attach",
        help="register a running Triton, vLLM or MindIE server, or the ready pods of k8s:NAMESPACE/SELECTOR"
    )
    attach_parser.add_argument(
        "url", metavar="URL", help="its HTTP endpoint, e.g. http://npu-host:8000, or k8s:NAMESPACE/SELECTOR"
    )
    attach_parser.add_argument("--name", help="session name (k8s: a prefix for the pods' names)")
    attach_parser.add_argument(
        "--engine", choices=("triton", "vllm", "mindie"), default="triton",
        help="what serves there (default triton); vllm and mindie are watched only (no load/unload/reload)",
    )
    attach_parser.add_argument(
        "--metrics-url", help="its /metrics URL (default: Triton port 8002 beside port 8000; "
        "vLLM URL/metrics; MindIE https://127.0.0.2:1027/metrics)")
    attach_parser.add_argument("--ca", type=Path, metavar="FILE",
                               help="the CA certificate an HTTPS server's is checked against (MindIE's own)")
    attach_parser.add_argument("--grpc-url", help="its gRPC host:port")
    _add_token_options(attach_parser, "the server's token: Triton's for its restricted APIs, with --engine "
                                      "the engine's API key (vLLM --api-key)")
    attach_parser.add_argument(
        "--token-header",
        default=TOKEN_HEADER,
        help=f"header its restricted APIs check (default: {TOKEN_HEADER})",
    )
    attach_parser.set_defaults(func=run_attach)
    ls_parser = subparsers.add_parser("ls", help="list sessions")
    ls_parser.add_argument("--json", action="store_true", help="machine-readable output")
    ls_parser.add_argument("--running", action="store_true",
                           help="only sessions that are starting, ready or not answering")
    ls_parser.set_defaults(func=run_ls)
    status_parser = subparsers.add_parser("status", help="a session's state, endpoints and models")
    _add_session_arguments(status_parser, "session, or a model: the running session serving it "
                                          "(default: the only one running)")
    status_parser.add_argument("--json", action="store_true", help="machine-readable output")
    status_parser.set_defaults(func=run_status)


def _add_validate_session(validate: argparse.ArgumentParser) -> None:
    """`validate --session NAME`: the verb is the repository's (check_cli, registered before); reading a
    session's backend directory is ours, so the option is declared here and adds it to --backend-dir."""
    validate.add_argument(
        "--session", metavar="NAME", help="judge backends against the backend directory of this session"
    )
    judge = validate.get_default("func")

    def run(args: argparse.Namespace) -> int:
        if args.session is not None:
            try:
                args.backend_dir = [*args.backend_dir, *session_backend_dir(args.session)]
            except GeConsoleError as exc:  # no such session, or unreadable: a usage error, as validate's are
                return error_line(str(exc), 2)
        return int(judge(args))

    validate.set_defaults(func=run)


def session_backend_dir(name: str) -> list[Path]:
    """The backend directory a session launched Triton with (none for an attached one); a RegistryError if
    the session cannot be read, SessionNotFound if there is none."""
    from triton_ge_console.sessions.server.registry import Registry

    record = Registry().load(name)
    return [record.backend_dir] if record.backend_dir is not None else []


def _add_up(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """`up SPEC|REPO`."""
    parser = subparsers.add_parser(
        "up",
        help="start Triton for a spec or a model repository (detached)",
        epilog=UP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "source", metavar="SPEC|REPO", type=Path, help="deployment spec, or repository folder"
    )
    parser.add_argument("--name", help="session name (default: the spec's name or the folder's)")
    parser.add_argument("--tritonserver", metavar="PATH", help="tritonserver binary to run")
    parser.add_argument(
        "--listen", metavar="ADDR", help="bind address (default 127.0.0.1; others need --token)"
    )
    _add_token_options(parser)
    parser.add_argument(
        "--public-health",
        action="store_true",
        help="with a token: leave liveness/readiness open for load-balancer probes",
    )
    for kind in ("http", "grpc", "metrics"):
        parser.add_argument(
            f"--{kind}-port", type=port_number, metavar="PORT", help=f"{kind} port (default: free)"
        )
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="MODEL",
        help="serve just this model of the spec or repository (repeatable; default: all)",
    )
    parser.add_argument(
        "--timeout", type=seconds, default=180.0,
        help="seconds to wait for READY models and the metrics port (default 180)"
    )
    parser.add_argument(
        "--restart", choices=RESTART_POLICIES,
        help="on-crash: restart a server that crashed (never one `down` stopped), waiting 1, 2, 4 ... 30 s, "
             "giving up after 5 in a row (default: the spec's server.restart, else never)",
    )
    parser.set_defaults(func=run_up)


def _add_down(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """`down` and `restart`."""
    parser = subparsers.add_parser("down", help="stop a session's server (an attached one is only detached)")
    _add_session_arguments(parser)
    parser.add_argument("--timeout", type=seconds, default=15.0, help="seconds before SIGKILL (default 15)")
    parser.add_argument(
        "--forget",
        action="store_true",
        help="also remove it from the session list (without NAME: every stopped or dead session too)",
    )
    parser.set_defaults(func=run_down)
    restart_parser = subparsers.add_parser("restart", help="stop and start a session again, same ports")
    _add_session_arguments(restart_parser)
    restart_parser.add_argument("--timeout", type=seconds, default=180.0,
                                help="seconds to wait for READY models and the metrics port")
    restart_parser.set_defaults(func=run_restart)


def _add_session_arguments(parser: argparse.ArgumentParser,
                           what: str = "session (default: the only one running)") -> None:
    """NAME, or -s/--session NAME as on every other verb."""
    parser.add_argument("name", nargs="?", metavar="NAME", help=what)
    parser.add_argument("--session", "-s", metavar="NAME", help="the same as NAME")


def _add_token_options(parser: argparse.ArgumentParser,
                       what: str = "access token for Triton's restricted APIs") -> None:
    """--token / --token-env, `what` saying whose token it is (attach's may be an engine's API key)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--token", help=f"{what} (kept in a 0600 file)")
    group.add_argument(
        "--token-env", metavar="VAR", help="read the access token from this environment variable"
    )


def token_given(args: argparse.Namespace) -> str | None:
    """The token given on the command line or through an environment variable."""
    if getattr(args, "token_env", None):
        value = os.environ.get(args.token_env)
        if not value:
            raise InputError(f"--token-env {args.token_env}: the variable is not set")
        return value
    token: str | None = getattr(args, "token", None)
    return token


def run_up(args: argparse.Namespace) -> int:
    """Start a session and print where it answers."""
    from triton_ge_console.display import metrics_where
    from triton_ge_console.repository.progress import Feed, TerminalProgress
    from triton_ge_console.sessions.act.act_cli import notify
    from triton_ge_console.sessions.launcher import LaunchOptions, launch
    from triton_ge_console.sessions.server.registry import Registry

    options = LaunchOptions(
        source=args.source,
        name=args.name,
        tritonserver=args.tritonserver,
        listen=args.listen,
        token=token_given(args),
        public_health=args.public_health,
        http_port=args.http_port,
        grpc_port=args.grpc_port,
        metrics_port=args.metrics_port,
        models=tuple(args.model),
        timeout=args.timeout,
        restart=args.restart,
    )
    terminal = TerminalProgress()
    try:
        record = launch(options, Registry(), notify=Feed(notify, terminal, terminal.elapsed))
    finally:
        terminal.close()
    print(
        f"session '{record.name}' ready: http {record.http_url}  grpc {record.grpc_url}  "
        f"metrics {metrics_where(record.metrics_url, record.name, record.attached)}"
    )
    print(f"models: {', '.join(record.models)}; log: {record.log_path}")
    return 0


def run_down(args: argparse.Namespace) -> int:
    """Stop (or detach) a session; `--forget` without a name also forgets every stopped or dead session."""
    from triton_ge_console.sessions.lifecycle import down_unreadable
    from triton_ge_console.sessions.server.registry import Registry, RegistryError

    registry = Registry()
    name = _named(args)
    if name is not None:
        try:
            record = registry.load(name)
        except RegistryError as exc:  # a corrupt file must not keep a running server from being stopped
            message, done = down_unreadable(name, registry, exc, timeout=args.timeout, forget=args.forget)
            print(message)
            return 0 if done else 1
        return _print_down(_down_showing(record, registry, args.timeout, args.forget))
    if args.forget:
        return _forget_stopped(registry, args.timeout)
    return _print_down(_down_showing(registry.resolve(None), registry, args.timeout))


def _down_showing(record: SessionRecord, registry: Registry, timeout: float,
                  forget: bool = False) -> StopResult:
    """down(), saying what it waits for, with a spinner and the time on a terminal."""
    from triton_ge_console.repository.progress import Feed, TerminalProgress
    from triton_ge_console.sessions.act.act_cli import notify
    from triton_ge_console.sessions.lifecycle import down

    terminal = TerminalProgress()
    try:
        return down(record, registry, timeout=timeout, forget=forget,
                    notify=Feed(notify, terminal, terminal.elapsed))
    finally:
        terminal.finish(f"stopping '{record.name}'")
        terminal.close()


def _print_down(result: StopResult) -> int:
    """What `down` did, one line; 1 when ports stayed busy."""
    print(result.message + (f" (exit code {result.exit_code})" if result.exit_code not in (None, 0) else ""))
    return 0 if result.ok else 1


def _forget_stopped(registry: Registry, timeout: float) -> int:
    """`down --forget` without NAME: the only running session stopped and forgotten, and every stopped one."""
    from triton_ge_console.session_states import READY, STARTING
    from triton_ge_console.sessions.lifecycle import down
    from triton_ge_console.sessions.server.registry import effective_state

    records, errors = registry.scan()
    running = [r for r in records if effective_state(r) in (STARTING, READY)]
    codes = [0]
    if len(running) == 1:
        codes.append(_print_down(_down_showing(running[0], registry, timeout, forget=True)))
    for record in records:
        if record not in running:
            codes.append(_print_down(down(record, registry, timeout=timeout, forget=True)))
    if len(running) > 1:  # which one to stop is the user's call: none is, and the command did not do it all
        names = ", ".join(r.name for r in running)
        error_line(f"{len(running)} sessions still run ({names}) and were left running: "
               f"ge-console down NAME --forget stops and forgets one")
        codes.append(1)
    for error in errors:
        error_line(f"{error} (ge-console down NAME --forget removes it)")
        codes.append(1)
    if len(codes) == 1 and not running:
        print("no sessions")
    return max(codes)


def _named(args: argparse.Namespace) -> str | None:
    """The session named positionally or with -s/--session."""
    name: str | None = getattr(args, "name", None) or getattr(args, "session", None)
    return name


def run_restart(args: argparse.Namespace) -> int:
    """Stop and start a session again."""
    from triton_ge_console.sessions.act.act_cli import notify
    from triton_ge_console.sessions.lifecycle import restart
    from triton_ge_console.sessions.server.registry import Registry

    registry = Registry()
    record = restart(registry.resolve(_named(args)), registry, notify=notify, timeout=args.timeout)
    print(f"session '{record.name}' ready again: http {record.http_url}")
    return 0


def run_attach(args: argparse.Namespace) -> int:
    """Register a server we did not start."""
    from triton_ge_console.sessions.lifecycle import attach
    from triton_ge_console.sessions.server.registry import Registry

    if not args.name:
        error_line("attach URL needs --name")
        return 2
    record = attach(
        args.url,
        args.name,
        Registry(),
        metrics_url=args.metrics_url,
        grpc_url=args.grpc_url,
        token=token_given(args),
        token_header=args.token_header,
        engine=args.engine,
        ca_file=args.ca,
    )
    engine = "" if args.engine == "triton" else \
        f" ({args.engine}: watched only, metrics {record.metrics_url})"
    print(f"attached '{record.name}' to {record.http_url}{engine} "
          f"(models: {', '.join(record.models) or 'none loaded'})")
    return 0


def run_ls(args: argparse.Namespace) -> int:
    """List sessions; corrupt session files are reported, the rest still listed."""
    from concurrent.futures import ThreadPoolExecutor

    from triton_ge_console.session_states import NOT_ANSWERING, READY, STARTING
    from triton_ge_console.sessions.server.registry import Registry

    records, errors = Registry().scan()
    for error in errors:
        error_line(str(error))
    # each running session is asked for its liveness: all at once, so N hung servers cost one timeout
    with ThreadPoolExecutor(max_workers=max(1, min(32, len(records)))) as pool:
        rows = list(pool.map(_ls_row, records))
    if args.running:
        rows = [row for row in rows if row["state"] in (STARTING, READY, NOT_ANSWERING)]
    if args.json:
        print(json.dumps(rows, indent=2))
    elif not rows:
        print(f"no {'running ' if args.running else ''}sessions (start one with: ge-console up SPEC)")
    else:
        width = max(len("STATE"), *(len(row["state"]) for row in rows))  # "not answering" is 13
        print(f"{'NAME':<20} {'STATE':<{width}} {'PID':>8}  {'HTTP':<28} MODELS")
        for row in rows:
            engine = "" if row["engine"] == "triton" else f" ({row['engine']})"
            print(
                f"{row['name']:<20} {row['state']:<{width}} {row['pid'] or '-':>8}  {row['http_url']:<28} "
                f"{', '.join(row['models'])}{engine}"
            )
    return 1 if errors else 0


def _ls_row(record: SessionRecord) -> dict[str, Any]:
    """One session for `ls`."""
    from triton_ge_console.sessions.lifecycle import listed_state

    state = listed_state(record)
    return {
        "name": record.name,
        "state": state,
        "pid": record.pid,
        "http_url": record.http_url,
        "attached": record.attached,
        "engine": record.engine,
        "models": list(record.models),
    }


def run_status(args: argparse.Namespace) -> int:
    """Print one session's state and models (exit code 1 when it is dead or not answering)."""
    from triton_ge_console.session_states import DEAD, NOT_ANSWERING
    from triton_ge_console.sessions.lifecycle import session_status
    from triton_ge_console.sessions.server.registry import Registry

    status = session_status(Registry().named_or_serving(_named(args)))
    data = status.to_dict()
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        _print_status(data)
    return 1 if status.state in (DEAD, NOT_ANSWERING) else 0


def _print_status(data: dict[str, Any]) -> None:
    """Human-readable status."""
    from triton_ge_console.display import (
        engine_memory_line,
        engine_requests_line,
        generation_line,
        metrics_where,
    )

    engine = data.get("engine", "triton")
    kind = (" (attached)" if engine == "triton" else f" (attached {engine})") if data["attached"] else ""
    print(f"session {data['name']}{kind}: {data['state']}  pid {data['pid'] or '-'}")
    metrics = metrics_where(data["metrics_url"], data["name"], data["attached"], data["discovered_by"])
    print(f"  http {data['http_url']}  grpc {data['grpc_url'] or '-'}  metrics {metrics}")
    for key in ("repository", "spec", "log_path"):
        if data[key]:
            print(f"  {key.replace('_', ' ')}: {data[key]}")
    if data["started_at"]:
        print(f"  started {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(data['started_at']))}")
    for model in data["models"]:
        reason = f"  ({model['reason']})" if model.get("reason") else ""
        failures = ", ".join(f"{why} {count}" for why, count in model.get("failures_by_reason") or ())
        failed = f"  failed: {failures}" if failures else ""
        version = f" v{model['version']}" if model["version"] else ""
        print(f"  model {model['name']}{version}: {model['state']}{reason}{failed}")
        if model.get("generation"):
            print(f"    {generation_line(model['generation'])}")
        if engine != "triton":
            print(f"    {engine_requests_line(model)}")
    for memory in data.get("engine_memory") or ():
        print(f"  {engine_memory_line(memory)}")
    if data["error"]:
        print(f"  error: {data['error']}")
    if data.get("note"):
        print(f"  note: {data['note']}")
    if data["exit_code"] is not None:
        print(f"  exit code {data['exit_code']}")
    _print_restarts(data)


def _print_restarts(data: dict[str, Any]) -> None:
    """The restart policy and this run's crashes and restarts, each with its time."""
    if data["restart"] in (None, "never") and not data["events"]:
        return
    print(f"  restart: {data['restart']} ({data['restarts']} restart{'s' if data['restarts'] != 1 else ''})")
    for event in data["events"]:
        when = time.strftime("%H:%M:%S", time.localtime(event["at"]))
        print(f"    {when} {event['kind']}: {event['message']}")
