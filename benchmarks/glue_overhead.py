"""What the Triton + `ge` glue path adds over calling ONNX Runtime directly, for the seed's llama_model.

    python3 benchmarks/glue_overhead.py [--seqs 16,1] [--requests 30] [--rounds 3] [--duration 6]
                                        [--concurrency 16] [--instances 2] [--threads 1]
                                        [--queue-delay-us 0] [--json PATH]

Side by side in one run, interleaved in rounds (the machine is shared), for each sequence length (the
logits, 125 KiB per token, dominate what Triton moves): p50/p99 latency at batch 1, 4 and 8 of direct
ONNX Runtime in-process vs Triton + `ge` through three clients, one request at a time: `ge-console
bench`'s HTTP load generator (the headline: measured near wrk, a client as lean as perf_analyzer's) and
tritonclient's HTTP and gRPC (what users of those libraries see); through the same clients, a "floor"
model that returns same-shaped logits without computing and a "tiny" one answering 4 bytes (the Python
backend's bare round trip). "Added" is Triton+ge − direct per client; the glue's own share is what `ge`
costs beyond the floor moving the same output (− direct). Then throughput with `--concurrency` requests
in flight (batch 1 each, dynamic batching with `--queue-delay-us`, default 0) from two clients
(tritonclient gRPC and `ge-console bench` over HTTP) vs direct single-stream.
It also reads Triton's statistics and the glue's own metrics to split the per-request time into
queue, the glue's Python (request handling, merge/split, tensors) and the model's execution.
Prints markdown tables; writes benchmarks/results/glue_overhead.json (or --json PATH).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import queue
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from triton_ge_console.backend_glue.distribution import find_distribution
from triton_ge_console.backend_glue.installer import install_backend_dir
from triton_ge_console.repository.demo_models import demo_bytes
from triton_ge_console.sessions.loadgen.run import LoadSpec, run_load_sync
from triton_ge_console.sessions.process import Ports, TritonProcess, pick_ports, server_args

RESULTS = Path(__file__).resolve().parent / "results"
MODEL = "llama_model"
BATCHES = (1, 4, 8)
CONFIG = """name: "llama_model"
backend: "ge"
max_batch_size: 8
input [{{ name: "input_ids" data_type: TYPE_INT64 dims: [-1] }}]
output [{{ name: "logits" data_type: TYPE_FP32 dims: [-1, 32000] }}]
dynamic_batching {{ max_queue_delay_microseconds: {delay_us} }}
instance_group [{{ count: {instances} kind: KIND_CPU }}]
parameters {{ key: "intra_op_threads" value: {{ string_value: "{threads}" }} }}
"""


# A Python-backend model answering with logits of the right shape without running anything: what Triton,
# the Python backend's shared memory and the client cost for this much output, with no glue and no model.
FLOOR_BACKEND = """import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.cache = {}

    def execute(self, requests):
        out = []
        for request in requests:
            shape = pb_utils.get_input_tensor_by_name(request, "input_ids").as_numpy().shape
            logits = self.cache.setdefault(shape, np.zeros((*shape, 32000), dtype=np.float32))
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("logits", logits)]))
        return out
"""
FLOOR = "floor_model"
# The same round trip answering 4 bytes: what Triton's Python backend and the client cost, nothing to move.
TINY_BACKEND = FLOOR_BACKEND.replace("np.zeros((*shape, 32000), dtype=np.float32)",
                                     "np.zeros((shape[0], 1, 1), dtype=np.float32)")
TINY = "tiny_model"


def note(text: str) -> None:
    """Progress on stderr (stdout carries the tables)."""
    print(text, file=sys.stderr, flush=True)


def build(root: Path, instances: int, threads: int, delay_us: int = 0) -> tuple[Path, Path]:
    """The seed's llama_model repository and an installed backend directory."""
    repo = root / "repo"
    (repo / MODEL / "1").mkdir(parents=True)
    config = CONFIG.format(instances=instances, threads=threads, delay_us=delay_us)
    (repo / MODEL / "config.pbtxt").write_text(config)
    (repo / MODEL / "1" / "model.onnx").write_bytes(demo_bytes("demo:llama"))
    (repo / FLOOR / "1").mkdir(parents=True)
    (repo / FLOOR / "config.pbtxt").write_text(config.replace('backend: "ge"', 'backend: "floor"')
                                               .replace(MODEL, FLOOR))
    backends = root / "backends"
    install_backend_dir(backends)
    (backends / "floor").mkdir(exist_ok=True)
    (backends / "floor" / "model.py").write_text(FLOOR_BACKEND)
    (repo / TINY / "1").mkdir(parents=True)
    (repo / TINY / "config.pbtxt").write_text(config.replace('backend: "ge"', 'backend: "tiny"')
                                              .replace(MODEL, TINY).replace("-1, 32000", "-1, 1"))
    (backends / "tiny").mkdir(exist_ok=True)
    (backends / "tiny" / "model.py").write_text(TINY_BACKEND)
    return repo, backends


def start(root: Path, repo: Path, backends: Path) -> tuple[TritonProcess, Ports]:
    """A loopback tritonserver with the model loaded."""
    ports = pick_ports()
    args = server_args(repo, backends, ports,
                       extra=(f"--load-model={MODEL}", f"--load-model={FLOOR}", f"--load-model={TINY}"))
    process = TritonProcess(find_distribution(), args, root / "server.log", root)
    process.start()
    process.wait_ready(f"http://127.0.0.1:{ports.http}", timeout=120)
    with httpclient.InferenceServerClient(f"127.0.0.1:{ports.http}") as client:
        if not all(client.is_model_ready(name) for name in (MODEL, FLOOR, TINY)):
            process.stop()
            raise RuntimeError(f"{MODEL} did not load; see {root / 'server.log'}")
    return process, ports


def token_ids(batch: int, seq: int, seed: int = 0) -> np.ndarray:
    """Random token ids [batch, seq]."""
    return np.random.default_rng(seed).integers(0, 32000, size=(batch, seq), dtype=np.int64)


def timed(call: Callable[[], Any], count: int) -> list[float]:
    """Milliseconds of each of count calls, after two warm-up calls."""
    call()
    call()
    times = []
    for _ in range(count):
        begin = time.perf_counter()
        call()
        times.append((time.perf_counter() - begin) * 1000.0)
    return times


def callers(session: ort.InferenceSession, ports: Ports, ids: np.ndarray) -> dict[str, Callable[[], Any]]:
    """One request of ids for each path: direct, HTTP, gRPC (clients kept open across calls)."""
    http = httpclient.InferenceServerClient(f"127.0.0.1:{ports.http}")
    grpc = grpcclient.InferenceServerClient(f"127.0.0.1:{ports.grpc}")
    http_input = httpclient.InferInput("input_ids", list(ids.shape), "INT64")
    http_input.set_data_from_numpy(ids)
    grpc_input = grpcclient.InferInput("input_ids", list(ids.shape), "INT64")
    grpc_input.set_data_from_numpy(ids)
    return {
        "direct": lambda: session.run(None, {"input_ids": ids}),
        "http": lambda: http.infer(MODEL, [http_input]).as_numpy("logits"),  # tritonclient HTTP
        "grpc": lambda: grpc.infer(MODEL, [grpc_input]).as_numpy("logits"),
        "floor_http": lambda: http.infer(FLOOR, [http_input]).as_numpy("logits"),
        "floor_grpc": lambda: grpc.infer(FLOOR, [grpc_input]).as_numpy("logits"),
        "tiny_http": lambda: http.infer(TINY, [http_input]).as_numpy("logits"),
        "tiny_grpc": lambda: grpc.infer(TINY, [grpc_input]).as_numpy("logits"),
    }


CLIENTS = ("loadgen", "http", "grpc")  # `ge-console bench`'s HTTP client (the headline), tritonclient's
PATHS = ("direct", *CLIENTS, *(f"{kind}_{c}" for kind in ("floor", "tiny") for c in CLIENTS))
LOADGEN_MODELS = {"loadgen": MODEL, "floor_loadgen": FLOOR, "tiny_loadgen": TINY}
Rounds = dict[int, dict[str, list[tuple[float, float]]]]  # batch → path → (p50, p99) ms of each round


def loadgen_latency(ports: Ports, model: str, seq: int, batch: int, seconds: float) -> tuple[float, float]:
    """p50 and p99 ms of requests sent one at a time by `ge-console bench`'s HTTP client (the client that
    is measured near wrk, as perf_analyzer's C++ client would be, rather than tritonclient's Python)."""
    windows = 2
    spec = LoadSpec(model=model, url=f"127.0.0.1:{ports.http}", protocol="http", concurrency=(1,),
                    batch_size=batch, shapes={"input_ids": (seq,)}, window_ms=int(seconds * 1000 / windows),
                    warmup_ms=200, max_windows=windows, stable_windows=windows)
    row = run_load_sync(spec)[0]
    if row.errors or row.p50_ms is None or row.p99_ms is None:
        raise RuntimeError(f"{model}: load generator run failed: {row.first_error}")
    return row.p50_ms, row.p99_ms


def latencies(session: ort.InferenceSession, ports: Ports, seq: int, requests: int,
              rounds: int) -> Rounds:
    """Per batch and path, each round's p50/p99, paths interleaved round by round."""
    found: Rounds = {b: {p: [] for p in PATHS} for b in BATCHES}
    for round_index in range(rounds):
        for batch in BATCHES:
            count = requests if batch == 1 else max(10, requests // 2)
            for path, call in callers(session, ports, token_ids(batch, seq)).items():
                times = timed(call, count)
                found[batch][path].append((float(np.percentile(times, 50)), float(np.percentile(times, 99))))
            for path, model in LOADGEN_MODELS.items():
                found[batch][path].append(loadgen_latency(ports, model, seq, batch, seconds=1.0))
        note(f"latency round {round_index + 1}/{rounds} done")
    return found


def direct_throughput(session: ort.InferenceSession, seq: int, duration: float) -> float:
    """Inferences per second, one request (batch 1) at a time, in-process."""
    ids = token_ids(1, seq)
    done, end = 0, time.perf_counter() + duration
    begin = time.perf_counter()
    while time.perf_counter() < end:
        session.run(None, {"input_ids": ids})
        done += 1
    return done / (time.perf_counter() - begin)


def triton_throughput(ports: Ports, seq: int, duration: float, concurrency: int) -> float:
    """Inferences per second with `concurrency` batch-1 gRPC requests kept in flight."""
    client = grpcclient.InferenceServerClient(f"127.0.0.1:{ports.grpc}")
    tensor = grpcclient.InferInput("input_ids", [1, seq], "INT64")
    tensor.set_data_from_numpy(token_ids(1, seq))
    slots = threading.Semaphore(concurrency)
    errors: queue.Queue[str] = queue.Queue()
    counter = {"done": 0}
    lock = threading.Lock()

    def finished(result: Any, error: Any) -> None:
        if error is not None:
            errors.put(str(error))
        with lock:
            counter["done"] += 1
        slots.release()

    begin = time.perf_counter()
    end = begin + duration
    while time.perf_counter() < end:
        slots.acquire()
        client.async_infer(MODEL, [tensor], callback=finished)
    for _ in range(concurrency):
        slots.acquire()
    elapsed = time.perf_counter() - begin
    client.close()
    if not errors.empty():
        raise RuntimeError(f"throughput run failed: {errors.get()}")
    return counter["done"] / elapsed


def loadgen_throughput(ports: Ports, seq: int, duration: float, concurrency: int) -> float:
    """Inferences per second with `concurrency` batch-1 HTTP requests in flight from `ge-console bench`."""
    windows = max(2, int(duration))
    spec = LoadSpec(model=MODEL, url=f"127.0.0.1:{ports.http}", protocol="http", concurrency=(concurrency,),
                    shapes={"input_ids": (seq,)}, window_ms=int(duration * 1000 / windows), warmup_ms=300,
                    max_windows=windows, stable_windows=windows)
    row = run_load_sync(spec)[0]
    if row.errors:
        raise RuntimeError(f"throughput run failed: {row.first_error}")
    return row.inferences_per_s


def counters(ports: Ports) -> dict[str, float]:
    """Cumulative figures now: Triton's statistics for the model and the glue's own execution counters."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with httpclient.InferenceServerClient(f"127.0.0.1:{ports.http}") as client:
        stats = client.get_inference_statistics(MODEL)["model_stats"][0]
    inference = stats["inference_stats"]
    # inference_stats add every request's time (a batch's execution counted once per request in it);
    # batch_stats count each execution once, which is what "per execution" needs
    batches = stats.get("batch_stats", [])
    totals = {"requests": float(inference["success"]["count"]), "executions": float(stats["execution_count"]),
              "queue_ns": float(inference["queue"]["ns"]),
              "compute_infer_ns": float(sum(int(b["compute_infer"]["ns"]) for b in batches)),
              "ge_execution_duration_us": 0.0, "ge_executions_total": 0.0}
    with urllib.request.urlopen(f"http://127.0.0.1:{ports.metrics}/metrics", timeout=5) as response:
        text = response.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = sample.name if sample.name in totals else family.name  # the parser strips _total
            if name in totals and sample.labels.get("model") == MODEL:
                totals[name] += sample.value
    return totals


def split(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Average µs per request / execution between two counter readings."""
    delta = {k: after[k] - before[k] for k in after}
    requests, executions = max(1.0, delta["requests"]), max(1.0, delta["executions"])
    model_us = delta["ge_execution_duration_us"] / max(1.0, delta["ge_executions_total"])
    compute_us = delta["compute_infer_ns"] / executions / 1000.0
    return {"requests": delta["requests"], "executions": delta["executions"],
            "queue_us_per_request": delta["queue_ns"] / requests / 1000.0,
            "compute_infer_us_per_execution": compute_us, "model_us_per_execution": model_us,
            "glue_us_per_execution": compute_us - model_us}


def _spread(values: list[float]) -> dict[str, float]:
    """Median and range over the rounds."""
    return {"median": float(np.median(values)), "min": float(min(values)), "max": float(max(values))}


def summarize(found: Rounds) -> dict[str, Any]:
    """Per batch and path, p50/p99 (median of the rounds, and the p50's range); per client, what Triton
    adds over direct ORT and the glue's own share (ge − no-work floor moving the same logits − direct),
    each computed within a round, then over the rounds."""
    figures: dict[str, Any] = {"latency": {}}
    for batch, paths in found.items():
        row = {path: {"p50_ms": _spread([r[0] for r in rounds])["median"],
                      "p99_ms": _spread([r[1] for r in rounds])["median"],
                      "p50_range_ms": [min(r[0] for r in rounds), max(r[0] for r in rounds)]}
               for path, rounds in paths.items()}
        figures["latency"][str(batch)] = row
        direct = [r[0] for r in paths["direct"]]
        for client in CLIENTS:
            ge, floor = [r[0] for r in paths[client]], [r[0] for r in paths[f"floor_{client}"]]
            added = _spread([g - d for g, d in zip(ge, direct, strict=True)])
            glue = _spread([g - f - d for g, f, d in zip(ge, floor, direct, strict=True)])
            figures[f"added_p50_ms_batch{batch}_{client}"] = added["median"]
            figures[f"added_p50_range_ms_batch{batch}_{client}"] = [added["min"], added["max"]]
            figures[f"glue_p50_ms_batch{batch}_{client}"] = glue["median"]
            figures[f"glue_p50_range_ms_batch{batch}_{client}"] = [glue["min"], glue["max"]]
    figures["added_p50_ms_batch1"] = figures["added_p50_ms_batch1_loadgen"]
    figures["latency_client"] = "loadgen"
    return figures


def print_tables(figures: dict[str, Any], args: argparse.Namespace) -> None:
    """The markdown tables."""
    seq = figures["seq"]
    mib = seq * 32000 * 4 / (1 << 20)
    print(f"\n### seq {seq}\n\nllama_model (demo:llama, seq {seq}: {mib:.1f} MiB of logits per inference), "
          f"{args.instances} instance(s) x {args.threads} ORT thread(s) in Triton; direct latency with "
          f"{args.threads} thread(s), direct throughput with ORT's default threads. "
          f"Floor: a Python-backend model returning same-shaped logits without computing (Triton + shared "
          f"memory + client cost), through each client; glue's own = Triton+ge − direct − floor. Latency "
          f"per round is each path's p50/p99 in that round; figures are the rounds' median. Dynamic batcher "
          f"max_queue_delay_microseconds {args.queue_delay_us}.\n")
    print_latency_tables(figures)
    print_throughput_tables(figures, args)


def _range(values: list[float]) -> str:
    """A round range, signed."""
    return f"{values[0]:+.3f}…{values[1]:+.3f}"


def print_latency_tables(figures: dict[str, Any]) -> None:
    """Latency per batch size and client: ge, the no-work floor with the same logits, the 4-byte round trip;
    then what Triton adds over direct ORT and the glue's own share, per client."""
    labels = {"loadgen": "`ge-console bench` HTTP", "http": "tritonclient HTTP", "grpc": "tritonclient gRPC"}
    print("| batch | client | direct p50 ms | Triton+ge p50 / p99 ms | no-work floor, same logits, p50 ms "
          "| no-work, 4 bytes, p50 ms |")
    print("|---:|---|---:|---:|---:|---:|")
    for batch in BATCHES:
        row = figures["latency"][str(batch)]
        for client in CLIENTS:
            print(f"| {batch} | {labels[client]} | {row['direct']['p50_ms']:.3f} "
                  f"| {row[client]['p50_ms']:.3f} / {row[client]['p99_ms']:.3f} "
                  f"| {row[f'floor_{client}']['p50_ms']:.3f} | {row[f'tiny_{client}']['p50_ms']:.3f} |")
    print("\n| batch | client | added p50 ms (Triton+ge − direct), median; range over rounds "
          "| glue's own p50 ms (− the floor too), median; range |")
    print("|---:|---|---:|---:|")
    for batch in BATCHES:
        for client in CLIENTS:
            print(f"| {batch} | {labels[client]} | {figures[f'added_p50_ms_batch{batch}_{client}']:+.3f}; "
                  f"{_range(figures[f'added_p50_range_ms_batch{batch}_{client}'])} "
                  f"| {figures[f'glue_p50_ms_batch{batch}_{client}']:+.3f}; "
                  f"{_range(figures[f'glue_p50_range_ms_batch{batch}_{client}'])} |")


def print_throughput_tables(figures: dict[str, Any], args: argparse.Namespace) -> None:
    """Throughput of both clients against direct, then where a Triton request's time goes."""
    print(f"\n| throughput (median of {args.rounds} alternating rounds) | inf/s |\n|---|---:|")
    print(f"| direct ORT, single stream, batch 1 | {figures['direct_single_stream_inf_s']:.1f} |")
    for client, label in (("grpc_client", "tritonclient gRPC"), ("loadgen_http", "`ge-console bench` HTTP")):
        print(f"| Triton+ge, {args.concurrency} in flight from {label}, dynamic batching | "
              f"{figures[f'triton_c16_inf_s_{client}']:.1f} (ratio "
              f"{figures[f'throughput_ratio_c16_{client}']:.2f}) |")
    print(f"| ratio, median of the rounds' ratios, `ge-console bench` client (target >= 1.5) | "
          f"{figures['throughput_ratio_c16']:.2f} |")
    split = figures["split"]
    print("\n| where a Triton request's time goes (averages over this sequence length's runs, "
          "throughput load included) | µs |\n|---|---:|")
    print(f"| queue per request | {split['queue_us_per_request']:.0f} |")
    rows = [("glue execute() per execution (Triton compute_infer)", split["compute_infer_us_per_execution"]),
            ("of which the model (ge_execution_duration_us)", split["model_us_per_execution"]),
            ("of which the rest: the glue's Python and the Python backend's response path "
             "(outputs into shared memory, IPC to the server)", split["glue_us_per_execution"])]
    for label, value in rows:
        print(f"| {label} | {value:.0f} |")
    average = split["requests"] / max(1, split["executions"])
    print(f"| average batch (requests / executions) | {average:.2f} |")


def parse_args() -> argparse.Namespace:
    """Command line."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seqs", default="16,1", type=lambda text: [int(v) for v in text.split(",")],
                        help="tokens per request, comma-separated; the first gives the headline figures")
    parser.add_argument("--requests", type=int, default=30, help="timed requests per path per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=6.0, help="seconds of throughput per path")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--instances", type=int, default=2, help="model instances in Triton")
    parser.add_argument("--threads", type=int, default=1, help="ORT intra-op threads per Triton instance")
    parser.add_argument("--queue-delay-us", type=int, default=0,
                        help="dynamic batcher max_queue_delay_microseconds (a single client waits this long "
                             "for company at batch 1)")
    parser.add_argument("--json", type=Path, default=RESULTS / "glue_overhead.json")
    return parser.parse_args()


def measure(args: argparse.Namespace, ports: Ports, seq: int) -> dict[str, Any]:
    """All figures for one sequence length, with the server up."""
    note(f"seq {seq}")
    before = counters(ports)
    # latency: the same ORT settings as one Triton instance, so the difference is Triton + the glue
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    matched = ort.InferenceSession(demo_bytes("demo:llama"), options, providers=["CPUExecutionProvider"])
    figures = summarize(latencies(matched, ports, seq, args.requests, args.rounds))
    # throughput: the best a single stream does in-process (ORT's default threads)
    best = ort.InferenceSession(demo_bytes("demo:llama"), providers=["CPUExecutionProvider"])
    figures.update(throughputs(best, ports, args, seq))
    figures["split"] = split(before, counters(ports))
    figures["seq"] = seq
    return figures


def throughputs(session: ort.InferenceSession, ports: Ports, args: argparse.Namespace,
                seq: int) -> dict[str, Any]:
    """Direct single-stream and Triton at concurrency from two clients, alternated over rounds; medians.

    Two clients, because on a 2-CPU machine the client's own CPU is taken from the server: tritonclient's
    gRPC client (Python, one callback thread) and `ge-console bench`'s HTTP load generator. The headline
    is the load generator's, chosen in advance (the leaner client); both are printed.
    """
    rounds: dict[str, list[float]] = {"direct": [], "grpc_client": [], "loadgen_http": []}
    slice_s = args.duration / args.rounds
    for round_index in range(args.rounds):
        rounds["direct"].append(direct_throughput(session, seq, slice_s))
        rounds["grpc_client"].append(triton_throughput(ports, seq, slice_s, args.concurrency))
        rounds["loadgen_http"].append(loadgen_throughput(ports, seq, slice_s, args.concurrency))
        note(f"throughput round {round_index + 1}/{args.rounds}: "
             + ", ".join(f"{name} {values[-1]:.0f}" for name, values in rounds.items()) + " inf/s")
    figures: dict[str, Any] = {"direct_single_stream_inf_s": float(np.median(rounds["direct"])),
                               "throughput_rounds": rounds}
    for client in ("grpc_client", "loadgen_http"):
        ratios = [s / d for s, d in zip(rounds[client], rounds["direct"], strict=True)]
        figures[f"triton_c16_inf_s_{client}"] = float(np.median(rounds[client]))
        figures[f"throughput_ratio_c16_{client}"] = float(np.median(ratios))
    figures["triton_c16_inf_s"] = figures["triton_c16_inf_s_loadgen_http"]
    figures["throughput_ratio_c16"] = figures["throughput_ratio_c16_loadgen_http"]
    figures["throughput_client"] = "loadgen_http"
    return figures


def main() -> int:
    """Run everything, print the tables, write the JSON."""
    args = parse_args()
    root = Path(tempfile.mkdtemp(prefix="ge-glue-bench-"))
    repo, backends = build(root, args.instances, args.threads, args.queue_delay_us)
    note(f"starting tritonserver (log: {root / 'server.log'})")
    process, ports = start(root, repo, backends)
    try:
        by_seq = [measure(args, ports, seq) for seq in args.seqs]
    finally:
        process.stop()
    for figures in by_seq:
        print_tables(figures, args)
    # the headline figures are the first sequence length's; every one is kept under by_seq
    figures = {**by_seq[0], "by_seq": {str(f["seq"]): f for f in by_seq}}
    figures.update({"instances": args.instances, "threads": args.threads, "concurrency": args.concurrency,
                    "queue_delay_us": args.queue_delay_us})
    write_json(args.json, figures)
    return 0


def write_json(path: Path, figures: dict[str, Any]) -> None:
    """The figures with what they were measured on, as pretty JSON."""
    machine = {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version(),
               "onnxruntime": ort.__version__, "load_average": os.getloadavg()}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**figures, "machine": machine}, indent=2) + "\n")
    note(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
