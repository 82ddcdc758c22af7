"""tritonserver's command line as Triton reads it: the last value of an option wins (the spec, the launcher
and the extra arguments an operator adds all end up on one line)."""

from __future__ import annotations

from collections.abc import Sequence

from triton_ge_console.errors import InputError

PORT_OPTIONS = ("--http-port", "--grpc-port", "--metrics-port")
LISTEN_OPTIONS = ("--http-address", "--grpc-address")  # the metrics one ge-console follows


def last_option(args: Sequence[str], option: str) -> str | None:
    """The value tritonserver takes for an option: the last one given, as `--opt=value` or `--opt value`."""
    value = None
    for index, arg in enumerate(args):
        if arg.startswith(f"{option}="):
            value = arg.split("=", 1)[1]
        elif arg == option and index + 1 < len(args):
            value = args[index + 1]
    return value


def port_option(args: Sequence[str], option: str) -> int | None:
    """The port tritonserver takes for an option; ValueError in one line when it is no port number."""
    value = last_option(args, option)
    if value is None:
        return None
    if not value.strip().isdigit() or not 0 < int(value) < 65536:
        raise InputError(f"tritonserver argument {option}={value}: not a port number (1-65535)")
    return int(value)


def switched_off(args: Sequence[str], option: str) -> bool:
    """Whether tritonserver's last value of a boolean option turns it off."""
    value = last_option(args, option)
    return value is not None and value.strip().lower() in ("false", "off", "0")  # as Triton parses it


def extra_args_problem(args: Sequence[str]) -> str | None:
    """What tritonserver's extra arguments must not do, in one line: a port it cannot take, or a listen
    address of its own (it would skip the token guard of an exposed address and the recorded URL)."""
    for option in LISTEN_OPTIONS:
        if last_option(args, option) is not None:
            return (f"tritonserver argument {option}: give the listen address as server.listen or up's "
                    "--listen instead (ge-console records it and guards an exposed one)")
    for option in PORT_OPTIONS:
        try:
            port_option(args, option)
        except ValueError as exc:
            return str(exc)
    return None
