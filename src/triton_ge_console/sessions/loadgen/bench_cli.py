"""`ge-console bench MODEL`: measure a served model's latency and throughput under load."""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triton_ge_console.arg_types import error_line, int_list, positive_int, rate_list
from triton_ge_console.sessions.loadgen.bench_shared import UsageError, resolve_endpoint, stop_on_interrupt
from triton_ge_console.sessions.loadgen.generate_bench_cli import add_generate_options
from triton_ge_console.sessions.loadgen.vs_direct_cli import add_vs_direct_options

# Imported where used: building the parser for `--help` must not load onnx, protobuf or clients.
if TYPE_CHECKING:
    from triton_ge_console.sessions.loadgen.run import BenchRow, LoadSpec, Progress, RunContext

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
EXAMPLES = """examples:
  ge-console bench llama_model --shape input_ids:16 --concurrency 1,2,4,8
  ge-console bench bert_model --session seed --protocol http --rate 50,100 --distribution poisson
  ge-console bench llama_model --url 127.0.0.1:8001 --batch-size 4 --input input_ids=ids.npy --json out.json
  ge-console bench llama_model --vs-direct --seq-len 16 --batch 1,4,8 --pin-executor 1
  ge-console bench llama_generate --generate --output-tokens 128 --concurrency 1,8 --slo ttft=50,itl=5

exit codes: 0 ok; 1 the server failed (unreachable, requests failed); 2 bad options or a model the
server does not serve; 130 interrupted (the steps already measured are still written)."""


def register(subparsers: Any) -> None:
    """Add `bench` to the ge-console parser."""
    parser = subparsers.add_parser(
        "bench", help="measure a model's latency and throughput under load",
        usage="ge-console bench MODEL [--session NAME | --url HOST:PORT] "
              "[--concurrency N,... | --rate R,...] [options]",
        description="Load a served model (concurrency sweep or request rate) and report p50/p90/p95/p99 "
                    "latency, throughput and Triton's queue/compute split over the same windows.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="model name as the server knows it")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--session", "-s", metavar="NAME",
                       help="a session started by `ge-console up` (default: the only one running)")
    where.add_argument("--url", metavar="HOST:PORT", help="server address (its gRPC or HTTP port)")
    parser.add_argument("--protocol", choices=("grpc", "http"),
                        help="default: grpc (--vs-direct: both, where the session has both)")
    _add_load_options(parser)
    parser.add_argument("--csv", nargs="?", const="-", metavar="FILE", help="write CSV (stdout: no FILE)")
    parser.add_argument("--json", nargs="?", const="-", metavar="FILE", help="write JSON (stdout: no FILE)")
    parser.add_argument("--quiet", action="store_true", help="no progress display")
    add_generate_options(parser)
    add_vs_direct_options(parser)
    parser.set_defaults(func=run_bench)


def _add_load_options(parser: argparse.ArgumentParser) -> None:
    """What load to apply and how to measure it."""
    load = parser.add_mutually_exclusive_group()
    load.add_argument("--concurrency", type=int_list, metavar="N[,N...]",
                      help="closed loop: requests kept in flight, one step per value (default: 1)")
    load.add_argument("--rate", type=rate_list, metavar="R[,R...]",
                      help="open loop: requests per second, one step per value")
    parser.add_argument("--distribution", choices=("constant", "poisson"), default="constant",
                        help="rate mode inter-arrival times (default: constant)")
    parser.add_argument("--batch-size", type=positive_int, default=1, metavar="N",
                        help="items per request for a batching model (default: 1)")
    parser.add_argument("--shape", action="append", default=[], metavar="NAME:DIMS",
                        help="an input's shape without the batch dimension, e.g. input_ids:128 (-1 dims "
                             "default to 1); repeatable")
    parser.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                        help="send this array for an input instead of random data; repeatable")
    parser.add_argument("--window-ms", type=positive_int, default=1500, metavar="MS",
                        help="length of one measurement window (default: 1500)")
    parser.add_argument("--warmup-ms", type=int, default=1000, metavar="MS",
                        help="unmeasured load before each step's windows (default: 1000)")
    parser.add_argument("--max-windows", type=positive_int, default=10, metavar="N",
                        help="windows per step at most while waiting for 3 within 10%% (default: 10)")
    parser.add_argument("--priority", type=positive_int, default=0, metavar="LEVEL",
                        help="request priority level (1 is served first; default: the model's)")
    parser.add_argument("--timeout-us", type=positive_int, default=0, metavar="US",
                        help="each request's queue timeout; Triton applies it where the model's queue "
                             "policy allows an override and it is shorter than the default")


def run_bench(args: argparse.Namespace) -> int:
    """Handler: build the spec, run the sweep with a progress display, print the results."""
    if args.vs_direct:
        from triton_ge_console.sessions.loadgen.vs_direct_cli import run_vs_direct

        return run_vs_direct(args)
    args.protocol = args.protocol or "grpc"
    if args.generate:
        from triton_ge_console.sessions.loadgen.generate_bench_cli import run_generate_bench

        return run_generate_bench(args)
    from triton_ge_console.sessions.loadgen.report import (
        client_bound_warnings,
        client_facts,
        run_context_dict,
    )
    from triton_ge_console.sessions.loadgen.run import (
        LoadError,
        LoadSpecError,
        UnknownModelError,
        run_load_sync,
    )
    from triton_ge_console.sessions.server import registry

    try:
        spec = spec_from_args(args)
        spec.validate()
    except (UsageError, LoadSpecError) as exc:
        return error_line(str(exc), EXIT_USAGE)
    except registry.SessionStopped as exc:
        return error_line(str(exc), EXIT_FAILURE)
    stop = threading.Event()
    contexts: list[RunContext] = []
    client_before = client_facts()
    try:
        with _ProgressDisplay(enabled=not args.quiet) as display, stop_on_interrupt(stop):
            rows = run_load_sync(spec, display.update, stop, contexts.append)
    except (LoadSpecError, UnknownModelError) as exc:
        return error_line(str(exc), EXIT_USAGE)
    except LoadError as exc:
        return error_line(str(exc), EXIT_FAILURE)
    context = run_context_dict(contexts[0] if contexts else None, client_before, client_facts())
    warnings = client_bound_warnings(rows)
    for warning in warnings:
        print(f"ge-console bench: warning: {warning}", file=sys.stderr)
    try:
        _write_results(args, spec, rows, context, warnings)
    except OSError as exc:
        return error_line(f"cannot write results: {exc}", EXIT_FAILURE)
    if stop.is_set():
        return error_line(f"interrupted: {len(rows)} of {len(spec.levels)} steps measured", EXIT_INTERRUPTED)
    failed = [row for row in rows if row.errors or row.requests == 0]
    if failed:
        return error_line(failure_text(failed[0]), EXIT_FAILURE)
    return EXIT_OK


def spec_from_args(args: argparse.Namespace) -> LoadSpec:
    """A LoadSpec from the parsed options; the endpoint from --url or the session registry."""
    from triton_ge_console.sessions.loadgen.inputs import parse_input_option, parse_shape_option
    from triton_ge_console.sessions.loadgen.run import LoadSpec

    if args.warmup_ms < 0:
        raise UsageError(f"--warmup-ms {args.warmup_ms}: must not be negative")
    shapes = dict(parse_shape_option(text) for text in args.shape)
    files = dict(parse_input_option(text) for text in args.input)
    url, headers = resolve_endpoint(args.session, args.url, args.protocol, args.model)
    return LoadSpec(
        model=args.model, url=url, protocol=args.protocol,
        concurrency=args.concurrency or (1,), rate=args.rate or (), distribution=args.distribution,
        batch_size=args.batch_size, shapes=shapes, input_files=files, window_ms=args.window_ms,
        warmup_ms=args.warmup_ms, max_windows=args.max_windows, headers=headers,
        priority=args.priority, timeout_us=args.timeout_us,
    )


def _write_results(args: argparse.Namespace, spec: LoadSpec, rows: list[BenchRow], context: dict[str, Any],
                   warnings: list[str]) -> None:
    """The table on stdout unless --csv/--json claim stdout; files where named (JSON with its context)."""
    from rich.console import Console

    from triton_ge_console.sessions.loadgen.report import bench_json, rows_to_csv, rows_to_table

    to_stdout = False
    renders = ((args.csv, lambda: rows_to_csv(rows)),
               (args.json, lambda: bench_json(rows, context, warnings)))
    for option, render in renders:
        if option is None:
            continue
        text = render()
        if option == "-":
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
            to_stdout = True
        else:
            Path(option).write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    if not to_stdout:
        title = f"{spec.model} over {spec.protocol} at {spec.url}, batch {spec.batch_size}"
        Console(width=None if sys.stdout.isatty() else 200).print(rows_to_table(rows, title))


def failure_text(row: BenchRow) -> str:
    """Why a step's figures cannot be trusted, in one line."""
    from triton_ge_console.sessions.loadgen.report import level_text

    if row.errors:
        count = "every request" if row.requests == 0 else f"{row.errors} requests"
        return f"{count} failed at {level_text(row)}: {row.first_error}"
    return f"no request completed within the windows at {level_text(row)}; try a longer --window-ms"




class _ProgressDisplay:
    """A live status line on a terminal's stderr; one line per finished step otherwise."""

    def __init__(self, enabled: bool) -> None:
        from rich.console import Console

        self.enabled = enabled
        self.console = Console(stderr=True)
        self._status: Any = None

    def __enter__(self) -> _ProgressDisplay:
        if self.enabled and self.console.is_terminal:
            self._status = self.console.status("connecting")
            self._status.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.__exit__(None, None, None)

    def update(self, progress: Progress) -> None:
        """Show one progress record."""
        from triton_ge_console.sessions.loadgen.report import progress_line

        if not self.enabled:
            return
        text = progress_line(progress)
        if self._status is not None:
            self._status.update(text)
        elif progress.phase in ("step-done", "stopped"):
            print(text, file=sys.stderr, flush=True)
