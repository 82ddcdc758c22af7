"""What the Triton + `ge` glue path adds over calling ONNX Runtime directly, for the seed's llama_model.

    python3 benchmarks/glue_overhead.py [--seqs 16,1] [--requests 30] [--rounds 3] [--duration 6]
                                        [--concurrency 1,4,16] [--instances 2] [--threads 1]
                                        [--queue-delay-us 0] [--baseline-src DIR] [--json PATH]

Side by side in one run, interleaved in rounds (the machine is shared), for each sequence length (the
logits, 125 KiB per token, dominate what Triton moves): p50/p99 latency at batch 1, 4 and 8 of direct
ONNX Runtime in-process vs Triton + `ge` through three clients, one request at a time: `ge-console
bench`'s HTTP load generator (the headline: measured near wrk, a client as lean as perf_analyzer's) and
tritonclient's HTTP and gRPC (what users of those libraries see); through the same clients, a "floor"
model that returns same-shaped logits without computing and a "tiny" one answering 4 bytes (the Python
backend's bare round trip). "Added" is Triton+ge − direct per client; the glue's own share is what `ge`
costs beyond the floor moving the same output (− direct). Server-side, Triton's compute time per
execution at batch 1 for `ge` against direct ORT + the no-work model's (what running the model inside the
stub costs beyond running it in a loop). Then throughput at each `--concurrency` (batch-1 requests in
flight from `ge-console bench`, dynamic batching with `--queue-delay-us`, default 0): scaling against the
lowest concurrency, and against direct ORT running the batch size the batcher formed, in-process.
With `--baseline-src` (another checkout's src/), that version of the glue serves a second copy of the
model, measured through the load generator in the same rounds: an A/B in one run.
It also reads Triton's statistics and the glue's own metrics to split the per-request time into
queue, the glue's Python (request handling, merge/split, tensors) and the model's execution.
Prints markdown tables; writes benchmarks/results/glue_overhead.json (or --json PATH).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from result_file import arguments, write_result
from triton_ge_console.backend_glue.distribution import find_distribution
from triton_ge_console.backend_glue.installer import install_backend_dir
from triton_ge_console.repository.demo_models import demo_bytes
from triton_ge_console.sessions.loadgen.rounds import Spread, round_order
from triton_ge_console.sessions.loadgen.run import LoadSpec, run_load_sync
from triton_ge_console.sessions.server.process import Ports, TritonProcess, pick_ports, server_args

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


# The same glue from another source tree (e.g. the previous commit), for an A/B in one run: each model
# has its own stub process, so this one imports the package from that tree.
BEFORE = "llama_before"
BEFORE_BACKEND = """import sys
sys.path.insert(0, {src!r})
from triton_ge_console.backend_glue.triton_model import TritonPythonModel  # noqa: E402,F401
"""


def build(root: Path, instances: int, threads: int, delay_us: int = 0,
          baseline_src: Path | None = None) -> tuple[Path, Path]:
    """The seed's llama_model repository and an installed backend directory (with the baseline glue's
    copy of the model when a baseline source tree is given)."""
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
    if baseline_src is not None:
        (repo / BEFORE / "1").mkdir(parents=True)
        (repo / BEFORE / "config.pbtxt").write_text(config.replace('backend: "ge"', 'backend: "ge_before"')
                                                    .replace(MODEL, BEFORE))
        (repo / BEFORE / "1" / "model.onnx").write_bytes(demo_bytes("demo:llama"))
        (backends / "ge_before").mkdir(exist_ok=True)
        (backends / "ge_before" / "model.py").write_text(BEFORE_BACKEND.format(src=str(baseline_src)))
    return repo, backends


def start(root: Path, repo: Path, backends: Path) -> tuple[TritonProcess, Ports]:
    """A loopback tritonserver with the models loaded."""
    ports = pick_ports()
    names = [MODEL, FLOOR, TINY] + ([BEFORE] if (repo / BEFORE).is_dir() else [])
    args = server_args(repo, backends, ports, extra=tuple(f"--load-model={name}" for name in names))
    process = TritonProcess(find_distribution(), args, root / "server.log", root)
    process.start()
    process.wait_ready(f"http://127.0.0.1:{ports.http}", timeout=120)
    with httpclient.InferenceServerClient(f"127.0.0.1:{ports.http}") as client:
        if not all(client.is_model_ready(name) for name in names):
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


EVICT = np.ones(32 << 20, dtype=np.uint8)  # walked between cold runs: more than this machine's caches


def timed_cold(session: ort.InferenceSession, ids: np.ndarray, count: int) -> list[float]:
    """Milliseconds of each of count direct runs, each after walking 32 MiB and sleeping 0.5 ms: what a
    model instance sees in the stub, where the server, the client and the copies of the response run
    between two requests and the stub waits blocked."""
    session.run(None, {"input_ids": ids})
    times = []
    for _ in range(count):
        EVICT.sum()
        time.sleep(0.0005)
        begin = time.perf_counter()
        session.run(None, {"input_ids": ids})
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
PATHS = ("direct", "direct_cold", *CLIENTS, *(f"{kind}_{c}" for kind in ("floor", "tiny") for c in CLIENTS))
LOADGEN_MODELS = {"loadgen": MODEL, "floor_loadgen": FLOOR, "tiny_loadgen": TINY}
BEFORE_PATH = "before_loadgen"  # the baseline glue, through the load generator
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


def compute_stats(ports: Ports, model: str) -> tuple[float, float]:
    """Triton's cumulative executions and compute_infer ns for a model (the time in its execute())."""
    with httpclient.InferenceServerClient(f"127.0.0.1:{ports.http}") as client:
        stats = client.get_inference_statistics(model)["model_stats"][0]
    batches = stats.get("batch_stats", [])
    return (float(stats["execution_count"]),
            float(sum(int(b["compute_infer"]["ns"]) for b in batches)))


def loadgen_with_compute(ports: Ports, model: str, seq: int, batch: int) -> tuple[float, float, float, float]:
    """loadgen_latency's p50/p99, and meanwhile the model's server-side compute µs per execution and, for
    the glue's models, the µs per execution its executor.run took inside the stub (ge_execution_duration_us,
    flushed every 0.5 s; NaN for the no-work models)."""
    glue = model in (MODEL, BEFORE)
    before = counters(ports, model) if glue else None
    executions, ns = compute_stats(ports, model)
    p50, p99 = loadgen_latency(ports, model, seq, batch, seconds=1.0)
    executions_after, ns_after = compute_stats(ports, model)
    run_us = float("nan")
    if before is not None:
        time.sleep(0.6)  # the glue's telemetry flushes its counters twice a second
        after = counters(ports, model)
        runs = after["ge_executions_total"] - before["ge_executions_total"]
        run_us = (after["ge_execution_duration_us"] - before["ge_execution_duration_us"]) / max(1.0, runs)
    return p50, p99, (ns_after - ns) / max(1.0, executions_after - executions) / 1000.0, run_us


def _p50_p99(times: list[float]) -> tuple[float, float]:
    """p50 and p99 of some times."""
    return float(np.percentile(times, 50)), float(np.percentile(times, 99))


def latencies(session: ort.InferenceSession, ports: Ports, seq: int, requests: int,
              rounds: int, loadgen_models: dict[str, str]) -> tuple[Rounds, dict[str, list[float]]]:
    """Per batch and path, each round's p50/p99, paths interleaved round by round; and per load-generator
    path, each round's server-side compute µs per execution at batch 1."""
    paths = (*PATHS, *(p for p in loadgen_models if p not in PATHS))
    found: Rounds = {b: {p: [] for p in paths} for b in BATCHES}
    compute: dict[str, list[float]] = {p: [] for p in loadgen_models}
    compute.update({f"{p}_run": [] for p in ("loadgen", BEFORE_PATH) if p in loadgen_models})
    for round_index in range(rounds):
        for batch in BATCHES:
            count = requests if batch == 1 else max(10, requests // 2)
            ids = token_ids(batch, seq)
            calls = callers(session, ports, ids)
            for path in round_order(list(calls), round_index):
                found[batch][path].append(_p50_p99(timed(calls[path], count)))
            found[batch]["direct_cold"].append(_p50_p99(timed_cold(session, ids, count)))
            for path, model in loadgen_models.items():
                p50, p99, compute_us, run_us = loadgen_with_compute(ports, model, seq, batch)
                found[batch][path].append((p50, p99))
                if batch == 1:
                    compute[path].append(compute_us)
                    if f"{path}_run" in compute:
                        compute[f"{path}_run"].append(run_us)
        note(f"latency round {round_index + 1}/{rounds} done")
    return found, compute


def direct_throughput(session: ort.InferenceSession, seq: int, duration: float, batch: int = 1) -> float:
    """Inferences per second, one request of `batch` at a time, in-process."""
    ids = token_ids(batch, seq)
    done, end = 0, time.perf_counter() + duration
    begin = time.perf_counter()
    while time.perf_counter() < end:
        session.run(None, {"input_ids": ids})
        done += batch
    return done / (time.perf_counter() - begin)


def batch_counts(ports: Ports) -> tuple[float, float]:
    """Triton's cumulative successful requests and executions for the ge model."""
    with httpclient.InferenceServerClient(f"127.0.0.1:{ports.http}") as client:
        stats = client.get_inference_statistics(MODEL)["model_stats"][0]
    return float(stats["inference_stats"]["success"]["count"]), float(stats["execution_count"])


def loadgen_throughput(ports: Ports, seq: int, duration: float, concurrency: int) -> tuple[float, float]:
    """Inferences per second with `concurrency` batch-1 HTTP requests in flight from `ge-console bench`,
    and the average batch the dynamic batcher formed meanwhile (requests / executions)."""
    windows = max(2, int(duration))
    spec = LoadSpec(model=MODEL, url=f"127.0.0.1:{ports.http}", protocol="http", concurrency=(concurrency,),
                    shapes={"input_ids": (seq,)}, window_ms=int(duration * 1000 / windows), warmup_ms=300,
                    max_windows=windows, stable_windows=windows)
    requests, executions = batch_counts(ports)
    row = run_load_sync(spec)[0]
    requests_after, executions_after = batch_counts(ports)
    if row.errors:
        raise RuntimeError(f"throughput run failed: {row.first_error}")
    return row.inferences_per_s, (requests_after - requests) / max(1.0, executions_after - executions)


def counters(ports: Ports, model: str = MODEL) -> dict[str, float]:
    """Cumulative figures now: Triton's statistics for the model and the glue's own execution counters."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with httpclient.InferenceServerClient(f"127.0.0.1:{ports.http}") as client:
        stats = client.get_inference_statistics(model)["model_stats"][0]
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
            if name in totals and sample.labels.get("model") == model:
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
    spread = Spread.of(values)
    return {"median": spread.median, "min": spread.low, "max": spread.high}


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
        if BEFORE_PATH in paths:
            before = _spread([g - d for g, d in zip([r[0] for r in paths[BEFORE_PATH]], direct, strict=True)])
            figures[f"added_p50_ms_batch{batch}_before"] = before["median"]
            figures[f"added_p50_range_ms_batch{batch}_before"] = [before["min"], before["max"]]
    figures["added_p50_ms_batch1"] = figures["added_p50_ms_batch1_loadgen"]
    floor = [r[0] for r in found[1]["floor_loadgen"]]
    added_ms = [g - d for g, d in zip([r[0] for r in found[1]["loadgen"]], [r[0] for r in found[1]["direct"]],
                                      strict=True)]
    ratio = _spread([a / f for a, f in zip(added_ms, floor, strict=True)])
    figures["added_over_floor_batch1_loadgen"] = ratio["median"]
    figures["added_over_floor_range_batch1_loadgen"] = [ratio["min"], ratio["max"]]
    figures["latency_client"] = "loadgen"
    return figures


def summarize_compute(found: Rounds, compute: dict[str, list[float]]) -> dict[str, Any]:
    """Server-side compute at batch 1 (Triton's compute_infer per execution, the time inside execute())
    per model, and ge's (and the baseline glue's) against direct ORT's p50 + the no-work model's compute,
    round by round: what the glue and the stub add to running the model."""
    direct_us = [r[0] * 1000.0 for r in found[1]["direct"]]
    cold_us = [r[0] * 1000.0 for r in found[1]["direct_cold"]]
    figures: dict[str, Any] = {"compute_us_batch1": {p: _spread(v) for p, v in compute.items()},
                               "direct_us_batch1": _spread(direct_us),
                               "direct_cold_us_batch1": _spread(cold_us)}
    if "floor_loadgen" in compute:  # what running inside the stub costs beyond the no-work model's compute
        in_stub = [g - f for g, f in zip(compute["loadgen"], compute["floor_loadgen"], strict=True)]
        figures["ge_minus_floor_compute_us_batch1"] = _spread(in_stub)
    floor = compute["floor_loadgen"]
    for path, label in (("loadgen", "ge"), (BEFORE_PATH, "before")):
        if path not in compute:
            continue
        figures[f"compute_ratio_{label}"] = _spread(
            [g / (d + f) for g, d, f in zip(compute[path], direct_us, floor, strict=True)])
        figures[f"compute_ratio_cold_{label}"] = _spread(
            [g / (d + f) for g, d, f in zip(compute[path], cold_us, floor, strict=True)])
        figures[f"glue_beyond_run_and_floor_us_{label}"] = _spread(
            [g - r - f for g, r, f in zip(compute[path], compute[f"{path}_run"], floor, strict=True)])
    figures["compute_rounds_batch1"] = compute
    return figures


def print_tables(figures: dict[str, Any], args: argparse.Namespace) -> None:
    """The markdown tables."""
    seq = figures["seq"]
    mib = seq * 32000 * 4 / (1 << 20)
    print(f"\n### seq {seq}\n\nllama_model (demo:llama, seq {seq}: {mib:.1f} MiB of logits per inference), "
          f"{args.instances} instance(s) x {args.threads} ORT thread(s) in Triton; direct ORT (latency "
          f"and throughput) with {args.threads} thread(s), one stream. "
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
        if f"added_p50_ms_batch{batch}_before" in figures:
            print(f"| {batch} | `ge-console bench` HTTP, baseline glue | "
                  f"{figures[f'added_p50_ms_batch{batch}_before']:+.3f}; "
                  f"{_range(figures[f'added_p50_range_ms_batch{batch}_before'])} | — |")
    ratio = figures["added_over_floor_batch1_loadgen"]
    low, high = figures["added_over_floor_range_batch1_loadgen"]
    print(f"\nAdded p50 at batch 1 ÷ the no-work floor's p50 (same logits, `ge-console bench`): "
          f"{ratio:.2f}× ({low:.2f}…{high:.2f}).")


def print_throughput_tables(figures: dict[str, Any], args: argparse.Namespace) -> None:
    """Server-side compute against direct ORT; throughput per concurrency; where a request's time goes."""
    compute = figures["compute_us_batch1"]
    print("\n| server-side compute at batch 1 (Triton compute_infer per execution), median; range over "
          "rounds | µs |\n|---|---:|")
    labels = {"loadgen": "`ge` glue", "loadgen_run": "of which executor.run inside the stub",
              BEFORE_PATH: "`ge` glue, baseline source", f"{BEFORE_PATH}_run": "of which executor.run",
              "floor_loadgen": "no-work model, same logits", "tiny_loadgen": "no-work model, 4 bytes"}
    for path, label in labels.items():
        if path in compute:
            c = compute[path]
            print(f"| {label} | {c['median']:.0f}; {c['min']:.0f}…{c['max']:.0f} |")
    for key, label in (("direct_us_batch1", "direct ORT p50, in a loop (hot caches)"),
                       ("direct_cold_us_batch1", "direct ORT p50, each run after walking 32 MiB and sleeping "
                                                 "0.5 ms (caches as the stub finds them)"),
                       ("ge_minus_floor_compute_us_batch1", "`ge` compute − no-work compute (what "
                                                            "running the model adds to the stub)")):
        c = figures[key]
        print(f"| {label} | {c['median']:.0f}; {c['min']:.0f}…{c['max']:.0f} |")
    for key, label in (("compute_ratio_ge", "`ge` compute ÷ (direct ORT p50 in a loop + no-work compute), "
                                            "target ≤ 1.3"),
                       ("compute_ratio_cold_ge", "`ge` compute ÷ (direct ORT p50 with cold caches + no-work "
                                                 "compute)"),
                       ("glue_beyond_run_and_floor_us_ge", "`ge` compute − its executor.run − no-work "
                                                           "compute, µs (the glue's Python around the run)"),
                       ("compute_ratio_before", "baseline compute ÷ (direct in a loop + no-work compute)"),
                       ("compute_ratio_cold_before", "baseline compute ÷ (direct with cold caches + no-work "
                                                     "compute)"),
                       ("glue_beyond_run_and_floor_us_before", "baseline compute − its executor.run − "
                                                               "no-work compute, µs")):
        if key in figures:
            r = figures[key]
            digits = 0 if key.startswith("glue_") else 2
            unit = "" if key.startswith("glue_") else "×"
            low, high = f"{r['min']:.{digits}f}", f"{r['max']:.{digits}f}"
            print(f"| {label} | {r['median']:.{digits}f}{unit}; {low}…{high} |")
    print(f"\n| concurrency (batch-1 requests in flight, `ge-console bench` HTTP) | Triton+ge inf/s "
          f"| scaling vs c{args.concurrency[0]} | average batch formed | direct ORT at that batch, inf/s "
          f"| Triton ÷ direct |")
    print("|---:|---:|---:|---:|---:|---:|")
    for concurrency, t in figures["throughput"].items():
        print(f"| {concurrency} | {_cell(t['triton_inf_s'], 0)} | {_cell(t['scaling'], 2)} "
              f"| {_cell(t['average_batch'], 2)} | {_cell(t['direct_inf_s'], 0)} "
              f"| {_cell(t['over_direct'], 2)} |")
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


def _cell(spread: dict[str, float], digits: int) -> str:
    """median (min…max)."""
    return f"{spread['median']:.{digits}f} ({spread['min']:.{digits}f}…{spread['max']:.{digits}f})"


def parse_args() -> argparse.Namespace:
    """Command line."""
    parser = arguments(__doc__, "glue_overhead", rounds=3)
    parser.add_argument("--seqs", default="16,1", type=lambda text: [int(v) for v in text.split(",")],
                        help="tokens per request, comma-separated; the first gives the headline figures")
    parser.add_argument("--requests", type=int, default=30, help="timed requests per path per round")
    parser.add_argument("--duration", type=float, default=6.0, help="seconds of throughput per path")
    parser.add_argument("--concurrency", default="1,4,16",
                        type=lambda text: [int(v) for v in text.split(",")],
                        help="batch-1 requests in flight for throughput, comma-separated; scaling is "
                             "against the first")
    parser.add_argument("--baseline-src", type=Path, default=None,
                        help="a source tree (its src/ folder) of another version of the glue, served as a "
                             "second model beside this one's for an A/B in the same run")
    parser.add_argument("--instances", type=int, default=2, help="model instances in Triton")
    parser.add_argument("--threads", type=int, default=1, help="ORT intra-op threads per Triton instance")
    parser.add_argument("--queue-delay-us", type=int, default=0,
                        help="dynamic batcher max_queue_delay_microseconds (a single client waits this long "
                             "for company at batch 1)")
    return parser.parse_args()


def measure(args: argparse.Namespace, ports: Ports, seq: int) -> dict[str, Any]:
    """All figures for one sequence length, with the server up."""
    note(f"seq {seq}")
    before = counters(ports)
    # the same ORT settings as one Triton instance, so the difference is Triton + the glue
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    matched = ort.InferenceSession(demo_bytes("demo:llama"), options, providers=["CPUExecutionProvider"])
    models = dict(LOADGEN_MODELS)
    if args.baseline_src is not None:
        models[BEFORE_PATH] = BEFORE
    found, compute = latencies(matched, ports, seq, args.requests, args.rounds, models)
    figures = summarize(found)
    figures.update(summarize_compute(found, compute))
    figures.update(throughputs(matched, ports, args, seq))
    figures["split"] = split(before, counters(ports))
    figures["seq"] = seq
    return figures


def throughputs(session: ort.InferenceSession, ports: Ports, args: argparse.Namespace,
                seq: int) -> dict[str, Any]:
    """Per concurrency, alternated over rounds: Triton + dynamic batching (batch-1 requests from
    `ge-console bench`, the lean client) and the average batch it formed; then direct ORT in-process
    (same threads as one instance, one stream) running that batch size. Scaling is each round's
    throughput over the same round's at the lowest concurrency; the ratio is over direct at that batch."""
    found: dict[int, dict[str, list[float]]] = {c: {"triton": [], "batch": [], "direct": []}
                                                for c in args.concurrency}
    slice_s = args.duration / args.rounds
    for round_index in range(args.rounds):
        for concurrency in args.concurrency:
            rate, batch = loadgen_throughput(ports, seq, slice_s, concurrency)
            found[concurrency]["triton"].append(rate)
            found[concurrency]["batch"].append(batch)
            size = min(8, max(1, round(batch)))
            found[concurrency]["direct"].append(direct_throughput(session, seq, slice_s / 2, size))
        note(f"throughput round {round_index + 1}/{args.rounds}: " + ", ".join(
            f"c{c} {v['triton'][-1]:.0f} inf/s (batch {v['batch'][-1]:.2f}; direct {v['direct'][-1]:.0f})"
            for c, v in found.items()))
    lowest = found[args.concurrency[0]]["triton"]
    figures: dict[str, Any] = {"throughput_rounds": {str(c): v for c, v in found.items()}, "throughput": {}}
    for concurrency, values in found.items():
        figures["throughput"][str(concurrency)] = {
            "triton_inf_s": _spread(values["triton"]), "average_batch": _spread(values["batch"]),
            "direct_inf_s": _spread(values["direct"]),
            "scaling": _spread([t / lo for t, lo in zip(values["triton"], lowest, strict=True)]),
            "over_direct": _spread([t / d for t, d in zip(values["triton"], values["direct"], strict=True)])}
    figures["throughput_client"] = "loadgen_http"
    return figures


def main() -> int:
    """Run everything, print the tables, write the JSON."""
    args = parse_args()
    root = Path(tempfile.mkdtemp(prefix="ge-glue-bench-"))
    baseline = args.baseline_src.resolve() if args.baseline_src is not None else None
    repo, backends = build(root, args.instances, args.threads, args.queue_delay_us, baseline)
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
                    "baseline_src": None if baseline is None else str(baseline),
                    "queue_delay_us": args.queue_delay_us})
    write_result(args.json, figures, onnxruntime=ort.__version__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
