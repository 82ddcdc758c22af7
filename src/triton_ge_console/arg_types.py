"""What the *_cli modules share: argparse value types and the handler type (a leaf: cli.py imports them)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

# What `set_defaults(func=...)` holds: the verb's handler, returning the exit code.
Handler = Callable[[argparse.Namespace], int]


def port_number(text: str) -> int:
    """An argparse type: a TCP port, 0 meaning "pick a free one" (argparse names the option)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port (0-65535)")
    return port


def seconds(text: str) -> float:
    """An argparse type: a positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number of seconds") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text[:40]} must be a positive number of seconds")
    return value


def int_list(text: str) -> tuple[int, ...]:
    """`1,2,4` as integers >= 1 (argparse turns the error into a usage message)."""
    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected integers such as 1,2,4,8") from None
    if any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: every concurrency must be at least 1")
    return values


def rate_list(text: str) -> tuple[float, ...]:
    """`100,200` as rates > 0 requests per second."""
    try:
        values = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected requests per second such as 100,200") from None
    if any(not v > 0 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: every rate must be > 0 requests per second")
    return values


def positive_int(text: str) -> int:
    """An integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: must be at least 1")
    return value
