"""`ge-console doctor [--json]`: the pre-flight of a new host, one line per check with what to do."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

SYMBOLS = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL", "info": "info"}


def register(subparsers: Any) -> None:
    """Add the `doctor` subcommand."""
    parser = subparsers.add_parser("doctor", help="check this host: CANN, driver, NPUs, pyACL, ATC, Triton, "
                                   "/dev/shm, limits")
    parser.add_argument("--json", action="store_true", help="print the checks as JSON")
    parser.add_argument("--spec", type=Path, metavar="FILE",
                        help="weigh /dev/shm against this deployment spec's models")
    parser.add_argument("--ascend-root", type=Path, metavar="DIR",
                        help="where the driver, firmware and CANN are installed (default /usr/local/Ascend)")
    parser.add_argument("--npu-smi", type=Path, metavar="PATH", help="the npu-smi binary (default: on PATH)")
    parser.add_argument("--tritonserver", metavar="PATH", help="the tritonserver binary to check")
    parser.set_defaults(func=run_doctor)


def run_doctor(args: argparse.Namespace) -> int:
    """Run every check and print them; 1 when one failed."""
    import os

    from triton_ge_console.doctor.checks import FAIL, Host, run_checks
    from triton_ge_console.doctor.install_info import DEFAULT_ROOT
    from triton_ge_console.doctor.shm_need import spec_shm_need

    need, detail = spec_shm_need(args.spec) if args.spec else (None, "")
    host = Host(env=dict(os.environ), ascend_root=args.ascend_root or DEFAULT_ROOT, npu_smi=args.npu_smi,
                python=sys.executable, tritonserver=args.tritonserver, shm_needed=need, shm_detail=detail)
    checks = run_checks(host)
    if args.json:
        print(json.dumps([dataclasses.asdict(c) for c in checks], indent=2))
    else:
        width = max(len(c.name) for c in checks)
        for check in checks:
            print(f"{SYMBOLS[check.status]}  {check.name:<{width}}  {check.line}")
            if check.action and check.status != "ok":
                print(f"      {'':<{width}}  → {check.action}")
    return 1 if any(c.status == FAIL for c in checks) else 0
