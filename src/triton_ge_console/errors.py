"""The project's error base: what `cli.py` reports as one `ge-console: error:` line, so any other exception
reaching it is a bug and keeps its traceback (a leaf: it imports nothing of the package)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


class GeConsoleError(Exception):
    """Every error ge-console raises on purpose, with a message the user can act on."""


class InputError(GeConsoleError, ValueError):
    """Bad input the user gave (a value, an option, a file's contents); a ValueError to its callers."""


class PathError(GeConsoleError, OSError):
    """The OS refused a path the user named (no such file, permission denied, already there): its message
    names the path; an OSError for callers that catch one."""

    def __str__(self) -> str:
        """The message as given (OSError would rebuild it from errno and filename)."""
        return str(self.args[0]) if self.args else ""


def path_error(path: object, exc: OSError) -> PathError:
    """`PATH: reason` for an OS error on a path the user named, keeping its errno."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    error = PathError(f"{path}: {reason[:1].lower()}{reason[1:]}")
    error.errno, error.filename = exc.errno, str(path)
    return error


@contextlib.contextmanager
def user_path(path: object) -> Iterator[None]:
    """Turn an OS error on a path the user named into a PathError naming it (one line, not a traceback)."""
    try:
        yield
    except PathError:
        raise
    except OSError as exc:
        raise path_error(path, exc) from exc
