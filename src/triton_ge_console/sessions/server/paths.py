"""Where sessions live on disk: the XDG state dir, or $GE_CONSOLE_STATE_DIR (tests point it at a tmp dir)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import platformdirs

STATE_DIR_ENV = "GE_CONSOLE_STATE_DIR"
APP_NAME = "ge-console"


def state_dir() -> Path:
    """The root of everything ge-console keeps between runs."""
    override = os.environ.get(STATE_DIR_ENV)
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_state_dir(APP_NAME))


def registry_dir() -> Path:
    """Where the session YAML files are kept (one per session)."""
    return state_dir() / "sessions"


def session_dir(name: str) -> Path:
    """A launched session's working dir: log, backend dir, built repository, token file."""
    return state_dir() / "runs" / name


PRIVATE_UMASK = 0o077  # servers, supervisors and stubs: what they create is the user's alone


def private_dir(path: Path) -> Path:
    """Create a folder readable by its owner only, and so every folder between it and the state dir."""
    root = state_dir()
    path.parent.mkdir(parents=True, exist_ok=True)
    for folder in (*reversed(path.parents), path):
        if folder == path or _inside(folder, root):
            folder.mkdir(mode=0o700, exist_ok=True)
            if folder.stat().st_uid == os.getuid():  # never chmod a folder someone else owns
                folder.chmod(0o700)
    return path


def make_private(tree: Path) -> None:
    """Drop group and other permissions below a session folder (built repository, backends, token).

    Folders are closed to all but their owner, so nothing below them is reachable by anyone else; a file
    with other links (a model source the build linked in) keeps its mode: it is the user's, never ours.
    """
    for folder, dirs, files in os.walk(tree):
        for name in (*dirs, *files):
            entry = Path(folder) / name
            info = entry.lstat()
            shared = not stat.S_ISDIR(info.st_mode) and info.st_nlink > 1
            if not stat.S_ISLNK(info.st_mode) and not shared and stat.S_IMODE(info.st_mode) & 0o077:
                entry.chmod(stat.S_IMODE(info.st_mode) & 0o700)
    tree.chmod(0o700)


def _inside(path: Path, folder: Path) -> bool:
    """Whether path is folder or below it."""
    return path == folder or folder in path.parents


def open_private(path: Path) -> int:
    """A descriptor appending to path (a log, a lock file), created and kept 0600."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.fchmod(fd, 0o600)
    return fd
