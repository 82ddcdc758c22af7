"""The builder's write path: stage changed model folders beside REPO, then swap each in with one rename; and
the plan of a model folder and what the build did to it, which both sides share."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from triton_ge_console.repository.placing import Transfers, write_file

if TYPE_CHECKING:
    from triton_ge_console.repository.spec.types import ModelSpec

FileContent = bytes | Path  # what to write: literal bytes, or a file to copy


@dataclass(frozen=True)
class ModelChange:
    """What a build did to one model folder."""

    name: str
    status: str  # one of build.STATUSES
    digest: str | None  # content hash of the folder as built (None when removed)
    linked: int = 0  # model files this build hard-linked into the folder
    copied: int = 0  # model files it copied
    why_copied: str | None = None  # why the copies were not links
    replaced: bool = False  # the folder it replaced was not one a build made (--force)

    def placement(self) -> str:
        """How this build placed the model's files, for people ("" when it placed none)."""
        parts = [f"{n} file{'s' if n != 1 else ''} {how}" for n, how in ((self.linked, "linked"),
                                                                          (self.copied, "copied")) if n]
        why = f": {self.why_copied}" if self.copied and self.why_copied else ""
        placed = f"({', '.join(parts)}{why})" if parts else ""
        replaced = " replaced a model folder no build made (--force)" if self.replaced else ""
        return f"{placed}{replaced}".lstrip()


@dataclass(frozen=True)
class ModelPlan:
    """The files one model folder should hold, and their content hash."""

    model: ModelSpec
    files: dict[str, FileContent]  # relative posix path → content
    digest: str
    hashes: dict[str, str]  # relative posix path → content hash


@contextlib.contextmanager
def build_lock(out: Path) -> Iterator[None]:
    """One build at a time beside REPO: an advisory lock on REPO's parent folder itself (no lock file)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(out.parent, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        remove_stale_staging(out)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _staging_prefix(out: Path) -> str:
    """The name every staging folder of REPO starts with."""
    return f".{out.name}.ge-build-"


def staging_dir(out: Path) -> Path:
    """A fresh folder beside REPO (same filesystem, so renames into REPO are atomic)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=_staging_prefix(out), dir=out.parent))


def remove_stale_staging(out: Path) -> None:
    """Staging folders of REPO left by a killed build; with the lock held no build of REPO is running."""
    for folder in out.parent.glob(f"{glob_escape(_staging_prefix(out))}*"):
        shutil.rmtree(folder, ignore_errors=True)


def glob_escape(text: str) -> str:
    """text matched literally in a glob pattern."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2  # linux/fs.h


def exchange(first: Path, second: Path) -> bool:
    """Swap two paths in one step (renameat2 RENAME_EXCHANGE); False where the kernel or filesystem cannot."""
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        return False
    renameat2.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)
    if renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(first), None, str(second))


def stage_model(root: Path, plan: ModelPlan, transfers: Transfers | None = None) -> Path:
    """Write one model folder under root (model files linked or copied as transfers says)."""
    folder = root / plan.model.name
    folder.mkdir(parents=True)
    for rel, content in sorted(plan.files.items()):
        write_file(folder / rel, content, transfers, f"{plan.model.name}/{rel}")
    return folder


class RenameJournal:
    """Renames and exchanges done so far, so a failed commit can put everything back."""

    def __init__(self) -> None:
        self.done: list[tuple[Path, Path, bool]] = []  # (source, target, exchanged)

    def move(self, source: Path, target: Path) -> None:
        """Rename source to target (target must not exist) and remember it."""
        os.rename(source, target)
        self.done.append((source, target, False))

    def replace_folder(self, new: Path, current: Path, aside: Path) -> None:
        """Put new where current is in one step (current ends up at new's place); else aside, then in."""
        if exchange(new, current):
            self.done.append((new, current, True))
            return
        self.move(current, aside)
        self.move(new, current)

    def undo(self) -> None:
        """Reverse every step, newest first."""
        for source, target, exchanged in reversed(self.done):
            with contextlib.suppress(OSError):
                if exchanged:
                    exchange(source, target)
                else:
                    os.rename(target, source)
        self.done.clear()


def commit_build(
    out: Path,
    plans: Iterable[ModelPlan],
    changes: list[ModelChange],
    manifest: str,
    manifest_name: str,
    transfers: Transfers | None = None,
) -> None:
    """Stage what changed, then swap it into out; unchanged folders and files are never touched."""
    status = {c.name: c.status for c in changes}
    to_write = [p for p in plans if status[p.model.name] in ("added", "updated")]
    removed = [c.name for c in changes if c.status == "removed"]
    old_manifest = _read_text(out / manifest_name)
    if not to_write and not removed and old_manifest == manifest:
        return
    staging = staging_dir(out)
    try:
        new_root, old_root = staging / "new", staging / "old"
        new_root.mkdir()
        old_root.mkdir()
        for plan in to_write:
            stage_model(new_root, plan, transfers)
        write_file(new_root / manifest_name, manifest.encode("utf-8"))
        if not out.exists():
            os.rename(new_root, out)
            return
        _swap(out, new_root, old_root, [p.model.name for p in to_write], removed, manifest_name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _swap(
    out: Path, new_root: Path, old_root: Path, written: list[str], removed: list[str], manifest_name: str
) -> None:
    """Swap each model folder in one step (never absent to a reader), drop removed ones; undo on error."""
    journal = RenameJournal()
    try:
        for name in written:
            if (out / name).exists() or (out / name).is_symlink():
                journal.replace_folder(new_root / name, out / name, old_root / name)
            else:
                journal.move(new_root / name, out / name)
        for name in removed:
            journal.move(out / name, old_root / name)
        os.replace(new_root / manifest_name, out / manifest_name)
    except OSError:
        journal.undo()
        raise


def _read_text(path: Path) -> str | None:
    """A file's text, or None when it cannot be read."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
