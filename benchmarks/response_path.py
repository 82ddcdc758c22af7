"""Where the CPU of a served llama_model request goes, and what the allocator setting saves.

    python3 benchmarks/response_path.py [--seqs 16,1] [--rounds 3] [--concurrency 16] [--json PATH]

Two tritonservers side by side, each serving the seed's llama_model through the `ge` glue and a "floor"
model (same-shaped logits, no compute): one started the way ge-console starts it (glibc's mmap and trim
thresholds raised, `ALLOCATOR_ENV`), one with glibc's defaults. For each sequence length, rounds
alternate between the servers; `ge-console bench`'s load generator keeps `--concurrency` requests in
flight over HTTP, and psutil reads the CPU time every process spent: tritonserver, each model's Python
stub, and the load generator. Figures are CPU milliseconds per request and requests per second; the
ratios (tuned ÷ default) are what to read on a shared machine.
Prints markdown tables; writes benchmarks/results/response_path.json (or --json PATH).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnxruntime as ort
import psutil
import tritonclient.http as httpclient

from glue_overhead import FLOOR, MODEL, build, note
from result_file import arguments, write_result
from triton_ge_console.backend_glue.distribution import ALLOCATOR_ENV, TritonDistribution, find_distribution
from triton_ge_console.sessions.loadgen.rounds import round_order
from triton_ge_console.sessions.loadgen.run import LoadSpec, run_load_sync
from triton_ge_console.sessions.server.process import Ports, TritonProcess, pick_ports, server_args

ARMS = ("tuned", "default")
PARTS = ("server", "stub", "client")


class GlibcDefaults(TritonDistribution):
    """The same tritonserver, started without the allocator setting (unless the caller's shell has it)."""

    def environment(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """The usual environment minus the allocator variables ge-console adds."""
        env = super().environment(base)
        for name in ALLOCATOR_ENV:
            if name not in (os.environ if base is None else base):
                env.pop(name)
        return env


@dataclass
class Server:
    """One running arm."""

    process: TritonProcess
    ports: Ports


def start(root: Path, dist: TritonDistribution) -> Server:
    """A loopback tritonserver with llama_model and the floor model loaded."""
    repo, backends = build(root, instances=1, threads=1)
    ports = pick_ports()
    args = server_args(repo, backends, ports, extra=(f"--load-model={MODEL}", f"--load-model={FLOOR}"))
    process = TritonProcess(dist, args, root / "server.log", root)
    process.start()
    process.wait_ready(f"http://127.0.0.1:{ports.http}", timeout=120)
    return Server(process, ports)


def processes(server: Server, model: str) -> dict[str, psutil.Process]:
    """The server, the model's stub and this process (the load generator runs here)."""
    root = psutil.Process(server.process.pid)
    stubs = [child for child in root.children(recursive=True)
             if any(f"/{model}/" in part or part.endswith(f"/{model}") for part in child.cmdline())]
    if len(stubs) != 1:
        raise RuntimeError(f"expected one Python stub for {model}, found {len(stubs)}")
    return {"server": root, "stub": stubs[0], "client": psutil.Process()}


def cpu_seconds(procs: dict[str, psutil.Process]) -> dict[str, float]:
    """User + system CPU time of each process, threads included."""
    return {name: sum(proc.cpu_times()[:2]) for name, proc in procs.items()}


def served(server: Server, model: str) -> int:
    """Requests the server has answered for the model (warm-up included, as the CPU times are)."""
    with httpclient.InferenceServerClient(f"127.0.0.1:{server.ports.http}") as client:
        stats = client.get_inference_statistics(model)["model_stats"][0]
    return int(stats["inference_stats"]["success"]["count"])


def one_round(server: Server, model: str, seq: int, concurrency: int) -> dict[str, float]:
    """Requests per second and CPU ms per request of each part, over one measured load step."""
    procs = processes(server, model)
    spec = LoadSpec(model=model, url=f"127.0.0.1:{server.ports.http}", protocol="http",
                    concurrency=(concurrency,), shapes={"input_ids": (seq,)}, window_ms=1000, warmup_ms=500,
                    max_windows=3, stable_windows=3)
    before, served_before = cpu_seconds(procs), served(server, model)
    row = run_load_sync(spec)[0]
    after, requests = cpu_seconds(procs), max(1, served(server, model) - served_before)
    figures = {f"{part}_ms": (after[part] - before[part]) * 1000.0 / requests for part in PARTS}
    return {"rps": row.throughput_rps, **figures}


def measure(servers: dict[str, Server], seq: int, rounds: int,
            concurrency: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Per model and arm, the median of the rounds' figures, and every round's; arms alternate."""
    samples: dict[str, dict[str, list[dict[str, float]]]] = {m: {a: [] for a in ARMS} for m in (MODEL, FLOOR)}
    for round_index in range(rounds):
        for model in (MODEL, FLOOR):
            for arm in round_order(ARMS, round_index):
                samples[model][arm].append(one_round(servers[arm], model, seq, concurrency))
        note(f"seq {seq}: round {round_index + 1}/{rounds} done")
    medians = {model: {arm: {key: statistics.median(s[key] for s in runs) for key in runs[0]}
                       for arm, runs in arms.items()} for model, arms in samples.items()}
    return medians, samples


def print_table(seq: int, figures: dict[str, Any], concurrency: int) -> None:
    """One markdown table per sequence length."""
    mib = seq * 32000 * 4 / (1 << 20)
    print(f"\n### seq {seq} ({mib:.2f} MiB of logits per request), {concurrency} in flight over HTTP\n")
    print("CPU ms per request of each process and requests per second (medians of the rounds); "
          "tuned = how ge-console starts tritonserver, default = glibc's allocator defaults.\n")
    print("| model | arm | tritonserver | Python stub | load generator | req/s |")
    print("|---|---|---:|---:|---:|---:|")
    for model, arms in figures.items():
        for arm in ARMS:
            f = arms[arm]
            print(f"| {model} | {arm} | {f['server_ms']:.3f} | {f['stub_ms']:.3f} | {f['client_ms']:.3f} "
                  f"| {f['rps']:.0f} |")
        tuned, default = arms["tuned"], arms["default"]
        ratios = [tuned[key] / default[key] for key in ("server_ms", "stub_ms", "client_ms", "rps")]
        print(f"| {model} | tuned ÷ default | " + " | ".join(f"{r:.2f}" for r in ratios) + " |")


def parse_args() -> argparse.Namespace:
    """Command line."""
    parser = arguments(__doc__, "response_path", rounds=3)
    parser.add_argument("--seqs", default="16,1", type=lambda text: [int(v) for v in text.split(",")])
    parser.add_argument("--concurrency", type=int, default=16)
    return parser.parse_args()


def main() -> int:
    """Start both arms, measure, print, write the JSON, stop both."""
    args = parse_args()
    dist = find_distribution()
    root = Path(tempfile.mkdtemp(prefix="ge-response-path-"))
    servers: dict[str, Server] = {}
    try:
        servers["tuned"] = start(root / "tuned", dist)
        servers["default"] = start(root / "default", GlibcDefaults(**vars(dist)))
        measured = {seq: measure(servers, seq, args.rounds, args.concurrency) for seq in args.seqs}
    finally:
        for server in servers.values():
            server.process.stop()
    for seq, (figures, _) in measured.items():
        print_table(seq, figures, args.concurrency)
    result = {"by_seq": {str(seq): figures for seq, (figures, _) in measured.items()},
              "rounds_by_seq": {str(seq): rounds for seq, (_, rounds) in measured.items()},
              "allocator_env": ALLOCATOR_ENV, "concurrency": args.concurrency, "rounds": args.rounds}
    write_result(args.json, result, onnxruntime=ort.__version__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
