"""The glue's own CPU per request at its floor, in CPU time (issue 44), with instruction counts beside it.

    python3 benchmarks/glue_cpu.py [--rounds 3] [--requests 200] [--instructions] [--json PATH]

One tritonserver serves the demo llama through the `ge` glue (one instance, one ONNX Runtime thread) and a
no-work Python model answering logits of the same shape (ones, cached). At concurrency 1 over HTTP, at
1x1, 16x1 and 16x8 (tokens x batch), in interleaved rounds (sessions/loadgen/rounds.py's order):

    glue's own CPU per request = the llama stub's CPU − direct ONNX Runtime's CPU per run − the no-work stub's

CPU is what each process's threads ran (/proc/PID/task/*/schedstat, ns); direct is the glue's executor
in-process with the served options (one thread: this one). Beside it, the same against direct with cold
caches (32 MiB walked and 0.5 ms slept before each run, as the stub finds its caches after tritonserver
and the client ran), and the split of the stub's CPU into its main thread (execute) and its other threads
(the glue's metric flusher, whose work for a window's requests is waited for inside the window; the
Python backend's own threads, which the no-work stub has too). And executor.run's own time inside the stub,
as the glue times it (ge_execution_duration_us ÷ ge_executions_total: wall, one thread at concurrency 1),
beside direct's: where the stub's main thread spends what the glue's Python does not. A figure
is a result only when every round saw it above zero, else "unresolved" with the rounds' range: on a
loaded host the noise can exceed what is measured, and the table says so (its noise column: the rounds'
range, and whether it exceeds the figure), with the load average before and after.

Direct runs under the glibc allocator settings the stubs get (the script runs itself again with
distribution.py's ALLOCATOR_ENV): run_in_stub.py saw the 16x8 run cost 0.27-0.48 ms more in a stub than
in a process without them, and no difference with them on both sides.

--instructions: also the instructions per direct run at each size under callgrind (load-independent, but
slow: 20 runs of each size took over 20 minutes on the loaded 2-core host), against which the CPU figures
can be read: the same instructions take
longer in the stub when its caches are cold.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from result_file import arguments, write_result
from triton_cost import EVICT, SHAPES, _ids, served, stub_pid
from triton_ge_console.backend_glue.distribution import ALLOCATOR_ENV, ALLOCATOR_OPT_OUT
from triton_ge_console.backend_glue.flusher import FLUSH_INTERVAL_S
from triton_ge_console.sessions.loadgen.inputs import RequestTensor
from triton_ge_console.sessions.loadgen.rounds import Spread, round_order
from triton_ge_console.sessions.loadgen.transport import open_transport
from triton_ge_console.sessions.loadgen.vs_direct import open_direct

TARGET_MS = 0.2
SERVED = {"ge": "llama_model", "floor": "floor_model"}
PATHS = ("direct", "cold", "ge", "floor")
# the glue hands its figures to Triton from a thread every FLUSH_INTERVAL_S: each window waits one flush
# after its last request (both stubs alike), so the work its requests caused is inside it
SETTLE_S = FLUSH_INTERVAL_S + 0.15


def note(text: str) -> None:
    """Progress on stderr (stdout carries the tables)."""
    print(text, file=sys.stderr, flush=True)


def thread_cpu_ns(pid: int) -> tuple[int, int]:
    """(main thread, every other thread) ns of CPU a process has run (schedstat: exact)."""
    main = rest = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            ran = int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
        if task.name == str(pid):
            main += ran
        else:
            rest += ran
    return main, rest


def run_totals(metrics: str) -> tuple[float, float]:
    """The llama instance's (ge_execution_duration_us, ge_executions_total) from /metrics: the glue's own
    timing of executor.run inside the stub (wall; at concurrency 1 one thread runs it)."""
    with urllib.request.urlopen(metrics, timeout=10) as response:
        text = response.read().decode()
    found = {"ge_execution_duration_us": 0.0, "ge_executions_total": 0.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            # the parser names a counter's sample NAME_total even where Triton's line has no suffix
            name = sample.name if sample.name in found else sample.name.removesuffix("_total")
            if name in found and sample.labels.get("model") == SERVED["ge"]:
                found[name] += sample.value
    return found["ge_execution_duration_us"], found["ge_executions_total"]


def _direct_cpu_ms(executor: Any, ids: np.ndarray, count: int, cold: bool) -> float:
    """CPU ms per run of the glue's executor in this thread; cold: caches evicted before each run."""
    feeds = {"input_ids": ids}
    executor.run(feeds)
    cpu = 0
    for _ in range(count):
        if cold:
            EVICT.sum()
            time.sleep(0.0005)
        started = time.thread_time_ns()
        executor.run(feeds)
        cpu += time.thread_time_ns() - started
    return cpu / 1e6 / count


async def one_round(http: str, metrics: str, repo: Path, server_pid: int, count: int, index: int
                    ) -> dict[str, float]:
    """Per size and path: CPU ms per request (stubs: main thread and other threads; tritonserver)."""
    transport = open_transport("http", http)
    signature = await transport.signature(SERVED["ge"])
    executor = open_direct(repo, SERVED["ge"], dict(signature.config))
    stubs = {kind: stub_pid(server_pid, model) for kind, model in SERVED.items()}
    found: dict[str, float] = {}
    try:
        for seq, batch in SHAPES:
            ids = _ids(batch, seq)
            for path in round_order(PATHS, index):
                key = f"{seq}x{batch}/{path}"
                if path in ("direct", "cold"):
                    found[key] = _direct_cpu_ms(executor, ids, count, cold=path == "cold")
                    continue
                transport.prepare(SERVED[path], (RequestTensor("input_ids", "INT64", ids),), ("logits",))
                for _ in range(3):
                    await transport.infer()
                await asyncio.sleep(SETTLE_S)  # the warm-up's figures flushed before the window opens
                stub, server = thread_cpu_ns(stubs[path]), sum(thread_cpu_ns(server_pid))
                runs = run_totals(metrics)
                for _ in range(count):
                    await transport.infer()
                await asyncio.sleep(SETTLE_S)  # the window's figures flushed inside it
                after = thread_cpu_ns(stubs[path])
                main, rest = after[0] - stub[0], after[1] - stub[1]
                found[key] = (main + rest) / 1e6 / count
                found[f"{key}/main"] = main / 1e6 / count
                found[f"{key}/other"] = rest / 1e6 / count
                found[f"{key}/server"] = (sum(thread_cpu_ns(server_pid)) - server) / 1e6 / count
                if path == "ge":
                    took, executions = (a - b for a, b in zip(run_totals(metrics), runs, strict=True))
                    found[f"{key}/run"] = took / 1e3 / max(executions, 1.0)
    finally:
        executor.close()
        await transport.close()
    return found


def noise_text(spread: Spread) -> str:
    """The rounds' range of a figure, and whether it exceeds the figure itself (then the figure is this
    host's noise, whatever its median says)."""
    width = spread.high - spread.low
    if width == 0:
        return "— (one round: no range to read)"
    said = "exceeds the figure" if width > abs(spread.median) else "within the figure"
    return f"{width:.3f} ({said})"


def verdict(spread: Spread) -> str:
    """The target read against every round: met, not met, or unresolved where the rounds straddle it."""
    if spread.high <= TARGET_MS:
        return f"met (every round ≤ {TARGET_MS} ms)"
    if spread.low > TARGET_MS:
        return f"not met (every round > {TARGET_MS} ms)"
    return f"unresolved (rounds straddle {TARGET_MS} ms)"


# per figure: the round's terms added (+1) or taken away (-1)
DERIVED = {
    "glue_own_cpu_ms": {"ge": 1, "direct": -1, "floor": -1},
    "glue_own_vs_cold_cpu_ms": {"ge": 1, "cold": -1, "floor": -1},
    "glue_main_thread_ms": {"ge/main": 1, "direct": -1, "floor/main": -1},
    "glue_other_threads_ms": {"ge/other": 1, "floor/other": -1},
    # all but the model's run (its time in the stub is wall, at least its CPU: this may read low)
    "glue_besides_the_run_ms": {"ge": 1, "ge/run": -1, "floor": -1},
}
MEASURED = {"direct_cpu_ms": "direct", "direct_cold_cpu_ms": "cold", "ge_stub_cpu_ms": "ge",
            "floor_stub_cpu_ms": "floor", "ge_main_thread_ms": "ge/main", "ge_other_threads_ms": "ge/other",
            "floor_main_thread_ms": "floor/main", "floor_other_threads_ms": "floor/other",
            "ge_server_cpu_ms": "ge/server", "floor_server_cpu_ms": "floor/server",
            "ge_run_in_stub_ms": "ge/run"}


def figures(rounds: list[dict[str, float]]) -> dict[str, dict[str, Any]]:
    """Per size: what was measured and the glue's own CPU and its parts, each a Spread over rounds."""
    out: dict[str, dict[str, Any]] = {}
    for seq, batch in SHAPES:
        size = f"{seq}x{batch}"
        found: dict[str, Any] = {name: Spread.of(r[f"{size}/{key}"] for r in rounds)
                                 for name, key in MEASURED.items()}
        for name, terms in DERIVED.items():
            found[name] = Spread.of(sum(sign * r[f"{size}/{key}"] for key, sign in terms.items())
                                    for r in rounds)
        found["verdict"] = verdict(found["glue_own_cpu_ms"])
        out[size] = found
    return out


def print_tables(found: dict[str, dict[str, Any]], rounds: int, requests: int) -> None:
    """The glue's own CPU per request and where the stub's CPU went, markdown."""
    print(f"\n#### The glue's own CPU per request, ms (median of {rounds} rounds × {requests} requests, "
          f"range; HTTP, concurrency 1; target ≤ {TARGET_MS} ms)\n")
    print("| tokens × batch | ge stub | direct | no-work stub | glue's own (ge − direct − no-work) "
          "| its noise: the rounds' range | target | against direct with cold caches |\n"
          "|---|---:|---:|---:|---:|---|---|---:|")
    for size, f in found.items():
        print(f"| {size.replace('x', ' × ')} | {f['ge_stub_cpu_ms'].text('{:.3f}')} "
              f"| {f['direct_cpu_ms'].text('{:.3f}')} | {f['floor_stub_cpu_ms'].text('{:.3f}')} "
              f"| {f['glue_own_cpu_ms'].cost_text('{:+.3f}', '…')} | {noise_text(f['glue_own_cpu_ms'])} "
              f"| {f['verdict']} "
              f"| {f['glue_own_vs_cold_cpu_ms'].cost_text('{:+.3f}', '…')} |")
    print("\n#### Where it went: the stub's main thread (execute) and its other threads, ms per request\n")
    print("| tokens × batch | ge main − direct − no-work main | ge other threads − no-work other threads "
          "| executor.run in the stub (glue's timing, wall) | direct | direct with cold caches "
          "| ge stub − its run − no-work stub | tritonserver, ge / no-work |\n"
          "|---|---:|---:|---:|---:|---:|---:|---:|")
    for size, f in found.items():
        print(f"| {size.replace('x', ' × ')} | {f['glue_main_thread_ms'].cost_text('{:+.3f}', '…')} "
              f"| {f['glue_other_threads_ms'].cost_text('{:+.3f}', '…')} "
              f"| {f['ge_run_in_stub_ms'].text('{:.3f}')} | {f['direct_cpu_ms'].text('{:.3f}')} "
              f"| {f['direct_cold_cpu_ms'].text('{:.3f}')} "
              f"| {f['glue_besides_the_run_ms'].cost_text('{:+.3f}', '…')} "
              f"| {f['ge_server_cpu_ms'].median:.3f} / {f['floor_server_cpu_ms'].median:.3f} |")


CHILD = """
import os, sys, tempfile
from pathlib import Path
import numpy as np
from prometheus_client.parser import text_string_to_metric_families
from triton_ge_console.backend_glue.onnx_executor import OnnxRuntimeExecutor
from triton_ge_console.repository.demo_models import demo_bytes
folder = Path(tempfile.mkdtemp()); (folder / "m.onnx").write_bytes(demo_bytes("demo:llama"))
executor = OnnxRuntimeExecutor(folder / "m.onnx", 1, 0)
for seq, batch in {shapes}:
    feeds = {{"input_ids": np.ones((batch, seq), np.int64)}}
    executor.run(feeds); executor.run(feeds)
    os.getpgid(0)  # callgrind dumps its counters here (--dump-before=getpgid)
    for _ in range({runs}):
        executor.run(feeds)
    os.getpgid(0)
"""


def instructions(runs: int) -> dict[str, float]:
    """Instructions per direct run at each size, under callgrind: one process, counters dumped around each
    size's runs."""
    out_dir = Path(tempfile.mkdtemp(prefix="ge-glue-cpu-cg-"))
    script = out_dir / "child.py"
    script.write_text(CHILD.format(shapes=[(s, b) for s, b in SHAPES], runs=runs))
    subprocess.run(["valgrind", "--tool=callgrind", "--dump-before=getpgid",
                    f"--callgrind-out-file={out_dir}/cg.out", os.path.realpath(sys.executable), str(script)],
                   check=True, capture_output=True)
    totals = []
    for dump in sorted(out_dir.glob("cg.out.*"), key=lambda p: int(p.name.rsplit(".", 1)[1])):
        found = re.search(r"^(?:summary|totals): (\d+)", dump.read_text(errors="replace"), re.M)
        totals.append(int(found.group(1)) if found else 0)
    # dumps: before size 1's runs, after them, before size 2's, ... (the first holds start-up)
    per_run = {}
    for index, (seq, batch) in enumerate(SHAPES):
        per_run[f"{seq}x{batch}"] = totals[2 * index + 1] / runs
    return per_run


def parse_args() -> argparse.Namespace:
    """Command line."""
    parser = arguments(__doc__, "glue_cpu", rounds=3)
    parser.add_argument("--requests", type=int, default=200,
                        help="requests (direct: runs) per path, size and round")
    parser.add_argument("--instructions", action="store_true",
                        help="also count direct's instructions per run (callgrind)")
    return parser.parse_args()


def served_allocator() -> None:
    """Run again under the glibc allocator settings tritonserver and its stubs get (distribution.py's
    ALLOCATOR_ENV, unless opted out), so direct's runs share them: without, the 16 x 8 run cost 0.27-0.48 ms
    more inside a stub than in this process in every round, and nothing with them (run_in_stub.py)."""
    missing = {name: value for name, value in ALLOCATOR_ENV.items() if name not in os.environ}
    if missing and os.environ.get(ALLOCATOR_OPT_OUT) != "glibc":
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **missing})


def main() -> int:
    """Serve, measure in rounds, print the tables, write the JSON."""
    args = parse_args()
    served_allocator()
    repo, process, ports = served("ge-glue-cpu-")
    load_before = os.getloadavg()
    rounds = []
    try:
        for index in range(args.rounds):
            rounds.append(asyncio.run(one_round(f"127.0.0.1:{ports.http}",
                                                f"http://127.0.0.1:{ports.metrics}/metrics", repo,
                                                process.pid or 0, args.requests, index)))
            note(f"round {index + 1}/{args.rounds}")
    finally:
        process.stop()
    found = figures(rounds)
    allocator = " ".join(f"{name}={os.environ.get(name, '-')}" for name in ALLOCATOR_ENV)
    print(f"\nLoad average {' '.join(f'{v:.2f}' for v in load_before)} before, "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())} after, on {os.cpu_count()} CPUs; direct ran "
          f"with the stubs' allocator settings ({allocator}).")
    print_tables(found, args.rounds, args.requests)
    counted = {}
    if args.instructions:
        note("counting instructions under callgrind (minutes)")
        counted = instructions(20)
        print("\n#### Direct ONNX Runtime per run: instructions (callgrind) and CPU\n")
        print("| tokens × batch | instructions per run | direct CPU ms | ns per instruction, direct "
              "| ns per instruction if the ge stub's main thread ran them |\n|---|---:|---:|---:|---:|")
        for size, count in counted.items():
            f = found[size]
            main_ms = statistics.median(r[f"{size}/ge/main"] for r in rounds)
            print(f"| {size.replace('x', ' × ')} | {count:,.0f} | {f['direct_cpu_ms'].median:.3f} "
                  f"| {f['direct_cpu_ms'].median * 1e6 / count:.3f} | {main_ms * 1e6 / count:.3f} |")
    document = {size: {k: (v.__dict__ if isinstance(v, Spread) else v) for k, v in f.items()}
                for size, f in found.items()}
    for size, f in found.items():
        document[size]["glue_own_cpu_ms"]["resolved"] = f["glue_own_cpu_ms"].resolved
    write_result(args.json, {"sizes": document, "rounds": rounds, "instructions_per_direct_run": counted},
                 load_before)
    note(f"load average {load_before} → {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
