"""`ge-console bench --generate --endpoint openai` beside AIPerf, against the same OpenAI endpoint and model.

    python3 benchmarks/aiperf_side_by_side.py [--aiperf /tmp/aiperf-venv/bin/aiperf] [--rounds 3]
                                              [--requests 100] [--prompt 32] [--output 32] [--concurrency 1]
                                              [--server-cpus 0 --client-cpus 1]

AIPerf (PyPI `aiperf`) is heavy; it lives in a venv of its own: `python3 -m venv /tmp/aiperf-venv &&
/tmp/aiperf-venv/bin/pip install aiperf`. One session (`ge-console up`, the demo llama as a generate model
with the demo tokenizer) and one front door (`ge-console openai`) serve both tools; each round runs AIPerf
(`profile --endpoint-type completions --streaming`, synthetic prompts of --prompt tokens counted with the
demo tokenizer, --output tokens asked) and `bench --generate --endpoint openai` (--prompt random token ids,
--output tokens) one after the other in rotating order (ABBA), each in its own process, at --concurrency,
--requests generations after one warm-up. Both count ITL per request as (e2e - TTFT) / (tokens - 1). The
table gives each tool's p50 TTFT and ITL per round and the rounds' median of ge-console ÷ AIPerf; the
target is within 15 %. Beside them, what the server's own histograms saw during each tool's runs and the
CPU each tool spent; --server-cpus / --client-cpus (taskset) keep the tools off the server's CPUs.
Writes benchmarks/results/aiperf_side_by_side.json (each tool's full statistics per round).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from triton_ge_console.sessions.loadgen.rounds import Spread, round_order
from triton_ge_console.sessions.server.paths import STATE_DIR_ENV
from triton_ge_console.sessions.server.process import free_port
from triton_ge_console.sessions.server.registry import Registry

RESULTS = Path(__file__).resolve().parent / "results"
MODEL, SESSION = "llama_text", "aiperf-side"
SPEC = """
models:
  - name: llama_text
    backend: ge
    source: demo:llama_kv
    generate: {max_tokens: 512, max_running: 8, kv_cache_mib: 256, tokenizer: demo:llama_kv}
"""
TOOLS = ("aiperf", "ge-console")
FIGURES = ("ttft_ms", "itl_ms", "e2e_ms")
TARGET = 0.15
# the glue's own histograms: what the server saw, whichever client asked
SERVER_SIDE = {"ttft_ms": "ge_generate_time_to_first_token_seconds",
               "itl_ms": "ge_generate_inter_token_latency_seconds"}


def note(text: str) -> None:
    """Progress on stderr."""
    print(text, file=sys.stderr, flush=True)


def cli(*arguments: str) -> list[str]:
    """A ge-console command line run by this interpreter."""
    return [sys.executable, "-m", "triton_ge_console.cli", *arguments]


def pinned(command: list[str], cpus: str | None) -> list[str]:
    """The command on these CPUs (taskset; its children inherit them), or as it is."""
    return ["taskset", "-c", cpus, *command] if cpus else command


def tokenizer_dir(root: Path, repository: Path) -> Path:
    """The demo tokenizer as transformers loads one from a folder (AIPerf counts tokens with it)."""
    folder = root / "tokenizer"
    folder.mkdir()
    shutil.copy(repository / MODEL / "1" / "tokenizer.json", folder / "tokenizer.json")
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "<unk>", "bos_token": "<s>",
        "eos_token": "</s>"}), encoding="utf-8")
    return folder


def wait_for(url: str, timeout: float = 60.0) -> None:
    """Until the front door lists its models."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def run_aiperf(aiperf: str, url: str, tokenizer: Path, out: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One AIPerf profile; its figures (ms) from profile_export_aiperf.json."""
    command = [aiperf, "profile", "--model", MODEL, "--url", url.removesuffix("/v1"),
               "--endpoint-type", "completions", "--streaming", "--tokenizer", str(tokenizer),
               "--concurrency", str(args.concurrency), "--request-count", str(args.requests),
               "--warmup-request-count", "1", "--prompt-input-tokens-mean", str(args.prompt),
               "--prompt-input-tokens-stddev", "0", "--prompt-output-tokens-mean", str(args.output),
               "--prompt-output-tokens-stddev", "0", "--random-seed", "1", "--output-artifact-dir", str(out),
               "--no-auto-plot", "--ui-type", "none", "--workers-max", "1", "--record-processors", "1"]
    done = subprocess.run(pinned(command, args.client_cpus), capture_output=True, text=True, timeout=900,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"aiperf exited {done.returncode}: {done.stderr[-2000:] or done.stdout[-2000:]}")
    data = json.loads((out / "profile_export_aiperf.json").read_text(encoding="utf-8"))
    names = {"ttft_ms": "time_to_first_token", "itl_ms": "inter_token_latency", "e2e_ms": "request_latency",
             "output_tokens": "output_sequence_length", "input_tokens": "input_sequence_length"}
    return {key: data[name] for key, name in names.items()} | {
        "requests": data["request_count"]["avg"], "requests_per_s": data["request_throughput"]["avg"]}


def run_ours(url: str, env: dict[str, str], args: argparse.Namespace) -> dict[str, Any]:
    """One `bench --generate --endpoint openai`; its row's figures."""
    command = cli("bench", MODEL, "--generate", "--endpoint", "openai", "--url", url,
                  "--concurrency", str(args.concurrency), "--requests", str(args.requests),
                  "--prompt-tokens", str(args.prompt), "--output-tokens", str(args.output), "--quiet",
                  "--json", "-")
    done = subprocess.run(pinned(command, args.client_cpus), capture_output=True, text=True, timeout=900,
                          env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"bench exited {done.returncode}: {done.stderr[-2000:]}")
    (row,) = json.loads(done.stdout)["rows"]
    return {key: row[key] for key in (*FIGURES, "requests", "requests_per_s")} | {
        "input_tokens": row["input_tokens"], "output_tokens": row["output_tokens_each"]}


def server_totals(metrics_url: str) -> dict[str, tuple[float, float]]:
    """(sum, count) of each server-side histogram for the model."""
    with urllib.request.urlopen(metrics_url, timeout=10) as response:
        text = response.read().decode()
    found = {key: [0.0, 0.0] for key in SERVER_SIDE}
    for family in text_string_to_metric_families(text):
        for key, name in SERVER_SIDE.items():
            if family.name != name:
                continue
            for sample in family.samples:
                if sample.labels.get("model") == MODEL and sample.name in (f"{name}_sum", f"{name}_count"):
                    found[key][0 if sample.name.endswith("_sum") else 1] += sample.value
    return {key: (total, count) for key, (total, count) in found.items()}


def measured(run: Any, metrics_url: str) -> dict[str, Any]:
    """A tool's run with what the server saw meanwhile (the glue's mean TTFT and ITL, ms) and the CPU
    seconds the tool's processes spent (this host's 2 cores are shared with the server)."""
    before, cpu_before = server_totals(metrics_url), resource.getrusage(resource.RUSAGE_CHILDREN)
    figures: dict[str, Any] = run()
    after, cpu_after = server_totals(metrics_url), resource.getrusage(resource.RUSAGE_CHILDREN)
    for key in SERVER_SIDE:
        total, count = (a - b for a, b in zip(after[key], before[key], strict=True))
        figures[f"server_{key}_mean"] = total / count * 1000 if count else None
    figures["client_cpu_s"] = (cpu_after.ru_utime + cpu_after.ru_stime) - (cpu_before.ru_utime
                                                                           + cpu_before.ru_stime)
    return figures


def summarize(rounds: list[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Per figure: each tool's p50 over rounds (median, range) and ge-console ÷ AIPerf per round."""
    found: dict[str, Any] = {}
    for figure in FIGURES:
        p50 = {tool: [r[tool][figure]["p50"] for r in rounds] for tool in TOOLS}
        ratios = [ours / theirs for ours, theirs in zip(p50["ge-console"], p50["aiperf"], strict=True)]
        found[figure] = {**{tool: vars(Spread.of(values)) for tool, values in p50.items()},
                         "ratio": vars(Spread.of(ratios)),
                         "within_target": abs(Spread.of(ratios).median - 1) <= TARGET}
    for figure in SERVER_SIDE:
        means = {tool: [r[tool][f"server_{figure}_mean"] for r in rounds] for tool in TOOLS}
        if all(v is not None for values in means.values() for v in values):
            found[f"server_{figure}_mean"] = {tool: vars(Spread.of(v)) for tool, v in means.items()}
    for key in ("client_cpu_s", "requests_per_s"):
        found[key] = {tool: vars(Spread.of([r[tool][key] for r in rounds])) for tool in TOOLS}
    return found


def print_table(summary: dict[str, Any], args: argparse.Namespace) -> None:
    """Markdown: p50 each way (median of rounds, range) and the ratio."""
    pins = (f", server on CPUs {args.server_cpus}, tools on CPUs {args.client_cpus}"
            if args.server_cpus or args.client_cpus else "")
    print(f"\n### {MODEL} through `ge-console openai`: {args.prompt} prompt + {args.output} output tokens, "
          f"concurrency {args.concurrency}, {args.requests} requests a run, {args.rounds} rounds{pins}\n")
    print("| p50 | AIPerf | bench --generate --endpoint openai | ge-console ÷ AIPerf | within 15 % |")
    print("|---|---|---|---|---|")
    for figure, label in (("ttft_ms", "TTFT ms"), ("itl_ms", "ITL ms"), ("e2e_ms", "e2e ms")):
        cells = [Spread(**summary[figure][tool]).text("{:.2f}") for tool in TOOLS]
        ratio = Spread(**summary[figure]["ratio"]).text("{:.2f}")
        within = "yes" if summary[figure]["within_target"] else "no"
        print(f"| {label} | {' | '.join(cells)} | {ratio} | {within} |")
    print("\n| meanwhile, during each tool's runs | AIPerf | bench --generate --endpoint openai |")
    print("|---|---|---|")
    for key, label in (("server_ttft_ms_mean", "the server's own mean TTFT ms (the glue's histogram)"),
                       ("server_itl_ms_mean", "the server's own mean ITL ms"),
                       ("requests_per_s", "requests/s"), ("client_cpu_s", "the tool's CPU s per run")):
        if key in summary:
            print(f"| {label} | {' | '.join(Spread(**summary[key][t]).text('{:.2f}') for t in TOOLS)} |")


def parse_args() -> argparse.Namespace:
    """The options."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--aiperf", default="/tmp/aiperf-venv/bin/aiperf", help="the aiperf executable")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--prompt", type=int, default=32)
    parser.add_argument("--output", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--server-cpus", metavar="CPUS",
                        help="run tritonserver, its stubs and the front door on these CPUs (taskset -c)")
    parser.add_argument("--client-cpus", metavar="CPUS", help="run both tools on these CPUs (taskset -c)")
    parser.add_argument("--json", type=Path, default=RESULTS / "aiperf_side_by_side.json")
    return parser.parse_args()


def main() -> int:
    """Start the session and the front door, run the rounds, print and write the figures."""
    args = parse_args()
    aiperf = shutil.which(args.aiperf) or (args.aiperf if Path(args.aiperf).is_file() else None)
    if aiperf is None:
        note(f"unresolved: no aiperf at {args.aiperf} (python3 -m venv /tmp/aiperf-venv && "
             "/tmp/aiperf-venv/bin/pip install aiperf)")
        return 2
    root = Path(tempfile.mkdtemp(prefix="ge-aiperf-"))
    env = {**os.environ, STATE_DIR_ENV: str(root / "state")}
    (root / "deploy.yaml").write_text(SPEC, encoding="utf-8")
    subprocess.run(pinned(cli("up", str(root / "deploy.yaml"), "--name", SESSION, "--timeout", "240"),
                          args.server_cpus), env=env, check=True, stdout=subprocess.DEVNULL)
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    serve = cli("openai", "--session", SESSION, "--port", str(port))
    door = subprocess.Popen(pinned(serve, args.server_cpus), env=env, stdout=subprocess.DEVNULL,
                            stderr=(root / "door.log").open("w"))
    failed = True
    try:
        wait_for(url)
        tokenizer = tokenizer_dir(root, root / "state" / "runs" / SESSION / "repository")
        metrics_url = Registry(root / "state" / "sessions").load(SESSION).metrics_url
        assert metrics_url is not None, "the session has no metrics"
        rounds = []
        for index in range(args.rounds):
            found: dict[str, dict[str, Any]] = {}
            for tool in round_order(TOOLS, index):
                note(f"round {index + 1} of {args.rounds}: {tool}")
                found[tool] = measured(
                    (lambda i=index: run_aiperf(aiperf, url, tokenizer, root / f"aiperf-{i}", args))
                    if tool == "aiperf" else (lambda: run_ours(url, env, args)), metrics_url)
            rounds.append(found)
        failed = False
    finally:
        door.terminate()
        door.wait(timeout=30)
        subprocess.run(cli("down", SESSION, "--forget"), env=env, check=False, stdout=subprocess.DEVNULL)
        if not failed:
            shutil.rmtree(root, ignore_errors=True)  # kept, with the logs, when the run failed
    summary = summarize(rounds)
    print_table(summary, args)
    version = subprocess.run([aiperf, "--version"], capture_output=True, text=True, check=False).stdout
    version = version.strip()
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"aiperf_version": version, "settings": {
        key: value for key, value in vars(args).items() if key not in ("json", "aiperf")},
        "summary": summary, "rounds": rounds}, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
