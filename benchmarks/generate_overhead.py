"""What streaming tokens through Triton and the `ge` glue's generate model adds over the direct decode loop.

    python3 benchmarks/generate_overhead.py [--prompt 128] [--output 128] [--rounds 5] [--streams 8]
                                            [--compare NAME=SRC ...] [--json PATH]

Side by side in one run, interleaved in rounds (the machine is shared), one stream at a time over gRPC:
the direct decode loop over demo:llama_kv in-process (ONNX Runtime: its prefill, its decode step), the
glue's generate model streaming the same greedy tokens, and a "floor": a no-work decoupled Python model
streaming as many token ids of the same size from a thread, through the same client and protocol (what
Triton's streaming costs with no glue and no model). The issue's targets, per round's medians:
    ITL through Triton − direct decode step − floor interval     (target ≤ 0.1 ms)
    TTFT through Triton − direct prefill − floor first response  (target ≤ 0.5 ms)
with tokens/s through Triton ÷ the direct loop beside them. Then `--streams` concurrent streams of the
generate model: aggregate output tokens/s ÷ one stream's (continuous batching; target ≥ 3×) and every
stream's own ITL p99, beside the floor's own `--streams` ÷ one (the floor sends from 8 threads): what
Triton, the client and this host allow with no model at all; and the CPU each side spent per token (this
process: the client, or the in-process loops; tritonserver; its Python stubs), where a 2-core host's time
goes.

`--compare NAME=SRC` (a checkout's `src`, e.g. `git archive main src | tar -x -C DIR`; repeatable) adds
a server whose glue imports the package from SRC, measured as variant NAME in the same interleaved
rounds: an A/B of a change on a shared machine. Prints markdown tables; writes
benchmarks/results/generate_overhead.json.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import psutil

from result_file import arguments, write_result
from triton_ge_console.backend_glue.distribution import ALLOCATOR_ENV, ALLOCATOR_OPT_OUT, find_distribution
from triton_ge_console.backend_glue.generate_batch import step_feeds
from triton_ge_console.backend_glue.generate_model import step_run
from triton_ge_console.backend_glue.generate_scheduler import GenerateRequest, Limits, Scheduler
from triton_ge_console.backend_glue.installer import install_backend_dir
from triton_ge_console.backend_glue.onnx_executor import OnnxRuntimeExecutor
from triton_ge_console.repository.build import build_repository
from triton_ge_console.repository.demo_decoder import DEMO_LAYOUT
from triton_ge_console.repository.demo_models import demo_bytes
from triton_ge_console.repository.spec.load import load_spec
from triton_ge_console.sessions.loadgen.generate_client import Generation, GrpcStreamer, StreamResult
from triton_ge_console.sessions.loadgen.rounds import Spread, round_order
from triton_ge_console.sessions.observe.health import stub_backends
from triton_ge_console.sessions.server.process import Ports, TritonProcess, pick_ports, server_args
from triton_ge_console.sessions.server.shm import new_shm_prefix, remove_shm_regions, shm_arguments

MODEL, FLOOR = "llama_generate", "floor_stream"
GLUE = "triton_ge"  # the glue of this checkout; --compare adds others
RERUN_MARK = "GE_GENERATE_BENCH_RERUN"  # set in the run as_the_server_runs starts
SCHEDULER = "scheduler"  # this checkout's scheduler and executor in-process: the glue without Triton
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
       { name: "max_tokens" data_type: TYPE_INT64 dims: [1] optional: true }]
output [{ name: "token_id" data_type: TYPE_INT64 dims: [1] }]
"""
# Streams max_tokens token ids as soon as a request arrives, from one of WORKERS threads fed by a queue
# (one stream: a queue wake-up, then its sends; several: their round trips overlap, as the Python backend
# allows): Triton's and the Python backend's cost per streamed response, with no glue and no model.
FLOOR_BACKEND = textwrap.dedent("""\
    import queue
    import threading

    import numpy as np
    import triton_python_backend_utils as pb_utils

    WORKERS = 8


    class TritonPythonModel:
        def initialize(self, args):
            self.jobs = queue.Queue()
            for _ in range(WORKERS):
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


def start(root: Path, repo: Path, backends: Path, src: Path | None = None, name: str = "server",
          models: tuple[str, ...] = (MODEL, FLOOR)) -> tuple[TritonProcess, Ports]:
    """A loopback tritonserver with these models loaded (the generate model and the floor); its glue
    imports the package from `src` if given."""
    ports = pick_ports()
    workdir = root / name
    workdir.mkdir()
    regions = shm_arguments(new_shm_prefix(workdir), stub_backends(backends))  # removed with the run
    args = server_args(repo, backends, ports, extra=(*(f"--load-model={m}" for m in models), *regions))
    process = TritonProcess(find_distribution(), args, root / f"{name}.log", workdir)
    saved = os.environ.get("PYTHONPATH")
    if src is not None:  # the child's environment is copied from ours when it starts
        os.environ["PYTHONPATH"] = str(src.absolute())
    try:
        process.start()
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
    process.wait_ready(f"http://127.0.0.1:{ports.http}", timeout=120)
    return process, ports


def prompt(length: int, seed: int) -> tuple[int, ...]:
    """Seeded prompt ids."""
    return tuple(int(t) for t in np.random.default_rng(seed).integers(0, 32000, length))


@dataclass(frozen=True)
class Local:
    """What runs in this process: ONNX Runtime for the direct loop, the glue's executor for its scheduler."""

    session: ort.InferenceSession
    executor: OnnxRuntimeExecutor


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


def direct_batch(session: ort.InferenceSession, prompts: list[tuple[int, ...]],
                 output: int) -> list[StreamResult]:
    """The direct loop for several prompts of one length at once: each prefilled alone, then one batched
    decode step for all (no padding needed): the model's own ceiling for concurrent streams here."""
    names = [o.name for o in session.get_outputs()]
    results = [StreamResult(sent=time.perf_counter()) for _ in prompts]
    pasts, tokens = [], []
    for ids, result in zip(prompts, results, strict=True):
        outputs = dict(zip(names, session.run(None, step_feeds(DEMO_LAYOUT, list(ids), DEMO_LAYOUT.empty())),
                           strict=True))
        tokens.append(int(np.argmax(outputs["logits"][0, -1])))
        result.tokens.append(tokens[-1])
        result.arrivals.append(time.perf_counter())
        pasts.append([outputs[n] for layer in DEMO_LAYOUT.names() for n in layer[2:]])
    past = [np.concatenate(arrays, axis=0) for arrays in zip(*pasts, strict=True)]
    length, rows = len(prompts[0]), len(prompts)
    while len(results[0].tokens) < output:
        feeds = {"input_ids": np.asarray(tokens, np.int64)[:, None],
                 "position_ids": np.full((rows, 1), length, np.int64),
                 "attention_mask": np.ones((rows, length + 1), np.int64)}
        feeds.update(zip([n for layer in DEMO_LAYOUT.names() for n in layer[:2]], past, strict=True))
        outputs = dict(zip(names, session.run(None, feeds), strict=True))
        tokens = [int(t) for t in np.argmax(outputs["logits"][:, -1], axis=-1)]
        now = time.perf_counter()
        for token, result in zip(tokens, results, strict=True):
            result.tokens.append(token)
            result.arrivals.append(now)
        past = [outputs[n] for layer in DEMO_LAYOUT.names() for n in layer[2:]]
        length += 1
    return results


class _Collected:
    """A scheduler Stream that keeps each token's arrival (the glue's own cost, no Triton)."""

    def __init__(self) -> None:
        self.result = StreamResult(sent=time.perf_counter())

    def send(self, token: int, final: bool) -> bool:
        self.result.tokens.append(token)
        self.result.arrivals.append(time.perf_counter())
        return True

    def fail(self, message: str) -> None:
        raise RuntimeError(message)

    def cancelled(self) -> bool:
        return False

    def close_cancelled(self) -> None:
        """Never cancelled."""


def in_process(executor: OnnxRuntimeExecutor, prompts: list[tuple[int, ...]],
               output: int) -> list[StreamResult]:
    """The glue's scheduler and executor stepped on this thread, its streams lists: the glue without
    Triton (no IPC, no sender or cancel threads)."""
    scheduler = Scheduler(lambda feeds: step_run(executor, feeds)[0], DEMO_LAYOUT,
                          Limits(max_tokens=output, max_running=len(prompts), kv_cache_bytes=512 << 20))
    streams = [_Collected() for _ in prompts]
    for stream, ids in zip(streams, prompts, strict=True):
        scheduler.submit(stream, GenerateRequest(ids, output))
    while scheduler.step():
        pass
    return [stream.result for stream in streams]


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


def one_round(index: int, local: Local, servers: dict[str, Ports], args: argparse.Namespace,
              per_round: int) -> dict[str, dict[str, float]]:
    """Each variant's median TTFT, ITL and tokens/s over `per_round` generations, in this round's order."""
    glues = {name: open_streams(ports, MODEL, 1)[0] for name, ports in servers.items()}
    (floor,) = open_streams(servers[GLUE], FLOOR, 1)
    variants: dict[str, Any] = {"direct": lambda ids: direct_loop(local.session, ids, args.output),
                                SCHEDULER: lambda ids: in_process(local.executor, [ids], args.output)[0],
                                "floor": lambda ids: streamed(floor, ids, args.output)}
    for name, glue in glues.items():
        variants[name] = lambda ids, glue=glue: streamed(glue, ids, args.output)
    found: dict[str, dict[str, float]] = {}
    for name in round_order(list(variants), index):
        results = [variants[name](prompt(args.prompt, 1000 * index + i)) for i in range(per_round)]
        found[name] = {
            "ttft_ms": statistics.median(r.ttft or 0.0 for r in results) * 1000,
            "itl_ms": statistics.median(i for r in results for i in r.itls) * 1000,
            "tokens_per_s": statistics.median(len(r.tokens) / (r.e2e or 1.0) for r in results),
        }
    for streamer in (*glues.values(), floor):
        streamer.close()
    return found


def cpu_seconds(server_pid: int | None) -> dict[str, float]:
    """CPU seconds used so far by this process (the client, or the in-process loops), and by a tritonserver
    and its children (the models' Python stubs)."""
    own = psutil.Process().cpu_times()
    used = {"client": own.user + own.system}
    if server_pid is not None:
        server = psutil.Process(server_pid)
        times = server.cpu_times()
        used["tritonserver"] = times.user + times.system
        stubs = [child.cpu_times() for child in server.children(recursive=True)]
        used["stubs"] = sum(t.user + t.system for t in stubs)
    return used


def concurrent(local: Local, servers: dict[str, Ports], args: argparse.Namespace,
               pids: dict[str, int | None]) -> dict[str, Any]:
    """`--streams` generations at once beside one alone, for each glue, the floor, the direct loop (each
    prompt prefilled alone, then batched decode steps) and the glue's scheduler in-process: aggregate
    tokens/s, each stream's ITL p99, and the CPU each side spent per token (where a 2-core host's time
    goes)."""
    def over_grpc(ports: Ports, model: str) -> Any:
        def run(prompts: list[tuple[int, ...]]) -> list[StreamResult]:
            results: list[StreamResult] = []
            streamers = open_streams(ports, model, len(prompts))
            threads = [threading.Thread(target=lambda s=s, ids=ids: results.append(
                streamed(s, ids, args.output))) for s, ids in zip(streamers, prompts, strict=True)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            for streamer in streamers:
                streamer.close()
            return results
        return run

    targets: dict[str, Any] = {name: over_grpc(ports, MODEL) for name, ports in servers.items()}
    targets["floor"] = over_grpc(servers[GLUE], FLOOR)
    targets["direct"] = lambda prompts: direct_batch(local.session, prompts, args.output)
    targets[SCHEDULER] = lambda prompts: in_process(local.executor, prompts, args.output)
    found: dict[str, dict[str, list[Any]]] = {
        name: {"one_stream_tokens_per_s": [], "streams_tokens_per_s": [], "itl_p99_ms_per_stream": [],
               "one_stream_cpu_ms_per_token": [], "streams_cpu_ms_per_token": []}
        for name in targets}
    server_of = {**{name: pids.get(name) for name in servers}, "floor": pids.get(GLUE)}
    for index in range(args.rounds):
        for name, count in round_order([(n, c) for n in targets for c in (1, args.streams)], index):
            before = cpu_seconds(server_of.get(name))
            results = targets[name]([prompt(args.prompt, 90_000 + i) for i in range(count)])
            after = cpu_seconds(server_of.get(name))
            elapsed = max(r.arrivals[-1] for r in results) - min(r.sent for r in results)
            tokens = sum(len(r.tokens) for r in results)
            rate = tokens / elapsed
            figures = found[name]
            cpu = {side: (after[side] - before[side]) * 1000 / tokens for side in after}
            figures["one_stream_cpu_ms_per_token" if count == 1 else "streams_cpu_ms_per_token"].append(cpu)
            if count == 1:
                figures["one_stream_tokens_per_s"].append(rate)
            else:
                figures["streams_tokens_per_s"].append(rate)
                figures["itl_p99_ms_per_stream"].append(
                    [float(np.percentile(r.itls, 99)) * 1000 for r in results])
    for figures in found.values():
        figures["ratio"] = [m / o for m, o in zip(figures["streams_tokens_per_s"],
                                                  figures["one_stream_tokens_per_s"], strict=True)]
    bound = [1 / (1 / d + 1 / f) / o for d, f, o in zip(found["direct"]["streams_tokens_per_s"],
                                                         found["floor"]["streams_tokens_per_s"],
                                                         found[GLUE]["one_stream_tokens_per_s"], strict=True)]
    return {**found[GLUE], "by_server": found, "bound_ratio": bound}


def spread(values: list[float]) -> dict[str, float]:
    """Median and range."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def cost(values: list[float]) -> dict[str, Any]:
    """An added cost's median and range, and whether every round saw it above zero (else this host's
    noise hides it: unresolved, never a negative overhead)."""
    found: dict[str, Any] = spread(values)
    found["resolved"] = Spread(found["median"], found["min"], found["max"]).resolved
    return found


def summarize(rounds: list[dict[str, dict[str, float]]]) -> dict[str, Any]:
    """Per round the targets' differences, then their medians and ranges (per glue server)."""
    per_variant = {name: {figure: spread([r[name][figure] for r in rounds])
                          for figure in ("ttft_ms", "itl_ms", "tokens_per_s")} for name in rounds[0]}
    figures: dict[str, Any] = {"variants": per_variant}
    for glue in (n for n in rounds[0] if n not in ("direct", "floor", SCHEDULER)):
        itl_added = [r[glue]["itl_ms"] - r["direct"]["itl_ms"] - r["floor"]["itl_ms"] for r in rounds]
        ttft_added = [r[glue]["ttft_ms"] - r["direct"]["ttft_ms"] - r["floor"]["ttft_ms"] for r in rounds]
        ratio = [r[glue]["tokens_per_s"] / r["direct"]["tokens_per_s"] for r in rounds]
        prefix = "" if glue == GLUE else f"{glue}_"
        figures.update({f"{prefix}itl_beyond_direct_and_floor_ms": cost(itl_added),
                        f"{prefix}ttft_beyond_direct_and_floor_ms": cost(ttft_added),
                        f"{prefix}tokens_per_s_ratio": spread(ratio)})
    for figure in ("itl_ms", "ttft_ms"):  # the glue's own cost, no Triton
        figures[f"{SCHEDULER}_{figure}_beyond_direct"] = cost(
            [r[SCHEDULER][figure] - r["direct"][figure] for r in rounds])
    return figures


def _cell(figures: dict[str, float], digits: int = 3) -> str:
    """median (low–high); an added cost (one with "resolved") only when every round saw it above zero."""
    found = Spread(figures["median"], figures["min"], figures["max"])
    return found.cost_text(f"{{:.{digits}f}}") if "resolved" in figures else found.text(f"{{:.{digits}f}}")


def print_tables(figures: dict[str, Any], args: argparse.Namespace) -> None:
    """Markdown tables: medians with the range over rounds."""
    print(f"\n### One stream, {args.prompt} prompt + {args.output} output tokens (median of rounds, range)\n")
    print("| variant | TTFT ms | ITL ms | tokens/s |\n|---|---|---|---|")
    for name, values in figures["variants"].items():
        print(f"| {name} | {_cell(values['ttft_ms'])} | {_cell(values['itl_ms'])} | "
              f"{_cell(values['tokens_per_s'], 0)} |")
    glues = [n for n in figures["variants"] if n not in ("direct", "floor", SCHEDULER)]
    print(f"\n| figure | {' | '.join(glues)} | target |\n|---|{'---|' * len(glues)}---|")
    rows = (("itl_beyond_direct_and_floor_ms", "ITL through Triton − direct step − floor interval (ms)", 3,
             "≤ 0.1"),
            ("ttft_beyond_direct_and_floor_ms", "TTFT through Triton − direct prefill − floor first response "
             "(ms)", 3, "≤ 0.5"),
            ("tokens_per_s_ratio", "tokens/s through Triton ÷ direct loop", 2, "—"))
    for key, label, digits, target in rows:
        cells = [_cell(figures[key if g == GLUE else f"{g}_{key}"], digits) for g in glues]
        print(f"| {label} | {' | '.join(cells)} | {target} |")
    print(f"\n| the glue without Triton ({SCHEDULER} in-process) − direct | ms |\n|---|---|")
    print(f"| ITL | {_cell(figures[f'{SCHEDULER}_itl_ms_beyond_direct'])} |")
    print(f"| TTFT | {_cell(figures[f'{SCHEDULER}_ttft_ms_beyond_direct'])} |")
    servers = figures["concurrent"]["by_server"]
    print(f"\n### {args.streams} concurrent streams vs one\n")
    print(f"| figure | {' | '.join(servers)} | target |\n|---|{'---|' * len(servers)}---|")
    def row(label: str, cell: Any, target: str = "—") -> None:
        print(f"| {label} | {' | '.join(cell(f) for f in servers.values())} | {target} |")
    row("aggregate tokens/s ÷ one stream", lambda f: _cell(spread(f["ratio"]), 2), "≥ 3")
    row("one stream tokens/s", lambda f: _cell(spread(f["one_stream_tokens_per_s"]), 0))
    row(f"{args.streams} streams tokens/s", lambda f: _cell(spread(f["streams_tokens_per_s"]), 0))
    row("worst stream's ITL p99 (ms)",
        lambda f: _cell(spread([max(p99) for p99 in f["itl_p99_ms_per_stream"]]), 2))
    for side in ("client", "tritonserver", "stubs"):
        for key, label in (("one_stream_cpu_ms_per_token", "one stream"),
                           ("streams_cpu_ms_per_token", f"{args.streams} streams")):
            row(f"CPU ms per token, {side if side != 'client' else 'this process'}, {label}",
                lambda f, side=side, key=key: _cell(spread([c[side] for c in f[key]]), 3)
                if all(side in c for c in f[key]) else "—")
    bound = figures["concurrent"]["bound_ratio"]
    print(f"\nThe glue's {args.streams} streams pay the model's batched steps and Triton's streaming on the "
          f"same 2 cores; were both CPU-bound with no overlap, 1 / (1 / direct's + 1 / floor's "
          f"{args.streams}-stream tokens/s) ÷ the glue's one stream, per round: {_cell(spread(bound), 2)}×.")


def compared(options: list[str]) -> list[tuple[str, Path]]:
    """--compare NAME=SRC options as (name, folder)."""
    pairs = []
    for option in options:
        name, _, src = option.partition("=")
        if not name or not src or name in (GLUE, "direct", "floor"):
            raise SystemExit(f"--compare {option!r}: expected NAME=SRC, NAME not {GLUE}, direct or floor")
        pairs.append((name, Path(src)))
    return pairs


def parse_args() -> argparse.Namespace:
    """The options in the docstring."""
    parser = arguments(__doc__, "generate_overhead", rounds=5)
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--output", type=int, default=128)
    parser.add_argument("--per-round", type=int, default=3, help="generations per variant per round")
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--compare", action="append", default=[], metavar="NAME=SRC",
                        help="another glue: a server importing the package from SRC, reported as NAME")
    return parser.parse_args()


def as_the_server_runs() -> int | None:
    """Run again as the server runs, the exit code; None when this is that run. A session of its own: the
    kernel shares CPU between sessions first (autogroup), and the server has one, so under load an
    in-process loop in the caller's busy session would get less than its share. And the allocator
    settings the server gets, so the in-process loops allocate as the glue does (glibc's mmap threshold
    otherwise differs for the prefill's 16 MB of logits)."""
    if os.environ.get(RERUN_MARK):
        return None
    env = {**os.environ, RERUN_MARK: "1"}
    if env.get(ALLOCATOR_OPT_OUT) != "glibc":
        env.update({name: value for name, value in ALLOCATOR_ENV.items() if name not in env})
    rerun = subprocess.run([sys.executable, *sys.argv], env=env, start_new_session=True, check=False)
    return rerun.returncode


def main() -> int:
    """Run everything, print the tables, write the JSON."""
    args = parse_args()
    rerun = as_the_server_runs()
    if rerun is not None:
        return rerun
    root = Path(tempfile.mkdtemp(prefix="ge-generate-bench-"))
    repo, backends = build(root, args.output, args.streams)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    onnx_path = root / "llama_kv.onnx"
    onnx_path.write_bytes(demo_bytes("demo:llama_kv"))
    local = Local(ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"]),
                  OnnxRuntimeExecutor(onnx_path, intra_op_threads=1))
    note(f"starting tritonserver (logs in {root})")
    processes, servers = [], {}
    try:
        for name, src in [(GLUE, None), *compared(args.compare)]:
            process, servers[name] = start(root, repo, backends, src, name)
            processes.append(process)
        for ports in servers.values():
            for streamer in open_streams(ports, MODEL, 1):  # warm-up: not measured
                streamed(streamer, prompt(args.prompt, 0), args.output)
                streamer.close()
        rounds = []
        for index in range(args.rounds):
            note(f"round {index + 1} of {args.rounds}")
            rounds.append(one_round(index, local, servers, args, args.per_round))
        figures = summarize(rounds)
        pids = {name: process.pid for name, process in zip(servers, processes, strict=True)}
        figures["concurrent"] = concurrent(local, servers, args, pids)
    finally:
        for process in processes:
            process.stop()
        for name, _ in [(GLUE, None), *compared(args.compare)]:
            remove_shm_regions(root / name)  # the floor's stubs left theirs behind (seen in /dev/shm)
    shutil.rmtree(root, ignore_errors=True)  # kept, with the servers' logs, when the run failed
    figures.update({"rounds": rounds, "prompt": args.prompt, "output": args.output, "streams": args.streams,
                    "compared": {name: str(src) for name, src in compared(args.compare)}})
    print_tables(figures, args)
    write_result(args.json, figures, onnxruntime=ort.__version__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
