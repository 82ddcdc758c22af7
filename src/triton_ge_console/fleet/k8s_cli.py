"""`ge-console k8s render`: only the arguments live here; the work is imported when the command runs."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from triton_ge_console.arg_types import error_line, help_when_bare
from triton_ge_console.display import listed


def register(subparsers: Any) -> None:
    """Add `k8s render`."""
    k8s = subparsers.add_parser("k8s", help="Kubernetes: manifests for a deployment spec")
    k8s_commands = k8s.add_subparsers(dest="k8s_command", metavar="COMMAND")
    help_when_bare(k8s)
    render = k8s_commands.add_parser(
        "render",
        help="write a Deployment, a Service (and a ServiceMonitor) for SPEC",
        description="Write the Kubernetes manifests for SPEC (its kubernetes: section sets image, "
        "namespace, storage and resource names) into DIR, one file per object.",
    )
    render.add_argument("spec", type=Path, metavar="SPEC", help="deployment spec (YAML)")
    render.add_argument("-o", "--output", type=Path, required=True, metavar="DIR", help="folder to write")
    render.set_defaults(func=run_render)


def run_render(args: argparse.Namespace) -> int:
    """Render and write; spec problems go to stderr, one line each."""
    from triton_ge_console.errors import user_path
    from triton_ge_console.fleet.k8s_render import (
        metrics_served,
        render,
        token_secret,
        write_manifests,
    )
    from triton_ge_console.repository.spec.load import SpecError, load_spec

    try:
        spec = load_spec(args.spec)
        with user_path(args.output):  # a directory the user named: 'DIR: not a directory', one line
            written = write_manifests(render(spec), args.output)
    except SpecError as exc:
        for problem in listed([str(p) for p in exc.problems]):
            error_line(problem)
        return 1
    for path in written:
        print(f"wrote {path}")
    k8s = spec.kubernetes
    if k8s.service_monitor and not metrics_served(spec):
        print("no ServiceMonitor (kubernetes.service_monitor): server.extra_args turn Triton's metrics off")
    print(
        f"the servers read their token from Secret '{token_secret(spec)}' (key '{k8s.token_secret_key}'): "
        f"kubectl -n {k8s.namespace} create secret generic {token_secret(spec)} "
        f"--from-literal={k8s.token_secret_key}=..."
    )
    return 0
