"""What changed since Triton loaded it, `reload --changed`, and `watch SPEC` (rebuild and reload on save).

A session remembers the content digest of each model folder as loaded (`loaded-digests.json` in the
session dir); a model whose folder now differs is reloaded, and the digest moves on only once Triton has
the new one READY, so a failed reload is retried next time while the old model keeps serving.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triton_ge_console.repository.build import BuildError, BuildReport, build_repository, folder_digest
from triton_ge_console.repository.spec import SpecError, load_spec
from triton_ge_console.sessions.control import ControlError, TritonControl
from triton_ge_console.sessions.registry import Registry, SessionRecord
from triton_ge_console.sessions.source import CommandResult

LOADED_DIGESTS = "loaded-digests.json"
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
    path = _digests_path(record)
    if path is None or record.repository is None:
        return
    digests = read_loaded_digests(record)
    for model in record.models if models is None else models:
        digest = model_digest(record.repository / model)
        if digest is not None:
            digests[model] = digest
    for model in forget:
        digests.pop(model, None)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(digests, indent=2, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


class SessionControl(TritonControl):
    """A session's TritonControl that keeps `loaded-digests.json` true after single-model commands.

    Without it, a model reloaded by `r` or `ge-console reload MODEL` would still look changed, and the
    next `reload --changed` would reload it again. A load or reload with a config override is not
    recorded: Triton then runs something other than the folder, so the folder still counts as changed.
    """

    def __init__(self, record: SessionRecord, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.record = record

    def load(self, model: str, config: str | None = None) -> CommandResult:
        """Load, and remember the folder as loaded."""
        return self._remember(super().load(model, config), config)

    def reload(self, model: str, config: str | None = None) -> CommandResult:
        """Reload, and remember the folder as loaded."""
        return self._remember(super().reload(model, config), config)

    def unload(self, model: str) -> CommandResult:
        """Unload, and forget the model's digest."""
        result = super().unload(model)
        if result.ok:
            record_loaded_digests(self.record, [], forget=[model])
        return result

    def _remember(self, result: CommandResult, config: str | None) -> CommandResult:
        """Record the model's folder digest when Triton took the folder as it is."""
        if result.ok and config is None:
            record_loaded_digests(self.record, [result.target])
        return result


def rebuild(record: SessionRecord) -> BuildReport | None:
    """Rebuild a spec session's repository from its spec (SpecError / BuildError on a broken edit)."""
    if record.spec is None or record.repository is None:
        return None
    return build_repository(load_spec(record.spec), record.repository)


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


def reload_changed(
    record: SessionRecord,
    control: TritonControl,
    registry: Registry | None = None,
    changes: Changes | None = None,
) -> list[CommandResult]:
    """Load added, reload updated and unload removed models; remember what Triton now serves."""
    changes = changes if changes is not None else find_changes(record)
    results: list[CommandResult] = []
    for model in changes.updated:
        results.append(control.reload(model))
    for model in changes.added:
        results.append(control.load(model))
    for model in changes.removed:
        results.append(control.unload(model))
    done = {r.target for r in results if r.ok}
    record_loaded_digests(
        record,
        [m for m in (*changes.updated, *changes.added) if m in done],
        forget=[m for m in changes.removed if m in done],
    )
    models = tuple(m for m in (*record.models, *changes.added) if not (m in changes.removed and m in done))
    if registry is not None and models != record.models:
        registry.save(record.replace(models=tuple(dict.fromkeys(models))))
    return results


def apply_edit(record: SessionRecord, control: TritonControl, registry: Registry | None, say: Report) -> bool:
    """Rebuild from the spec and reload what changed; a broken edit is reported and nothing is reloaded."""
    try:
        report = rebuild(record)
    except SpecError as exc:
        for problem in exc.problems:
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
        debounce=debounce_ms,
        stop_event=stop,
        recursive=False,
    ):
        names = ", ".join(sorted({Path(p).name for _c, p in changed}))
        say(f"changed: {names}")
        current = registry.load(record.name) if registry is not None else record
        apply_edit(current, control, registry, say)
        if watched_files(spec_path) != files:
            return
