"""What the session verbs do (`session_cli.py` only declares them, so the CLI starts fast)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from triton_ge_console.display import generation_line, printable
from triton_ge_console.repository.build import BuildError
from triton_ge_console.repository.progress import Feed, TerminalProgress, ticking
from triton_ge_console.repository.spec.load import SpecError
from triton_ge_console.sessions.act.watch import (
    apply_edit,
    controller_for,
    describe_changes,
    find_changes,
    rebuild,
    reload_changed,
    watch_spec,
)
from triton_ge_console.sessions.launcher import LaunchError, LaunchOptions, launch
from triton_ge_console.sessions.lifecycle import (
    StopResult,
    attach,
    down,
    down_unreadable,
    listed_state,
    restart,
    session_status,
)
from triton_ge_console.sessions.observe.source import CommandResult
from triton_ge_console.sessions.server.registry import (
    DEAD,
    READY,
    STARTING,
    Registry,
    RegistryError,
    SessionNotFound,
    SessionRecord,
    effective_state,
    require_running,
)

T = TypeVar("T")


def _error(message: str) -> None:
    """One line on stderr."""
    print(f"ge-console: error: {printable(message)}", file=sys.stderr)


def token_given(args: argparse.Namespace) -> str | None:
    """The token given on the command line or through an environment variable."""
    if getattr(args, "token_env", None):
        value = os.environ.get(args.token_env)
        if not value:
            raise LaunchError(f"--token-env {args.token_env}: the variable is not set")
        return value
    token: str | None = getattr(args, "token", None)
    return token


def run_up(args: argparse.Namespace) -> int:
    """Start a session and print where it answers."""
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
    )
    terminal = TerminalProgress()
    try:
        record = launch(options, Registry(), notify=Feed(_notify, terminal, terminal.elapsed))
    finally:
        terminal.close()
    print(
        f"session '{record.name}' ready: http {record.http_url}  grpc {record.grpc_url}  "
        f"metrics {record.metrics_url}"
    )
    print(f"models: {', '.join(record.models)}; log: {record.log_path}")
    return 0


def _notify(line: str) -> None:
    """Progress on stdout, warnings on stderr."""
    print(line, file=sys.stderr if line.startswith("warning:") else sys.stdout)


def run_down(args: argparse.Namespace) -> int:
    """Stop (or detach) a session; `--forget` without a name also forgets every stopped or dead session."""
    registry = Registry()
    name = _named(args)
    if name is not None:
        try:
            record = registry.load(name)
        except RegistryError as exc:  # a corrupt file must not keep a running server from being stopped
            message, done = down_unreadable(name, registry, exc, timeout=args.timeout, forget=args.forget)
            print(message)
            return 0 if done else 1
        return _print_down(down(record, registry, timeout=args.timeout, forget=args.forget))
    if args.forget:
        return _forget_stopped(registry, args.timeout)
    return _print_down(down(registry.resolve(None), registry, timeout=args.timeout))


def _print_down(result: StopResult) -> int:
    """What `down` did, one line; 1 when ports stayed busy."""
    print(result.message + (f" (exit code {result.exit_code})" if result.exit_code not in (None, 0) else ""))
    return 0 if result.ports_freed else 1


def _forget_stopped(registry: Registry, timeout: float) -> int:
    """`down --forget` without NAME: the only running session stopped and forgotten, and every stopped one."""
    records, errors = registry.scan()
    running = [r for r in records if effective_state(r) in (STARTING, READY)]
    codes = [0]
    if len(running) == 1:
        codes.append(_print_down(down(running[0], registry, timeout=timeout, forget=True)))
    for record in records:
        if record not in running:
            codes.append(_print_down(down(record, registry, timeout=timeout, forget=True)))
    if len(running) > 1:  # which one to stop is the user's call: none is, and the command did not do it all
        names = ", ".join(r.name for r in running)
        _error(f"{len(running)} sessions still run ({names}) and were left running: "
               f"ge-console down NAME --forget stops and forgets one")
        codes.append(1)
    for error in errors:
        _error(f"{error} (ge-console down NAME --forget removes it)")
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
    registry = Registry()
    record = restart(registry.resolve(_named(args)), registry, notify=_notify, timeout=args.timeout)
    print(f"session '{record.name}' ready again: http {record.http_url}")
    return 0


def run_attach(args: argparse.Namespace) -> int:
    """Register a server we did not start."""
    if not args.name:
        _error("attach URL needs --name")
        return 2
    record = attach(
        args.url,
        args.name,
        Registry(),
        metrics_url=args.metrics_url,
        grpc_url=args.grpc_url,
        token=token_given(args),
        token_header=args.token_header,
    )
    print(
        f"attached '{record.name}' to {record.http_url} (models: {', '.join(record.models) or 'none loaded'})"
    )
    return 0


def run_ls(args: argparse.Namespace) -> int:
    """List sessions; corrupt session files are reported, the rest still listed."""
    records, errors = Registry().scan()
    for error in errors:
        _error(str(error))
    rows = [_ls_row(record) for record in records]
    if args.running:
        rows = [row for row in rows if row["state"] in (STARTING, READY)]
    if args.json:
        print(json.dumps(rows, indent=2))
    elif not rows:
        print(f"no {'running ' if args.running else ''}sessions (start one with: ge-console up SPEC)")
    else:
        print(f"{'NAME':<20} {'STATE':<9} {'PID':>8}  {'HTTP':<28} MODELS")
        for row in rows:
            print(
                f"{row['name']:<20} {row['state']:<9} {row['pid'] or '-':>8}  {row['http_url']:<28} "
                f"{', '.join(row['models'])}"
            )
    return 1 if errors else 0


def _ls_row(record: SessionRecord) -> dict[str, Any]:
    """One session for `ls`."""
    state = listed_state(record)
    return {
        "name": record.name,
        "state": state,
        "pid": record.pid,
        "http_url": record.http_url,
        "attached": record.attached,
        "models": list(record.models),
    }


def run_status(args: argparse.Namespace) -> int:
    """Print one session's state and models (exit code 1 when it is dead)."""
    status = session_status(Registry().resolve(_named(args)))
    data = status.to_dict()
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        _print_status(data)
    return 1 if status.state == DEAD else 0


def _print_status(data: dict[str, Any]) -> None:
    """Human-readable status."""
    kind = " (attached)" if data["attached"] else ""
    print(f"session {data['name']}{kind}: {data['state']}  pid {data['pid'] or '-'}")
    print(f"  http {data['http_url']}  grpc {data['grpc_url'] or '-'}  metrics {data['metrics_url'] or '-'}")
    for key in ("repository", "spec", "log_path"):
        if data[key]:
            print(f"  {key.replace('_', ' ')}: {data[key]}")
    if data["started_at"]:
        print(f"  started {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(data['started_at']))}")
    for model in data["models"]:
        reason = f"  ({model['reason']})" if model.get("reason") else ""
        failures = ", ".join(f"{why} {count}" for why, count in model.get("failures_by_reason") or ())
        failed = f"  failed: {failures}" if failures else ""
        print(f"  model {model['name']} v{model['version']}: {model['state']}{reason}{failed}")
        if model.get("generation"):
            print(f"    {generation_line(model['generation'])}")
    if data["error"]:
        print(f"  error: {data['error']}")
    if data["exit_code"] is not None:
        print(f"  exit code {data['exit_code']}")
    for line in data["log_tail"]:
        print(f"  | {line}")


def run_model_command(args: argparse.Namespace) -> int:
    """load / unload / reload [--changed]: print what Triton did, one line per model."""
    if not args.model and not getattr(args, "changed", False):
        _error("reload needs MODEL or --changed")
        return 2
    registry = Registry()
    record = _running(registry.resolve(args.session))
    control = controller_for(record)
    if args.action == "reload" and args.changed:
        return _print_results(_reload_changed(record, control, registry))
    config = getattr(args, "config", None)
    command = {"load": control.load, "reload": control.reload}.get(args.action)
    if command is None:
        return _print_results([control.unload(args.model)])
    result = _with_elapsed(f"{args.action}ing {args.model}", lambda: command(args.model, config))
    return _print_results([result])


def _with_elapsed(what: str, call: Callable[[], T]) -> T:
    """call() under a spinner with its elapsed time on a terminal (Triton says nothing while it loads)."""
    terminal = TerminalProgress()
    try:
        with ticking(what, terminal.elapsed):
            return call()
    finally:
        terminal.finish(what)
        terminal.close()


def _running(record: SessionRecord) -> SessionRecord:
    """The record, if its server can take commands; SessionStopped saying what to do if not."""
    return require_running(record)


def _reload_changed(record: SessionRecord, control: Any, registry: Registry) -> list[CommandResult]:
    """Rebuild a spec session, then reload whatever changed."""
    terminal = TerminalProgress()  # a rebuild that copies gigabytes shows it, as `build` does
    try:
        report = rebuild(record, progress=terminal)
    except SpecError as exc:
        raise LaunchError(f"spec not applied, running models keep serving: {exc.problems[0]}") from None
    except BuildError as exc:
        raise LaunchError(f"{exc}; running models keep serving") from None
    finally:
        terminal.close()
    changes = find_changes(record, report)
    if changes.empty:
        print("no model changed")
        return []
    for line in describe_changes(record, control, changes):
        print(line)
    return _with_elapsed("reloading what changed", lambda: reload_changed(record, control, registry, changes))


def _print_results(results: list[CommandResult]) -> int:
    """One line per result, errors on stderr; exit code 1 if any failed."""
    for result in results:
        if result.ok:
            print(f"{result.message} ({result.duration_s or 0:.1f}s)")
        else:
            _error(result.message)
    return 0 if all(r.ok for r in results) else 1


def run_watch(args: argparse.Namespace) -> int:
    """Rebuild and reload on every save of SPEC until interrupted."""
    registry = Registry()
    record = _running(_session_for_spec(registry, args.spec, args.session))
    control = controller_for(record)
    apply_edit(record, control, registry, _notify)
    try:
        watch_spec(registry.load(record.name), control, _notify, registry)
    except KeyboardInterrupt:
        print("stopped watching")
    return 0


def _session_for_spec(registry: Registry, spec: Path, name: str | None) -> SessionRecord:
    """The running session started from spec (or the named one)."""
    if name:
        return registry.load(name)
    if not spec.is_file():
        raise LaunchError(f"{spec}: no such spec file")
    wanted = spec.resolve()
    matches = [
        r
        for r in registry.scan()[0]
        if r.spec and r.spec.resolve() == wanted and effective_state(r) in (STARTING, READY)
    ]
    if len(matches) != 1:
        found = "no running session" if not matches else f"{len(matches)} sessions"
        raise SessionNotFound(
            f"{found} started from {spec}; start one with: ge-console up {spec} (or give -s)"
        )
    return matches[0]
