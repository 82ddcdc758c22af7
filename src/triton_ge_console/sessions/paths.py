"""Where sessions live on disk: the XDG state dir, or $GE_CONSOLE_STATE_DIR (tests point it at a tmp dir)."""

from __future__ import annotations

import os
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
