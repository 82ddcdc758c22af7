"""What Triton costs the demo models, where gRPC's time goes for large outputs, and the glue at its floor.

    python3 benchmarks/triton_cost.py [--rounds 3] [--requests 20] [--pin 1] [--parts table,grpc,glue]
                                      [--json PATH]

One tritonserver serves the demo llama and bert through the `ge` glue (one instance, one ORT thread each)
and a no-work Python model answering llama's logits (`zeros(batch, tokens, 32000)`, cached). Three parts,
each interleaved in rounds (sessions/loadgen/rounds.py's order), figures the rounds' median and range:

- table: `ge-console bench --vs-direct`'s own measurement (the library) for llama and bert at 1 and 16
  tokens, batch 1/4/8, shared CPUs and with the executor pinned to `--pin` (docs/benchmarks.md's table).
- grpc: the 16 MB answer (llama's floor at 16 tokens × batch 8) fetched one at a time by the load
  generator over HTTP and gRPC (raw bytes, as now), gRPC parsed into a protobuf (as before), tritonclient's
  gRPC client, and a bare synchronous grpc call: wall p50 and the CPU per request of the client and of
  tritonserver, which says whose side the time is on.
- glue: the glue's own share, through Triton (ge) − direct (the glue's executor in-process) − (the no-work
  model moving the same bytes − nothing), per protocol, at 1×1, 16×1 and 16×8 (tokens × batch). The no-work
  model's time is all transfer and Triton; what remains is what the glue adds.
Prints markdown tables; writes benchmarks/results/triton_cost.json (or --json PATH).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2

from glue_overhead import FLOOR, FLOOR_BACKEND
from result_file import arguments, write_result
from triton_ge_console.backend_glue.distribution import find_distribution
from triton_ge_console.backend_glue.installer import install_backend_dir
from triton_ge_console.repository.demo_models import demo_bytes
from triton_ge_console.sessions.loadgen.inputs import RequestTensor
from triton_ge_console.sessions.loadgen.pinning import stub_pids
from triton_ge_console.sessions.loadgen.rounds import Spread, round_order
from triton_ge_console.sessions.loadgen.transport import GRPC_MAX_MESSAGE, MODEL_INFER, open_transport
from triton_ge_console.sessions.loadgen.vs_direct import (
    VsDirectReport,
    VsDirectSpec,
    measure_vs_direct,
    open_direct,
)
from triton_ge_console.sessions.server.process import Ports, TritonProcess, pick_ports, server_args

MODELS = {"llama_model": "demo:llama", "bert_model": "demo:bert"}
GLUE_CONFIG = """name: "{name}"
backend: "ge"
max_batch_size: 8
instance_group [{{ count: 1 kind: KIND_CPU }}]
parameters {{ key: "intra_op_threads" value: {{ string_value: "1" }} }}
"""
LLAMA_IO = """input [{ name: "input_ids" data_type: TYPE_INT64 dims: [-1] }]
output [{ name: "logits" data_type: TYPE_FP32 dims: [-1, 32000] }]
"""
SHAPES = ((1, 1), (16, 1), (16, 8))  # tokens × batch for the glue's share
# The floor answers ones here; glue_overhead.py's answers np.zeros, whose untouched pages all map the
# kernel's one zero page, so copying them out might read one cache-hot page instead of the whole answer and
# make that floor cheaper than moving real logits. Both are served, to see whether it does.
ONES_BACKEND = FLOOR_BACKEND.replace("np.zeros((*shape, 32000)", "np.ones((*shape, 32000)")
ZEROS, ZEROS_BACKEND = "floor_zeros", FLOOR_BACKEND
assert ONES_BACKEND != FLOOR_BACKEND


def note(text: str) -> None:
    """Progress on stderr (stdout carries the tables)."""
    print(text, file=sys.stderr, flush=True)


def build(root: Path) -> tuple[Path, Path]:
    """The repository (llama, bert, the no-work floor) and an installed backend directory."""
    repo, backends = root / "repo", root / "backends"
    for name, source in MODELS.items():
        (repo / name / "1").mkdir(parents=True)
        io = LLAMA_IO if name == "llama_model" else ""
        (repo / name / "config.pbtxt").write_text(GLUE_CONFIG.format(name=name) + io)
        (repo / name / "1" / "model.onnx").write_bytes(demo_bytes(source))
    (repo / FLOOR / "1").mkdir(parents=True)
    (repo / FLOOR / "config.pbtxt").write_text(
        GLUE_CONFIG.format(name=FLOOR).replace('backend: "ge"', 'backend: "floor"') + LLAMA_IO)
    (repo / ZEROS / "1").mkdir(parents=True)
    (repo / ZEROS / "config.pbtxt").write_text(
        GLUE_CONFIG.format(name=ZEROS).replace('backend: "ge"', 'backend: "zeros"') + LLAMA_IO)
    install_backend_dir(backends)
    for backend, source in (("floor", ONES_BACKEND), ("zeros", ZEROS_BACKEND)):
        (backends / backend).mkdir(exist_ok=True)
        (backends / backend / "model.py").write_text(source)
    return repo, backends


def served(prefix: str) -> tuple[Path, TritonProcess, Ports]:
    """The repository built in a new temporary folder (PREFIX...) and served from there, its log beside it."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    repo, backends = build(root)
    note(f"starting tritonserver (log: {root / 'server.log'})")
    return repo, *start(root, repo, backends)


def start(root: Path, repo: Path, backends: Path) -> tuple[TritonProcess, Ports]:
    """A loopback tritonserver with every model loaded."""
    ports = pick_ports()
    names = [*MODELS, FLOOR, ZEROS]
    process = TritonProcess(find_distribution(), server_args(
        repo, backends, ports, extra=tuple(f"--load-model={n}" for n in names)), root / "server.log", root)
    process.start()
    process.wait_ready(f"http://127.0.0.1:{ports.http}", timeout=180)
    return process, ports


def cpu_ns(pid: int) -> int:
    """Nanoseconds a process's threads have run (Linux schedstat: exact, unlike the 10 ms ticks of
    cpu_times, which a 1 ms request would never see)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
    return total


def stub_pid(server_pid: int, model: str) -> int:
    """The Python stub serving `model`."""
    (pid,) = stub_pids(model, server_pid)
    return pid


def spread_dict(values: list[float]) -> dict[str, float]:
    """Median and range of one figure over rounds, for the JSON."""
    return dataclasses.asdict(Spread.of(values))


# --- table: the vs-direct report for each demo model -------------------------------------------------


def vs_direct(ports: Ports, repo: Path, server_pid: int | None, model: str, seq: int, pin: tuple[int, ...],
              args: argparse.Namespace) -> VsDirectReport:
    """`bench MODEL --vs-direct --seq-len SEQ [--pin-executor PIN]`, through the library."""
    spec = VsDirectSpec(model=model, endpoints={"grpc": f"127.0.0.1:{ports.grpc}",
                                                "http": f"127.0.0.1:{ports.http}"},
                        repository=repo, seq_len=seq, rounds=args.rounds, requests=args.requests,
                        throughput_s=args.throughput_s, pin=pin, server_pid=server_pid)
    return asyncio.run(measure_vs_direct(spec, note))


def _cell(spread: Spread, digits: int = 2) -> str:
    """median (low–high)."""
    return spread.text(f"{{:.{digits}f}}")


def print_vs_direct(report: VsDirectReport, seq: int) -> None:
    """The seed's table as markdown: p50 (p99) each way and what Triton adds; then the throughputs."""
    where = f"executor pinned to CPU {','.join(map(str, report.pinned))}" if report.pinned else "shared CPUs"
    print(f"\n#### {report.model}, {seq} token(s), {where}\n")
    print("| batch | protocol | direct p50 (p99) ms | through Triton p50 (p99) ms "
          "| Triton adds, p50 ms (range) |")
    print("|---:|---|---:|---:|---:|")
    for row in report.latency:
        added = row.added_p50_ms
        print(f"| {row.batch} | {row.protocol} "
              f"| {row.direct_p50_ms.median:.2f} ({row.direct_p99_ms.median:.2f}) "
              f"| {row.triton_p50_ms.median:.2f} ({row.triton_p99_ms.median:.2f}) "
              f"| {added.median:+.2f} ({added.low:+.2f}…{added.high:+.2f}) |")
    print(f"\n| max throughput, batch 1, req/s ({report.concurrency} in flight) | direct | through Triton "
          "| Triton ÷ direct |\n|---|---:|---:|---:|")
    for rate in report.throughput:
        print(f"| {rate.protocol} | {_cell(rate.direct_rps, 1)} | {_cell(rate.triton_rps, 1)} "
              f"| {_cell(rate.ratio)} |")


def table_part(ports: Ports, repo: Path, server_pid: int | None, args: argparse.Namespace) -> dict[str, Any]:
    """Every model × sequence length, shared then pinned."""

    found: dict[str, Any] = {}
    for model in MODELS:
        for seq in (1, 16):
            for pin in ((), args.pin) if args.pin else ((),):
                note(f"table: {model} seq {seq} pin {pin or '-'}")
                report = vs_direct(ports, repo, server_pid, model, seq, pin, args)
                print_vs_direct(report, seq)
                key = f"{model}/seq{seq}/" + ("pinned" if pin else "shared")
                found[key] = dataclasses.asdict(report)
    return found


# --- grpc: whose side the time of a 16 MB answer is on ------------------------------------------------


def _ids(batch: int, seq: int) -> np.ndarray:
    """Token ids [batch, seq]."""
    return np.random.default_rng(0).integers(0, 32000, size=(batch, seq), dtype=np.int64)


def _request(model: str, ids: np.ndarray) -> service_pb2.ModelInferRequest:
    """A ModelInferRequest for input_ids."""
    request = service_pb2.ModelInferRequest(model_name=model)
    request.inputs.add(name="input_ids", datatype="INT64", shape=list(ids.shape))
    request.raw_input_contents.append(ids.tobytes())
    return request


Timed = Callable[[], Awaitable[None]]


async def _p50_and_cpu(call: Timed, count: int, server: int) -> tuple[float, float, float]:
    """Wall p50 ms of count calls one at a time, and client / server CPU ms per call."""
    await call()
    await call()
    times = []
    client, server_before = cpu_ns(os.getpid()), cpu_ns(server)
    for _ in range(count):
        started = time.perf_counter()
        await call()
        times.append((time.perf_counter() - started) * 1000.0)
    client_ms = (cpu_ns(os.getpid()) - client) / 1e6 / count
    server_ms = (cpu_ns(server) - server_before) / 1e6 / count
    return statistics.median(times), client_ms, server_ms


async def grpc_round(ports: Ports, model: str, ids: np.ndarray, count: int, index: int,
                     server: int) -> dict[str, tuple[float, float, float]]:
    """One round of every client fetching the same answer, in this round's order."""
    tensors = (RequestTensor("input_ids", "INT64", ids),)
    http = open_transport("http", f"127.0.0.1:{ports.http}")
    ours = open_transport("grpc", f"127.0.0.1:{ports.grpc}")
    http.prepare(model, tensors, ("logits",))
    ours.prepare(model, tensors, ("logits",))
    options = [("grpc.max_receive_message_length", GRPC_MAX_MESSAGE)]
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{ports.grpc}", options=options)
    serialize = service_pb2.ModelInferRequest.SerializeToString
    parsed = channel.unary_unary(MODEL_INFER, request_serializer=serialize,
                                 response_deserializer=service_pb2.ModelInferResponse.FromString)
    sync_channel = grpc.insecure_channel(f"127.0.0.1:{ports.grpc}", options=options)
    bare = sync_channel.unary_unary(MODEL_INFER, request_serializer=serialize)
    tc = grpcclient.InferenceServerClient(f"127.0.0.1:{ports.grpc}")
    tc_input = grpcclient.InferInput("input_ids", list(ids.shape), "INT64")
    tc_input.set_data_from_numpy(ids)
    request = _request(model, ids)

    async def parsed_call() -> None:
        await parsed(request)

    async def bare_call() -> None:
        bare(request)

    async def tritonclient_call() -> None:
        tc.infer(model, [tc_input]).as_numpy("logits")

    calls: dict[str, Timed] = {"loadgen HTTP": http.infer, "loadgen gRPC (raw bytes)": ours.infer,
                               "gRPC parsed into a protobuf (the load generator before)": parsed_call,
                               "tritonclient gRPC (with as_numpy)": tritonclient_call,
                               "bare synchronous grpc call (raw bytes)": bare_call}
    found = {}
    try:
        for name in round_order(list(calls), index):
            found[name] = await _p50_and_cpu(calls[name], count, server)
    finally:
        await http.close()
        await ours.close()
        await channel.close()
        sync_channel.close()
        tc.close()
    return found


def grpc_part(ports: Ports, server_pid: int, args: argparse.Namespace) -> dict[str, Any]:
    """The 16 MB answer through every client, rounds interleaved."""
    server = server_pid
    ids = _ids(8, 16)
    rounds: dict[str, list[tuple[float, float, float]]] = {}
    for index in range(args.rounds):
        for name, figures in asyncio.run(grpc_round(ports, FLOOR, ids, args.requests, index, server)).items():
            rounds.setdefault(name, []).append(figures)
        note(f"grpc: round {index + 1}/{args.rounds}")
    keys = ("p50_ms", "client_cpu_ms", "server_cpu_ms")
    found = {name: {key: spread_dict([r[i] for r in runs]) for i, key in enumerate(keys)}
             for name, runs in rounds.items()}
    mib = 8 * 16 * 32000 * 4 / (1 << 20)
    print(f"\n#### {mib:.1f} MiB answers (the no-work model, 16 tokens × batch 8), one at a time\n")
    print("| client | wall p50 ms | client CPU ms per request | tritonserver CPU ms per request |")
    print("|---|---:|---:|---:|")
    for name, spreads in found.items():
        print(f"| {name} | {' | '.join(_spread_text(spreads[k]) for k in keys)} |")
    return found


def _spread_text(figure: dict[str, float]) -> str:
    """median (low–high) of a spread_dict."""
    return Spread(**figure).text("{:.1f}")


# --- glue: what the glue owns ------------------------------------------------------------------------


GLUE_MODELS = {"ge": "llama_model", "floor": FLOOR, "zeros": ZEROS}


async def glue_round(ports: Ports, repo: Path, server_pid: int, count: int, index: int
                     ) -> dict[str, tuple[float, float]]:  # and, under ".../host", (server, client) CPU ms
    """(wall p50 ms, the model's CPU ms per request) of direct, ge, the no-work floor (ones) and the old
    floor (zeros) per protocol at every shape, paths in this round's order. The CPU is the model's stub's
    (direct: the thread that runs the executor): what each puts on the host besides Triton itself."""
    transports = {p: open_transport(p, f"127.0.0.1:{ports.grpc if p == 'grpc' else ports.http}")
                  for p in ("http", "grpc")}
    signature = await transports["http"].signature("llama_model")
    executor = open_direct(repo, "llama_model", dict(signature.config))
    stubs = {kind: stub_pid(server_pid, model) for kind, model in GLUE_MODELS.items()}
    found: dict[str, tuple[float, float]] = {}
    try:
        for seq, batch in SHAPES:
            ids = _ids(batch, seq)
            paths = ["direct", "cold", *(f"{m}_{p}" for m in GLUE_MODELS for p in transports)]
            for path in round_order(paths, index):
                if path in ("direct", "cold"):
                    found[f"{seq}x{batch}/{path}"] = _direct_p50(executor, ids, count, cold=path == "cold")
                    continue
                kind, protocol = path.split("_")
                transport = transports[protocol]
                transport.prepare(GLUE_MODELS[kind], (RequestTensor("input_ids", "INT64", ids),), ("logits",))
                for _ in range(2):
                    await transport.infer()
                times = []
                pids = (stubs[kind], server_pid, os.getpid())
                cpu = [cpu_ns(pid) for pid in pids]
                for _ in range(count):
                    started = time.perf_counter()
                    await transport.infer()
                    times.append((time.perf_counter() - started) * 1000.0)
                stub_ms, server_ms, client_ms = ((cpu_ns(pid) - c) / 1e6 / count for pid, c in zip(pids, cpu,
                                                                                                   strict=True))
                found[f"{seq}x{batch}/{path}"] = (statistics.median(times), stub_ms)
                found[f"{seq}x{batch}/{path}/host"] = (server_ms, client_ms)
    finally:
        executor.close()
        for transport in transports.values():
            await transport.close()
    return found


EVICT = np.ones(32 << 20, dtype=np.uint8)  # more than this machine's caches


def _direct_p50(executor: Any, ids: np.ndarray, count: int, cold: bool = False) -> tuple[float, float]:
    """p50 ms of the glue's executor run in-process (one ORT thread: this one), and its CPU ms per run;
    cold: each run after walking 32 MiB and sleeping 0.5 ms, as the stub finds its caches after the
    server and the client ran between two requests."""
    feeds = {"input_ids": ids}
    executor.run(feeds)
    times, cpu = [], 0
    for _ in range(count):
        if cold:
            EVICT.sum()
            time.sleep(0.0005)
        started, cpu_started = time.perf_counter(), time.thread_time_ns()
        executor.run(feeds)
        cpu += time.thread_time_ns() - cpu_started
        times.append((time.perf_counter() - started) * 1000.0)
    return statistics.median(times), cpu / 1e6 / count


def glue_part(ports: Ports, repo: Path, server_pid: int, args: argparse.Namespace) -> dict[str, Any]:
    """The glue's own share per shape and protocol: ge − direct − floor, within each round; wall and CPU."""
    rounds = []
    for index in range(args.rounds):
        rounds.append(asyncio.run(glue_round(ports, repo, server_pid, args.requests, index)))
        note(f"glue: round {index + 1}/{args.rounds}")
    print("\n#### The glue's own share: through Triton (ge) − direct − the no-work model moving the same "
          "bytes; p50 ms, and the model's CPU ms per request (its stub's; direct: the executor's thread)\n")
    print("| tokens × batch | protocol | direct p50 / CPU | direct, cold caches | ge p50 / stub CPU "
          "| no-work (ones) p50 / stub CPU | no-work (zeros) p50 / stub CPU | glue's own p50 (range) "
          "| glue's own CPU (range) | glue's own CPU against direct with cold caches |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    found: dict[str, Any] = {}
    for seq, batch in SHAPES:
        for protocol in ("http", "grpc"):
            key = f"{seq}x{batch}"
            series = {kind: [r[f"{key}/{kind}" if kind in ("direct", "cold") else f"{key}/{kind}_{protocol}"]
                             for r in rounds] for kind in ("direct", "cold", *GLUE_MODELS)}
            wall = {k: [v[0] for v in values] for k, values in series.items()}
            cpu = {k: [v[1] for v in values] for k, values in series.items()}
            own = spread_dict([g - d - f for g, d, f in zip(wall["ge"], wall["direct"], wall["floor"],
                                                             strict=True)])
            own_cpu = spread_dict([g - d - f for g, d, f in zip(cpu["ge"], cpu["direct"], cpu["floor"],
                                                                 strict=True)])
            own_cold_cpu = spread_dict([g - d - f for g, d, f in zip(cpu["ge"], cpu["cold"], cpu["floor"],
                                                                      strict=True)])
            found[f"{key}/{protocol}"] = {
                **{f"{k}_p50_ms": spread_dict(v) for k, v in wall.items()},
                **{f"{k}_cpu_ms": spread_dict(v) for k, v in cpu.items()},
                "glue_own_p50_ms": own, "glue_own_cpu_ms": own_cpu, "glue_own_cpu_vs_cold_ms": own_cold_cpu}
            cells = " | ".join(f"{statistics.median(wall[k]):.2f} / {statistics.median(cpu[k]):.2f}"
                               for k in ("direct", "cold", *GLUE_MODELS))
            print(f"| {seq} × {batch} | {protocol} | {cells} | {_signed(own)} | {_signed(own_cpu)} "
                  f"| {_signed(own_cold_cpu)} |")
            for kind in GLUE_MODELS:
                host = [r[f"{key}/{kind}_{protocol}/host"] for r in rounds]
                found[f"{key}/{protocol}"][f"{kind}_server_cpu_ms"] = spread_dict([h[0] for h in host])
                found[f"{key}/{protocol}"][f"{kind}_client_cpu_ms"] = spread_dict([h[1] for h in host])
    print("\n| tokens × batch | protocol | tritonserver CPU ms per request, ge / no-work "
          "| client CPU ms per request, ge / no-work |\n|---|---|---:|---:|")
    for key, figures in found.items():
        seq_batch, protocol = key.split("/")
        cells = " | ".join(f"{figures[f'ge_{part}_cpu_ms']['median']:.2f} / "
                           f"{figures[f'floor_{part}_cpu_ms']['median']:.2f}"
                           for part in ("server", "client"))
        print(f"| {seq_batch.replace('x', ' × ')} | {protocol} | {cells} |")
    return found


def _signed(figure: dict[str, float]) -> str:
    """median (low…high), signed; "unresolved" with the noise when a round saw no cost."""
    return Spread(**figure).cost_text("{:+.2f}", "…")


def cpu_ids(text: str) -> tuple[int, ...]:
    """--pin's CPUs, '1' or '2,3'; empty (`--pin ""`) is no pinned table, as its help says."""
    try:
        return tuple(int(value) for value in text.split(",") if value.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected CPU ids such as 1 or 2,3 "
                                         f"(empty: no pinned table)") from None


def parse_args() -> argparse.Namespace:
    """Command line."""
    parser = arguments(__doc__, "triton_cost", rounds=3)
    parser.add_argument("--requests", type=int, default=20, help="timed requests per path, shape and round")
    parser.add_argument("--throughput-s", type=float, default=1.5, help="seconds per path and round")
    parser.add_argument("--pin", type=cpu_ids, default=(1,),
                        help="CPUs for the executor in the pinned table (empty: no pinned table)")
    parser.add_argument("--parts", default="table,grpc,glue")
    return parser.parse_args()


def main() -> int:
    """Run the parts asked for, print their tables, write the JSON."""
    args = parse_args()
    repo, process, ports = served("ge-triton-cost-")
    load_before = os.getloadavg()
    figures: dict[str, Any] = {}
    try:
        parts = args.parts.split(",")
        if "grpc" in parts:
            figures["grpc"] = grpc_part(ports, process.pid or 0, args)
        if "glue" in parts:
            figures["glue"] = glue_part(ports, repo, process.pid or 0, args)
        if "table" in parts:
            figures["table"] = table_part(ports, repo, process.pid, args)
    finally:
        process.stop()
    previous = json.loads(args.json.read_text()) if args.json.is_file() else {}
    write_result(args.json, {**previous, **figures}, load_before)
    note(f"load average {load_before} → {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
