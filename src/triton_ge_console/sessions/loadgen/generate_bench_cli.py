"""The `--generate` options of `ge-console bench` and their handler (the work is in generate_bench)."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from triton_ge_console.arg_types import error_line, positive_int
from triton_ge_console.triton_terms import with_scheme

if TYPE_CHECKING:
    from triton_ge_console.sessions.loadgen.generate_bench import GenerateLoad, GenerateRow

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
                       help="generations measured per step (default: 4 per stream, at least 8); with "
                            "--vs-direct, timed requests per path, batch and round (default: 20)")
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


def _host_port(address: str, protocol: str) -> tuple[str, int]:
    """host and port of 'HOST:PORT' or a URL."""
    parsed = urlparse(with_scheme(address, "tcp"))
    if parsed.hostname is None or parsed.port is None:
        raise ValueError(f"{address!r}: expected HOST:PORT of the server's {protocol} endpoint")
    return parsed.hostname, parsed.port


def load_from_args(args: argparse.Namespace) -> GenerateLoad:
    """The sweep the options ask for; ValueError names a bad one."""
    from triton_ge_console.sessions.loadgen.bench_shared import resolve_endpoint
    from triton_ge_console.sessions.loadgen.generate_bench import GenerateLoad, parse_slo

    address, headers = resolve_endpoint(args.session, args.url, args.protocol)
    host, port = _host_port(address, args.protocol)
    return GenerateLoad(model=args.model, host=host, port=port, protocol=args.protocol,
                        prompt_tokens=args.prompt_tokens, output_tokens=args.output_tokens,
                        concurrency=tuple(args.concurrency or (1,)), requests=args.requests,
                        slo=parse_slo(args.slo), vocab=args.vocab, headers=tuple(headers.items()),
                        rates=tuple(args.rate or ()), distribution=args.distribution)


def run_generate_bench(args: argparse.Namespace) -> int:
    """Handler of `bench --generate`: run the sweep, print the table and/or JSON; exit codes as bench's."""
    from triton_ge_console.sessions.loadgen.bench_shared import UsageError, stop_on_interrupt
    from triton_ge_console.sessions.loadgen.generate_bench import (
        compare,
        generate_json,
        read_baseline,
        run_generate_load,
    )
    from triton_ge_console.sessions.server import registry

    try:
        load = load_from_args(args)
        baseline = None if args.compare is None else read_baseline(_read(args.compare), args.compare)
    except (ValueError, UsageError) as exc:
        return error_line(str(exc), EXIT_USAGE)
    except registry.SessionStopped as exc:
        return error_line(str(exc), EXIT_FAILURE)
    stop = threading.Event()
    with stop_on_interrupt(stop):
        rows = run_generate_load(load, stop, None if args.quiet else _progress)
    compared = None if baseline is None else compare(rows, baseline)
    if args.json is not None:
        text = json.dumps(generate_json(load, rows, compared), indent=2) + "\n"
        if args.json == "-":
            sys.stdout.write(text)
        else:
            Path(args.json).write_text(text, encoding="utf-8")
    if args.json != "-":
        _print_table(load, rows)
        if compared:
            _print_comparison(args.compare, compared)
    if stop.is_set():
        steps = len(load.rates or load.concurrency)
        return error_line(f"interrupted: {len(rows)} of {steps} steps measured", EXIT_INTERRUPTED)
    failed = next((row for row in rows if row.errors or row.requests == 0), None)
    if failed is not None:
        return error_line(f"{failed.errors} of {failed.errors + failed.requests} generations failed at "
                     f"{_level(failed)}: {failed.first_error}", EXIT_FAILURE)
    return EXIT_OK


def _progress(row: GenerateRow) -> None:
    """One line on stderr per finished step."""
    from triton_ge_console.display import number

    print(f"{_level(row)}: {row.requests} generations, "
          f"{number(row.output_tokens_per_s)} output tokens/s", file=sys.stderr, flush=True)


def _print_table(load: GenerateLoad, rows: list[GenerateRow]) -> None:
    """The sweep as a table on stdout."""
    from rich.console import Console
    from rich.table import Table

    from triton_ge_console.display import number

    title = (f"{load.model} over {load.protocol} at {load.host}:{load.port}: prompt "
             f"{_span(load.prompt_tokens)}, output {_span(load.output_tokens)} tokens (ms; p50/p90/p99)")
    table = Table(title=title)
    for header in ("load", "ok", "err", "TTFT", "ITL", "e2e", "out tok/s", "req/s", "goodput/s",
                   "worst ITL p99"):
        table.add_column(header, justify="right")

    def spread(figures: dict[str, Any]) -> str:
        return "/".join(number(figures[key], 2) for key in ("p50", "p90", "p99"))

    for row in rows:
        table.add_row(_level(row), str(row.requests), str(row.errors), spread(row.ttft_ms),
                      spread(row.itl_ms), spread(row.e2e_ms), number(row.output_tokens_per_s),
                      number(row.requests_per_s, 2), number(row.goodput_per_s, 2),
                      number(row.itl_p99_worst_stream_ms, 2))
    Console(width=None if sys.stdout.isatty() else 200).print(table)


def _span(bounds: tuple[int, int]) -> str:
    """A length as given: N, or LOW–HIGH."""
    return str(bounds[0]) if bounds[0] == bounds[1] else f"{bounds[0]}–{bounds[1]}"


def _level(row: GenerateRow) -> str:
    """A step as the table names it: its rate (with the most in flight) or its concurrency."""
    if row.rate is not None:
        return f"{row.rate:g}/s (≤{row.concurrency} in flight)"
    return f"conc {row.concurrency}"


def _read(path: str) -> str:
    """A --compare file's text; an unreadable one is a usage error naming it."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"--compare {path}: cannot read it ({exc})") from None


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
