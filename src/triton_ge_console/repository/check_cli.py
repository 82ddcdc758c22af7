"""`ge-console validate PATH [--json]` and `ge-console convert MODEL.onnx --soc-version SOC -o OUT`."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from triton_ge_console.arg_types import error_line
from triton_ge_console.display import listed
from triton_ge_console.files import not_a_file

# atc and soc are light (the parser lists ATC's choices); validation is imported where used: building the
# parser for `--help` must not load onnx, protobuf or clients.
from triton_ge_console.repository import atc, soc

if TYPE_CHECKING:
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
    validate.add_argument(
        "--backend-dir",
        action="append",
        type=Path,
        default=[],
        metavar="DIR",
        help="a backend directory Triton will use (repeatable); a backend found in none is an error "
        "(default: /opt/tritonserver/backends where it exists, else a missing backend is a warning)",
    )
    validate.set_defaults(func=run_validate)
    _register_convert(subparsers)


def _register_convert(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the convert subcommand: ATC's options, spelled with dashes."""
    convert = subparsers.add_parser(
        "convert",
        help="compile an ONNX model to an Ascend .om with CANN's ATC",
        description="Run ATC (--framework=5) on MODEL after checking ATC's own argument rules. ATC runs in "
        "OUT.atc/ (its check_result.json and fusion_result.json land there).",
    )
    convert.add_argument("model", type=Path, metavar="MODEL.onnx")
    convert.add_argument("--soc-version", help="target SoC: 'Ascend' + the chip name npu-smi shows, e.g. "
                         "Ascend910B3 or Ascend310P3 (default: this host's NPUs, when npu-smi sees one kind)")
    convert.add_argument(
        "-o", "--output", required=True, type=Path, help="OM to write (.om is added if missing)"
    )
    convert.add_argument("--input-shape",
                         help='ATC --input_shape, e.g. "input_ids:-1,128" ("name:" for a scalar)')
    gears = convert  # one at most: ATC's own E10009 says so
    gears.add_argument("--dynamic-batch-size",
                       help="batch size gears, e.g. 1,2,4,8 (N axis -1 in --input-shape)")
    gears.add_argument("--dynamic-dims", help='gears for the -1 axes of --input-shape, e.g. "1,128;4,128"')
    gears.add_argument("--dynamic-image-size", help='H,W gears, e.g. "224,224;448,448"')
    convert.add_argument("--input-format", help="ATC --input_format (ND, NCHW or NCDHW for ONNX)")
    convert.add_argument("--precision-mode", help=f"ATC --precision_mode: {', '.join(atc.PRECISION_MODES)} "
                         f"(ATC's default: {atc.DEFAULT_PRECISION_MODE})")
    convert.add_argument("--output-type",
                         help=f'ATC --output_type: {", ".join(atc.OUTPUT_TYPES)}, or per output '
                              '"node:0:FP16;..." (each node:index also in --out-nodes)')
    convert.add_argument("--out-nodes", help='ATC --out_nodes, e.g. "logits_node:0"')
    convert.add_argument("--op-select-implmode",
                         help=f"ATC --op_select_implmode: {', '.join(atc.IMPL_MODES)}")
    convert.add_argument("--log", help=f"ATC --log level: {', '.join(atc.LOG_LEVELS)} (ATC's default: null)")
    convert.set_defaults(func=run_convert)


def run_validate(args: argparse.Namespace) -> int:
    """Findings (or the JSON report) on stdout, the verdict on stderr; exit 0 clean, 1 errors, 2 no PATH."""
    from triton_ge_console.errors import GeConsoleError
    from triton_ge_console.repository.validate import validate_path

    try:
        report = validate_path(args.path, args.backend_dir)
    except GeConsoleError as exc:  # no such PATH: a usage error
        return error_line(str(exc), 2)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        for line in listed([str(problem) for problem in report.problems]):
            print(line)
        print(summary(report), file=sys.stderr)
    return 0 if report.ok else 1


def summary(report: ValidationReport) -> str:
    """One closing line: verdict, counts, what was judged."""
    judged = f"{len(report.models)} model(s)" if report.models else "1 config"
    verdict = "ok" if report.ok else "invalid"
    counts = f"{len(report.errors)} error(s), {len(report.warnings)} warning(s)"
    return f"{report.path}: {verdict}: {counts} in {judged}"


def _request(args: argparse.Namespace, soc_version: str) -> atc.AtcRequest:
    """The ATC request the command line asks for."""
    return atc.AtcRequest(
        args.model, soc_version, args.output, args.input_shape, args.dynamic_batch_size, args.input_format,
        precision_mode=args.precision_mode, output_type=args.output_type, out_nodes=args.out_nodes,
        op_select_implmode=args.op_select_implmode, log=args.log, dynamic_dims=args.dynamic_dims,
        dynamic_image_size=args.dynamic_image_size,
    )


def _soc_version(given: str | None) -> str | None:
    """The SoC to build for: the one given, else this host's NPUs' (one kind only); notes on stderr."""
    visible = soc.visible_soc_versions()
    if given is None:
        if len(visible) == 1:
            print(f"ge-console convert: --soc-version {visible[0]} (this host's NPUs)", file=sys.stderr)
            return visible[0]
        seen = (f"this host's NPUs are {', '.join(visible)}" if visible
                else "npu-smi names no NPU's SoC here")
        error_line(f"--soc-version is required ({seen})")
        return None
    if given == soc.LEGACY_910:
        print(f"ge-console convert: note: {given} is the legacy 910-class SoC, not the 910B series "
              "(Ascend910B1..B4: 'Ascend' + the chip name npu-smi shows)", file=sys.stderr)
    if visible and given not in visible:
        verdict = ("loads on them (the same NpuArch)" if all(soc.loads_on(given, v) for v in visible)
                   else "will not load on them (another NpuArch)")
        print(f"ge-console convert: note: this host's NPUs are {', '.join(visible)}; an OM built for {given} "
              f"{verdict}", file=sys.stderr)
    return given


def run_convert(args: argparse.Namespace) -> int:
    """Check ATC's rules, find ATC, run it with progress; 0 OM written, 1 failed, 2 bad arguments."""
    soc_version = _soc_version(args.soc_version)
    if soc_version is None:
        return 2
    request = _request(args, soc_version)
    problems = atc.check_request(request)
    for problem in problems:
        error_line(problem)
    if problems:
        return 2
    unreadable = not_a_file(request.model)
    if unreadable is not None:
        return error_line(f"{request.model}: {unreadable}")
    model_problems = atc.check_model(request)
    for problem in model_problems:
        error_line(problem)
    if model_problems:
        return 1
    executable = atc.find_atc()
    if executable is None:
        return error_line(atc.atc_missing())
    return _convert(request, executable)


def _convert(request: atc.AtcRequest, executable: str) -> int:
    """Run ATC and report what it wrote, recording the SoC beside the OM."""
    started = time.monotonic()
    result = _run_with_progress(request, executable)
    if not result.ok:
        return _report_failure(request, result)
    soc.write_record(result.om_path, request.soc_version, atc.atc_command(request, executable))
    size_mib = result.om_path.stat().st_size / (1 << 20)
    print(f"wrote {result.om_path} ({size_mib:.1f} MiB) in {time.monotonic() - started:.1f}s")
    return 0


def _run_with_progress(request: atc.AtcRequest, executable: str) -> atc.AtcResult:
    """ATC under a spinner showing its latest line (stderr, so stdout stays the result)."""
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True, disable=not console.is_terminal) as progress:
        task = progress.add_task(f"atc: compiling {request.model.name} for {request.soc_version}")

        def show(line: str) -> None:
            if line.strip():
                progress.update(task, description=f"atc: {line.strip()[:STATUS_WIDTH]}")

        return atc.run_atc(request, executable, on_line=show)


def _report_failure(request: atc.AtcRequest, result: atc.AtcResult) -> int:
    """ATC's error lines on stderr (or its last lines when it named none), and where its reports are."""
    if result.returncode == 0:
        return error_line(f"atc exited 0 but wrote no {result.om_path}")
    error_line(f"atc failed (exit {result.returncode}):")
    for line in result.error_lines or result.output[-10:]:
        print(f"  {line}", file=sys.stderr)
    print(f"  (ATC's check_result.json and fusion_result.json, if any: {request.work_dir})", file=sys.stderr)
    return 1
