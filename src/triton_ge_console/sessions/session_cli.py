"""`ge-console up | down | restart | attach | ls | status | load | unload | reload | watch`.

Only the arguments live here; `handlers.py` (tritonclient, the builder, watchfiles) is imported when a
session command actually runs, so `ge-console --help` and the other areas' commands start quickly.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from triton_ge_console.arg_types import Handler, port_number, seconds
from triton_ge_console.sessions.server.token_header import TOKEN_HEADER

UP_EPILOG = """\
exposing a server (--listen other than loopback):
  a token is required; Triton then restricts every API to it: inference, metadata, health,
  model-repository, model-config, shared-memory, statistics, logging and trace (--public-health
  leaves liveness/readiness open for load balancers). Metrics stay on 127.0.0.1 (Triton cannot
  protect them with a token); reach them through an SSH tunnel or a scraper on this host.
  `down` removes the session's token file.
  Triton only takes the token on its command line, so local users can read it (ps,
  /proc/PID/cmdline). Prefer --token-env VAR over --token: it keeps the token out of
  ge-console's own command line and your shell history:
    GE_TOKEN=... ge-console up repo --listen 0.0.0.0 --token-env GE_TOKEN
"""

def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the session commands."""
    _add_up(subparsers)
    _add_down(subparsers)
    attach_parser = subparsers.add_parser(
        "attach", help="register a running Triton server, or the ready pods of k8s:NAMESPACE/SELECTOR"
    )
    attach_parser.add_argument(
        "url", metavar="URL", help="its HTTP endpoint, e.g. http://npu-host:8000, or k8s:NAMESPACE/SELECTOR"
    )
    attach_parser.add_argument("--name", help="session name (k8s: a prefix for the pods' names)")
    attach_parser.add_argument("--metrics-url", help="its /metrics URL (default: port 8002 beside port 8000)")
    attach_parser.add_argument("--grpc-url", help="its gRPC host:port")
    _add_token_options(attach_parser)
    attach_parser.add_argument(
        "--token-header",
        default=TOKEN_HEADER,
        help=f"header its restricted APIs check (default: {TOKEN_HEADER})",
    )
    attach_parser.set_defaults(func=_later(lambda h: h.run_attach))
    ls_parser = subparsers.add_parser("ls", help="list sessions")
    ls_parser.add_argument("--json", action="store_true", help="machine-readable output")
    ls_parser.add_argument("--running", action="store_true", help="only sessions that are starting or ready")
    ls_parser.set_defaults(func=_later(lambda h: h.run_ls))
    status_parser = subparsers.add_parser("status", help="a session's state, endpoints and models")
    _add_session_arguments(status_parser)
    status_parser.add_argument("--json", action="store_true", help="machine-readable output")
    status_parser.set_defaults(func=_later(lambda h: h.run_status))
    _add_model_commands(subparsers)
    watch_parser = subparsers.add_parser("watch", help="rebuild and reload on every save of SPEC")
    watch_parser.add_argument("spec", metavar="SPEC", type=Path, help="the spec a session was started from")
    watch_parser.add_argument("--session", "-s", metavar="NAME", help="session (default: the one from SPEC)")
    watch_parser.set_defaults(func=_later(lambda h: h.run_watch))


def _add_up(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """`up SPEC|REPO`."""
    parser = subparsers.add_parser(
        "up",
        help="start Triton for a spec or a model repository (detached)",
        epilog=UP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "source", metavar="SPEC|REPO", type=Path, help="deployment spec, or repository folder"
    )
    parser.add_argument("--name", help="session name (default: the spec's name or the folder's)")
    parser.add_argument("--tritonserver", metavar="PATH", help="tritonserver binary to run")
    parser.add_argument(
        "--listen", metavar="ADDR", help="bind address (default 127.0.0.1; others need --token)"
    )
    _add_token_options(parser)
    parser.add_argument(
        "--public-health",
        action="store_true",
        help="with a token: leave liveness/readiness open for load-balancer probes",
    )
    for kind in ("http", "grpc", "metrics"):
        parser.add_argument(
            f"--{kind}-port", type=port_number, metavar="PORT", help=f"{kind} port (default: free)"
        )
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="MODEL",
        help="REPO only: load just this model (repeatable; default: all)",
    )
    parser.add_argument(
        "--timeout", type=seconds, default=180.0, help="seconds to wait for READY (default 180)"
    )
    parser.set_defaults(func=_later(lambda h: h.run_up))


def _add_down(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """`down` and `restart`."""
    parser = subparsers.add_parser("down", help="stop a session's server (an attached one is only detached)")
    _add_session_arguments(parser)
    parser.add_argument("--timeout", type=seconds, default=15.0, help="seconds before SIGKILL (default 15)")
    parser.add_argument(
        "--forget",
        action="store_true",
        help="also remove it from the session list (without NAME: every stopped or dead session too)",
    )
    parser.set_defaults(func=_later(lambda h: h.run_down))
    restart_parser = subparsers.add_parser("restart", help="stop and start a session again, same ports")
    _add_session_arguments(restart_parser)
    restart_parser.add_argument("--timeout", type=seconds, default=180.0, help="seconds to wait for READY")
    restart_parser.set_defaults(func=_later(lambda h: h.run_restart))


def _add_model_commands(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """`load`, `unload`, `reload`."""
    for action in ("load", "unload", "reload"):
        parser = subparsers.add_parser(action, help=f"{action} a model in a session")
        parser.add_argument("model", nargs="?" if action == "reload" else None, metavar="MODEL")
        parser.add_argument("--session", "-s", metavar="NAME", help="session (default: the only one running)")
        if action != "unload":
            parser.add_argument(
                "--config", metavar="JSON", help="config override (reload: merged over the running config)"
            )
        if action == "reload":
            parser.add_argument(
                "--changed",
                action="store_true",
                help="reload every model whose files changed (spec sessions: rebuild first)",
            )
        parser.set_defaults(func=_later(lambda h: h.run_model_command), action=action)


def _add_session_arguments(parser: argparse.ArgumentParser) -> None:
    """NAME, or -s/--session NAME as on every other verb."""
    parser.add_argument("name", nargs="?", metavar="NAME", help="session (default: the only one running)")
    parser.add_argument("--session", "-s", metavar="NAME", help="the same as NAME")


def _add_token_options(parser: argparse.ArgumentParser) -> None:
    """--token / --token-env."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--token", help="access token for Triton's restricted APIs (kept in a 0600 file)")
    group.add_argument(
        "--token-env", metavar="VAR", help="read the access token from this environment variable"
    )


def _later(pick: Callable[[ModuleType], Handler]) -> Handler:
    """A verb's handler from handlers.py (`pick` names it), imported only when the verb runs."""

    def run(args: argparse.Namespace) -> int:
        from triton_ge_console.sessions import handlers

        return pick(handlers)(args)

    return run
