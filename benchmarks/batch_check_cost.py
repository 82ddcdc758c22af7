"""What the batching check (model_files/batch_axis.py) costs build and validate of the demo llama served
with batching, with the check and with it switched off (batch_axis.check_batching answering "fine" at
once), the two alternating in ABBA rounds: `ge-console build` of a one-model spec into a fresh repository
and `ge-console validate` of it, each a fresh process timed whole (as a user runs them); then, in one
fresh process with its imports done before the clock starts, the first build and validate (the demo's
generation and ONNX's first shape inference included) and the median of 10 more. Each figure is taken as
wall time and as CPU time (user + system of the process measured): on a shared host the CPU time is what
the other work disturbs least. The check alone (check_batching on the demo llama in a fresh process, CPU:
the first call, ONNX's operator schemas loaded, and the median of 10 more) is the cost the ratios carry.

    python3 benchmarks/batch_check_cost.py [--rounds 8]

Prints a markdown table and writes benchmarks/results/batch_check_cost.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from triton_ge_console.sessions.loadgen.rounds import Spread, round_order

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
SPEC = """models:
  - name: llama_model
    backend: ge
    source: demo:llama
    max_batch_size: 8
    dynamic_batching: {max_queue_delay_microseconds: 2000}
"""
VARIANTS = ("with", "without")
REPEATS = 10  # warm build + validate runs after the first, in the same process


def _step(variant: str, work: Path) -> dict[str, float]:
    """Build then validate here, the check on or off: the seconds of the first (as `ge-console build` and
    `validate` pay them, the demo generated) and the median of REPEATS more (each build a fresh folder)."""
    from triton_ge_console.model_files import batch_axis
    from triton_ge_console.repository.build import build_repository
    from triton_ge_console.repository.spec.load import load_spec
    from triton_ge_console.repository.validate import validate_path

    if variant == "without":
        batch_axis.check_batching = lambda *_args, **_kw: batch_axis.Batching()  # type: ignore[assignment]
    (work / "deploy.yaml").write_text(SPEC, encoding="utf-8")
    found: dict[str, float] = {}
    for clock, suffix in ((time.perf_counter, "s"), (time.process_time, "cpu_s")):
        runs = []
        for index in range(1 + REPEATS):
            repo = work / f"repo-{suffix}-{index}"
            started = clock()
            build_repository(load_spec(work / "deploy.yaml"), repo)
            built = clock()
            report = validate_path(repo)
            validated = clock()
            assert report.errors == (), [str(p) for p in report.errors]
            runs.append((built - started, validated - built))
        warm = runs[1:]
        if suffix == "s":  # the first build and validate in the process: once, on the wall clock
            found |= {"build_s": runs[0][0], "validate_s": runs[0][1], "total_s": sum(runs[0])}
        found |= {f"warm_build_{suffix}": statistics.median(b for b, _ in warm),
                  f"warm_validate_{suffix}": statistics.median(v for _, v in warm),
                  f"warm_total_{suffix}": statistics.median(b + v for b, v in warm)}
    return found


def _check_alone(onnx_path: Path) -> dict[str, float]:
    """CPU seconds of check_batching on the built demo llama here, read as validate reads it: the first
    call (ONNX's operator schemas loaded) and the median of REPEATS more."""
    import onnx

    from triton_ge_console.model_files import batch_axis

    model = onnx.load(str(onnx_path))
    took = []
    for _ in range(1 + REPEATS):
        started = time.process_time()
        assert batch_axis.check_batching(model, onnx_path, 8) == batch_axis.Batching()
        took.append(time.process_time() - started)
    return {"check_first_cpu_s": took[0], "check_warm_cpu_s": statistics.median(took[1:])}


def _cli(variant: str, *args: str) -> tuple[float, float]:
    """Wall and CPU seconds of `ge-console ARGS` in a fresh process (imports included), the check on or
    off."""
    switch = ("from triton_ge_console.model_files import batch_axis as b; "
              "b.check_batching = lambda *a, **k: b.Batching(); ") if variant == "without" else ""
    code = f"import sys; {switch}from triton_ge_console.cli import main; sys.exit(main(sys.argv[1:]))"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, *args], capture_output=True, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def run_step(variant: str) -> dict[str, float]:
    """One round's figures for a variant: `ge-console build` and `validate` as a user runs them, then
    build and validate in one process (first, and the median of more), each in a fresh folder."""
    with tempfile.TemporaryDirectory(prefix="ge-batch-check-") as folder:
        (Path(folder) / "deploy.yaml").write_text(SPEC, encoding="utf-8")
        build = _cli(variant, "build", f"{folder}/deploy.yaml", "-o", f"{folder}/cli")
        validate = _cli(variant, "validate", f"{folder}/cli")
        cli = {"cli_build_s": build[0], "cli_validate_s": validate[0],
               "cli_build_cpu_s": build[1], "cli_validate_cpu_s": validate[1],
               "cli_total_cpu_s": build[1] + validate[1]}
        done = subprocess.run([sys.executable, __file__, "--step", variant, "--work", folder],
                              capture_output=True, text=True, check=True)
        check = {}
        if variant == "with":
            built = f"{folder}/cli/llama_model/1/model.onnx"
            alone = subprocess.run([sys.executable, __file__, "--check-alone", built], capture_output=True,
                                   text=True, check=True)
            check = json.loads(alone.stdout.splitlines()[-1])
    return {**cli, **json.loads(done.stdout.splitlines()[-1]), **check}


def measure(rounds: int) -> list[dict[str, dict[str, float]]]:
    """Each round: both variants, in round_order (ABBA BAAB ...)."""
    found = []
    for index in range(rounds):
        found.append({variant: run_step(variant) for variant in round_order(VARIANTS, index)})
    return found


def table(found: list[dict[str, dict[str, float]]]) -> str:
    """Median (range) of each figure with and without the check, and their ratio per round."""
    lines = ["| step | with the check, s | without, s | with ÷ without (per round) |", "|---|---|---|---|"]
    more = f"median of {REPEATS} more"
    for key, label in (("cli_build_cpu_s", "`ge-console build` (process CPU)"),
                       ("cli_validate_cpu_s", "`ge-console validate` (process CPU)"),
                       ("cli_total_cpu_s", "`ge-console build` + `validate` (process CPU)"),
                       ("cli_build_s", "`ge-console build` (process wall)"),
                       ("cli_validate_s", "`ge-console validate` (process wall)"),
                       ("build_s", "build, first (wall)"), ("validate_s", "validate, first (wall)"),
                       ("total_s", "build + validate, first (wall)"),
                       ("warm_build_cpu_s", f"build, {more} (CPU)"),
                       ("warm_validate_cpu_s", f"validate, {more} (CPU)"),
                       ("warm_total_cpu_s", f"build + validate, {more} (CPU)"),
                       ("warm_build_s", f"build, {more} (wall)"),
                       ("warm_validate_s", f"validate, {more} (wall)"),
                       ("warm_total_s", f"build + validate, {more} (wall)")):
        with_check = Spread.of(r["with"][key] for r in found)
        without = Spread.of(r["without"][key] for r in found)
        ratio = Spread.of(r["with"][key] / r["without"][key] for r in found)
        lines.append(f"| {label} | {with_check.text('{:.3f}')} | {without.text('{:.3f}')} | "
                     f"{ratio.text('{:.2f}')} |")
    first = Spread.of(r["with"]["check_first_cpu_s"] * 1000 for r in found)
    warm = Spread.of(r["with"]["check_warm_cpu_s"] * 1000 for r in found)
    lines.append(f"\nThe check alone (check_batching on the demo llama, CPU, a fresh process): first call "
                 f"{first.text('{:.1f}')} ms, median of {REPEATS} more {warm.text('{:.1f}')} ms.")
    return "\n".join(lines)


def main() -> int:
    """Run the rounds (or, with --step, one measured step) and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--step", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--check-alone", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.check_alone:
        print(json.dumps(_check_alone(args.check_alone)))
        return 0
    if args.step:
        print(json.dumps(_step(args.step, args.work)))
        return 0
    found = measure(args.rounds)
    text = table(found)
    print(text)
    RESULTS.mkdir(parents=True, exist_ok=True)
    machine = {"cpu": platform.machine(), "cores": os.cpu_count(), "load_average": os.getloadavg(),
               "python": platform.python_version()}
    result: dict[str, Any] = {"machine": machine, "rounds": found, "table": text,
                              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    (RESULTS / "batch_check_cost.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
