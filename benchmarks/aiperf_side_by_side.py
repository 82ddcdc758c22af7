"""`ge-console bench --generate --endpoint openai` beside AIPerf, against the same OpenAI endpoint and model.

    python3 benchmarks/aiperf_side_by_side.py [--aiperf /tmp/aiperf-venv/bin/aiperf] [--rounds 3]
                                              [--requests 100] [--prompt 32] [--output 32] [--concurrency 1]
                                              [--server-cpus 0 --client-cpus 1] [--pace-ms 20]

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

--pace-ms N serves, instead of the demo llama, a paced model: a decoupled Python model (the glue's inputs
and token_id output, the demo tokenizer) that streams one token every N ms and logs, per request, when
execute took it and when it sent each token (the host's monotonic clock). The pace is known and far above
a decode step of the demo llama (~1 ms, where which process the 2 cores run decides the TTFT/ITL split),
and the log gives the server's own p50 TTFT and ITL per run: each tool's p50 minus the server's is what
the front door and that tool added, so the two tools' difference is each tool's own overhead.
Writes benchmarks/results/aiperf_side_by_side.json (each tool's full statistics per round).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from triton_ge_console.repository.demo_tokenizer import demo_tokenizer_json
from triton_ge_console.sessions.loadgen.rounds import Spread, round_order
from triton_ge_console.sessions.server.paths import STATE_DIR_ENV
from triton_ge_console.sessions.server.process import free_port
from triton_ge_console.sessions.server.registry import Registry

RESULTS = Path(__file__).resolve().parent / "results"
LLAMA, PACED, SESSION = "llama_text", "paced_text", "aiperf-side"
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
PACED_CONFIG = """name: "paced_text"
backend: "python"
max_batch_size: 0
model_transaction_policy { decoupled: true }
input [{ name: "input_ids" data_type: TYPE_INT64 dims: [-1] },
       { name: "max_tokens" data_type: TYPE_INT64 dims: [1] optional: true },
       { name: "temperature" data_type: TYPE_FP32 dims: [1] optional: true },
       { name: "top_k" data_type: TYPE_INT64 dims: [1] optional: true },
       { name: "top_p" data_type: TYPE_FP32 dims: [1] optional: true },
       { name: "seed" data_type: TYPE_INT64 dims: [1] optional: true }]
output [{ name: "token_id" data_type: TYPE_INT64 dims: [1] }]
parameters { key: "generate_max_tokens" value: { string_value: "512" } }
parameters { key: "generate_tokenizer" value: { string_value: "tokenizer.json" } }
"""
# Each request on a thread of its own: max_tokens ids of plain demo words (100, 101, ...), one every PACE_S,
# then one log line: the time execute took the request, then each token's send time (time.monotonic).
PACED_MODEL = """import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils

PACE_S, LOG, FIRST_WORD = {pace_s}, {log!r}, 100
lock = threading.Lock()


def stream(sender, count, taken):
    sent = []
    for index in range(count):
        time.sleep(PACE_S)
        token = pb_utils.Tensor("token_id", np.array([FIRST_WORD + index], np.int64))
        sent.append(time.monotonic())
        sender.send(pb_utils.InferenceResponse([token]),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL if index == count - 1 else 0)
    with lock, open(LOG, "a", encoding="utf-8") as log:
        log.write(" ".join(repr(t) for t in (taken, *sent)) + "\\n")


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            taken = time.monotonic()
            asked = pb_utils.get_input_tensor_by_name(request, "max_tokens")
            count = int(asked.as_numpy().reshape(-1)[0]) if asked is not None else 16
            threading.Thread(target=stream, args=(request.get_response_sender(), count, taken),
                             daemon=True).start()
        return None
"""
PATHS = ("path_in_ms_p50", "path_first_out_ms_p50", "path_last_out_ms_p50")
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


def tokenizer_dir(root: Path, model_dir: Path) -> Path:
    """The demo tokenizer as transformers loads one from a folder (AIPerf counts tokens with it)."""
    folder = root / "tokenizer"
    folder.mkdir()
    shutil.copy(model_dir / "1" / "tokenizer.json", folder / "tokenizer.json")
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
    command = [aiperf, "profile", "--model", args.model, "--url", url.removesuffix("/v1"),
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
    timed = []  # each request's (start, TTFT, e2e), wall-clock seconds, from AIPerf's per-request export
    for line in (out / "profile_export.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        metrics = record.get("metrics") or {}
        if "time_to_first_token" in metrics and "request_latency" in metrics:
            timed.append((record["metadata"]["request_start_ns"] / 1e9,
                          _ms(metrics["time_to_first_token"]) / 1000, _ms(metrics["request_latency"]) / 1000))
    names = {"ttft_ms": "time_to_first_token", "itl_ms": "inter_token_latency", "e2e_ms": "request_latency",
             "output_tokens": "output_sequence_length", "input_tokens": "input_sequence_length"}
    return {key: data[name] for key, name in names.items()} | {
        "requests": data["request_count"]["avg"], "requests_per_s": data["request_throughput"]["avg"],
        "timed": timed}


def _ms(metric: dict[str, Any]) -> float:
    """An AIPerf per-request metric in ms."""
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1000.0}[metric.get("unit", "ms")]
    return float(metric["value"]) * scale


def run_ours(url: str, env: dict[str, str], export: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One `bench --generate --endpoint openai`; its row's figures."""
    command = cli("bench", args.model, "--generate", "--endpoint", "openai", "--url", url,
                  "--concurrency", str(args.concurrency), "--requests", str(args.requests),
                  "--prompt-tokens", str(args.prompt), "--output-tokens", str(args.output), "--quiet",
                  "--json", "-", "--export", str(export))
    done = subprocess.run(pinned(command, args.client_cpus), capture_output=True, text=True, timeout=900,
                          env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"bench exited {done.returncode}: {done.stderr[-2000:]}")
    (row,) = json.loads(done.stdout)["rows"]
    lines = [json.loads(line) for line in export.read_text(encoding="utf-8").splitlines()]
    timed = [(line["send_time"], line["ttft_ms"] / 1000, line["e2e_ms"] / 1000) for line in lines
             if line["status"] == "ok"]
    return {key: row[key] for key in (*FIGURES, "requests", "requests_per_s")} | {
        "input_tokens": row["input_tokens"], "output_tokens": row["output_tokens_each"], "timed": timed}


def server_totals(metrics_url: str) -> dict[str, tuple[float, float]]:
    """(sum, count) of each server-side histogram for the demo llama."""
    with urllib.request.urlopen(metrics_url, timeout=10) as response:
        text = response.read().decode()
    found = {key: [0.0, 0.0] for key in SERVER_SIDE}
    for family in text_string_to_metric_families(text):
        for key, name in SERVER_SIDE.items():
            if family.name != name:
                continue
            for sample in family.samples:
                if sample.labels.get("model") == LLAMA and sample.name in (f"{name}_sum", f"{name}_count"):
                    found[key][0 if sample.name.endswith("_sum") else 1] += sample.value
    return {key: (total, count) for key, (total, count) in found.items()}


def paced_lines(log: Path) -> list[list[float]]:
    """The paced model's log: per request, when execute took it, then each token's send time (s)."""
    if not log.exists():
        return []
    return [[float(v) for v in line.split()] for line in log.read_text(encoding="utf-8").splitlines()]


def paced_p50s(requests: list[list[float]]) -> dict[str, float | None]:
    """The server's own p50 TTFT (taken → first send) and ITL ((last - first send) / (tokens - 1)), ms."""
    ttfts = [(sends[0] - taken) * 1000 for taken, *sends in requests if sends]
    itls = [(sends[-1] - sends[0]) / (len(sends) - 1) * 1000 for _, *sends in requests if len(sends) > 1]
    return {"ttft_ms": statistics.median(ttfts) if ttfts else None,
            "itl_ms": statistics.median(itls) if itls else None}


Timed = list[tuple[float, float, float]]  # per request: (send, TTFT, e2e), wall-clock seconds


def path_split(timed: Timed, requests: list[list[float]]) -> dict[str, float | None]:
    """Each client request against the paced model's log line for it (the one taken between the client's
    send and its first token; wall clock turned monotonic here), p50 ms of: `in` (the client's send → the
    model took it: the client's sending, HTTP, the front door, gRPC, Triton), `first_out` (the model sent
    the first token → the client read it) and `last_out` (the same for the last token)."""
    offset = time.time() - time.monotonic()
    split: dict[str, list[float]] = {"in": [], "first_out": [], "last_out": []}
    for start, ttft, e2e in timed:
        sent = start - offset
        line = next((line for line in requests if sent <= line[0] <= sent + ttft and len(line) > 1), None)
        if line is None:
            continue
        split["in"].append((line[0] - sent) * 1000)
        split["first_out"].append((sent + ttft - line[1]) * 1000)
        split["last_out"].append((sent + e2e - line[-1]) * 1000)
    return {f"path_{key}_ms_p50": statistics.median(values) if values else None
            for key, values in split.items()} | {"path_matched": len(split["in"])}


def measured(run: Any, metrics_url: str, log: Path | None) -> dict[str, Any]:
    """A tool's run with what the server saw meanwhile (the glue's mean TTFT and ITL, ms, or the paced
    model's own p50s) and the CPU seconds the tool's processes spent (this host's 2 cores are shared with
    the server)."""
    before, cpu_before = server_totals(metrics_url), resource.getrusage(resource.RUSAGE_CHILDREN)
    logged = len(paced_lines(log)) if log else 0
    figures: dict[str, Any] = run()
    after, cpu_after = server_totals(metrics_url), resource.getrusage(resource.RUSAGE_CHILDREN)
    for key in SERVER_SIDE:
        total, count = (a - b for a, b in zip(after[key], before[key], strict=True))
        figures[f"server_{key}_mean"] = total / count * 1000 if count else None
    timed = figures.pop("timed")
    if log:
        requests = paced_lines(log)[logged:]
        for key, value in paced_p50s(requests).items():
            figures[f"server_{key}_p50"] = value
        figures |= path_split(timed, requests)
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
        own = {tool: [r[tool].get(f"server_{figure}_p50") for r in rounds] for tool in TOOLS}
        if all(v is not None for values in own.values() for v in values):
            found[f"server_{figure}_p50"] = {tool: vars(Spread.of(float(x or 0) for x in v))
                                             for tool, v in own.items()}
            # what the front door and the tool added to the server's own p50, per round
            found[f"added_{figure}"] = {tool: vars(Spread.of(
                r[tool][figure]["p50"] - r[tool][f"server_{figure}_p50"] for r in rounds)) for tool in TOOLS}
    for key in ("client_cpu_s", "requests_per_s", *PATHS):
        if all(r[tool].get(key) is not None for r in rounds for tool in TOOLS):
            found[key] = {tool: vars(Spread.of([r[tool][key] for r in rounds])) for tool in TOOLS}
    return found


def print_table(summary: dict[str, Any], args: argparse.Namespace) -> None:
    """Markdown: p50 each way (median of rounds, range) and the ratio."""
    pins = (f", server on CPUs {args.server_cpus}, tools on CPUs {args.client_cpus}"
            if args.server_cpus or args.client_cpus else "")
    pace = f", one token every {args.pace_ms:g} ms" if args.pace_ms > 0 else ""
    print(f"\n### {args.model}{pace} through `ge-console openai`: {args.prompt} prompt + {args.output} "
          f"output tokens, concurrency {args.concurrency}, {args.requests} requests a run, "
          f"{args.rounds} rounds{pins}\n")
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
                       ("server_ttft_ms_p50", "the paced model's own p50 TTFT ms (its send log)"),
                       ("server_itl_ms_p50", "the paced model's own p50 ITL ms"),
                       ("added_ttft_ms", "p50 TTFT ms the front door and the tool added (tool − model)"),
                       ("added_itl_ms", "p50 ITL ms the front door and the tool added (tool − model)"),
                       ("path_in_ms_p50", "p50 ms from the tool's send to the model taking the request"),
                       ("path_first_out_ms_p50", "p50 ms from the model sending the first token to the tool "
                                                 "reading it"),
                       ("path_last_out_ms_p50", "the same for the last token"),
                       ("requests_per_s", "requests/s"), ("client_cpu_s", "the tool's CPU s per run")):
        if key in summary:
            spreads = [Spread(**summary[key][tool]) for tool in TOOLS]
            cells = [s.cost_text() if key.startswith("added_") else s.text() for s in spreads]
            print(f"| {label} | {' | '.join(cells)} |")


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
    parser.add_argument("--pace-ms", type=float, default=0.0,
                        help="serve a paced model (one token every N ms, its sends logged) instead of the "
                             "demo llama")
    parser.add_argument("--json", type=Path, default=RESULTS / "aiperf_side_by_side.json")
    args = parser.parse_args()
    args.model = PACED if args.pace_ms > 0 else LLAMA
    return args


def write_paced(repository: Path, pace_ms: float, log: Path) -> None:
    """The paced model and the demo tokenizer, in a repository served in place."""
    folder = repository / PACED
    (folder / "1").mkdir(parents=True)
    (folder / "config.pbtxt").write_text(PACED_CONFIG, encoding="utf-8")
    (folder / "1" / "model.py").write_text(PACED_MODEL.format(pace_s=pace_ms / 1000, log=str(log)),
                                           encoding="utf-8")
    (folder / "1" / "tokenizer.json").write_text(demo_tokenizer_json(), encoding="utf-8")


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
    log = root / "paced.log" if args.pace_ms > 0 else None
    if log:
        write_paced(root / "repo", args.pace_ms, log)
        source, model_dir = root / "repo", root / "repo" / PACED
    else:
        (root / "deploy.yaml").write_text(SPEC, encoding="utf-8")
        source, model_dir = root / "deploy.yaml", root / "state" / "runs" / SESSION / "repository" / LLAMA
    subprocess.run(pinned(cli("up", str(source), "--name", SESSION, "--timeout", "240"),
                          args.server_cpus), env=env, check=True, stdout=subprocess.DEVNULL)
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    serve = cli("openai", "--session", SESSION, "--port", str(port))
    door = subprocess.Popen(pinned(serve, args.server_cpus), env=env, stdout=subprocess.DEVNULL,
                            stderr=(root / "door.log").open("w"))
    failed = True
    try:
        wait_for(url)
        tokenizer = tokenizer_dir(root, model_dir)
        metrics_url = Registry(root / "state" / "sessions").load(SESSION).metrics_url
        assert metrics_url is not None, "the session has no metrics"
        rounds = []
        for index in range(args.rounds):
            found: dict[str, dict[str, Any]] = {}
            for tool in round_order(TOOLS, index):
                note(f"round {index + 1} of {args.rounds}: {tool}")
                found[tool] = measured(
                    (lambda i=index: run_aiperf(aiperf, url, tokenizer, root / f"aiperf-{i}", args))
                    if tool == "aiperf"
                    else (lambda i=index: run_ours(url, env, root / f"bench-{i}.jsonl", args)),
                    metrics_url, log)
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
