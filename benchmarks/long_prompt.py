"""A long prompt beside short requests: chunked prefill against one run per prompt, in one server.

    python3 benchmarks/long_prompt.py [--long 6000] [--rounds 3] [--json PATH]

Two generate models over demo:llama_kv in one tritonserver, as the issue reported it (kv_cache_mib 256):
`chunked` (the default step budget, max_num_batched_tokens 256) and `whole` (a budget of 8,192: each
prompt prefilled in one run, as the glue did before). Interleaved in rounds (the machine is shared),
for each model:
    lone:   the long prompt alone, max_tokens 1: its TTFT is its prefill
    beside: the long prompt, and a 3-token request sent 0.3 s later: the short one's TTFT
    memory: the model's stub process over its VmRSS before any long prompt: its peak (VmHWM) during
            `beside`, and its VmRSS 2 s after it ended
The issue's targets: the short TTFT during the chunked prefill <= 1/5 of that prefill and <= 1 s; the
stub grows <= 1 GiB and gives it back; the chunked lone prefill <= 1.2x the whole one. Prints a markdown
table; writes benchmarks/results/long_prompt.json.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from generate_overhead import note, prompt, start
from result_file import arguments, write_result
from triton_ge_console.backend_glue.installer import install_backend_dir
from triton_ge_console.repository.build import build_repository
from triton_ge_console.repository.spec.load import load_spec
from triton_ge_console.sessions.loadgen.generate_client import Generation, GrpcStreamer, StreamResult
from triton_ge_console.sessions.loadgen.pinning import stub_pids
from triton_ge_console.sessions.loadgen.rounds import round_order
from triton_ge_console.sessions.server.shm import remove_shm_regions

MODELS = {"chunked": 256, "whole": 8192}  # model → max_num_batched_tokens
SPEC_ENTRY = """  - name: {name}
    backend: ge
    source: demo:llama_kv
    generate: {{max_tokens: 16, kv_cache_mib: 256, max_num_batched_tokens: {budget}}}
    parameters: {{intra_op_thread_count: "1"}}
"""
MIB = 1024


def build(root: Path) -> tuple[Path, Path]:
    """Both models built from a spec by the real builder, and the backends."""
    entries = "".join(SPEC_ENTRY.format(name=name, budget=budget) for name, budget in MODELS.items())
    (root / "deploy.yaml").write_text("models:\n" + entries)
    repo = root / "repo"
    build_repository(load_spec(root / "deploy.yaml"), repo)
    backends = root / "backends"
    install_backend_dir(backends)
    return repo, backends


def memory_mib(pid: int, field: str) -> float:
    """A /proc/PID/status figure in MiB (VmRSS: now; VmHWM: the peak since it was last reset)."""
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / MIB
    raise RuntimeError(f"no {field} for process {pid}")


def reset_peak(pid: int) -> None:
    """Start VmHWM afresh from VmRSS (clear_refs 5, Linux 4.0 on)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def generate(grpc: str, model: str, generation: Generation) -> StreamResult:
    """One generation read as it arrives, over a channel of its own; an error is the run's failure."""
    streamer = GrpcStreamer(grpc, model)
    try:
        result = streamer.generate(generation)
    finally:
        streamer.close()
    if result.error is not None or result.ttft is None:
        raise RuntimeError(f"{model}: {result.error or 'no token'}")
    return result


def lone(grpc: str, model: str, long: int, seed: int) -> dict[str, float]:
    """The long prompt alone: its prefill (TTFT)."""
    result = generate(grpc, model, Generation(prompt(long, seed), 1))
    return {"prefill_s": result.ttft or 0.0}


def beside(grpc: str, model: str, long: int, seed: int, stub: int, before: float) -> dict[str, float]:
    """The long prompt and a 3-token request 0.3 s later: both TTFTs; the stub's memory (its peak during
    them, what it holds 2 s after) over `before`, its VmRSS before any long prompt."""
    reset_peak(stub)
    found: dict[str, StreamResult] = {}
    thread = threading.Thread(target=lambda: found.update(
        long=generate(grpc, model, Generation(prompt(long, seed), 2))))
    thread.start()
    time.sleep(0.3)  # the gap between the two requests
    short = generate(grpc, model, Generation(prompt(3, seed + 1), 3))
    thread.join()
    peak = memory_mib(stub, "VmHWM")
    time.sleep(2.0)  # what the process gives back once the long prompt has ended
    after = memory_mib(stub, "VmRSS")
    return {"short_ttft_s": short.ttft or 0.0, "long_ttft_s": found["long"].ttft or 0.0,
            "grew_mib": peak - before, "kept_mib": after - before}


def spread(values: list[float]) -> dict[str, float]:
    """Median and range."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarize(rounds: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, dict[str, float]]]:
    """Per model, each figure's median and range over the rounds."""
    return {model: {key: spread([r[model][key] for r in rounds]) for key in rounds[0][model]}
            for model in MODELS}


def print_table(figures: dict[str, Any], long: int) -> None:
    """The figures and the issue's ratios, as markdown."""
    def cell(value: dict[str, float], scale: float = 1.0, digits: int = 2) -> str:
        return (f"{value['median'] * scale:.{digits}f} ({value['min'] * scale:.{digits}f}–"
                f"{value['max'] * scale:.{digits}f})")

    print(f"\n{long}-token prompt, median (range) of {figures['rounds_run']} rounds\n")
    print("| model | lone prefill s | 3-token TTFT beside it, ms | long TTFT beside, s | stub grew MiB | "
          "stub kept MiB after 2 s |")
    print("|---|---|---|---|---|---|")
    for model in MODELS:
        f = figures["models"][model]
        print(f"| {model} | {cell(f['prefill_s'])} | {cell(f['short_ttft_s'], 1000, 0)} | "
              f"{cell(f['long_ttft_s'])} | {cell(f['grew_mib'], digits=0)} | "
              f"{cell(f['kept_mib'], digits=0)} |")
    ratios = figures["ratios"]
    print(f"\nshort TTFT ÷ chunked prefill: {cell(ratios['short_over_prefill'])} (target <= 0.2); "
          f"chunked ÷ whole lone prefill: {cell(ratios['chunked_over_whole'])} (target <= 1.2)")


def main() -> int:
    """Run the rounds, print the table, write the JSON."""
    parser = arguments(__doc__, "long_prompt", rounds=3)
    parser.add_argument("--long", type=int, default=6000)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ge-long-prompt-bench-"))
    repo, backends = build(root)
    note(f"starting tritonserver (logs in {root})")
    process, ports = start(root, repo, backends, models=tuple(MODELS))
    grpc = f"127.0.0.1:{ports.grpc}"
    rounds: list[dict[str, dict[str, float]]] = []
    try:
        stubs = {model: stub_pids(model, process.pid)[0] for model in MODELS}
        for model in MODELS:  # warm-up: not measured
            generate(grpc, model, Generation(prompt(16, 0), 2))
        time.sleep(1.0)  # the stubs' memory settles before it is taken as the base
        base = {model: memory_mib(stubs[model], "VmRSS") for model in MODELS}
        for index in range(args.rounds):
            note(f"round {index + 1} of {args.rounds}")
            found: dict[str, dict[str, float]] = {model: {} for model in MODELS}
            for model, what in round_order([(m, w) for m in MODELS for w in ("lone", "beside")], index):
                seed = 1000 * index + (0 if what == "lone" else 500)
                found[model].update(lone(grpc, model, args.long, seed) if what == "lone"
                                    else beside(grpc, model, args.long, seed, stubs[model], base[model]))
            rounds.append(found)
    finally:
        process.stop()
        remove_shm_regions(root / "server")
    shutil.rmtree(root, ignore_errors=True)
    ratios = {"short_over_prefill": spread([r["chunked"]["short_ttft_s"] / r["chunked"]["prefill_s"]
                                            for r in rounds]),
              "chunked_over_whole": spread([r["chunked"]["prefill_s"] / r["whole"]["prefill_s"]
                                            for r in rounds])}
    figures: dict[str, Any] = {"models": summarize(rounds), "ratios": ratios, "rounds": rounds,
                               "rounds_run": len(rounds), "long": args.long, "budgets": MODELS}
    print_table(figures, args.long)
    write_result(args.json, figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
