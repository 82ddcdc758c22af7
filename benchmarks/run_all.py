"""Run every benchmark script there is and assemble the performance record, results/PERFORMANCE.md.

Each script prints a markdown table and writes its JSON under benchmarks/results/; this keeps each
table as results/<name>.table.md and writes results/PERFORMANCE.md (machine, date, every table) for the
docs' figures (docs/benchmarks.md). Benchmarks are slow and the machine's load matters: run them on a quiet
machine, not in CI.

    python3 benchmarks/run_all.py                 # run all, then assemble
    python3 benchmarks/run_all.py --only startup  # run some (the others' saved tables are reused)
    python3 benchmarks/run_all.py --collect-only  # just assemble from the saved tables
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


@dataclass(frozen=True)
class Benchmark:
    """One script and the heading its table goes under."""

    name: str
    title: str
    what: str


BENCHMARKS = (
    Benchmark("triton_cost", "What Triton costs the demo models",
              "direct vs through Triton (bench --vs-direct), gRPC vs HTTP for 16 MB, the glue's own share"),
    Benchmark("glue_cpu", "The glue's own CPU per request",
              "the llama stub's CPU − direct ONNX Runtime's − a no-work stub's, at 1x1, 16x1, 16x8, HTTP"),
    Benchmark("run_in_stub", "The model's run inside a stub vs a plain process",
              "the demo llama's run back to back and after a 1 ms wait, in a Python stub and in-process"),
    Benchmark("glue_overhead", "GE glue overhead",
              "the same model called directly vs through Triton and the `ge` backend"),
    Benchmark("response_path", "Where a served request's CPU goes",
              "CPU per request of tritonserver, the Python stub and the client; glibc allocator setting A/B"),
    Benchmark("console_overhead", "Console overhead",
              "cost of one poll at 100 models; Triton's latency summaries on vs off"),
    Benchmark("poll_cost_ab", "What a poll costs a busy server",
              "throughput with the console's poller on vs off, 40 paired rounds, the poll amplified tenfold"),
    Benchmark("startup", "Start-up", "`ge-console up` to READY and `ge-console demo` to a live dashboard"),
    Benchmark("console_start", "The console's start",
              "importing the console app; a fresh process to the first frame and to the first figures"),
    Benchmark("stub_calls", "What a generate model's per-token calls cost",
              "CPU per Python-backend call (is_cancelled, histogram observe, counter increment, send)"),
    Benchmark("build_scale", "Builds at LLM size",
              "a 3 GiB external-data ONNX: build vs cp -r / cp -al, no-op rebuild, reload --changed, RSS"),
    Benchmark("batch_check_cost", "What the batching check costs build and validate",
              "the demo llama served batched: build and validate with the check vs without, ABBA rounds"),
)


def table_path(name: str) -> Path:
    """Where a benchmark's last table is kept."""
    return RESULTS / f"{name}.table.md"


def run_one(bench: Benchmark, timeout: float) -> str:
    """Run one script; keep and return its markdown table, or a line saying why there is none."""
    script = HERE / f"{bench.name}.py"
    if not script.is_file():
        return f"_not measured: benchmarks/{bench.name}.py does not exist yet_"
    print(f"running {script.name} ...", file=sys.stderr, flush=True)
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, str(script)], cwd=HERE.parent, capture_output=True, text=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return f"_not measured: {script.name} did not finish within {timeout:.0f} s_"
    took = time.monotonic() - started
    print(f"  {script.name}: exit {done.returncode} after {took:.0f} s", file=sys.stderr)
    table = extract_tables(done.stdout)
    if done.returncode != 0 or not table:
        cause = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        last = cause[-1] if cause else "no output"
        return f"_not measured: {script.name} exited {done.returncode}: {last}_"
    RESULTS.mkdir(parents=True, exist_ok=True)
    table_path(bench.name).write_text(table + "\n", encoding="utf-8")
    return table


def extract_tables(output: str) -> str:
    """A script's tables with their headings (as level-4), the caption lines right above them and the
    footnote line right below them (a ratio, say)."""
    lines = [line.strip() for line in output.splitlines()]
    kept: list[str] = []
    for index, line in enumerate(lines):
        following = next((later for later in lines[index + 1:] if later), "")
        before = next((earlier for earlier in reversed(lines[:index]) if earlier), "")
        if line.startswith("|"):
            kept.append(line)
        elif line.startswith("#"):
            kept += ["", "#### " + line.lstrip("#").strip(), ""]
        elif line and (following.startswith("|") or following.startswith("#") or before.startswith("|")):
            kept += ["", line, ""]
        elif kept and kept[-1]:
            kept.append("")
    text = "\n".join(kept)
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    return text.strip()


def saved_table(bench: Benchmark) -> str:
    """The table kept from the last run, or a note that there is none."""
    path = table_path(bench.name)
    if path.is_file():
        return path.read_text(encoding="utf-8").rstrip()
    return f"_not measured yet: run `python3 benchmarks/run_all.py --only {bench.name}`_"


def machine_line() -> str:
    """What the numbers were measured on."""
    cpu = platform.processor() or platform.machine()
    try:
        names = [line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                 if line.startswith("model name")]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    memory_gib = psutil.virtual_memory().total / 2**30
    return (f"{cpu}, {psutil.cpu_count()} cores, {memory_gib:.0f} GiB RAM, no NPU (CPU emulation); "
            f"{platform.system()} {platform.release()}, Python {platform.python_version()}, "
            f"tritonserver from nvidia-pytriton {_version('nvidia-pytriton')}, "
            f"onnxruntime {_version('onnxruntime')}")


def _version(package: str) -> str:
    """An installed package's version, or '?'."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def assemble(tables: dict[str, str], load: str | None) -> str:
    """The performance page's section (docs/benchmarks.md)."""
    today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    busy = f" Other work shared the machine: {load}." if load else ""
    parts = ["## Performance", "",
             f"Measured {today} on {machine_line()}.{busy} Reproduce with `python3 benchmarks/run_all.py` "
             "(each script alone also works; raw figures are in `benchmarks/results/*.json`).", ""]
    for bench in BENCHMARKS:
        parts += [f"### {bench.title}", "", f"`benchmarks/{bench.name}.py`: {bench.what}.", "",
                  tables[bench.name], ""]
    return "\n".join(parts)


def load_note(loads: list[float], cores: int) -> str | None:
    """How busy the machine was during the last run, when it was busier than one core."""
    if not loads or max(loads) <= 1.0:
        return None
    return (f"1-minute load average {min(loads):.1f}-{max(loads):.1f} on {cores} cores during the run, "
            "so treat absolute figures as pessimistic")


def main() -> int:
    """Run the chosen benchmarks, then write results/PERFORMANCE.md from every table there is."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated benchmark names to run (default: all)")
    parser.add_argument("--collect-only", action="store_true", help="run nothing; assemble saved tables")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per script (default 1800)")
    args = parser.parse_args()
    known = {b.name for b in BENCHMARKS}
    chosen = {n for n in args.only.split(",") if n} or known
    unknown = chosen - known
    if unknown:
        print(f"run_all: unknown benchmark {sorted(unknown)[0]!r} (known: {', '.join(sorted(known))})",
              file=sys.stderr)
        return 2
    tables = {}
    loads = [os.getloadavg()[0]]
    for bench in BENCHMARKS:
        run = bench.name in chosen and not args.collect_only
        tables[bench.name] = run_one(bench, args.timeout) if run else saved_table(bench)
        loads.append(os.getloadavg()[0])
    RESULTS.mkdir(parents=True, exist_ok=True)
    record = RESULTS / "run_all.json"
    if args.collect_only and record.is_file():
        loads = json.loads(record.read_text(encoding="utf-8")).get("load_averages", [])
    elif not args.collect_only:
        record.write_text(json.dumps({"ran": sorted(chosen), "load_averages": loads}) + "\n",
                          encoding="utf-8")
    target = RESULTS / "PERFORMANCE.md"
    target.write_text(assemble(tables, load_note(loads, psutil.cpu_count() or 1)), encoding="utf-8")
    print(f"wrote {os.path.relpath(target)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
