"""How long an operator waits: `ge-console --help`, `up` to a ready server, `demo` to a live dashboard.

`ge-console --help` is timed beside `python -c pass` (the interpreter's own start), alternating the two
in rounds; target: at most 0.3 s.

Both are timed through the CLI as an operator runs them, for the demo deployment (examples/seed.yaml:
llama_model and bert_model from the built-in demo models, CPU-emulated), in a private state dir so no
real session is touched. `demo` is run with `--headless` (no terminal needed); until that command exists
its row says so and the rest still runs.

    python3 benchmarks/startup.py [--repeats 3] [--help-rounds 10] [--help-only]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from triton_ge_console.sessions.loadgen.rounds import Spread, round_order
from triton_ge_console.triton_terms import MODEL_READY

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
SPEC = ROOT / "examples" / "seed.yaml"
CLI = [sys.executable, "-m", "triton_ge_console.cli"]
# `demo --headless` prints this once every model is READY and its figures move on the dashboard.
LIVE_LINE = re.compile(r"demo live in ([\d.]+)s")
DEMO_TIMEOUT_S = 300


def ge_console(*args: str, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run one ge-console command and capture its output."""
    return subprocess.run([*CLI, *args], env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)


def time_up(env: dict[str, str], name: str) -> dict[str, Any]:
    """`ge-console up SPEC` until it returns (it waits for READY), then check status and stop it."""
    started = time.perf_counter()
    done = ge_console("up", str(SPEC), "--name", name, env=env)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        return {"ok": False, "error": _last_line(done.stderr or done.stdout)}
    status = ge_console("status", name, "--json", env=env)
    models = json.loads(status.stdout).get("models", []) if status.returncode == 0 else []
    ready = sorted(m["name"] for m in models if m.get("state") == MODEL_READY)
    ge_console("down", name, "--forget", env=env)
    return {"ok": bool(ready), "seconds": elapsed, "ready_models": ready}


def demo_available(env: dict[str, str]) -> str | None:
    """None when `ge-console demo --headless` exists, else why not."""
    done = ge_console("demo", "--help", env=env, timeout=60)
    if done.returncode != 0:
        return "`ge-console demo` is not available in this build yet"
    if "--headless" not in done.stdout:
        return "`ge-console demo` has no --headless mode in this build yet"
    return None


def time_demo(env: dict[str, str]) -> dict[str, Any]:
    """`ge-console demo --headless` from launch to its 'demo live' line (models READY, figures moving)."""
    started = time.perf_counter()
    process = subprocess.Popen([*CLI, "demo", "--headless", str(DEMO_TIMEOUT_S)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    watchdog = threading.Timer(DEMO_TIMEOUT_S + 60, process.kill)
    watchdog.start()
    lines: list[str] = []
    try:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line.rstrip())
            live = LIVE_LINE.search(line)
            if live:
                return {"ok": True, "seconds": time.perf_counter() - started,
                        "reported_s": float(live.group(1))}
        code = process.wait(timeout=30)
        return {"ok": False, "error": f"exit {code}: {_last_line(chr(10).join(lines))}"}
    finally:
        watchdog.cancel()
        _stop(process)


def _stop(process: subprocess.Popen[str]) -> None:
    """Let the demo stop its own server and exit (it does after 'live'); interrupt it if it lingers."""
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGINT)  # as an operator's Ctrl-C
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def stop_leftovers(env: dict[str, str], state_dir: Path) -> None:
    """`ge-console down` every session still registered in our private state dir."""
    for path in sorted((state_dir / "sessions").glob("*.yaml")):
        ge_console("down", path.stem, "--forget", env=env, timeout=60)


def _last_line(text: str) -> str:
    """The last non-empty line of some output."""
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"


def time_help(env: dict[str, str], rounds: int) -> dict[str, Any]:
    """`python -c pass` and `ge-console --help` alternately, each in a fresh process; seconds per run."""
    commands = {"python_pass": [sys.executable, "-c", "pass"], "help": [*CLI, "--help"]}
    runs: dict[str, list[dict[str, Any]]] = {key: [] for key in commands}
    for index in range(rounds):
        for key in round_order(list(commands), index):
            command = commands[key]
            started = time.perf_counter()
            done = subprocess.run(command, env=env, capture_output=True, timeout=60, check=False)
            seconds = time.perf_counter() - started
            run: dict[str, Any] = {"ok": done.returncode == 0, "seconds": seconds}
            if done.returncode != 0:
                run["error"] = _last_line(done.stderr.decode())
            runs[key].append(run)
    return {key: summarize(value) for key, value in runs.items()}


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Median, min and max seconds over the successful runs, with every run kept."""
    seconds = [r["seconds"] for r in runs if r.get("ok")]
    if not seconds:
        return {"median_s": None, "min_s": None, "max_s": None, "runs": runs}
    spread = Spread.of(seconds)
    return {"median_s": spread.median, "min_s": spread.low, "max_s": spread.high, "runs": runs}


def main() -> int:
    """Time `up` and `demo` a few times each; print a markdown table; write results/startup.json."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--help-rounds", type=int, default=10, help="rounds of `python -c pass` / --help")
    parser.add_argument("--help-only", action="store_true", help="time only `ge-console --help`")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        state_dir = Path(tmp)
        env = {**os.environ, "GE_CONSOLE_STATE_DIR": str(state_dir)}
        help_timing = time_help(env, args.help_rounds)
        if args.help_only:
            print_help_table(help_timing)
            return 0 if help_timing["help"]["median_s"] is not None else 1
        try:
            up = summarize([time_up(env, f"startup-{i}") for i in range(args.repeats)])
            why_not = demo_available(env)
            demo = ({"skipped": why_not} if why_not
                    else summarize([time_demo(env) for _ in range(args.repeats)]))
        finally:
            stop_leftovers(env, state_dir)
    record = {"benchmark": "startup", "spec": str(SPEC.relative_to(ROOT)), "repeats": args.repeats,
              "machine": {"cpu": platform.processor() or platform.machine(), "cores": psutil.cpu_count(),
                          "python": platform.python_version()}, "help": help_timing, "up": up, "demo": demo}
    print_help_table(help_timing)
    print()
    print_table(record)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "startup.json").write_text(json.dumps(record, indent=2) + "\n")
    return 0 if up["median_s"] is not None else 1


def print_table(record: dict[str, Any]) -> None:
    """The two timings as a markdown table."""
    print("| step | median s | min s | max s | note |")
    print("|---|---:|---:|---:|---|")
    for label, key in (("`ge-console up` seed.yaml to READY", "up"),
                       ("`ge-console demo --headless` to live dashboard", "demo")):
        figures = record[key]
        if "skipped" in figures:
            print(f"| {label} | - | - | - | skipped: {figures['skipped']} |")
            continue
        failures = [r["error"] for r in figures["runs"] if not r.get("ok")]
        note = f"{len(failures)} failed: {failures[0]}" if failures else f"{len(figures['runs'])} runs"
        cells = [("-" if figures[k] is None else f"{figures[k]:.1f}") for k in ("median_s", "min_s", "max_s")]
        print(f"| {label} | {' | '.join(cells)} | {note} |")


def print_help_table(timing: dict[str, Any]) -> None:
    """`python -c pass` and `ge-console --help` side by side, in seconds."""
    print("| command | median s | min s | max s | runs |")
    print("|---|---:|---:|---:|---:|")
    for label, key in (("`python -c pass`", "python_pass"), ("`ge-console --help`", "help")):
        figures = timing[key]
        cells = [("-" if figures[k] is None else f"{figures[k]:.3f}") for k in ("median_s", "min_s", "max_s")]
        print(f"| {label} | {' | '.join(cells)} | {len(figures['runs'])} |")


if __name__ == "__main__":
    sys.exit(main())
