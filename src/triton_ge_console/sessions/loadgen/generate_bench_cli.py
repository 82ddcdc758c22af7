"""The `--generate` options of `ge-console bench` and their handler (the work is in generate_bench)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triton_ge_console.arg_types import error_line, positive_int
from triton_ge_console.errors import InputError
from triton_ge_console.triton_terms import host_and_port, parse_endpoint

if TYPE_CHECKING:
    from triton_ge_console.sessions.loadgen.generate_bench import GenerateLoad, GenerateRow, StepKey
    from triton_ge_console.sessions.loadgen.generate_report import RequestExport

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def add_generate_options(parser: argparse.ArgumentParser) -> None:
    """Options for streaming a generate model (a decoupled model built from a spec's `generate:`)."""
    group = parser.add_argument_group("generate models (--generate)")
    group.add_argument("--generate", action="store_true",
                       help="stream generations (gRPC stream or HTTP generate_stream) and report TTFT, "
                            "ITL, end-to-end latency, output tokens/s, requests/s and goodput")
    group.add_argument("--prompt-tokens", type=token_range, default=(128, 128), metavar="N|LOW:HIGH",
                       help="prompt length in tokens, or drawn uniformly from LOW..HIGH (default: 128)")
    group.add_argument("--output-tokens", type=token_range, default=(128, 128), metavar="N|LOW:HIGH",
                       help="tokens asked of each generation (max_tokens), or drawn uniformly from "
                            "LOW..HIGH (default: 128)")
    group.add_argument("--requests", type=positive_int, metavar="N",
                       help="generations measured per step (default: 4 per stream, at least 100, so p99 "
                            "rests on a sample); with --vs-direct, timed requests per path, batch and "
                            "round (default: 20)")
    group.add_argument("--endpoint", choices=("triton", "openai"), default="triton",
                       help="triton: the gRPC stream or HTTP generate_stream (default); openai: an "
                            "OpenAI-compatible API's /v1/completions, streamed (--url http://HOST:PORT/v1, "
                            "e.g. `ge-console openai`'s; its key from $OPENAI_API_KEY)")
    group.add_argument("--export", metavar="FILE",
                       help="write every measured generation as a JSON line: send time, TTFT, each "
                            "inter-token interval, e2e, input and output tokens, status")
    group.add_argument("--slo", metavar="ttft=MS,itl=MS",
                       help="objectives for goodput: time to first token and mean inter-token latency")
    group.add_argument("--vocab", type=positive_int, default=32000, metavar="N",
                       help="prompt ids are drawn below this (default: 32000)")
    group.add_argument("--compare", metavar="FILE",
                       help="an earlier run's --json: each step's output tokens/s, TTFT p50, ITL p50 and "
                            "e2e p99 now ÷ then")


def token_range(text: str) -> tuple[int, int]:
    """'128' → (128, 128); '64:256' → (64, 256)."""
    low, _, high = text.partition(":")
    try:
        bounds = (int(low), int(high or low))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected N or LOW:HIGH (token counts)") from None
    if not 1 <= bounds[0] <= bounds[1]:
        raise argparse.ArgumentTypeError(f"{text!r}: expected 1 <= LOW <= HIGH")
    return bounds


def load_from_args(args: argparse.Namespace) -> GenerateLoad:
    """The sweep the options ask for; ValueError names a bad one."""
    from triton_ge_console.sessions.loadgen.bench_shared import UsageError, resolve_endpoint
    from triton_ge_console.sessions.loadgen.generate_bench import GenerateLoad, parse_slo

    base_path = ""
    if args.endpoint == "openai":
        if not args.url:
            raise UsageError("--endpoint openai: give the API's base URL, --url http://HOST:PORT/v1")
        host, port = host_and_port(args.url, "--url (the OpenAI API)")
        base_path = parse_endpoint(args.url, strict=False, path_allowed=True).path or "/v1"
        key = os.environ.get("OPENAI_API_KEY")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
    else:
        address, headers = resolve_endpoint(args.session, args.url, args.protocol, args.model)
        host, port = host_and_port(address, f"the server's {args.protocol} endpoint")
    return GenerateLoad(model=args.model, host=host, port=port, protocol=args.protocol,
                        prompt_tokens=args.prompt_tokens, output_tokens=args.output_tokens,
                        concurrency=tuple(args.concurrency or (1,)), requests=args.requests,
                        slo=parse_slo(args.slo), vocab=args.vocab, headers=tuple(headers.items()),
                        rates=tuple(args.rate or ()), distribution=args.distribution,
                        endpoint=args.endpoint, base_path=base_path)


def run_generate_bench(args: argparse.Namespace) -> int:
    """Handler of `bench --generate`: run the sweep, print the table and/or JSON; exit codes as bench's."""
    from triton_ge_console.sessions.loadgen.bench_shared import UsageError
    from triton_ge_console.sessions.loadgen.generate_bench import compare
    from triton_ge_console.sessions.loadgen.generate_report import (
        generate_context,
        generate_warnings,
        server_facts,
    )
    from triton_ge_console.sessions.loadgen.report import client_facts
    from triton_ge_console.sessions.server import registry

    try:
        load, baseline, export = _prepared(args)
    except (ValueError, UsageError) as exc:
        return error_line(str(exc), EXIT_USAGE)
    except OSError as exc:
        return error_line(f"--export {args.export}: cannot write it ({exc.strerror or exc})", EXIT_USAGE)
    except registry.SessionStopped as exc:
        return error_line(str(exc), EXIT_FAILURE)
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    client_before, server = client_facts(), server_facts(load)
    stop = threading.Event()
    rows = _measured(load, stop, args.quiet, export)
    compared = None if baseline is None else compare(rows, baseline)
    warnings = generate_warnings(rows)
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.json is not None:
        client = {**client_before, "load_average_after": client_facts()["load_average"]}
        _write_json(args.json, generate_context(load, started_at, server, client), warnings, rows, compared)
    if args.json != "-":
        _print_table(load, rows)
        if compared:
            _print_comparison(args.compare, compared)
    return _outcome(load, rows, stop)


def _prepared(args: argparse.Namespace) -> tuple[GenerateLoad, dict[StepKey, dict[str, Any]] | None,
                                                  RequestExport | None]:
    """The load the options ask for, the baseline to compare with and the file the requests go to (raises
    what the handler reports: bad options, an unwritable export, a stopped session)."""
    from triton_ge_console.sessions.loadgen.generate_bench import read_baseline
    from triton_ge_console.sessions.loadgen.generate_report import RequestExport

    load = load_from_args(args)
    baseline = None if args.compare is None else read_baseline(_read(args.compare), args.compare)
    return load, baseline, None if args.export is None else RequestExport(Path(args.export))


def _measured(load: GenerateLoad, stop: threading.Event, quiet: bool,
              export: RequestExport | None) -> list[GenerateRow]:
    """The sweep's rows (fewer when interrupted: `stop` is set), each step's requests exported if asked."""
    from triton_ge_console.sessions.loadgen.bench_shared import stop_on_interrupt
    from triton_ge_console.sessions.loadgen.generate_bench import run_generate_load

    try:
        with stop_on_interrupt(stop):
            return run_generate_load(load, stop, None if quiet else _progress,
                                     None if export is None else export.step)
    finally:
        if export is not None:
            export.close()


def _write_json(where: str, context: dict[str, Any], warnings: list[str], rows: list[GenerateRow],
                compared: list[dict[str, Any]] | None) -> None:
    """--json: to stdout for '-', else to the file named."""
    from triton_ge_console.sessions.loadgen.generate_report import generate_json

    text = json.dumps(generate_json(context, warnings, rows, compared), indent=2) + "\n"
    if where == "-":
        sys.stdout.write(text)
    else:
        Path(where).write_text(text, encoding="utf-8")


def _outcome(load: GenerateLoad, rows: list[GenerateRow], stop: threading.Event) -> int:
    """The exit code: interrupted, a step with a failed generation (or none measured), else OK."""
    from triton_ge_console.sessions.loadgen.generate_report import level

    if stop.is_set():
        steps = len(load.rates or load.concurrency)
        return error_line(f"interrupted: {len(rows)} of {steps} steps measured", EXIT_INTERRUPTED)
    failed = next((row for row in rows if row.errors or row.requests == 0), None)
    if failed is not None:
        return error_line(f"{failed.errors} of {failed.errors + failed.requests} generations failed at "
                          f"{level(failed)}: {failed.first_error}", EXIT_FAILURE)
    return EXIT_OK


def _progress(row: GenerateRow) -> None:
    """One line on stderr per finished step."""
    from triton_ge_console.display import number
    from triton_ge_console.sessions.loadgen.generate_report import level

    print(f"{level(row)}: {row.requests} generations, "
          f"{number(row.output_tokens_per_s)} output tokens/s", file=sys.stderr, flush=True)


FIGURES = (("TTFT (ms)", "ttft_ms", 2), ("ITL (ms)", "itl_ms", 3), ("e2e latency (ms)", "e2e_ms", 1),
           ("input tokens", "input_tokens", 1), ("output tokens", "output_tokens_each", 1))


def _print_table(load: GenerateLoad, rows: list[GenerateRow]) -> None:
    """Each step as a table of its figures' statistics (as AIPerf prints them), then its rates."""
    from rich.console import Console
    from rich.table import Table

    from triton_ge_console.display import number
    from triton_ge_console.sessions.loadgen.generate_report import level
    from triton_ge_console.sessions.loadgen.generate_stats import STATISTICS

    where = f"{load.endpoint} {load.protocol}" if load.endpoint == "triton" else "the OpenAI API"
    console = Console(width=None if sys.stdout.isatty() else 200)
    for row in rows:
        table = Table(title=f"{load.model} over {where} at {load.host}:{load.port}{load.base_path}, "
                            f"{level(row)}: {row.requests} ok, {row.errors} failed")
        table.add_column("figure")
        for name in STATISTICS:
            table.add_column(name, justify="right")
        for title, key, digits in FIGURES:
            figures = getattr(row, key)
            table.add_row(title, *(number(figures[name], digits) for name in STATISTICS))
        console.print(table)
        console.print(f"  output tokens/s {number(row.output_tokens_per_s)} · requests/s "
                      f"{number(row.requests_per_s, 2)} · goodput/s {number(row.goodput_per_s, 2)} · "
                      f"worst stream's ITL p99 {number(row.itl_p99_worst_stream_ms, 2)} ms")


def _read(path: str) -> str:
    """A --compare file's text; an unreadable one is a usage error naming it."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"--compare {path}: cannot read it ({exc})") from None


def _print_comparison(path: str, compared: list[dict[str, Any]]) -> None:
    """Now ÷ then per step, as a table."""
    from rich.console import Console
    from rich.table import Table

    from triton_ge_console.display import number

    table = Table(title=f"now ÷ {path}")
    for header in ("load", "out tok/s", "TTFT p50", "ITL p50", "e2e p99"):
        table.add_column(header, justify="right")
    for row in compared:
        load = f"{row['rate']:g}/s" if row.get("rate") is not None else f"conc {row['concurrency']}"
        table.add_row(load, *(number(row[key], 2) for key in (
            "output_tokens_per_s", "ttft_p50_ms", "itl_p50_ms", "e2e_p99_ms")))
    Console(width=None if sys.stdout.isatty() else 200).print(table)
