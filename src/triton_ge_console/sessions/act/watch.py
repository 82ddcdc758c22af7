"""`watch SPEC`: rebuild and reload on every save of the spec or the model sources it names.

Acting on a server is `control` (load, unload, reload); what changed since Triton loaded it is `changes`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from pathlib import Path

from triton_ge_console.display import listed
from triton_ge_console.model_files.external_data import external_files
from triton_ge_console.repository.build import BuildError
from triton_ge_console.repository.spec.load import SpecError, load_spec
from triton_ge_console.sessions.act.changes import find_changes, rebuild, reload_changed
from triton_ge_console.sessions.act.control import ControlError, TritonControl
from triton_ge_console.sessions.server.registry import Registry, SessionRecord

Report = Callable[[str], None]


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
