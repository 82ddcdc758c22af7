"""A server run's Python-stub shared-memory regions: named with the run's own prefix, removed once it ends.

Triton's Python backend names each stub's region `<shm-region-prefix-name><uuid>` in /dev/shm and leaves
it behind when a stub or the server is killed. Standard library only: the supervisor imports it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

SHM_DIR = Path("/dev/shm")
SHM_PREFIX_FILE = "shm-prefix"  # in the session dir: the prefix of every region this run's stubs use


def new_shm_prefix(workdir: Path) -> str:
    """A fresh shared-memory region prefix for one server run, kept in its session dir for cleanup.

    The session's previous run is over (never two runs of one session): what it left, when it ended with
    nobody to clean up (supervisor and server both killed), is removed before its prefix is forgotten."""
    remove_shm_regions(workdir)
    prefix = f"triton_ge_{secrets.token_hex(6)}_"
    fd = os.open(workdir / SHM_PREFIX_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as file:
        os.fchmod(fd, 0o600)
        file.write(prefix + "\n")
    return prefix


def shm_arguments(prefix: str, backends: frozenset[str]) -> list[str]:
    """Backend config giving every Python-based backend's regions the run's own prefix (the Python
    backend's `shm-region-prefix-name`), so they can all be found and removed once the server is gone."""
    return [f"--backend-config={backend},shm-region-prefix-name={prefix}" for backend in sorted(backends)]


def remove_shm_regions(workdir: Path) -> int:
    """Remove the shared-memory regions of the run recorded in `workdir` (live or dead); how many."""
    try:
        prefix = (workdir / SHM_PREFIX_FILE).read_text(encoding="ascii").strip()
    except OSError:
        return 0
    if not prefix.startswith("triton_ge_"):
        return 0
    removed = 0
    for region in SHM_DIR.glob(f"{prefix}*"):
        with contextlib.suppress(FileNotFoundError):
            region.unlink()
            removed += 1
    return removed
