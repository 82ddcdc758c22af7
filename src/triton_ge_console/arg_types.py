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
