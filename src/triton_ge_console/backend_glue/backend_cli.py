"""`ge-console backend install DIR`: lay out a backend directory serving `ge` and `npu_ge`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triton_ge_console.arg_types import error_line, help_when_bare

# Imported where used: building the parser for `--help` must not load onnx, protobuf or clients.
if TYPE_CHECKING:
    from triton_ge_console.backend_glue.installer import InstallReport


def register(subparsers: Any) -> None:
    """Add `backend install`."""
    backend = subparsers.add_parser("backend", help="manage the Triton backend directory (ge, npu_ge)")
    actions = backend.add_subparsers(dest="backend_command", metavar="ACTION")
    install = actions.add_parser("install", help="lay out DIR for tritonserver --backend-directory")
    install.add_argument("dir", type=Path, metavar="DIR")
    install.add_argument("--tritonserver", help="tritonserver binary to take the Python backend from")
    install.add_argument("--native-npu-ge", type=Path, metavar="PATH",
                         help="native CANN libnpu_ge.so (or its folder) to use instead of the glue")
    install.add_argument("--json", action="store_true", help="print the report as JSON")
    install.set_defaults(func=run_install)
    help_when_bare(backend)


def run_install(args: argparse.Namespace) -> int:
    """Install the backend directory and print what was used."""
    from triton_ge_console.backend_glue.distribution import DistributionError, find_distribution
    from triton_ge_console.backend_glue.installer import InstallError, install_backend_dir

    try:
        dist = find_distribution(args.tritonserver)
        report = install_backend_dir(args.dir, dist, args.native_npu_ge)
    except (DistributionError, InstallError, OSError) as exc:
        return error_line(str(exc))
    print(json.dumps(report_dict(report), indent=2) if args.json else "\n".join(report.lines()))
    return 0


def report_dict(report: InstallReport) -> dict[str, Any]:
    """The install report as plain data."""
    return {
        "dest": str(report.dest),
        "tritonserver": str(report.distribution.binary),
        "origin": report.distribution.origin,
        "stub": str(report.stub),
        "python_version": report.python_version,
        "npu_ge": report.npu_ge,
        "changed": report.changed,
        "files": [{"path": str(f.path), "source": str(f.source), "action": f.action} for f in report.files],
    }
