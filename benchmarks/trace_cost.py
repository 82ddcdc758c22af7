"""What each source of the console's p50/p99 costs the server: `console_overhead.py --trace-ab`.

One-model servers side by side, each started as a launched session starts (trace file set, tracing off):
no latency source, `summary_latencies=true`, sampled tracing at the rate the console's poller picks for
the measured load, and two fixed rates (every 10th request, the old npu_ge default; every request, the
cost of one trace). Rounds rotate the order so drift hits every variant alike.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import statistics
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from triton_ge_console.backend_glue.distribution import TritonDistribution
from triton_ge_console.sessions.loadgen.rounds import Spread, round_order
from triton_ge_console.sessions.observe.stats import HttpEndpoint
from triton_ge_console.sessions.observe.trace import enable_tracing
from triton_ge_console.sessions.observe.trace_sampling import Sampling, sampling_for

Measure = Callable[[], tuple[float, float]]
SUMMARIES = "--metrics-config=summary_latencies=true"
VARIANTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("off", ()), ("summaries", (SUMMARIES,)), ("console_rate", ()), ("every_10th", ()), ("every_request", ()))


def trace_args(folder: Path) -> tuple[str, ...]:
    """The flags a launched session gets: a trace file, tracing off until the console turns it on."""
    folder.mkdir(parents=True, exist_ok=True)
    return (f"--trace-config=triton,file={folder / 'trace.json'}", "--trace-config=level=OFF")


def set_tracing(http_url: str, model: str, sampling: Sampling) -> None:
    """Turn TIMESTAMPS tracing on for `model` at `sampling`, as the poller does, but with no count limit
    (the steady state)."""
    endpoint = HttpEndpoint(http_url, timeout=30.0)
    try:
        enable_tracing(endpoint, model, sampling.rate, sampling.log_frequency, count=-1)
    finally:
        endpoint.close()


def traced_requests(folder: Path) -> int:
    """How many requests Triton traced into a folder's trace files (proof the setting took)."""
    ids: set[int] = set()
    for path in folder.glob("trace.json*"):
        with contextlib.suppress(ValueError, OSError):
            ids.update(event["id"] for event in json.loads(path.read_text()) if "model_name" in event)
    return len(ids)


def rotate(rounds: int, measures: dict[str, Measure]) -> tuple[dict[str, list[tuple[float, float]]],
                                                                dict[str, str]]:
    """Every variant once per round, in `round_order`; a variant whose
    server stops answering is reported (with why) and left out of later rounds, not the whole run."""
    names = list(measures)
    found: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    failed: dict[str, str] = {}
    for index in range(rounds):
        for name in round_order(names, index):
            if name in failed:
                continue
            try:
                value = measures[name]()
                if value[0] <= 0:
                    raise RuntimeError("wrk had no request answered")
                found[name].append(value)
            except (subprocess.CalledProcessError, RuntimeError) as exc:
                failed[name] = f"round {index}: {type(exc).__name__}: {exc}"[:300]
    return found, failed


def trace_ab(dist: TritonDistribution, root: Path, args: argparse.Namespace,
             server: Callable[..., Any], measured: Callable[..., Measure], script: Path,
             models: list[str]) -> dict[str, Any]:
    """The comparison: per variant, req/s and server CPU µs per request of every round."""
    with contextlib.ExitStack() as stack:
        servers = {name: stack.enter_context(server(dist, root / "single", root / "backends", models,
                                                    (*trace_args(root / name), *extra)))
                   for name, extra in VARIANTS}
        measures = {name: measured(url, pid, args, script) for name, (url, _, pid) in servers.items()}
        for measure in measures.values():
            measure()  # warm up
        load = statistics.median(measures["off"]()[0] for _ in range(3))
        fixed = {"console_rate": sampling_for(load), "every_10th": Sampling(10, 20, -1),
                 "every_request": Sampling(1, 100, -1)}
        for name, sampling in fixed.items():
            set_tracing(servers[name][0], models[0], sampling)
        found, failed = rotate(args.rounds, measures)
        alive = {name: psutil.pid_exists(pid) for name, (_, _, pid) in servers.items()}
    return {"failed": failed, "server_alive_at_end": alive, "load_rps": load,
            "console_sampling": dataclasses.asdict(fixed["console_rate"]),
            "traced_requests": {name: traced_requests(root / name) for name in fixed},  # all written at stop
            "rounds": args.rounds, "duration_s": args.duration, "connections": args.connections,
            "variants": {name: {"rps": [r for r, _ in values], "cpu_us_per_request": [c for _, c in values]}
                         for name, values in found.items()}}


def rows(result: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The table: per variant, throughput and CPU per request (median, range) and CPU against off."""
    variants = result["variants"]
    base = statistics.median(variants["off"]["cpu_us_per_request"])
    sampling = result["console_sampling"]
    labels = {"off": "no latency source (trace file set, tracing off)",
              "summaries": "summary_latencies=true",
              "console_rate": f"traces at the console's rate (every {sampling['rate']}th at "
                              f"{result['load_rps']:.0f} req/s)",
              "every_10th": "traces, every 10th request", "every_request": "traces, every request"}
    found = []
    for name, label in labels.items():
        cpu, rps = variants[name]["cpu_us_per_request"], variants[name]["rps"]
        if not cpu:
            found.append((label, f"no round: {result['failed'].get(name, '?')}", ""))
            continue
        change = 100 * (statistics.median(cpu) / base - 1)
        failed = f"; server failed at {result['failed'][name]}" if name in result["failed"] else ""
        found.append((f"{label}: server CPU per request; req/s (median, range of {len(cpu)}{failed})",
                      f"{Spread.of(cpu).text('{:.0f}')} us, {change:+.1f} %; {Spread.of(rps).text('{:.0f}')}",
                      "lower"))
    return found
