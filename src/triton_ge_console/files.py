"""The one way we replace a file: readers never see half of it, and a failure leaves no temp file behind."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path

__all__ = ["not_a_file", "write_atomic"]


def write_atomic(path: Path, data: str | bytes, mode: int = 0o600) -> None:
    """Write data to a temp file beside path (private until it is complete), then rename it over path."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data.encode("utf-8") if isinstance(data, str) else data)
        if mode != 0o600:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def not_a_file(path: Path) -> str | None:
    """Why path cannot be read as a regular file, in words ("a symlink loop", "a named pipe, not a file",
    "no such file"); None when it can. Reading a pipe would hang, so it is told apart, never opened."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symlink loop"
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return "a broken symlink" if path.is_symlink() else "no such file"
        return (exc.strerror or str(exc)).lower()
    if stat.S_ISREG(mode):
        return None
    return f"{next((what for test, what in _KINDS if test(mode)), 'something else')}, not a file"
