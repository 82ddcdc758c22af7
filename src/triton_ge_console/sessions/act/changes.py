"""What changed since Triton loaded it, and `reload --changed`: rebuild a spec session, find the models
whose folders differ from their loaded digests (or were added or removed), say how, and act on them."""

from __future__ import annotations

from dataclasses import dataclass

from triton_ge_console.repository.build import BuildReport, build_repository
from triton_ge_console.repository.progress import ProgressHook
from triton_ge_console.repository.spec.load import load_spec
from triton_ge_console.sessions.act.control import ControlError, TritonControl, changes_text, config_changes
from triton_ge_console.sessions.act.digests import model_digest, read_loaded_digests, store_digests
from triton_ge_console.sessions.observe.source import CommandResult
from triton_ge_console.sessions.server.paths import make_private
from triton_ge_console.sessions.server.registry import Registry, SessionRecord


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


def rebuild(record: SessionRecord, progress: ProgressHook | None = None) -> BuildReport | None:
    """Rebuild a spec session's repository from its spec (SpecError / BuildError on a broken edit); what
    the build wrote with the process's umask is made private again (700/600), as `up` left it."""
    if record.spec is None or record.repository is None:
        return None
    spec = load_spec(record.spec).only(record.chosen_models)  # up --model: only those
    report = build_repository(spec, record.repository, progress=progress)
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
