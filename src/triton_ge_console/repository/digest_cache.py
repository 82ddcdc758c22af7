"""File content hashes remembered by (path, size, mtime_ns, inode), so a no-op build or `reload --changed`
learns that gigabytes of weights did not change from one stat() each, and hashes only what did.

The cache is a JSON file in the user's cache dir ($GE_CONSOLE_CACHE_DIR overrides it), shared by every
process; losing it costs one re-hash. A file whose mtime is within RACY_NS of the moment it was hashed
is not remembered: a write landing in the same clock tick would keep size and mtime (git's "racy" rule).
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
    with _lock:
        known = _load().get(name)
    return known[1] if known is not None and known[0] == _key(stat) else None


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


def copy_hashing(source: Path, target: Path, copy: Callable[[Path, Path], None]) -> str:
    """Copy source with `copy` while a thread hashes it (hashlib and the kernel's copy leave the GIL, so the
    two overlap on two cores, and the second read finds the pages cached); the sha256 of what was copied."""
    before, started = os.stat(source), time.time_ns()
    hashed: list[str] = []
    hasher = threading.Thread(target=lambda: hashed.append(stream_sha256(source)), daemon=True)
    hasher.start()
    try:
        copy(source, target)
    finally:
        hasher.join()
    if not hashed or _key(os.stat(source)) != _key(before):
        return stream_sha256(target)  # the source changed (or vanished) meanwhile: hash what was copied
    _remember_if_settled(source, hashed[0], before, started)
    return hashed[0]


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
