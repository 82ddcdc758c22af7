"""What watching a server costs it: the console's poller, and Triton's latency summaries.

1. Poll cost at 100 loaded models: one `Poller.poll()` (health, index, statistics, /metrics over HTTP,
   parse, rates, snapshot) timed end to end, plus its CPU time and the /metrics parse alone.
2. What a poll costs a busy server's throughput is settled by `poll_cost_ab.py` (many paired rounds, the
   poll amplified tenfold); the rounds that were here (8, unpaired, the poller started inside them) could
   not tell 1 % from noise.
3. Throughput with `--metrics-config summary_latencies=true` vs without (Triton issue 8561), two one-model
   servers side by side, alternating rounds.
Throughput on a shared machine is noisy; each round also records the server's CPU per request (Triton and
its Python stubs, user + system), which other processes' load disturbs far less.


Prints a markdown table and writes benchmarks/results/console_overhead.json. wrk comes from Debian
(`apt-get install -y wrk`).

    python3 benchmarks/console_overhead.py [--rounds 8] [--duration 2] [--connections 4]
    python3 benchmarks/console_overhead.py --quick     # only the poll cost (1.), printed, nothing written
    python3 benchmarks/console_overhead.py --trace-ab  # only the latency sources: off vs summaries vs
                                                       # sampled traces (trace_cost.py), written to
                                                       # results/console_overhead_traces.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil

from trace_cost import rows as trace_rows
from trace_cost import trace_ab
from triton_ge_console.backend_glue.distribution import TritonDistribution, find_distribution
from triton_ge_console.backend_glue.installer import install_backend_dir
from triton_ge_console.sessions.loadgen.rounds import Spread, round_order
from triton_ge_console.sessions.observe.metrics import PlainLines, parse_metrics
from triton_ge_console.sessions.observe.poller import UNUSED_METRICS, Poller
from triton_ge_console.sessions.observe.snapshot import Endpoints
from triton_ge_console.sessions.server.process import TritonProcess, pick_ports, server_args

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "console_overhead.json"
TRACE_RESULTS = HERE / "results" / "console_overhead_traces.json"
CORES = os.cpu_count() or 1
MODEL_PY = textwrap.dedent("""
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X")
                                                                .as_numpy() + 1)]) for r in requests]
""")
CONFIG = textwrap.dedent("""
    name: "{name}"
    backend: "python"
    max_batch_size: 8
    input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 4 ] }} ]
    output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ 4 ] }} ]
    instance_group [ {{ kind: KIND_CPU count: 1 }} ]
""")
WRK_SCRIPT = """
wrk.method = "POST"
wrk.body = '{"inputs":[{"name":"X","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]}]}'
wrk.headers["Content-Type"] = "application/json"
"""


def write_repository(root: Path, count: int) -> list[str]:
    """`count` trivial Python-backend models (Y = X + 1)."""
    names = [f"m{i:03d}" for i in range(count)]
    for name in names:
        (root / name / "1").mkdir(parents=True)
        (root / name / "config.pbtxt").write_text(CONFIG.format(name=name))
        (root / name / "1" / "model.py").write_text(MODEL_PY)
    return names


@contextlib.contextmanager
def server(dist: TritonDistribution, repository: Path, backends: Path, models: list[str],
           extra: tuple[str, ...] = ()) -> Iterator[tuple[str, str, int]]:
    """A tritonserver with `models` loaded; yields (http_url, metrics_url, pid); always stopped."""
    ports = pick_ports()
    workdir = Path(tempfile.mkdtemp(prefix="ge-bench-"))
    args = server_args(repository, backends, ports, extra=(*[f"--load-model={m}" for m in models], *extra))
    process = TritonProcess(dist, args, workdir / "server.log", workdir)
    process.start()
    try:
        process.wait_ready(f"http://127.0.0.1:{ports.http}", timeout=600)
        assert process.pid is not None
        yield f"http://127.0.0.1:{ports.http}", f"http://127.0.0.1:{ports.metrics}/metrics", process.pid
    finally:
        process.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def wrk_throughput(url: str, model: str, duration: float, connections: int,
                   script: Path) -> tuple[float, int]:
    """(requests per second, requests) wrk reaches against one model; any non-2xx answer is an error."""
    command = ["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(duration))}s", "-s", str(script),
               f"{url}/v2/models/{model}/infer"]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    if "Non-2xx" in done.stdout:
        raise RuntimeError(f"wrk saw errors: {done.stdout}")
    rate = re.search(r"Requests/sec:\s+([\d.]+)", done.stdout)
    count = re.search(r"(\d+) requests in", done.stdout)
    if rate is None or count is None:
        raise RuntimeError(f"no throughput in wrk output: {done.stdout}")
    return float(rate.group(1)), int(count.group(1))


def measured(url: str, pid: int, args: argparse.Namespace, script: Path) -> Callable[[], tuple[float, float]]:
    """A measurement: (req/s, server CPU microseconds per request, Python stubs included)."""

    def measure() -> tuple[float, float]:
        before = server_cpu_s(pid)
        rps, requests = wrk_throughput(url, "m000", args.duration, args.connections, script)
        return rps, (server_cpu_s(pid) - before) * 1e6 / max(1, requests)

    return measure


def server_cpu_s(pid: int) -> float:
    """CPU seconds tritonserver and its Python backend stubs have used (user + system)."""
    process = psutil.Process(pid)
    total = 0.0
    for member in (process, *process.children(recursive=True)):
        with contextlib.suppress(psutil.Error):
            times = member.cpu_times()
            total += times.user + times.system
    return total


def measure_poll(http_url: str, metrics_url: str, pid: int, polls: int,
                 moved_statistics: bool = True) -> dict[str, Any]:
    """Wall and CPU time of one poll (ours and Triton's), and of parsing /metrics alone."""
    poller = Poller("bench", Endpoints(http_url, None, metrics_url), moved_statistics=moved_statistics)
    walls, cpus = [], []
    try:
        for _ in range(3):
            poller.poll()  # learn model configs, prime rates
        idle_began, idle_cpu = time.perf_counter(), server_cpu_s(pid)
        time.sleep(2.0)  # Triton's own background CPU over a like window, to subtract
        idle_rate = (server_cpu_s(pid) - idle_cpu) / (time.perf_counter() - idle_began)
        began, triton_cpu = time.perf_counter(), server_cpu_s(pid)
        for _ in range(polls):
            wall, cpu = time.perf_counter(), time.process_time()
            snapshot = poller.poll()
            cpus.append((time.process_time() - cpu) * 1000)
            walls.append((time.perf_counter() - wall) * 1000)
        triton_ms = (server_cpu_s(pid) - triton_cpu - idle_rate * (time.perf_counter() - began)) * 1000
        assert snapshot.error is None, snapshot.error
        models = len(snapshot.models)
    finally:
        poller.close()
    text = urllib.request.urlopen(metrics_url, timeout=30).read().decode()
    lines = PlainLines()  # as the poller parses: its skipped families, its memory of the last scrape
    parses = []
    for _ in range(polls):
        began = time.perf_counter()
        parse_metrics(text, UNUSED_METRICS, lines)
        parses.append((time.perf_counter() - began) * 1000)
    return {"models": models, "metrics_lines": text.count("\n"), "poll_ms_p50": statistics.median(walls),
            "poll_ms_p95": sorted(walls)[int(0.95 * (len(walls) - 1))],
            "poll_cpu_ms_p50": statistics.median(cpus), "parse_ms_p50": statistics.median(parses),
            "triton_cpu_ms_per_poll": max(0.0, triton_ms / polls)}


def alternate(rounds: int, measure_a: Callable[[], tuple[float, float]],
              measure_b: Callable[[], tuple[float, float]]
              ) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """Interleaved A/B rounds in `round_order` (ABBA BAAB ...) so drift hits both sides alike."""
    a_values: list[tuple[float, float]] = []
    b_values: list[tuple[float, float]] = []
    for index in range(rounds):
        for values, measure in round_order([(a_values, measure_a), (b_values, measure_b)], index):
            values.append(measure())
    return a_values, b_values


def comparison(name_a: str, a: list[tuple[float, float]], name_b: str, b: list[tuple[float, float]]
               ) -> dict[str, Any]:
    """Throughput and server CPU per request of two alternated variants, and b's cost against a."""
    a_rps, a_cpu = [r for r, _ in a], [c for _, c in a]
    b_rps, b_cpu = [r for r, _ in b], [c for _, c in b]
    return {f"{name_a}_rps": a_rps, f"{name_b}_rps": b_rps, f"{name_a}_cpu_us_per_request": a_cpu,
            f"{name_b}_cpu_us_per_request": b_cpu, "loss_percent": loss(a_rps, b_rps),
            "cpu_per_request_increase_percent": -loss(a_cpu, b_cpu)}


def loss(reference: list[float], other: list[float]) -> float:
    """Median throughput loss of `other` against `reference`, in percent."""
    return 100.0 * (1 - statistics.median(other) / statistics.median(reference))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--duration", type=int, default=2, help="seconds per wrk run")
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--polls", type=int, default=30)
    parser.add_argument("--quick", action="store_true", help="only the poll cost; print it, write nothing")
    parser.add_argument("--statistics-ab", action="store_true",
                        help="only the poll cost at 100 idle models, statistics for every model vs only for "
                             "those whose counters moved, alternating rounds; printed, nothing written")
    parser.add_argument("--trace-ab", action="store_true",
                        help="only the latency sources' cost: no source vs summaries vs sampled traces at "
                             "the console's rate and at fixed rates, rotating rounds (trace_cost.py)")
    args = parser.parse_args()
    if args.quick:
        return quick(args.polls)
    if args.statistics_ab:
        return statistics_ab(args.polls, args.rounds)
    if shutil.which("wrk") is None:
        print("wrk is not installed: apt-get install -y wrk", file=sys.stderr)
        return 1
    if args.trace_ab:
        return trace_only(args)
    dist = find_distribution()
    root = Path(tempfile.mkdtemp(prefix="ge-overhead-"))
    try:
        result = run(dist, root, args)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report(result)
    return 0


def quick(polls: int) -> int:
    """Only the poll cost at 100 models: the table's poll rows, nothing written."""
    dist = find_distribution()
    root = Path(tempfile.mkdtemp(prefix="ge-overhead-"))
    try:
        install_backend_dir(root / "backends", dist)
        names = write_repository(root / "repository", 100)
        with server(dist, root / "repository", root / "backends", names) as (http_url, metrics_url, pid):
            poll = measure_poll(http_url, metrics_url, pid, polls)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print_rows(poll_rows(poll))
    return 0


def statistics_ab(polls: int, rounds: int) -> int:
    """Poll cost at 100 idle models, statistics of every model each poll (A) vs only of the models whose
    counters moved (B), in alternating rounds on one server."""
    dist = find_distribution()
    root = Path(tempfile.mkdtemp(prefix="ge-overhead-stats-"))
    measured: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
    try:
        install_backend_dir(root / "backends", dist)
        names = write_repository(root / "repository", 100)
        with server(dist, root / "repository", root / "backends", names) as (http_url, metrics_url, pid):
            for index in range(rounds):
                for moved in round_order((False, True), index):
                    measured[moved].append(measure_poll(http_url, metrics_url, pid, polls, moved))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("| measure, 100 idle models | every model's statistics | only moved models' | target |\n"
          "|---|---|---|---|")
    for key, label in (("triton_cpu_ms_per_poll", "Triton's CPU per poll"), ("poll_cpu_ms_p50", "poller CPU"),
                       ("poll_ms_p50", "poll wall p50")):
        cells = [Spread.of([m[key] for m in measured[moved]]).text() + ' ms' for moved in (False, True)]
        print(f"| {label} (median, range of {rounds} rounds) | {cells[0]} | {cells[1]} | lower |")
    return 0


def trace_only(args: argparse.Namespace) -> int:
    """Only the latency sources' cost: printed, and written to results/console_overhead_traces.json."""
    dist = find_distribution()
    root = Path(tempfile.mkdtemp(prefix="ge-overhead-traces-"))
    try:
        install_backend_dir(root / "backends", dist)
        one = write_repository(root / "single", 1)
        script = root / "post.lua"
        script.write_text(WRK_SCRIPT)
        traces = trace_ab(dist, root, args, server, measured, script, one)
        result = {"benchmark": "console_overhead (latency sources)", "machine": machine(), "traces": traces}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print_rows(trace_rows(traces))
    TRACE_RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwrote {TRACE_RESULTS}")
    return 0


def machine() -> dict[str, Any]:
    """What the figures were taken on (the load average says how shared it was)."""
    return {"cpu": platform.machine(), "cores": CORES, "load_average_1m": os.getloadavg()[0],
            "python": platform.python_version(), "os": platform.platform()}


def run(dist: TritonDistribution, root: Path, args: argparse.Namespace) -> dict[str, Any]:
    """All three measurements."""
    install_backend_dir(root / "backends", dist)
    names = write_repository(root / "repository", 100)
    script = root / "post.lua"
    script.write_text(WRK_SCRIPT)
    started = time.perf_counter()
    with server(dist, root / "repository", root / "backends", names) as (http_url, metrics_url, pid):
        load_s = time.perf_counter() - started
        progress(f"100 models loaded in {load_s:.0f} s; timing polls")
        poll = measure_poll(http_url, metrics_url, pid, args.polls)
    progress("summaries off vs on")
    one = write_repository(root / "single", 1)
    with server(dist, root / "single", root / "backends", one) as (off_url, _, off_pid), \
            server(dist, root / "single", root / "backends", one,
                   ("--metrics-config=summary_latencies=true",)) as (on_url, _, on_pid):
        measure_off = measured(off_url, off_pid, args, script)
        measure_on = measured(on_url, on_pid, args, script)
        measure_off(), measure_on()  # warm up
        summaries_off, summaries_on = alternate(args.rounds, measure_off, measure_on)
    return {
        "benchmark": "console_overhead",
        "machine": machine(),
        "settings": {"rounds": args.rounds, "duration_s": args.duration, "connections": args.connections,
                     "load_generator": "wrk -t1", "model": "Python backend, FP32[4] + 1, 1 instance"},
        "load_100_models_s": load_s,
        "poll": poll,
        "estimated_poller_loss_percent": estimated_loss(poll),
        "summaries_throughput": comparison("off", summaries_off, "on", summaries_on),
    }


def estimated_loss(poll: dict[str, Any], interval_s: float = 1.0) -> float:
    """Throughput share a CPU-bound server loses to polling on this host: the CPU both sides spend per
    poll over the CPU the host has per interval (the console on the same host, the worst case)."""
    return 100.0 * (poll["poll_cpu_ms_p50"] + poll["triton_cpu_ms_per_poll"]) / (interval_s * 1000 * CORES)


def cpu_line(reference: list[float], other: list[float]) -> str:
    """'x us vs y us (+z %)'."""
    ref, oth = statistics.median(reference), statistics.median(other)
    return f"{oth:.0f} us vs {ref:.0f} us ({100 * (oth / ref - 1):+.1f} %)"


def spread(values: list[float]) -> str:
    """Median with the range of the rounds, so noise is visible next to the figure."""
    return f"{Spread.of(values).text('{:.0f}')} req/s"


def progress(message: str) -> None:
    """A progress line on stderr."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def poll_rows(poll: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The table's rows about one poll (with the loss they imply)."""
    return [
        ("poll + parse + snapshot, 100 models (wall, p50 / p95)",
         f"{poll['poll_ms_p50']:.1f} / {poll['poll_ms_p95']:.1f} ms", "<= 10 ms"),
        ("  of which poller CPU (p50)", f"{poll['poll_cpu_ms_p50']:.1f} ms", ""),
        ("  Triton's CPU per poll, 100 models", f"{poll['triton_cpu_ms_per_poll']:.1f} ms", ""),
        (f"  estimated loss at 1 s, {CORES} cores (poller + Triton CPU per poll / cores)",
         f"{estimated_loss(poll):.2f} %", "<= 1 %"),
        (f"  of which /metrics parse ({poll['metrics_lines']} lines, p50)", f"{poll['parse_ms_p50']:.1f} ms",
         ""),
    ]


def print_rows(rows: list[tuple[str, str, str]]) -> None:
    """A markdown table on stdout."""
    print("| measure | value | target |\n|---|---|---|")
    for row in rows:
        print(f"| {row[0]} | {row[1]} | {row[2]} |")


def report(result: dict[str, Any]) -> None:
    """Markdown table on stdout, JSON in benchmarks/results/."""
    poll, summ = result["poll"], result["summaries_throughput"]
    rows = [
        *poll_rows(poll),
        ("throughput, summaries off (median)", spread(summ["off_rps"]), ""),
        ("throughput, summary_latencies=true (median)", spread(summ["on_rps"]), ""),
        ("  loss with summaries", f"{summ['loss_percent']:+.2f} %", "material if > 1 %"),
        ("  server CPU per request with summaries (median, vs off)",
         cpu_line(summ["off_cpu_us_per_request"], summ["on_cpu_us_per_request"]), "material if > 1 %"),
    ]
    print_rows(rows)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwrote {RESULTS}")


if __name__ == "__main__":
    sys.exit(main())
