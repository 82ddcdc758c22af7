"""Our load generator side by side with wrk (C) against the HTTP endpoint of a trivial model.

Same server, same model, same KServe v2 JSON body, same number of connections, one after the other in
one run. The ratio ours / wrk throughput says whether the Python generator is the bottleneck: near 1.0
means the server is. wrk comes from Debian (`apt-get install -y wrk`); this script installs it when it is
missing and apt-get is usable (pass --no-install to skip wrk instead).

    python3 benchmarks/loadgen_vs_wrk.py [--duration 5] [--concurrency 1,8]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import tritonclient.http as httpclient

from triton_ge_console.backend_glue.distribution import find_distribution
from triton_ge_console.backend_glue.installer import install_backend_dir
from triton_ge_console.sessions.loadgen.run import LoadSpec, run_load_sync
from triton_ge_console.sessions.server.process import TritonProcess, pick_ports, server_args

RESULTS = Path(__file__).resolve().parent / "results"
MODEL = "identity"
JSON_BODY = "http (JSON body)"

MODEL_PY = textwrap.dedent('''
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def execute(self, requests):
            return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", r.inputs()[0].as_numpy())])
                    for r in requests]
''')

CONFIG = textwrap.dedent(f'''
    name: "{MODEL}"
    backend: "python"
    max_batch_size: 0
    input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] }} ]
    output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] }} ]
    instance_group [ {{ count: 1 kind: KIND_CPU }} ]
''')

WRK_SCRIPT = textwrap.dedent('''
    wrk.method = "POST"
    wrk.headers["Content-Type"] = "application/json"
    wrk.body = [==[{body}]==]
''')


def ensure_wrk(install: bool) -> str | None:
    """The wrk binary, installing Debian's package when missing and allowed."""
    found = shutil.which("wrk")
    if found or not install:
        return found
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        print("wrk is missing and apt-get needs root here; install it with: apt-get install -y wrk",
              file=sys.stderr)
        return None
    print("installing wrk: apt-get update && apt-get install -y wrk", file=sys.stderr)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "wrk"]):
        if subprocess.run(command, env=env, capture_output=True, check=False).returncode != 0:
            print(f"{' '.join(command)} failed; skipping wrk", file=sys.stderr)
            return None
    return shutil.which("wrk")


@contextmanager
def trivial_server(workdir: Path) -> Iterator[tuple[str, str]]:
    """A loopback tritonserver serving the identity model; yields its HTTP and gRPC host:port."""
    dist = find_distribution()
    repository = workdir / "models"
    (repository / MODEL / "1").mkdir(parents=True)
    (repository / MODEL / "1" / "model.py").write_text(MODEL_PY)
    (repository / MODEL / "config.pbtxt").write_text(CONFIG)
    backend_dir = workdir / "backends"
    install_backend_dir(backend_dir, dist)
    ports = pick_ports()
    args = server_args(repository, backend_dir, ports, extra=(f"--load-model={MODEL}",))
    process = TritonProcess(dist, args, workdir / "server.log", workdir)
    process.start()
    try:
        process.wait_ready(f"http://127.0.0.1:{ports.http}", timeout=120)
        yield f"127.0.0.1:{ports.http}", f"127.0.0.1:{ports.grpc}"
    finally:
        process.stop()


def json_body() -> str:
    """The KServe v2 JSON infer body both tools send."""
    tensor = httpclient.InferInput("INPUT0", [16], "FP32")
    tensor.set_data_from_numpy(np.linspace(0, 1, 16, dtype=np.float32), binary_data=False)
    output = httpclient.InferRequestedOutput("OUTPUT0", binary_data=False)
    body, json_size = httpclient.InferenceServerClient.generate_request_body([tensor], [output])
    assert json_size is None, "the body must be plain JSON"
    return body if isinstance(body, str) else body.decode()


def run_wrk(wrk: str, hostport: str, connections: int, duration_s: int, workdir: Path) -> dict[str, Any]:
    """One wrk run (one thread, `connections` keep-alive connections); its throughput, latency and CPU."""
    script = workdir / "infer.lua"
    script.write_text(WRK_SCRIPT.format(body=json_body()))
    url = f"http://{hostport}/v2/models/{MODEL}/infer"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([wrk, "-t1", f"-c{connections}", f"-d{duration_s}s", "--latency", "-s", str(script),
                           url], capture_output=True, text=True, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {**parse_wrk(done.stdout), "generator_cpu": cpu / wall}


def parse_wrk(text: str) -> dict[str, Any]:
    """Requests/sec, p50/p99 and non-2xx count from wrk --latency output."""
    rate = re.search(r"Requests/sec:\s+([\d.]+)", text)
    if rate is None:
        raise RuntimeError(f"unexpected wrk output:\n{text}")
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
    return {"throughput_rps": float(rate.group(1)), "p50_ms": _wrk_percentile(text, "50%"),
            "p99_ms": _wrk_percentile(text, "99%"), "errors": int(bad.group(1)) if bad else 0}


def _wrk_percentile(text: str, label: str) -> float | None:
    """One line of wrk's latency distribution, in ms."""
    match = re.search(rf"^\s*{re.escape(label)}\s+([\d.]+)(us|ms|s)\s*$", text, re.MULTILINE)
    if match is None:
        return None
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}[match.group(2)]
    return float(match.group(1)) * scale


def run_ours(hostport: str, protocol: str, connections: int, duration_s: int) -> dict[str, Any]:
    """Our generator at the same concurrency; windows sized so the measured time matches wrk's."""
    window_ms = max(500, duration_s * 1000 // 3)
    spec = LoadSpec(MODEL, hostport, protocol, concurrency=(connections,), window_ms=window_ms,
                    warmup_ms=500, max_windows=3, http_json_body=protocol == "http")
    (row,) = run_load_sync(spec)
    return {"throughput_rps": row.throughput_rps, "p50_ms": row.p50_ms, "p99_ms": row.p99_ms,
            "errors": row.errors, "generator_cpu": row.client_cpu}


def measure(workdir: Path, levels: list[int], duration_s: int, rounds: int, wrk: str | None
            ) -> list[dict[str, Any]]:
    """At each level, `rounds` interleaved runs of ours (HTTP), wrk and ours (gRPC); medians per tool."""
    rows: list[dict[str, Any]] = []
    with trivial_server(workdir) as (hostport, grpc):
        run_ours(hostport, "http", 1, 1)  # load the Python stub's code paths once before measuring
        for level in levels:
            runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
            for _ in range(rounds):
                runs.setdefault(("ge-console bench", JSON_BODY), []).append(
                    run_ours(hostport, "http", level, duration_s))
                if wrk is not None:
                    runs.setdefault(("wrk", JSON_BODY), []).append(
                        run_wrk(wrk, hostport, level, duration_s, workdir))
                runs.setdefault(("ge-console bench", "grpc"), []).append(
                    run_ours(grpc, "grpc", level, duration_s))
            level_rows = {key: {"tool": key[0], "protocol": key[1], "concurrency": level,
                                "rounds": len(samples), **medians(samples)} for key, samples in runs.items()}
            if wrk is not None:
                ours, theirs = level_rows[("ge-console bench", JSON_BODY)], level_rows[("wrk", JSON_BODY)]
                ours["ratio_vs_wrk"] = ours["throughput_rps"] / theirs["throughput_rps"]
            rows += level_rows.values()
    return rows


def medians(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over the rounds (the machine is shared and noisy), plus the raw throughputs."""
    keys = ("throughput_rps", "p50_ms", "p99_ms", "errors", "generator_cpu")
    result: dict[str, Any] = {}
    for key in keys:
        values = [s[key] for s in samples if s[key] is not None]
        result[key] = statistics.median(values) if values else None
    result["throughput_each_round"] = [round(s["throughput_rps"], 1) for s in samples]
    return result


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    return {"cpu": platform.processor() or platform.machine(), "cores": psutil.cpu_count(),
            "python": platform.python_version(), "os": platform.platform(terse=True)}


def main() -> int:
    """Run both tools at each concurrency, print a markdown table, write the JSON record."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=5, help="seconds per measurement (default 5)")
    parser.add_argument("--concurrency", default="1,8", help="connections / requests in flight (default 1,8)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved repetitions per level (default 3)")
    parser.add_argument("--no-install", action="store_true", help="never apt-get install wrk")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    wrk = ensure_wrk(install=not args.no_install)
    with tempfile.TemporaryDirectory(prefix="bench-wrk-") as tmp:
        rows = measure(Path(tmp), levels, args.duration, args.rounds, wrk)
    print_table(rows)
    record = {"benchmark": "loadgen_vs_wrk", "model": f"{MODEL} (Python backend, FP32[16], 1 instance)",
              "duration_s": args.duration, "rounds": args.rounds, "machine": machine(), "wrk": wrk,
              "rows": rows,
              "ratios": {str(r["concurrency"]): r["ratio_vs_wrk"] for r in rows if "ratio_vs_wrk" in r}}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "loadgen_vs_wrk.json").write_text(json.dumps(record, indent=2) + "\n")
    return 0


def print_table(rows: list[dict[str, Any]]) -> None:
    """The results as a markdown table."""
    print("| tool | protocol | concurrency | req/s | p50 ms | p99 ms | generator CPU | ours ÷ wrk |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        ratio = f"{r['ratio_vs_wrk']:.2f}" if "ratio_vs_wrk" in r else ""
        print(f"| {r['tool']} | {r['protocol']} | {r['concurrency']} | {r['throughput_rps']:.0f} | "
              f"{_ms(r['p50_ms'])} | {_ms(r['p99_ms'])} | {_pct(r['generator_cpu'])} | {ratio} |")


def _ms(value: float | None) -> str:
    """A latency cell."""
    return "-" if value is None else f"{value:.2f}"


def _pct(value: float | None) -> str:
    """A CPU cell: share of one core."""
    return "-" if value is None else f"{value:.0%}"


if __name__ == "__main__":
    sys.exit(main())
