"""What the *_cli modules share: argparse value types and the handler type (a leaf: cli.py imports them)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TypeVar

from triton_ge_console.display import printable
from triton_ge_console.errors import GeConsoleError

# What `set_defaults(func=...)` holds: the verb's handler, returning the exit code.
Handler = Callable[[argparse.Namespace], int]
T = TypeVar("T")


def _parsed(convert: Callable[[str], T], text: str, unreadable: str) -> T:
    """convert(text), or argparse's usage error with the message for text it cannot read."""
    try:
        return convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(unreadable) from None


def _each(convert: Callable[[str], T]) -> Callable[[str], tuple[T, ...]]:
    """A comma-separated list of what convert reads."""
    return lambda text: tuple(convert(part) for part in text.split(","))


def port_number(text: str) -> int:
    """An argparse type: a TCP port, 0 meaning "pick a free one" (argparse names the option)."""
    port = _parsed(int, text, f"{text[:40]!r} is not a port number")
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port (0-65535)")
    return port


def seconds(text: str) -> float:
    """An argparse type: a positive, finite number of seconds."""
    value = _parsed(float, text, f"{text[:40]!r} is not a number of seconds")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text[:40]} must be a positive number of seconds")
    return value


def int_list(text: str) -> tuple[int, ...]:
    """`1,2,4` as integers >= 1 (argparse turns the error into a usage message)."""
    values = _parsed(_each(int), text, f"{text!r}: expected integers such as 1,2,4,8")
    if any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: every concurrency must be at least 1")
    return values


def rate_list(text: str) -> tuple[float, ...]:
    """`100,200` as rates > 0 requests per second."""
    values = _parsed(_each(float), text, f"{text!r}: expected requests per second such as 100,200")
    if any(not v > 0 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: every rate must be > 0 requests per second")
    return values


def positive_int(text: str) -> int:
    """An integer >= 1."""
    value = _parsed(int, text, f"{text!r}: expected a whole number")
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: must be at least 1")
    return value


class UsageError(GeConsoleError, ValueError):
    """What the user asked cannot be told apart or put together (options that clash, a session to name):
    one line and exit code 2, a usage error (docs/reference/errors.md)."""


def error_line(message: str, code: int = 1) -> int:
    """The one way a verb reports an error: one line on stderr; gives back the exit code to return."""
    print(f"ge-console: error: {printable(message)}", file=sys.stderr)
    return code


def help_when_bare(parser: argparse.ArgumentParser) -> None:
    """A verb with subcommands given none (`ge-console k8s`) prints its own help, a usage error (exit 2)."""

    def usage(args: argparse.Namespace) -> int:
        parser.print_help(sys.stderr)
        return 2

    parser.set_defaults(func=usage)
