"""`ge-console load | unload | reload | watch`: acting on a running session's models.

Only the arguments are declared at import; each handler imports the work when its verb runs, so
`ge-console --help` stays fast. A user error is raised and reported once, by cli.py.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from triton_ge_console.arg_types import error_line
from triton_ge_console.errors import InputError

if TYPE_CHECKING:
    from triton_ge_console.sessions.observe.source import CommandResult
    from triton_ge_console.sessions.server.registry import Registry, SessionRecord

T = TypeVar("T")


def register(subparsers: Any) -> None:
    """Add `load`, `unload`, `reload` and `watch`."""
    for action in ("load", "unload", "reload"):
        parser = subparsers.add_parser(action, help=f"{action} a model in a session")
        parser.add_argument("model", nargs="?" if action == "reload" else None, metavar="MODEL")
        parser.add_argument("--session", "-s", metavar="NAME", help="session (default: the only one running)")
        if action != "unload":
            parser.add_argument(
                "--config", metavar="JSON", help="config override (reload: merged over the running config)"
            )
        if action == "reload":
            parser.add_argument(
                "--changed",
                action="store_true",
                help="reload every model whose files changed (spec sessions: rebuild first)",
            )
        parser.set_defaults(func=run_model_command, action=action)
    watch_parser = subparsers.add_parser("watch", help="rebuild and reload on every save of SPEC")
    watch_parser.add_argument("spec", metavar="SPEC", type=Path, help="the spec a session was started from")
    watch_parser.add_argument("--session", "-s", metavar="NAME", help="session (default: the one from SPEC)")
    watch_parser.set_defaults(func=run_watch)


def run_model_command(args: argparse.Namespace) -> int:
    """load / unload / reload [--changed]: print what Triton did, one line per model."""
    from triton_ge_console.sessions.act.control import controller_for
    from triton_ge_console.sessions.server.engines import control_refusal
    from triton_ge_console.sessions.server.registry import Registry, require_running

    if not args.model and not getattr(args, "changed", False):
        error_line("reload needs MODEL or --changed")
        return 2
    registry = Registry()
    record = require_running(registry.resolve(args.session, running=True, model=args.model))
    refused = control_refusal(record.engine)
    if refused is not None:  # vLLM, MindIE: their APIs load nothing at run time
        raise InputError(f"{args.action} {args.model or '--changed'} on '{record.name}': {refused}")
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
    from triton_ge_console.repository.progress import TerminalProgress, ticking

    terminal = TerminalProgress()
    try:
        with ticking(what, terminal.elapsed):
            return call()
    finally:
        terminal.finish(what)
        terminal.close()


def _reload_changed(record: SessionRecord, control: Any, registry: Registry) -> list[CommandResult]:
    """Rebuild a spec session, then reload whatever changed."""
    from triton_ge_console.repository.build import BuildError
    from triton_ge_console.repository.progress import TerminalProgress
    from triton_ge_console.repository.spec.load import SpecError
    from triton_ge_console.sessions.act.changes import describe_changes, find_changes, rebuild, reload_changed

    terminal = TerminalProgress()  # a rebuild that copies gigabytes shows it, as `build` does
    try:
        report = rebuild(record, progress=terminal)
    except SpecError as exc:
        raise InputError(f"spec not applied, running models keep serving: {exc.problems[0]}") from None
    except BuildError as exc:
        raise InputError(f"{exc}; running models keep serving") from None
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
            error_line(result.message)
    return 0 if all(r.ok for r in results) else 1


def run_watch(args: argparse.Namespace) -> int:
    """Rebuild and reload on every save of SPEC until interrupted."""
    from triton_ge_console.sessions.act.control import controller_for
    from triton_ge_console.sessions.act.watch import apply_edit, watch_spec
    from triton_ge_console.sessions.server.registry import Registry, require_running

    registry = Registry()
    record = require_running(_session_for_spec(registry, args.spec, args.session))
    control = controller_for(record)
    apply_edit(record, control, registry, notify)
    try:
        watch_spec(registry.load(record.name), control, notify, registry)
    except KeyboardInterrupt:
        print("stopped watching")
    return 0


def notify(line: str) -> None:
    """Progress on stdout, warnings on stderr."""
    print(line, file=sys.stderr if line.startswith("warning:") else sys.stdout)


def _session_for_spec(registry: Registry, spec: Path, name: str | None) -> SessionRecord:
    """The running session started from spec (or the named one)."""
    from triton_ge_console.session_states import READY, STARTING
    from triton_ge_console.sessions.server.registry import SessionNotFound, effective_state

    if name:
        return registry.load(name)
    if not spec.is_file():
        raise InputError(f"{spec}: no such spec file")
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
