"""What streaming tokens through Triton and the `ge` glue's generate model adds over the direct decode loop.

    python3 benchmarks/generate_overhead.py [--prompt 128] [--output 128] [--rounds 5] [--streams 8]
                                            [--json PATH]

Side by side in one run, interleaved in rounds (the machine is shared), one stream at a time over gRPC:
the direct decode loop over demo:llama_kv in-process (ONNX Runtime: its prefill, its decode step), the
glue's generate model streaming the same greedy tokens, and a "floor": a no-work decoupled Python model
streaming as many token ids of the same size from a thread, through the same client and protocol (what
Triton's streaming costs with no glue and no model). The issue's targets, per round's medians:
    ITL through Triton − direct decode step − floor interval     (target ≤ 0.1 ms)
    TTFT through Triton − direct prefill − floor first response  (target ≤ 0.5 ms)
with tokens/s through Triton ÷ the direct loop beside them. Then `--streams` concurrent streams of the
generate model: aggregate output tokens/s ÷ one stream's (continuous batching; target ≥ 3×) and every
stream's own ITL p99. Prints markdown tables; writes benchmarks/results/generate_overhead.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from triton_ge_console.backend_glue.distribution import find_distribution
from triton_ge_console.backend_glue.installer import install_backend_dir
from triton_ge_console.repository.build import build_repository
from triton_ge_console.repository.demo_decoder import DEMO_LAYOUT, step_feeds
from triton_ge_console.repository.demo_models import demo_bytes
from triton_ge_console.repository.spec.load import load_spec
from triton_ge_console.sessions.loadgen.generate_client import Generation, GrpcStreamer, StreamResult
from triton_ge_console.sessions.loadgen.rounds import round_order
from triton_ge_console.sessions.server.process import Ports, TritonProcess, pick_ports, server_args

RESULTS = Path(__file__).resolve().parent / "results"
MODEL, FLOOR = "llama_generate", "floor_stream"
SPEC = """
models:
  - name: llama_generate
    backend: ge
    source: demo:llama_kv
    generate: {{max_tokens: {output}, max_running: {streams}, kv_cache_mib: 512}}
    parameters: {{intra_op_thread_count: "1"}}
"""
FLOOR_CONFIG = """name: "floor_stream"
backend: "floor_stream"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [{ name: "input_ids" data_type: TYPE_INT64 dims: [-1] },
       { name: "max_tokens" data_type: TYPE_INT32 dims: [1] optional: true }]
output [{ name: "token_id" data_type: TYPE_INT64 dims: [1] }]
"""
# Streams max_tokens token ids from a thread as soon as a request arrives: Triton's and the Python
# backend's cost per streamed response, with no glue and no model.
FLOOR_BACKEND = textwrap.dedent("""\
    import queue
    import threading

    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def initialize(self, args):
            self.jobs = queue.Queue()
            threading.Thread(target=self.loop, daemon=True).start()

        def execute(self, requests):
            for request in requests:
                count = pb_utils.get_input_tensor_by_name(request, "max_tokens")
                self.jobs.put((request.get_response_sender(), int(count.as_numpy()[0]) if count else 16))
            return None

        def loop(self):
            while True:
                sender, count = self.jobs.get()
                for i in range(count):
                    token = pb_utils.Tensor("token_id", np.array([i], np.int64))
                    final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL if i == count - 1 else 0
                    sender.send(pb_utils.InferenceResponse([token]), flags=final)
""")


def note(text: str) -> None:
    """Progress on stderr."""
    print(text, file=sys.stderr, flush=True)


def build(root: Path, output: int, streams: int) -> tuple[Path, Path]:
    """The generate model built from a spec by the real builder, the floor beside it, the backends."""
    (root / "deploy.yaml").write_text(SPEC.format(output=output, streams=streams))
    repo = root / "repo"
    build_repository(load_spec(root / "deploy.yaml"), repo)
    (repo / FLOOR / "1").mkdir(parents=True)
    (repo / FLOOR / "config.pbtxt").write_text(FLOOR_CONFIG)
    backends = root / "backends"
    install_backend_dir(backends)
    (backends / FLOOR).mkdir(exist_ok=True)
    (backends / FLOOR / "model.py").write_text(FLOOR_BACKEND)
    return repo, backends


def start(root: Path, repo: Path, backends: Path) -> tuple[TritonProcess, Ports]:
    """A loopback tritonserver with both models loaded."""
    ports = pick_ports()
    args = server_args(repo, backends, ports, extra=(f"--load-model={MODEL}", f"--load-model={FLOOR}"))
    process = TritonProcess(find_distribution(), args, root / "server.log", root)
    process.start()
    process.wait_ready(f"http://127.0.0.1:{ports.http}", timeout=120)
    return process, ports


def prompt(length: int, seed: int) -> tuple[int, ...]:
    """Seeded prompt ids."""
    return tuple(int(t) for t in np.random.default_rng(seed).integers(0, 32000, length))


def direct_loop(session: ort.InferenceSession, ids: tuple[int, ...], output: int) -> StreamResult:
    """The direct greedy loop, timed like a stream: its first token after the prefill, then each step."""
    names = [o.name for o in session.get_outputs()]
    result = StreamResult(sent=time.perf_counter())
    past, feed = DEMO_LAYOUT.empty(), list(ids)
    while len(result.tokens) < output:
        outputs = dict(zip(names, session.run(None, step_feeds(DEMO_LAYOUT, feed, past)), strict=True))
        token = int(np.argmax(outputs["logits"][0, -1]))
        result.tokens.append(token)
        result.arrivals.append(time.perf_counter())
        past = [outputs[n] for layer in DEMO_LAYOUT.names() for n in layer[2:]]
        feed = [token]
    return result


def streamed(streamer: GrpcStreamer, ids: tuple[int, ...], output: int) -> StreamResult:
    """One generation over an open gRPC stream (opening it is not what is measured)."""
    result = streamer.generate(Generation(ids, output))
    if result.error is not None or len(result.tokens) != output:
        raise RuntimeError(f"{streamer.model}: {result.error or f'{len(result.tokens)} of {output} tokens'}")
    return result


def open_streams(ports: Ports, model: str, count: int) -> list[GrpcStreamer]:
    """Streams opened (and used once, unmeasured) before a measurement."""
    streamers = [GrpcStreamer(f"127.0.0.1:{ports.grpc}", model) for _ in range(count)]
    for streamer in streamers:
        streamed(streamer, (1, 2, 3), 2)
    return streamers


def one_round(index: int, session: ort.InferenceSession, ports: Ports, args: argparse.Namespace,
              per_round: int) -> dict[str, dict[str, float]]:
    """Each variant's median TTFT, ITL and tokens/s over `per_round` generations, in this round's order."""
    (glue,), (floor,) = open_streams(ports, MODEL, 1), open_streams(ports, FLOOR, 1)
    variants = {
        "direct": lambda ids: direct_loop(session, ids, args.output),
        "triton_ge": lambda ids: streamed(glue, ids, args.output),
        "floor": lambda ids: streamed(floor, ids, args.output),
    }
    found: dict[str, dict[str, float]] = {}
    for name in round_order(list(variants), index):
        results = [variants[name](prompt(args.prompt, 1000 * index + i)) for i in range(per_round)]
        found[name] = {
            "ttft_ms": statistics.median(r.ttft or 0.0 for r in results) * 1000,
            "itl_ms": statistics.median(i for r in results for i in r.itls) * 1000,
            "tokens_per_s": statistics.median(len(r.tokens) / (r.e2e or 1.0) for r in results),
        }
    for streamer in (glue, floor):
        streamer.close()
    return found


def concurrent(ports: Ports, args: argparse.Namespace) -> dict[str, Any]:
    """`--streams` generations at once beside one alone: aggregate tokens/s and each stream's ITL p99."""
    def run(count: int) -> tuple[float, list[StreamResult]]:
        results: list[StreamResult] = []
        streamers = open_streams(ports, MODEL, count)
        threads = [threading.Thread(target=lambda s=s, i=i: results.append(
            streamed(s, prompt(args.prompt, 90_000 + i), args.output))) for i, s in enumerate(streamers)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        rate = sum(len(r.tokens) for r in results) / (time.perf_counter() - started)
        for streamer in streamers:
            streamer.close()
        return rate, results

    ones, manys, itl_p99 = [], [], []
    for index in range(args.rounds):
        for count in round_order([1, args.streams], index):
            rate, results = run(count)
            if count == 1:
                ones.append(rate)
            else:
                manys.append(rate)
                itl_p99.append([float(np.percentile(r.itls, 99)) * 1000 for r in results])
    return {"one_stream_tokens_per_s": ones, "streams_tokens_per_s": manys,
            "ratio": [m / o for m, o in zip(manys, ones, strict=True)], "itl_p99_ms_per_stream": itl_p99}


def spread(values: list[float]) -> dict[str, float]:
    """Median and range."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarize(rounds: list[dict[str, dict[str, float]]]) -> dict[str, Any]:
    """Per round the targets' differences, then their medians and ranges."""
    itl_added = [r["triton_ge"]["itl_ms"] - r["direct"]["itl_ms"] - r["floor"]["itl_ms"] for r in rounds]
    ttft_added = [r["triton_ge"]["ttft_ms"] - r["direct"]["ttft_ms"] - r["floor"]["ttft_ms"] for r in rounds]
    ratio = [r["triton_ge"]["tokens_per_s"] / r["direct"]["tokens_per_s"] for r in rounds]
    per_variant = {name: {figure: spread([r[name][figure] for r in rounds])
                          for figure in ("ttft_ms", "itl_ms", "tokens_per_s")} for name in rounds[0]}
    return {"variants": per_variant, "itl_beyond_direct_and_floor_ms": spread(itl_added),
            "ttft_beyond_direct_and_floor_ms": spread(ttft_added), "tokens_per_s_ratio": spread(ratio)}


def _cell(figures: dict[str, float], digits: int = 3) -> str:
    return f"{figures['median']:.{digits}f} ({figures['min']:.{digits}f}–{figures['max']:.{digits}f})"


def print_tables(figures: dict[str, Any], args: argparse.Namespace) -> None:
    """Markdown tables: medians with the range over rounds."""
    print(f"\n### One stream, {args.prompt} prompt + {args.output} output tokens (median of rounds, range)\n")
    print("| variant | TTFT ms | ITL ms | tokens/s |\n|---|---|---|---|")
    for name, values in figures["variants"].items():
        print(f"| {name} | {_cell(values['ttft_ms'])} | {_cell(values['itl_ms'])} | "
              f"{_cell(values['tokens_per_s'], 0)} |")
    print("\n| figure | measured | target |\n|---|---|---|")
    print(f"| ITL through Triton − direct step − floor interval (ms) | "
          f"{_cell(figures['itl_beyond_direct_and_floor_ms'])} | ≤ 0.1 |")
    print(f"| TTFT through Triton − direct prefill − floor first response (ms) | "
          f"{_cell(figures['ttft_beyond_direct_and_floor_ms'])} | ≤ 0.5 |")
    print(f"| tokens/s through Triton ÷ direct loop | {_cell(figures['tokens_per_s_ratio'], 2)} | — |")
    many = figures["concurrent"]
    worst = [max(p99) for p99 in many["itl_p99_ms_per_stream"]]
    print(f"\n### {args.streams} concurrent streams vs one\n")
    print("| figure | measured | target |\n|---|---|---|")
    print(f"| aggregate tokens/s ÷ one stream | {_cell(spread(many['ratio']), 2)} | ≥ 3 |")
    print(f"| one stream tokens/s | {_cell(spread(many['one_stream_tokens_per_s']), 0)} | — |")
    print(f"| {args.streams} streams tokens/s | {_cell(spread(many['streams_tokens_per_s']), 0)} | — |")
    print(f"| worst stream's ITL p99 (ms) | {_cell(spread(worst), 2)} | — |")


def parse_args() -> argparse.Namespace:
    """The options in the docstring."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--output", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--per-round", type=int, default=3, help="generations per variant per round")
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--json", type=Path, default=RESULTS / "generate_overhead.json")
    return parser.parse_args()


def main() -> int:
    """Run everything, print the tables, write the JSON."""
    args = parse_args()
    root = Path(tempfile.mkdtemp(prefix="ge-generate-bench-"))
    repo, backends = build(root, args.output, args.streams)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(demo_bytes("demo:llama_kv"), options, providers=["CPUExecutionProvider"])
    note(f"starting tritonserver (log: {root / 'server.log'})")
    process, ports = start(root, repo, backends)
    try:
        for streamer in open_streams(ports, MODEL, 1):  # warm-up: not measured
            streamed(streamer, prompt(args.prompt, 0), args.output)
            streamer.close()
        rounds = []
        for index in range(args.rounds):
            note(f"round {index + 1} of {args.rounds}")
            rounds.append(one_round(index, session, ports, args, args.per_round))
        figures = summarize(rounds)
        figures["concurrent"] = concurrent(ports, args)
    finally:
        process.stop()
    figures.update({"rounds": rounds, "prompt": args.prompt, "output": args.output, "streams": args.streams})
    print_tables(figures, args)
    machine = {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version(),
               "onnxruntime": ort.__version__, "load_average": os.getloadavg()}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({**figures, "machine": machine}, indent=2) + "\n")
    note(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
