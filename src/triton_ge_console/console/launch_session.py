"""Opening the console on a registered session, or on a spec/repository it launches itself."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from triton_ge_console.console.options import ConsoleOptions
from triton_ge_console.display import listed
from triton_ge_console.session_states import READY, STARTING
from triton_ge_console.sessions.observe.source import CommandResult, SessionSource
from triton_ge_console.sessions.observe.thresholds import thresholds_of
from triton_ge_console.sessions.pending import PendingSource, RecordLifecycle
from triton_ge_console.sessions.server.registry import Registry, SessionRecord, effective_state


def running_sessions(registry: Registry) -> list[SessionRecord]:
    """Sessions whose server is starting or ready."""
    records, _errors = registry.scan()
    return [r for r in records if effective_state(r) in (READY, STARTING)]


def reload_changed_for(lifecycle: RecordLifecycle) -> Callable[[], list[CommandResult]]:
    """Reload-changed through the sessions layer (digests of what Triton loaded), for the session's record."""

    def run() -> list[CommandResult]:
        from triton_ge_console.repository.build import BuildError
        from triton_ge_console.repository.spec.load import SpecError
        from triton_ge_console.sessions.act.changes import find_changes, rebuild, reload_changed
        from triton_ge_console.sessions.act.control import ControlError, controller_for

        record = lifecycle.record
        if record is None or record.repository is None:
            return [CommandResult("reload", "repository", False, "this session has no repository here")]
        try:
            changes = find_changes(record, rebuild(record))
        except SpecError as exc:
            return [_not_applied("spec not applied", [str(p) for p in exc.problems])]
        except (BuildError, ControlError) as exc:
            return [_not_applied("repository not rebuilt", [str(exc)])]
        return reload_changed(record, controller_for(record), lifecycle.registry, changes)

    return run


def _not_applied(what: str, problems: list[str]) -> CommandResult:
    """A failed rebuild as one result listing every problem; the running models keep serving."""
    lines = "\n".join(f"  {problem}" for problem in listed(problems))
    return CommandResult("reload", "changed", False, f"{what}, running models keep serving:\n{lines}")


def _repository_of(lifecycle: RecordLifecycle) -> Path | None:
    """The repository of a session once launched."""
    return lifecycle.record.repository if lifecycle.record is not None else None


@dataclass
class OpenedSession:
    """A source plus the options to open the console with, and what to stop on quit."""

    source: SessionSource
    options: ConsoleOptions
    lifecycle: RecordLifecycle
    started_here: bool


def open_record(record: SessionRecord, registry: Registry, interval_s: float) -> OpenedSession:
    """The console on an existing session."""
    from triton_ge_console.sessions.live import LiveSource

    lifecycle = RecordLifecycle(registry, record)
    options = record_options(record, lifecycle, interval_s)
    return OpenedSession(LiveSource.from_record(record), options, lifecycle, started_here=False)


def record_options(record: SessionRecord, lifecycle: RecordLifecycle, interval_s: float) -> ConsoleOptions:
    """What the console is given for an existing session (server control only for one it launched)."""
    return ConsoleOptions(
        interval_s=interval_s, repository=record.repository, thresholds=thresholds_of(record),
        server=None if record.attached else lifecycle,
        reload_changed=None if record.attached else reload_changed_for(lifecycle),
        diagnostics_dir=record.session_dir,
    )


def open_target(target: Path, registry: Registry, interval_s: float, name: str | None) -> OpenedSession:
    """The console launching a spec or repository itself, showing progress while it starts."""
    pending = PendingSource(name or target.stem)
    lifecycle = RecordLifecycle(registry)

    def startup(say: Callable[[str], None]) -> None:
        from triton_ge_console.sessions.launcher import LaunchOptions, launch
        from triton_ge_console.sessions.live import LiveSource

        record = launch(LaunchOptions(source=target, name=name), registry, say)
        lifecycle.record = record
        source = LiveSource.from_record(record)
        source.history = pending.history
        pending.bind(source)
        say(f"session '{record.name}' ready at {record.http_url}")

    repository = target if target.is_dir() else None
    options = ConsoleOptions(interval_s=interval_s, repository=repository, server=lifecycle, startup=startup,
                             reload_changed=reload_changed_for(lifecycle),
                             locate_repository=lambda: _repository_of(lifecycle))
    return OpenedSession(pending, options, lifecycle, started_here=True)
