"""The `--vs-direct` options of `ge-console bench` and their handler (the work is in vs_direct)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from triton_ge_console.arg_types import error_line, int_list, positive_int

if TYPE_CHECKING:
    from triton_ge_console.sessions.loadgen.vs_direct import VsDirectSpec

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
PROTOCOL_ORDER = ("grpc", "http")


def add_vs_direct_options(parser: argparse.ArgumentParser) -> None:
    """Options for comparing a served model with its own executor run in-process."""
    group = parser.add_argument_group("what Triton costs (--vs-direct)")
    group.add_argument("--vs-direct", action="store_true",
                       help="run the model's own executor in-process (ONNX Runtime in emulation, AscendCL on "
                            "an NPU) and through Triton over gRPC and HTTP, interleaved in rounds: p50 (p99) "
                            "each way at each --batch, what Triton adds, maximum throughput and its ratio")
    group.add_argument("--batch", type=int_list, default=(1, 4, 8), metavar="N[,N...]",
                       help="batch sizes compared (default: 1,4,8; 1 for a model that does not batch)")
    group.add_argument("--seq-len", type=positive_int, metavar="N",
                       help="every dynamic input dimension (a sequence length) at N (default: 1)")
    group.add_argument("--rounds", type=positive_int, default=3, metavar="N",
                       help="interleaved rounds; figures are their median and range (default: 3)")
    group.add_argument("--repository", type=Path, metavar="DIR",
                       help="the served model repository (default: the session's); needed with --url")
    group.add_argument("--pin-executor", metavar="CPUS",
                       help="CPU emulation: run the executor (in-process and the served model's stub) on "
                            "these CPUs and the client and tritonserver on the others, as an NPU would "
                            "(e.g. 1, or 2-3)")


def vs_direct_spec(args: argparse.Namespace) -> VsDirectSpec:
    """The comparison the options ask for: both protocols of a session, or the one --url names."""
    from triton_ge_console.sessions.loadgen.bench_shared import UsageError, resolve_endpoint
    from triton_ge_console.sessions.loadgen.inputs import parse_shape_option
    from triton_ge_console.sessions.loadgen.pinning import parse_cpus
    from triton_ge_console.sessions.loadgen.vs_direct import VsDirectSpec

    if args.rate or args.generate:
        raise UsageError("--vs-direct measures latency one request at a time and maximum throughput; "
                         "--rate and --generate do not apply")
    protocols: tuple[str, ...] = ((args.protocol or "grpc",) if args.protocol or args.url
                                  else PROTOCOL_ORDER)
    endpoints, headers = {}, {}
    for protocol in protocols:
        endpoints[protocol], headers[protocol] = resolve_endpoint(args.session, args.url, protocol,
                                                                  args.model)
    repository, server_pid = args.repository, None
    if args.url is None:
        from triton_ge_console.sessions.server import registry

        record = registry.require_running(
            registry.Registry().resolve(args.session, running=True, model=args.model))
        repository = repository or record.repository
        server_pid = record.pid if record.listen in ("127.0.0.1", "localhost", "::1") else None
    if repository is None:
        raise UsageError("--vs-direct needs the served repository: give --repository DIR")
    return VsDirectSpec(
        model=args.model, endpoints=endpoints, repository=Path(repository), headers=headers,
        batches=tuple(args.batch), seq_len=args.seq_len,
        shapes=dict(parse_shape_option(text) for text in args.shape), rounds=args.rounds,
        requests=args.requests or 20, throughput_s=args.window_ms / 1000,
        concurrency=args.concurrency[0] if args.concurrency else None,
        pin=parse_cpus(args.pin_executor) if args.pin_executor else (), server_pid=server_pid)


def run_vs_direct(args: argparse.Namespace) -> int:
    """Handler: measure, then print the tables (or --json)."""
    from rich.console import Console

    from triton_ge_console.sessions.loadgen.bench_shared import UsageError
    from triton_ge_console.sessions.loadgen.inputs import LoadSpecError
    from triton_ge_console.sessions.loadgen.pinning import PinningError
    from triton_ge_console.sessions.loadgen.report import client_facts
    from triton_ge_console.sessions.loadgen.transport import LoadError, UnknownModelError
    from triton_ge_console.sessions.loadgen.vs_direct import measure_vs_direct_sync
    from triton_ge_console.sessions.loadgen.vs_direct_report import vs_direct_json, vs_direct_renderable
    from triton_ge_console.sessions.server import registry

    try:
        spec = vs_direct_spec(args)
        spec.validate()
    except (UsageError, LoadSpecError, PinningError) as exc:
        return error_line(str(exc), EXIT_USAGE)
    except (registry.SessionStopped, registry.SessionNotFound, registry.RegistryError) as exc:
        return error_line(str(exc), EXIT_FAILURE)
    before = client_facts()
    progress = None if args.quiet else (lambda text: print(text, file=sys.stderr, flush=True))
    try:
        report = measure_vs_direct_sync(spec, progress)
    except (LoadSpecError, UnknownModelError) as exc:
        return error_line(str(exc), EXIT_USAGE)
    except (LoadError, OSError) as exc:
        return error_line(str(exc), EXIT_FAILURE)
    except KeyboardInterrupt:
        return error_line("interrupted", EXIT_INTERRUPTED)
    if args.json is not None:
        context = {"endpoints": dict(spec.endpoints), "repository": str(spec.repository),
                   "client": {**before, "load_average_after": client_facts()["load_average"]}}
        text = vs_direct_json(report, context) + "\n"
        if args.json == "-":
            sys.stdout.write(text)
            return EXIT_OK
        Path(args.json).write_text(text, encoding="utf-8")
    Console(width=None if sys.stdout.isatty() else 200).print(vs_direct_renderable(report))
    return EXIT_OK
