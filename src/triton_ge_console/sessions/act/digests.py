"""What Triton loaded: the content digest of each model folder as loaded (`loaded-digests.json`).

A session remembers them in its dir; a model whose folder now differs counts as changed (`reload
--changed`, `watch`), and a digest moves on only once Triton has the new one READY, so a failed reload is
retried next time while the old model keeps serving.
"""

from __future__ import annotations

import fcntl
import json
import threading
from collections.abc import Iterable
from pathlib import Path

from triton_ge_console.files import write_atomic
from triton_ge_console.sessions.server.paths import open_private
from triton_ge_console.sessions.server.registry import SessionRecord

LOADED_DIGESTS = "loaded-digests.json"
_DIGESTS_LOCK = threading.Lock()  # threads of one process; flock covers other processes
_IGNORED_PARTS = ("__pycache__",)


def model_digest(folder: Path) -> str | None:
    """The builder's folder digest, Python bytecode caches left out; None when unknown (changed)."""
    from triton_ge_console.repository.build import folder_digest  # the builder brings onnx: not at start

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
