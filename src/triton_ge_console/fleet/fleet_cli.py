"""The fleet's options on the session verbs: `status --all`, `reload --fleet`, `attach k8s:NS/SELECTOR`.

The verbs themselves are declared in sessions/session_cli.py; these options act on many servers at once, so
they are declared here, beside the fleet's handlers, and route the verb there (sessions never imports fleet).
Registered after session_cli. The work is imported when the command runs, so `ge-console --help` stays fast.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from triton_ge_console.arg_types import Handler, error_line


def register(subparsers: Any) -> None:
    """Add the fleet's options to `status`, `reload` and `attach`."""
    status = subparsers.choices["status"]
    status.add_argument(
        "--all", action="store_true", help="one row per running session (the fleet), polled concurrently"
    )
    status.add_argument(
        "--interval", type=float, default=1.0, metavar="S", help="--all: seconds between a server's two polls"
    )
    status.add_argument("--workers", type=int, default=8, metavar="N", help="--all: polls at once")
    _route(status, lambda args: args.all, run_status_all)
    reload = subparsers.choices["reload"]
    reload.add_argument(
        "--fleet",
        action="store_true",
        help="every running session with MODEL loaded, one at a time; stop at the first failure",
    )
    _route(reload, lambda args: args.fleet, run_rolling_reload)
    attach = subparsers.choices["attach"]
    _add_k8s_options(attach)
    _route(attach, lambda args: args.url.startswith("k8s:"), run_k8s_attach)


def _route(parser: argparse.ArgumentParser, when: Callable[[argparse.Namespace], bool],
           fleet: Handler) -> None:
    """The verb runs `fleet` when `when(args)`, else the session handler it had."""
    session: Handler = parser.get_default("func")

    def run(args: argparse.Namespace) -> int:
        return (fleet if when(args) else session)(args)

    parser.set_defaults(func=run)


def _add_k8s_options(parser: argparse.ArgumentParser) -> None:
    """Options of `attach k8s:...`."""
    group = parser.add_argument_group("k8s:NAMESPACE/SELECTOR")
    group.add_argument("--kubeconfig", type=Path, metavar="PATH",
                       help="default: $KUBECONFIG, ~/.kube/config, else the pod's service account")
    group.add_argument("--context", help="kubeconfig context (default: the current one)")
    group.add_argument("--once", action="store_true", help="add the ready pods and exit instead of following")
    group.add_argument(
        "--via", choices=("auto", "pod-ip", "port-forward"), default="auto",
        help="how the pods are reached: pod-ip (their addresses: in-cluster, or where pod IPs route), "
        "port-forward (127.0.0.1 ports relayed through the API server; needs RBAC create on "
        "pods/portforward; closed when attach stops); auto (default): pod-ip in-cluster or with --once, "
        "else port-forward",
    )


def run_status_all(args: argparse.Namespace) -> int:
    """`status --all`: every running session's row."""
    from triton_ge_console.fleet.status_table import run_status_all as run

    return run(args)


def run_rolling_reload(args: argparse.Namespace) -> int:
    """`reload --fleet MODEL`: roll MODEL over every running session."""
    from triton_ge_console.fleet.rolling_report import run_rolling_reload as run

    if not args.model:
        return error_line("reload --fleet needs MODEL", 2)
    return run(args)


def run_k8s_attach(args: argparse.Namespace) -> int:
    """`attach k8s:NAMESPACE/SELECTOR`: list (--once) or follow the target's pods."""
    from triton_ge_console.fleet.k8s_attach import run_k8s_attach as run
    from triton_ge_console.sessions.session_cli import token_given

    return run(args, token_given(args))
