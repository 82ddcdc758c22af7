"""File content hashes remembered by (path, size, mtime_ns, inode), so a no-op build or `reload --changed`
learns that gigabytes of weights did not change from one stat() each, and hashes only what did.

What stands for a file in a build's digests (file_digest) is its remembered hash, else its identity
(device, inode, size, mtime_ns) when it holds IDENTITY_MIN bytes or more and was not modified in the
last RACY_NS: a build then reads none of a model's weights. The identity changes whenever the file is
replaced (a new inode) or written (mtime), and a hard link shares it, so a file linked into REPO has
the identity of its source; a copy is remembered with its source's digest. A file modified in the last
RACY_NS is hashed (its mtime may not move again).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import platformdirs

from triton_ge_console.files import write_atomic

CACHE_FILE = "digests.json"
CACHE_FORMAT = 1
RACY_NS = 2_000_000_000
IDENTITY_MIN = 16 << 20  # smaller files are hashed (cheap, and their digest survives a lost cache)
CHUNK = 1 << 20
MAX_ENTRIES = 20_000
Progress = Callable[[int, int], None]  # (bytes done, bytes in all)
Key = tuple[int, int, int]  # size, mtime_ns, inode

_lock = threading.Lock()
_memory: dict[str, tuple[Key, str]] = {}
_loaded_from: tuple[Path, int | None] | None = None  # the cache file and its mtime as last read
_dirty = False
_deferred = 0
bytes_hashed = 0  # model bytes this process has read to hash (what tests and the benchmark count)


def cache_dir() -> Path:
    """Where the digest cache lives."""
    override = os.environ.get("GE_CONSOLE_CACHE_DIR")
    return Path(override) if override else Path(platformdirs.user_cache_dir("ge-console"))


def _key(stat: os.stat_result) -> Key:
    """What must stay the same for a remembered hash to hold."""
    return (stat.st_size, stat.st_mtime_ns, stat.st_ino)


def _load() -> dict[str, tuple[Key, str]]:
    """The process's view of the cache, merged again whenever another process has saved the file."""
    global _loaded_from
    path = cache_dir() / CACHE_FILE
    seen = (path, _mtime_ns(path))
    if _loaded_from != seen:
        if _loaded_from is None or _loaded_from[0] != path:
            _memory.clear()
        _loaded_from = seen
        _memory.update(_read_disk(path))
    return _memory


def _mtime_ns(path: Path) -> int | None:
    """A file's mtime, None when it is not there."""
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def _read_disk(path: Path) -> dict[str, tuple[Key, str]]:
    """The cache file's entries ({} when missing or unreadable)."""
    with contextlib.suppress(OSError, ValueError, TypeError, AttributeError, KeyError):
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") == CACHE_FORMAT:
            return {str(p): (tuple(k), str(d)) for p, (k, d) in data["files"].items()}  # type: ignore[misc]
    return {}


def _save() -> None:
    """Write the cache atomically, over what other processes wrote meanwhile; errors are ignored."""
    global _loaded_from
    folder = cache_dir()
    with contextlib.suppress(OSError):
        folder.mkdir(parents=True, exist_ok=True)
        merged = {**_read_disk(folder / CACHE_FILE), **_memory}
        merged = dict(list(merged.items())[-MAX_ENTRIES:])
        write_atomic(folder / CACHE_FILE, json.dumps({"format": CACHE_FORMAT, "files": merged}))
        _memory.update(merged)
        _loaded_from = (folder / CACHE_FILE, _mtime_ns(folder / CACHE_FILE))  # what we wrote, known


def stream_sha256(path: Path, progress: Progress | None = None) -> str:
    """sha256 of a file read in 1 MiB chunks (bounded memory), reporting progress."""
    global bytes_hashed
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        total = os.fstat(stream.fileno()).st_size
        os.posix_fadvise(stream.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
        done = 0
        while chunk := stream.read(CHUNK):
            digest.update(chunk)
            done += len(chunk)
            if progress is not None:
                progress(done, total)
    bytes_hashed += done
    return digest.hexdigest()


def cached(path: Path) -> str | None:
    """The remembered hash of a file whose size, mtime and inode are unchanged since, else None."""
    name = os.path.abspath(path)
    try:
        stat = os.stat(name)
    except OSError:
        return None
    return _cached(name, stat)


def _cached(name: str, stat: os.stat_result) -> str | None:
    """The remembered hash of the file at absolute path `name` with this stat, else None."""
    with _lock:
        known = _load().get(name)
    return known[1] if known is not None and known[0] == _key(stat) else None


def identity(stat: os.stat_result) -> str:
    """A file's identity as its digest: shared by hard links of one file, new once written or replaced."""
    return f"file:{stat.st_dev}:{stat.st_ino}:{stat.st_size}:{stat.st_mtime_ns}"


def settled(stat: os.stat_result) -> bool:
    """Modified long enough ago that a write would have moved its mtime (git's racy rule)."""
    return stat.st_mtime_ns < time.time_ns() - RACY_NS


def file_digest(path: Path, progress: Progress | None = None) -> str:
    """What stands for a file's content in a build: its remembered hash, else the identity of a big settled
    file (no byte read), else its sha256 (a small file, or one still being written)."""
    name = os.path.abspath(path)
    stat = os.stat(name)
    known = _cached(name, stat)
    if known is not None:
        return known
    return identity(stat) if _by_identity(stat) else file_sha256(Path(name), progress)


def _by_identity(stat: os.stat_result) -> bool:
    """Whether a file's identity stands for its content: big enough to be worth it, and settled."""
    return stat.st_size >= IDENTITY_MIN and settled(stat)


def file_sha256(path: Path, progress: Progress | None = None) -> str:
    """A file's sha256, from the cache when its size, mtime and inode are unchanged."""
    name = os.path.abspath(path)
    known = cached(Path(name))
    if known is not None:
        return known
    before = os.stat(name)
    started = time.time_ns()
    digest = stream_sha256(Path(name), progress)
    _remember_if_settled(Path(name), digest, before, started)
    return digest


def _remember_if_settled(path: Path, digest: str, before: os.stat_result, started: int) -> None:
    """Remember a hash just read unless the file changed meanwhile or was modified too recently."""
    after = os.stat(path)
    if _key(after) == _key(before) and after.st_mtime_ns < started - RACY_NS:
        remember(path, digest, after)


def copy_identified(source: Path, target: Path, copy: Callable[[Path, Path], None]) -> str:
    """Copy source with `copy`; the file_digest of what was copied: the source's, read before the copy when
    it reads no bytes and the source did not change meanwhile, else the sha256 of the copy (pages cached)."""
    before, started = os.stat(source), time.time_ns()
    known = _cached(os.path.abspath(source), before) or (identity(before) if _by_identity(before) else None)
    copy(source, target)
    if _key(os.stat(source)) != _key(before):
        return stream_sha256(target)  # the source changed meanwhile: what was copied is what counts
    if known is None:
        known = stream_sha256(target)
        _remember_if_settled(source, known, before, started)
    return known


def remember(path: Path, digest: str, stat: os.stat_result | None = None) -> None:
    """Note a hash we know (a file we just wrote or linked from content of that hash)."""
    name = os.path.abspath(path)
    key = _key(stat if stat is not None else os.stat(name))
    with _lock:
        entries = _load()
        if entries.get(name) == (key, digest):
            return
        entries.pop(name, None)
        entries[name] = (key, digest)
        _mark_dirty()


def _mark_dirty() -> None:
    """Save now, or at the end of the deferred() block we are in (caller holds _lock)."""
    global _dirty
    _dirty = True
    if not _deferred:
        _save()
        _dirty = False


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Save the cache once, when the block ends, however many hashes it learns (a build's many files)."""
    global _deferred, _dirty
    with _lock:
        _deferred += 1
    try:
        yield
    finally:
        with _lock:
            _deferred -= 1
            if not _deferred and _dirty:
                _save()
                _dirty = False
