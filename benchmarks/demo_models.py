"""How big and how fast the built-in demo models are: build time, file size, ONNX Runtime latency on this CPU.

    python3 benchmarks/demo_models.py [--repeats 50] [--threads 0]

Prints a markdown table and writes benchmarks/results/demo_models.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

import triton_ge_console.repository.demo_models as demo_models

RESULTS = Path(__file__).resolve().parent / "results"
# (source, batch, sequence length): the shapes the console's demo load uses, and a long prompt.
CASES = (
    ("demo:llama", 1, 16),
    ("demo:llama", 4, 16),
    ("demo:llama", 8, 16),
    ("demo:llama", 1, 128),
    ("demo:bert", 1, 32),
    ("demo:bert", 8, 32),
    ("demo:bert", 16, 128),
)


def build_figures(source: str) -> dict[str, float]:
    """Graph construction + deterministic serialization time, and the file size."""
    builder = demo_models.DEMO_BUILDERS[source.removeprefix(demo_models.DEMO_PREFIX)]
    start = time.perf_counter()
    data = builder().SerializeToString(deterministic=True)
    return {"build_s": time.perf_counter() - start, "size_mb": len(data) / 1e6}


def session(source: str, threads: int) -> tuple[ort.InferenceSession, float]:
    """An ONNX Runtime CPU session and how long creating it took."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    start = time.perf_counter()
    made = ort.InferenceSession(demo_models.demo_bytes(source), options, providers=["CPUExecutionProvider"])
    return made, time.perf_counter() - start


def feeds(source: str, batch: int, seq: int) -> dict[str, np.ndarray]:
    """Random token ids (and a full attention mask for bert)."""
    ids = np.random.default_rng(0).integers(0, 30000, size=(batch, seq), dtype=np.int64)
    return (
        {"input_ids": ids}
        if source == "demo:llama"
        else {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    )


def latency(run: ort.InferenceSession, inputs: dict[str, np.ndarray], repeats: int) -> dict[str, float]:
    """p50/p99/mean latency in ms over repeats runs, after warm-up."""
    for _ in range(3):
        run.run(None, inputs)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run.run(None, inputs)
        times.append((time.perf_counter() - start) * 1000)
    values = np.array(times)
    return {
        "p50_ms": float(np.percentile(values, 50)),
        "p99_ms": float(np.percentile(values, 99)),
        "mean_ms": float(values.mean()),
    }


def measure(repeats: int, threads: int) -> dict[str, Any]:
    """All figures for both demo models."""
    models: dict[str, Any] = {}
    sessions: dict[str, ort.InferenceSession] = {}
    for source in demo_models.demo_names():
        sessions[source], create_s = session(source, threads)
        models[source] = {**build_figures(source), "session_s": create_s}
    cases = []
    for source, batch, seq in CASES:
        figures = latency(sessions[source], feeds(source, batch, seq), repeats)
        cases.append(
            {
                "model": source,
                "batch": batch,
                "seq": seq,
                **figures,
                "inferences_per_s": batch * 1000 / figures["p50_ms"],
            }
        )
    return {
        "machine": {
            "python": platform.python_version(),
            "onnxruntime": ort.__version__,
            "cpus": os.cpu_count(),
            "processor": platform.processor() or platform.machine(),
        },
        "repeats": repeats,
        "intra_op_threads": threads,
        "models": models,
        "cases": cases,
    }


def table(result: dict[str, Any]) -> str:
    """Markdown tables of the figures."""
    lines = ["| model | size MB | build s | session s |", "|---|---:|---:|---:|"]
    for source, m in result["models"].items():
        lines.append(f"| {source} | {m['size_mb']:.1f} | {m['build_s']:.3f} | {m['session_s']:.3f} |")
    lines += [
        "",
        "| model | batch | seq | p50 ms | p99 ms | inf/s at p50 |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for c in result["cases"]:
        lines.append(
            f"| {c['model']} | {c['batch']} | {c['seq']} | {c['p50_ms']:.2f} | {c['p99_ms']:.2f} | "
            f"{c['inferences_per_s']:.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    """Measure, print, save."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--threads", type=int, default=0, help="ONNX Runtime intra-op threads (0: default)")
    parser.add_argument("--json", type=Path, default=RESULTS / "demo_models.json")
    args = parser.parse_args()
    result = measure(args.repeats, args.threads)
    print(table(result))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
