"""`ge-console validate PATH [--json]` and `ge-console convert MODEL.onnx --soc-version SOC -o OUT`."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

# Imported where used: building the parser for `--help` must not load onnx, protobuf or clients.
if TYPE_CHECKING:
    from triton_ge_console.repository import atc
    from triton_ge_console.repository.validate import ValidationReport

STATUS_WIDTH = 80


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the validate and convert subcommands."""
    validate = subparsers.add_parser(
        "validate",
        help="check a model repository, model folder or config.pbtxt the way Triton would",
        description="Judge PATH (a repository, one model folder, or one config.pbtxt: the config alone) with "
        "Triton's own config rules and the GE backends' checks. Exit 0 clean (warnings allowed), "
        "1 errors, 2 usage.",
    )
    validate.add_argument("path", type=Path, metavar="PATH")
    validate.add_argument("--json", action="store_true", help="print the report as JSON")
    validate.set_defaults(func=run_validate)

    convert = subparsers.add_parser(
        "convert",
        help="compile an ONNX model to an Ascend .om with CANN's ATC",
        description="Run ATC (--framework=5) on MODEL after checking ATC's own argument rules.",
    )
    convert.add_argument("model", type=Path, metavar="MODEL.onnx")
    convert.add_argument("--soc-version", required=True, help="target SoC, e.g. Ascend310P3 or Ascend910B1")
    convert.add_argument(
        "-o", "--output", required=True, type=Path, help="OM to write (.om is added if missing)"
    )
    convert.add_argument("--input-shape", help='ATC --input_shape, e.g. "input_ids:-1,128"')
    convert.add_argument(
        "--dynamic-batch-size", help="batch size gears, e.g. 1,2,4,8 (N axis -1 in --input-shape)"
    )
    convert.add_argument("--input-format", help="ATC --input_format (ND, NCHW or NCDHW for ONNX)")
    convert.set_defaults(func=run_convert)


def run_validate(args: argparse.Namespace) -> int:
    """Findings (or the JSON report) on stdout, the verdict on stderr; exit 0 clean, 1 errors, 2 no PATH."""
    from triton_ge_console.repository.validate import validate_path

    try:
        report = validate_path(args.path)
    except FileNotFoundError as exc:
        print(f"ge-console validate: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        for problem in report.problems:
            print(problem)
        print(summary(report), file=sys.stderr)
    return 0 if report.ok else 1


def summary(report: ValidationReport) -> str:
    """One closing line: verdict, counts, what was judged."""
    judged = f"{len(report.models)} model(s)" if report.models else "1 config"
    verdict = "ok" if report.ok else "invalid"
    counts = f"{len(report.errors)} error(s), {len(report.warnings)} warning(s)"
    return f"{report.path}: {verdict}: {counts} in {judged}"


def run_convert(args: argparse.Namespace) -> int:
    """Check ATC's rules, find ATC, run it with progress; 0 OM written, 1 failed, 2 bad arguments."""
    from triton_ge_console.repository import atc

    request = atc.AtcRequest(
        args.model,
        args.soc_version,
        args.output,
        args.input_shape,
        args.dynamic_batch_size,
        args.input_format,
    )
    problems = atc.check_request(request)
    for problem in problems:
        print(f"ge-console convert: {problem}", file=sys.stderr)
    if problems:
        return 2
    if not request.model.is_file():
        print(f"ge-console convert: {request.model}: no such file", file=sys.stderr)
        return 1
    model_problems = atc.check_model(request)
    for problem in model_problems:
        print(f"ge-console convert: {problem}", file=sys.stderr)
    if model_problems:
        return 1
    executable = atc.find_atc()
    if executable is None:
        print(f"ge-console convert: {atc.ATC_MISSING}", file=sys.stderr)
        return 1
    started = time.monotonic()
    result = _run_with_progress(request, executable)
    if not result.ok:
        return _report_failure(result)
    size_mib = result.om_path.stat().st_size / (1 << 20)
    print(f"wrote {result.om_path} ({size_mib:.1f} MiB) in {time.monotonic() - started:.1f}s")
    return 0


def _run_with_progress(request: atc.AtcRequest, executable: str) -> atc.AtcResult:
    """ATC under a spinner showing its latest line (stderr, so stdout stays the result)."""
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from triton_ge_console.repository import atc

    console = Console(stderr=True)
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True, disable=not console.is_terminal) as progress:
        task = progress.add_task(f"atc: compiling {request.model.name} for {request.soc_version}")

        def show(line: str) -> None:
            if line.strip():
                progress.update(task, description=f"atc: {line.strip()[:STATUS_WIDTH]}")

        return atc.run_atc(request, executable, on_line=show)


def _report_failure(result: atc.AtcResult) -> int:
    """ATC's error lines on stderr (or its last lines when it named none)."""
    if result.returncode == 0:
        print(f"ge-console convert: atc exited 0 but wrote no {result.om_path}", file=sys.stderr)
        return 1
    print(f"ge-console convert: atc failed (exit {result.returncode}):", file=sys.stderr)
    for line in result.error_lines or result.output[-10:]:
        print(f"  {line}", file=sys.stderr)
    return 1
