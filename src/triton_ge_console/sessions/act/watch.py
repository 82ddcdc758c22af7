"""What changed since Triton loaded it, `reload --changed`, and `watch SPEC` (rebuild and reload on save).

A session remembers the content digest of each model folder as loaded (`loaded-digests.json` in the
session dir); a model whose folder now differs is reloaded, and the digest moves on only once Triton has
the new one READY, so a failed reload is retried next time while the old model keeps serving.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triton_ge_console.display import listed
from triton_ge_console.files import write_atomic
from triton_ge_console.model_files.external_data import external_files
from triton_ge_console.repository.build import BuildError, BuildReport, build_repository, folder_digest
from triton_ge_console.repository.progress import ProgressHook
from triton_ge_console.repository.spec.load import SpecError, load_spec
from triton_ge_console.sessions.act.control import ControlError, TritonControl, changes_text, config_changes
from triton_ge_console.sessions.observe.health import instance_watch
from triton_ge_console.sessions.observe.source import CommandResult
from triton_ge_console.sessions.server.access import SessionReach, session_reach
from triton_ge_console.sessions.server.paths import make_private, open_private
from triton_ge_console.sessions.server.registry import Registry, SessionRecord

LOADED_DIGESTS = "loaded-digests.json"
_DIGESTS_LOCK = threading.Lock()  # threads of one process; flock covers other processes
_IGNORED_PARTS = ("__pycache__",)
Report = Callable[[str], None]


@dataclass(frozen=True)
class Changes:
    """Models to load, reload and unload so Triton serves what the repository now holds."""

    added: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        """Whether nothing needs doing."""
        return not (self.added or self.updated or self.removed)


def model_digest(folder: Path) -> str | None:
    """The builder's folder digest, Python bytecode caches left out; None when unknown (changed)."""
    try:
        return folder_digest(folder, ignore=_IGNORED_PARTS)
    except OSError:  # a file replaced while an editor saves it: unknown, so the model counts as changed
        return None


def _digests_path(record: SessionRecord) -> Path | None:
    """Where a session keeps the digests of what Triton loaded."""
    return record.session_dir / LOADED_DIGESTS if record.session_dir else None


def read_loaded_digests(record: SessionRecord) -> dict[str, str]:
    """Model → digest of the folder as Triton last loaded it ({} when unknown)."""
    path = _digests_path(record)
    try:
        data = json.loads(path.read_text(encoding="utf-8")) if path else {}
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def record_loaded_digests(
    record: SessionRecord, models: Iterable[str] | None = None, forget: Iterable[str] = ()
) -> None:
    """Note the current folder digest of models just loaded (default: all the session's models)."""
    if record.repository is None:
        return
    digests = {model: model_digest(record.repository / model)
               for model in (record.models if models is None else models)}
    store_digests(record, digests, forget)


def store_digests(record: SessionRecord, digests: dict[str, str | None], forget: Iterable[str] = ()) -> None:
    """Merge digests (None: unknown) into the session's file, locked: console workers and the CLI may race."""
    path = _digests_path(record)
    if path is None:
        return
    with _DIGESTS_LOCK, open(open_private(path.with_name(f".{path.name}.lock")), "a") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        merged = read_loaded_digests(record)
        merged.update({model: digest for model, digest in digests.items() if digest is not None})
        for model in forget:
            merged.pop(model, None)
        write_atomic(path, json.dumps(merged, indent=2, sort_keys=True))


def controller_for(record: SessionRecord, timeout: float = 300.0,
                   reach: SessionReach | None = None) -> SessionControl:
    """The controller of a session, with its token (if any), its log for error details, and its digests."""
    reach = reach or session_reach(record)
    return SessionControl(
        record,
        reach.http_url,
        reach.token,
        token_header=reach.token_header,
        log_path=reach.log_path,
        timeout=timeout,
        instances=instance_watch(reach),  # its own: commands run on other threads than the poller's
    )


class SessionControl(TritonControl):
    """A session's TritonControl that keeps `loaded-digests.json` true after a single load or reload.

    Without it, a model reloaded by `r` or `ge-console reload MODEL` would still look changed, and the
    next `reload --changed` would reload it again. Only the session's own models are recorded (a model
    loaded from outside its list stays outside `reload --changed`), the digest is taken before the
    command (an edit saved meanwhile still counts as changed), and a command with a config override is
    not recorded: Triton then runs something other than the folder. Unload leaves the digests alone, so
    `reload --changed` does not bring back a model the operator unloaded.
    """

    def __init__(self, record: SessionRecord, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.record = record

    def load(self, model: str, config: str | None = None) -> CommandResult:
        """Load, and remember the folder as loaded."""
        digest = self._digest_before(model, config)
        return self._remember(super().load(model, config), digest)

    def reload(self, model: str, config: str | None = None) -> CommandResult:
        """Reload, and remember the folder as loaded."""
        digest = self._digest_before(model, config)
        return self._remember(super().reload(model, config), digest)

    def _digest_before(self, model: str, config: str | None) -> str | None:
        """The folder's digest now, when this command's outcome should be recorded."""
        if config is not None or model not in self.record.models or self.record.repository is None:
            return None
        return model_digest(self.record.repository / model)

    def _remember(self, result: CommandResult, digest: str | None) -> CommandResult:
        """Record the digest after success; a failed write is said, never hides Triton's answer."""
        if not result.ok or digest is None:
            return result
        try:
            store_digests(self.record, {result.target: digest})
        except OSError as exc:
            note = f" (not recorded for reload --changed: {exc})"
            return dataclasses.replace(result, message=result.message + note)
        return result


def rebuild(record: SessionRecord, progress: ProgressHook | None = None) -> BuildReport | None:
    """Rebuild a spec session's repository from its spec (SpecError / BuildError on a broken edit); what
    the build wrote with the process's umask is made private again (700/600), as `up` left it."""
    if record.spec is None or record.repository is None:
        return None
    report = build_repository(load_spec(record.spec), record.repository, progress=progress)
    if record.session_dir is not None and record.repository.is_relative_to(record.session_dir):
        make_private(record.repository)
    return report


def find_changes(record: SessionRecord, report: BuildReport | None = None) -> Changes:
    """Models whose folders differ from what was loaded, plus (spec sessions) models added or removed."""
    if record.repository is None:
        raise ControlError(f"session '{record.name}' has no repository on this machine")
    loaded = read_loaded_digests(record)
    wanted = report.names("added", "updated", "unchanged") if report else record.models
    updated = tuple(m for m in wanted if m in loaded and model_digest(record.repository / m) != loaded[m])
    added = tuple(m for m in wanted if m not in loaded)
    removed = tuple(m for m in loaded if m not in wanted or not (record.repository / m).is_dir())
    return Changes(added, updated, removed)


def describe_changes(record: SessionRecord, control: TritonControl, changes: Changes) -> list[str]:
    """One line per model saying what changed: added, removed, or which config fields now differ from
    what Triton serves (or that only its files did)."""
    lines = [f"{model}: {_what_changed(record, control, model)}" for model in changes.updated]
    return lines + [f"{m}: added" for m in changes.added] + [f"{m}: removed" for m in changes.removed]


def _what_changed(record: SessionRecord, control: TritonControl, model: str) -> str:
    """The config fields on disk that differ from the loaded config, as 'field old → new'."""
    from google.protobuf import json_format

    from triton_ge_console.repository import pbtxt

    assert record.repository is not None
    try:
        on_disk = pbtxt.load(record.repository / model / "config.pbtxt")
        loaded = control.model_config(model)
    except (OSError, pbtxt.ConfigSyntaxError, ControlError) as exc:
        return f"updated (its config cannot be compared: {exc})"
    wanted = json_format.MessageToDict(on_disk, preserving_proto_field_name=True)
    fields = config_changes(wanted, loaded)
    if not fields:
        return "updated: its files changed; the fields its config.pbtxt sets are the ones served"
    return "updated: " + changes_text(fields)


def reload_changed(
    record: SessionRecord,
    control: TritonControl,
    registry: Registry | None = None,
    changes: Changes | None = None,
) -> list[CommandResult]:
    """Load added, reload updated and unload removed models; remember what Triton now serves."""
    changes = changes if changes is not None else find_changes(record)
    repository = record.repository
    if repository is None:
        raise ControlError(f"session '{record.name}' has no repository on this machine")
    # digests taken before the commands (an edit saved meanwhile stays "changed"); the plain
    # TritonControl commands, so a SessionControl does not hash the folders a second time
    digests = {m: model_digest(repository / m) for m in (*changes.updated, *changes.added)}
    results: list[CommandResult] = []
    for model in changes.updated:
        results.append(TritonControl.reload(control, model))
    for model in changes.added:
        results.append(TritonControl.load(control, model))
    for model in changes.removed:
        results.append(TritonControl.unload(control, model))
    done = {r.target for r in results if r.ok}
    store_digests(record, {m: d for m, d in digests.items() if m in done},
                  forget=[m for m in changes.removed if m in done])
    models = tuple(m for m in (*record.models, *changes.added) if not (m in changes.removed and m in done))
    if registry is not None and models != record.models:
        registry.save(record.replace(models=tuple(dict.fromkeys(models))))
    return results


def apply_edit(record: SessionRecord, control: TritonControl, registry: Registry | None, say: Report) -> bool:
    """Rebuild from the spec and reload what changed; a broken edit is reported and nothing is reloaded."""
    try:
        report = rebuild(record)
    except SpecError as exc:
        for problem in listed([str(p) for p in exc.problems]):
            say(f"error: {problem}")
        say("spec not applied: the running models keep serving")
        return False
    except BuildError as exc:
        say(f"error: {exc}; the running models keep serving")
        return False
    changes = find_changes(record, report)
    if changes.empty:
        say("no model changed")
        return True
    results = reload_changed(record, control, registry, changes)
    for result in results:
        say(("ok: " if result.ok else "error: ") + result.message)
    return all(result.ok for result in results)


def watched_files(spec_path: Path) -> set[Path]:
    """The spec file and the model source files it names (when the spec is readable)."""
    files = {spec_path.resolve()}
    try:
        spec = load_spec(spec_path)
    except SpecError:
        return files
    for model in spec.models:
        files.update(p.resolve() for p in (model.onnx_path, model.om_path) if p is not None)
        if model.onnx_path is not None:
            with contextlib.suppress(Exception):  # an unreadable ONNX: the rebuild reports it
                files.update(p.resolve() for p in external_files(model.onnx_path).values())
    return files


def watch_spec(
    record: SessionRecord,
    control: TritonControl,
    say: Report,
    registry: Registry | None = None,
    stop_event: threading.Event | None = None,
    debounce_ms: int = 300,
) -> None:
    """Rebuild and reload on every save of the spec (or its model sources) until stopped."""
    if record.spec is None:
        raise ControlError(f"session '{record.name}' was not started from a spec")
    stop = stop_event or threading.Event()
    while not stop.is_set():
        _watch_until_sources_change(record, record.spec, control, say, registry, stop, debounce_ms)


def _watch_until_sources_change(
    record: SessionRecord,
    spec_path: Path,
    control: TritonControl,
    say: Report,
    registry: Registry | None,
    stop: threading.Event,
    debounce_ms: int,
) -> None:
    """Watch the current set of files; return when stopped or when an edit changes which files to watch."""
    files = watched_files(spec_path)
    folders = sorted({str(f.parent) for f in files if f.parent.is_dir()})
    say(f"watching {spec_path} ({len(files) - 1} model source files)")
    import watchfiles  # only `watch` needs it (a slow import)

    for changed in watchfiles.watch(
        *folders,
        watch_filter=lambda _c, p: Path(p).resolve() in files,
        debounce=10 * debounce_ms,
        step=debounce_ms,  # one save is one batch though an editor writes it in parts some ms apart
        stop_event=stop,
        recursive=False,
    ):
        names = ", ".join(sorted({Path(p).name for _c, p in changed}))
        say(f"changed: {names}")
        current = registry.load(record.name) if registry is not None else record
        apply_edit(current, control, registry, say)
        if watched_files(spec_path) != files:
            return
