"""How the builder puts a file into a staged model folder: literal bytes are written; a model file is
hard-linked when source and repository share a filesystem, else copied in bounded chunks, and the build
says which. A placed file is always a new file: nothing is ever written into an existing (maybe linked)
file, so a served version never changes under Triton."""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field
from pathlib import Path

from triton_ge_console.repository.progress import ProgressHook

COPY_CHUNK = 64 << 20
# link() errors that mean "this cannot be linked here", so a copy is the answer
_NO_LINK = {
    errno.EXDEV: "the source is on another filesystem",
    errno.EPERM: "linking is not permitted (another owner, or protected_hardlinks)",
    errno.EMLINK: "the source has too many links",
    errno.EOPNOTSUPP: "the filesystem has no hard links",
}


@dataclass
class Transfers:
    """The build's linking choice, its progress hook, and what each model file placed became."""

    link: bool = True
    reuse_root: Path | None = None  # files under it (the repository's own) are linked even with link off
    progress: ProgressHook | None = None
    placed: list[tuple[str, str, str | None]] = field(default_factory=list)  # (model, how, why copied)
    copies: dict[Path, Path] = field(default_factory=dict)  # source → its copy staged by this build
    precopied: dict[Path, str] = field(default_factory=dict)  # copy made (and hashed) ahead → why copied

    def copy_reason(self, source: Path, folder: Path) -> str | None:
        """Why source would be copied into folder rather than linked, or None when a link should work."""
        if not self.link:
            return "linking is off (--copy)"
        if os.stat(source).st_dev != os.stat(folder).st_dev:
            return _NO_LINK[errno.EXDEV]
        return None

    def note(self, model: str, how: str, why: str | None) -> None:
        """Record one placed model file."""
        self.placed.append((model, how, why))


def _fsync_read_only(path: Path) -> None:
    """Flush a file to disk without opening it for writing (it may be linked into a served version)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def copy_file(source: Path, target: Path, what: str, progress: ProgressHook | None = None) -> None:
    """Copy in 64 MiB kernel-side chunks (copy_file_range; read/write where unsupported) into a new file."""
    with open(source, "rb") as src, open(target, "xb") as dst:
        total = os.fstat(src.fileno()).st_size
        os.posix_fadvise(src.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
        done = 0
        while done < total:
            try:
                n = os.copy_file_range(src.fileno(), dst.fileno(), min(COPY_CHUNK, total - done))
            except OSError as exc:
                if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                    raise
                chunk = src.read(min(COPY_CHUNK, total - done))
                n = dst.write(chunk)
            if n == 0:
                break  # the source shrank while we copied
            done += n
            if progress is not None:
                progress(what, done, total)
        os.fsync(dst.fileno())


def write_bytes(target: Path, content: bytes) -> None:
    """Write literal bytes into a new file and flush it, so a disk error shows up now, not after the swap."""
    with open(target, "xb") as stream:
        stream.write(content)
        stream.flush()
        os.fsync(stream.fileno())


def place_file(target: Path, source: Path, transfers: Transfers, what: str) -> tuple[str, str | None]:
    """Link source at target when allowed and possible, else copy it: ("linked"|"copied", why copied)."""
    if source in transfers.precopied:  # copied and hashed in one pass beside REPO: now only linked in
        os.link(source, target)
        return "copied", transfers.precopied[source]
    own = transfers.reuse_root is not None and source.is_relative_to(transfers.reuse_root)
    staged = transfers.copies.get(source)  # copied once already (another version): link to that copy
    why: str | None = "linking is off (--copy)"
    if transfers.link or own or staged is not None:
        try:
            os.link(staged or source, target, follow_symlinks=True)
        except OSError as exc:
            if exc.errno not in _NO_LINK:
                raise
            why = _NO_LINK[exc.errno]
        else:
            _fsync_read_only(target)
            return "linked", None
    copy_file(source, target, f"copying {what}", transfers.progress)
    transfers.copies[source] = target
    return "copied", why


def write_file(
    target: Path, content: bytes | Path, transfers: Transfers | None = None, what: str = ""
) -> None:
    """Place one staged file ("model/rel" in what): bytes written, a model file linked or copied and noted."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if not isinstance(content, Path):
        write_bytes(target, content)
        return
    transfers = transfers if transfers is not None else Transfers(link=False)
    how, why = place_file(target, content, transfers, what or target.name)
    transfers.note(what.split("/", 1)[0], how, why)
