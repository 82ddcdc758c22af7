"""The model's run inside a Python stub vs in a plain process, back to back and after a wait (issue 44).

    python3 benchmarks/run_in_stub.py [--rounds 4] [--runs 200] [--json PATH]

glue_cpu.py finds the demo llama's run costing more CPU inside the glue's stub than direct ONNX Runtime in
a loop. This asks why: the stub process (its interpreter, threads, allocator settings, ORT options), or
when the run comes (after a wait for the next request, while tritonserver and the client ran). One
tritonserver serves a probe Python model that opens the glue's executor for the demo llama as served
(one intra-op thread, spinning off) and, asked, runs it `--runs` times and answers the CPU per run of its
thread; this process runs the same executor the same way. Each at 1x1, 16x1 and 16x8 (tokens x batch):
back to back, after a 1 ms sleep (the thread waits as a stub waits for its next request), and after 1 ms
of a Python busy loop (the thread never leaves the core). Modes and places alternate in rounds.

A stub that cost CPU of its own shows as stub - plain above zero back to back; a run paying for its wait
shows as the gap modes above back to back in both places.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import tritonclient.http as httpclient

from result_file import arguments, write_result
from triton_ge_console.backend_glue.distribution import find_distribution
from triton_ge_console.backend_glue.installer import install_backend_dir
from triton_ge_console.backend_glue.onnx_executor import OnnxRuntimeExecutor
from triton_ge_console.repository.demo_models import demo_bytes
from triton_ge_console.sessions.loadgen.rounds import Spread, round_order
from triton_ge_console.sessions.server.process import TritonProcess, pick_ports, server_args

HERE = Path(__file__).resolve().parent
SHAPES = ((1, 1), (16, 1), (16, 8))  # tokens x batch, as glue_cpu.py
GAPS = {"back to back": 0, "1 ms sleep": 1, "1 ms busy": 2}
GAP_S = 0.001
PLACES = ("stub", "plain")
CONFIG = """name: "probe"
backend: "probe"
max_batch_size: 0
instance_group [{ count: 1 kind: KIND_CPU }]
input [{ name: "spec" data_type: TYPE_INT64 dims: [4] }]
output [{ name: "cpu_ms" data_type: TYPE_FP64 dims: [1] },
        { name: "threads" data_type: TYPE_INT64 dims: [1] }]
"""
# the probe: this file's loop inside a stub (its PYTHONPATH applied as the glue's model.py does)
PROBE = '''
import os, sys
sys.path[1:1] = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in sys.path]
sys.path.insert(0, HERE)
import numpy as np
import triton_python_backend_utils as pb_utils
from run_in_stub import open_executor, loop


class TritonPythonModel:
    def initialize(self, args):
        self.executor = open_executor()

    def execute(self, requests):
        responses = []
        for request in requests:
            spec = pb_utils.get_input_tensor_by_name(request, "spec").as_numpy()
            seq, batch, runs, gap = (int(v) for v in spec)
            cpu_ms = loop(self.executor, seq, batch, runs, gap)
            threads = len(os.listdir(f"/proc/{os.getpid()}/task"))
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("cpu_ms", np.array([cpu_ms])),
                                                         pb_utils.Tensor("threads", np.array([threads]))]))
        return responses
'''


def open_executor() -> OnnxRuntimeExecutor:
    """The glue's executor for the demo llama, as glue_cpu.py serves it (one thread, spinning off)."""
    folder = Path(tempfile.mkdtemp(prefix="ge-run-in-stub-model-"))
    (folder / "model.onnx").write_bytes(demo_bytes("demo:llama"))
    return OnnxRuntimeExecutor(folder / "model.onnx", 1, 0)


def _busy(seconds: float) -> None:
    """Hold the core without sleeping."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def loop(executor: OnnxRuntimeExecutor, seq: int, batch: int, runs: int, gap: int) -> float:
    """CPU ms per run of this thread, each run after `gap` (GAPS)."""
    feeds = {"input_ids": np.ones((batch, seq), np.int64)}
    executor.run(feeds)
    executor.run(feeds)
    cpu = 0
    for _ in range(runs):
        if gap == 1:
            time.sleep(GAP_S)
        elif gap == 2:
            _busy(GAP_S)
        started = time.thread_time_ns()
        executor.run(feeds)
        cpu += time.thread_time_ns() - started
    return cpu / 1e6 / runs


def build(root: Path) -> tuple[Path, Path]:
    """The probe's repository and a backend directory holding it (and the Python backend)."""
    repo, backends = root / "repo", root / "backends"
    (repo / "probe" / "1").mkdir(parents=True)
    (repo / "probe" / "config.pbtxt").write_text(CONFIG)
    install_backend_dir(backends)
    (backends / "probe").mkdir()
    (backends / "probe" / "model.py").write_text(PROBE.replace("HERE", repr(str(HERE))))
    return repo, backends


def in_stub(url: str, seq: int, batch: int, runs: int, gap: int) -> tuple[float, int]:
    """(CPU ms per run, the stub's thread count) from the probe."""
    with httpclient.InferenceServerClient(url, network_timeout=600) as client:
        spec = httpclient.InferInput("spec", [4], "INT64")
        spec.set_data_from_numpy(np.array([seq, batch, runs, gap], np.int64))
        result = client.infer("probe", [spec])
        return float(result.as_numpy("cpu_ms")[0]), int(result.as_numpy("threads")[0])


def measure(url: str, executor: OnnxRuntimeExecutor, rounds: int, runs: int
            ) -> tuple[list[dict[str, float]], int]:
    """Per round, CPU ms per run for every size, gap and place (interleaved); the stub's thread count."""
    found: list[dict[str, float]] = []
    threads = 0
    for index in range(rounds):
        one: dict[str, float] = {}
        for seq, batch in SHAPES:
            for gap_name in round_order(list(GAPS), index):
                for place in round_order(PLACES, index):
                    key = f"{seq}x{batch}/{gap_name}/{place}"
                    if place == "stub":
                        one[key], threads = in_stub(url, seq, batch, runs, GAPS[gap_name])
                    else:
                        one[key] = loop(executor, seq, batch, runs, GAPS[gap_name])
        found.append(one)
        print(f"round {index + 1}/{rounds}", file=sys.stderr, flush=True)
    return found, threads


def _row(found: list[dict[str, float]], size: str, gap_name: str) -> dict[str, Any]:
    """One size and gap: print its row, return its figures."""
    def of(place: str, gap: str = gap_name) -> list[float]:
        return [r[f"{size}/{gap}/{place}"] for r in found]

    stub, plain = Spread.of(of("stub")), Spread.of(of("plain"))
    excess = Spread.of(s - p for s, p in zip(of("stub"), of("plain"), strict=True))
    waits = {place: Spread.of(g - b for g, b in zip(of(place), of(place, "back to back"), strict=True))
             for place in PLACES}
    row = [stub.text("{:.3f}"), plain.text("{:.3f}"), excess.text("{:+.3f}", "…")]
    row += ["—" if gap_name == "back to back" else waits[p].text("{:+.3f}", "…") for p in PLACES]
    print(f"| {size.replace('x', ' × ')} | {gap_name} | " + " | ".join(row) + " |")
    return {"stub": stub.__dict__, "plain": plain.__dict__, "stub_minus_plain": excess.__dict__,
            "minus_back_to_back": {p: waits[p].__dict__ for p in PLACES}}


def print_table(found: list[dict[str, float]], rounds: int, runs: int, threads: int) -> dict[str, Any]:
    """Markdown: each mode's CPU per run in the stub and in this process, and the stub's excess."""
    print(f"\n#### The demo llama's run, CPU ms per run (median of {rounds} rounds × {runs} runs, range)\n")
    print("| tokens × batch | between runs | in a stub | in a plain process | stub − plain | "
          "− back to back, stub | − back to back, plain |\n|---|---|---:|---:|---:|---:|---:|")
    out: dict[str, Any] = {}
    for seq, batch in SHAPES:
        for gap_name in GAPS:
            out[f"{seq}x{batch}/{gap_name}"] = _row(found, f"{seq}x{batch}", gap_name)
    print(f"\nThe probe's stub ran {threads} threads (ONNX Runtime with one intra-op thread starts no pool "
          "thread: nothing of its own spins between runs).")
    return out


def main() -> int:
    """Serve the probe, measure in rounds, print the table, write the JSON."""
    parser = arguments(__doc__, "run_in_stub", rounds=4)
    parser.add_argument("--runs", type=int, default=200, help="runs per size, gap, place and round")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ge-run-in-stub-"))
    repo, backends = build(root)
    ports = pick_ports()
    args_ = server_args(repo, backends, ports, extra=("--load-model=probe",))
    process = TritonProcess(find_distribution(), args_, root / "server.log", root)
    process.start()
    load_before = os.getloadavg()
    try:
        process.wait_ready(f"http://127.0.0.1:{ports.http}", timeout=180)
        found, threads = measure(f"127.0.0.1:{ports.http}", open_executor(), args.rounds, args.runs)
    finally:
        process.stop()
    table = print_table(found, args.rounds, args.runs, threads)
    write_result(args.json, {"figures": table, "rounds": found, "stub_threads": threads}, load_before)
    print(f"load average {load_before} → {os.getloadavg()}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
