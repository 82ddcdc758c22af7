"""`ge-console grafana`: write the Grafana dashboard over the console's metrics."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from triton_ge_console.arg_types import error_line


def register(subparsers: Any) -> None:
    """Add `grafana` to the ge-console parser."""
    parser = subparsers.add_parser(
        "grafana", help="write a Grafana dashboard (JSON) over the metrics the console reads",
        description="A dashboard with the console's panels over Triton's nv_*, the GE glue's ge_*, "
                    "npu-exporter's npu_chip_info_*, vLLM's vllm:* and MindIE Server's metrics; import it "
                    "in Grafana with a Prometheus source.")
    parser.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")
    parser.add_argument("--title", default="Triton GE Console", help="the dashboard's title")
    parser.set_defaults(func=run_grafana)


def run_grafana(args: argparse.Namespace) -> int:
    """Handler: the JSON on stdout or in FILE."""
    from triton_ge_console.sessions.observe.grafana import dashboard_json

    text = dashboard_json(args.title)
    if not args.output:
        sys.stdout.write(text)
        return 0
    try:
        Path(args.output).write_text(text, encoding="utf-8")
    except OSError as exc:
        reason = exc.strerror or exc
        return error_line(f"cannot write {args.output}: {reason}")
    print(f"wrote {args.output}")
    return 0
