"""Builds at LLM size: an external-data ONNX of --gib GiB built into a repository, side by side with cp.

Makes once (cached outside the repository, under the user's cache dir) an ONNX whose weights are
--gib GiB in one external-data file, then, in one run, each step in its own fresh process (so its peak
RSS is its own): `cp -r` of the model's folder (then its fsync, as the builder flushes what it writes)
beside a cold `build --copy`; `cp -al` beside a cold linked `build`; a no-op rebuild and `reload --changed`'s
look at the repository beside a plain os.stat walk of the same files; a config-only edit rebuilt
(copied and linked repositories). "cold" means an empty digest cache; the weights are still not read,
their identity (device, inode, size, mtime_ns) standing for their content (digest_cache.file_digest).

    python3 benchmarks/build_scale.py [--gib 3] [--tensor-mib 256] [--json out.json]

Prints a markdown table and writes benchmarks/results/build_scale.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import platformdirs
from onnx import TensorProto, helper

from triton_ge_console.sessions.loadgen.rounds import round_order

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
WIDTH = 1024  # FP32 columns per weight row
BLOCK = 64 << 20  # random bytes written repeatedly into the data file (not sparse, not all zero)
SPEC = "models:\n  - name: big\n    backend: ge\n    source: {source}\n    max_batch_size: 0\n{extra}"
EDIT = '    parameters: {intra_op_thread_count: "2"}\n'


def model_dir(gib: float, tensor_mib: int) -> Path:
    """Where the generated model is cached (outside the repository)."""
    base = Path(os.environ.get("GE_BENCH_CACHE", platformdirs.user_cache_dir("ge-console-bench")))
    return base / "build_scale" / f"ext-{gib:g}gib-{tensor_mib}mib"


def _external_tensor(name: str, rows: int, offset: int) -> TensorProto:
    """An FP32 [rows, WIDTH] initializer whose bytes sit at offset in model.onnx.data."""
    tensor = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=[rows, WIDTH])
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "model.onnx.data"), ("offset", str(offset)),
                       ("length", str(rows * WIDTH * 4))):
        tensor.external_data.add(key=key, value=value)
    return tensor


def make_model(folder: Path, gib: float, tensor_mib: int) -> Path:
    """Write (once) model.onnx + model.onnx.data: y = sum of Gather(W_i, ids); returns the ONNX path."""
    onnx_path = folder / "model.onnx"
    if (folder / "complete").is_file():
        return onnx_path
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    count = max(1, math.ceil(gib * 1024 / tensor_mib))
    rows = tensor_mib * (1 << 20) // (WIDTH * 4)
    tensors = [_external_tensor(f"w{i}", rows, i * rows * WIDTH * 4) for i in range(count)]
    block = np.random.default_rng(0).bytes(BLOCK)
    with open(folder / "model.onnx.data", "wb") as out:
        for _ in range(count * tensor_mib * (1 << 20) // BLOCK):
            out.write(block)
        out.write(block[: count * tensor_mib * (1 << 20) % BLOCK])
    nodes = [helper.make_node("Gather", [f"w{i}", "ids"], [f"g{i}"]) for i in range(count)]
    nodes.append(helper.make_node("Sum", [f"g{i}" for i in range(count)], ["y"]))
    graph = helper.make_graph(
        nodes, "scale", [helper.make_tensor_value_info("ids", TensorProto.INT64, [None])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, WIDTH])], tensors,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save_model(model, str(onnx_path))
    (folder / "complete").write_text("", encoding="utf-8")
    return onnx_path


# ---- steps, each run in its own process (`--step NAME`) ----

def _step(name: str, work: Path, source: Path) -> dict[str, Any]:
    """Run one measured step here and return its figures (time of the work only, imports done first)."""
    from triton_ge_console.repository import build, digest_cache
    from triton_ge_console.repository.spec import load as spec
    from triton_ge_console.sessions.act import changes, digests
    from triton_ge_console.sessions.server import registry

    assert build and spec and registry and changes and digests  # imported before the clock starts

    started = time.perf_counter()
    extra = STEPS[name](work, source)
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "peak_rss_mib": _peak_rss_mib(), "bytes_hashed": digest_cache.bytes_hashed,
            **(extra or {})}


def _peak_rss_mib() -> float | None:
    """This process's own peak RSS (VmHWM: ru_maxrss would carry the forking parent's over exec)."""
    with contextlib.suppress(OSError, ValueError, StopIteration):
        status = Path("/proc/self/status").read_text(encoding="utf-8").splitlines()
        return int(next(line for line in status if line.startswith("VmHWM:")).split()[1]) / 1024
    return None


def _cp(args: list[str], target: Path, source: Path) -> dict[str, Any]:
    """cp (args) source's folder to target, then fsync the copies as the builder does."""
    subprocess.run(["cp", *args, str(source.parent), str(target)], check=True)
    copied = time.perf_counter()
    subprocess.run(["sync", *[str(p) for p in target.rglob("*") if p.is_file()]], check=True)
    return {"sync_seconds": time.perf_counter() - copied}


def _build(work: Path, source: Path, repo: str, link: bool, edit: bool = False) -> dict[str, Any]:
    """build_repository of the spec into work/repo; the lines it printed."""
    from triton_ge_console.repository.build import build_repository
    from triton_ge_console.repository.spec.load import load_spec

    spec = work / "deploy.yaml"
    spec.write_text(SPEC.format(source=source, extra=EDIT if edit else ""), encoding="utf-8")
    report = build_repository(load_spec(spec), work / repo, link=link)
    return {"lines": report.lines()}


def _stat_walk(work: Path, _source: Path) -> dict[str, Any]:
    """What any no-op check must at least do: stat every file of the repository."""
    count = 0
    for folder, _dirs, files in os.walk(work / "repo_link"):
        for name in files:
            os.stat(os.path.join(folder, name))
            count += 1
    return {"files": count}


def _hash_only(_work: Path, source: Path) -> dict[str, Any]:
    """What a cold build cannot skip: reading and hashing every byte once (the builder's streamed sha256)."""
    from triton_ge_console.repository import digest_cache

    for path in sorted(source.parent.glob("model.onnx*")):
        digest_cache.stream_sha256(path)
    return {}


def _record(work: Path) -> Any:
    """A session record over the linked repository, as `up` would leave it."""
    from triton_ge_console.sessions.server.registry import SessionRecord

    (work / "session").mkdir(exist_ok=True)
    return SessionRecord(
        name="bench", pid=None, started_at=0.0, http_url="", grpc_url=None, metrics_url=None,
        repository=work / "repo_link", spec=None, backend_dir=None, log_path=None, token_ref=None,
        attached=False, session_dir=work / "session", models=("big",),
    )


def _record_loaded(work: Path, _source: Path) -> dict[str, Any]:
    """Note the repository as loaded (what a session does after `up`)."""
    from triton_ge_console.sessions.act.digests import record_loaded_digests

    record_loaded_digests(_record(work))
    return {}


def _reload_changed(work: Path, _source: Path) -> dict[str, Any]:
    """`reload --changed`'s look at the repository: which models differ from what was loaded."""
    from triton_ge_console.sessions.act.changes import find_changes

    return {"changed": not find_changes(_record(work)).empty}


STEPS = {
    "cp_r": lambda w, s: _cp(["-r"], w / "cp_r", s),
    "build_copy": lambda w, s: _build(w, s, "repo_copy", link=False),
    "cp_al": lambda w, s: _cp(["-al"], w / "cp_al", s),
    "build_link": lambda w, s: _build(w, s, "repo_link", link=True),
    "hash_only": _hash_only,
    "noop_rebuild": lambda w, s: _build(w, s, "repo_link", link=True),
    "stat_walk": _stat_walk,
    "record_loaded": _record_loaded,
    "reload_changed": _reload_changed,
    "edit_copy": lambda w, s: _build(w, s, "repo_copy", link=False, edit=True),
    "edit_link": lambda w, s: _build(w, s, "repo_link", link=True, edit=True),
}
COLD = ("build_copy", "build_link")  # run with an empty digest cache
PAIRS = (("cp_r", "build_copy"), ("cp_al", "build_link"))  # run in rounds, each pair side by side
SCRATCH = {"cp_r": "cp_r", "build_copy": "repo_copy", "cp_al": "cp_al", "build_link": "repo_link"}


def run_step(name: str, work: Path, source: Path, cache: Path) -> dict[str, Any]:
    """Run one step in a fresh interpreter and read its figures."""
    env = {**os.environ, "GE_CONSOLE_CACHE_DIR": str(cache / ("cold-" + name if name in COLD else "warm")),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, __file__, "--step", name, "--work", str(work), "--source",
                           str(source)], env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"step {name} failed:\n{done.stderr}")
    return dict(json.loads(done.stdout.splitlines()[-1]))


def _merge_cache(cold: Path, warm: Path) -> None:
    """What a cold build learned joins the one cache the later steps share (as one user's cache would)."""
    entries: dict[str, Any] = {}
    for folder in (warm, cold):
        with contextlib.suppress(OSError):
            entries.update(json.loads((folder / "digests.json").read_text(encoding="utf-8"))["files"])
    warm.mkdir(parents=True, exist_ok=True)
    (warm / "digests.json").write_text(json.dumps({"format": 1, "files": entries}), encoding="utf-8")


def _paired_rounds(work: Path, source: Path, cache: Path, rounds: int) -> dict[str, dict[str, Any]]:
    """Each cold build and its cp baseline, alternating which goes first, `rounds` times; the median run
    of each (low median), with every round's seconds."""
    runs: dict[str, list[dict[str, Any]]] = {name: [] for pair in PAIRS for name in pair}
    for index in range(rounds):
        for pair in PAIRS:
            for name in round_order(pair, index):
                for scratch in SCRATCH.values():  # each step on the same folder: another 3 GiB copy left
                    shutil.rmtree(work / scratch, ignore_errors=True)  # beside it slowed any copy 3-4x here
                shutil.rmtree(cache / f"cold-{name}", ignore_errors=True)
                runs[name].append(run_step(name, work, source, cache))
                print(f"  round {index + 1} {name}: {runs[name][-1]['seconds']:.3f} s", file=sys.stderr,
                      flush=True)
    for name in COLD:  # the later steps work on what the builds made (untimed: the rounds are the figures)
        if not (work / SCRATCH[name]).exists():
            shutil.rmtree(cache / f"cold-{name}", ignore_errors=True)
            run_step(name, work, source, cache)
    figures = {}
    for name, done in runs.items():
        middle = statistics.median_low(r["seconds"] for r in done)
        figures[name] = {**next(r for r in done if r["seconds"] == middle), "rounds": done}
    return figures


def measure(source: Path, rounds: int) -> dict[str, dict[str, Any]]:
    """Every step in a scratch folder beside the cached model (same filesystem): the cold pairs in rounds,
    then the rest once, on what the last round built."""
    work = Path(tempfile.mkdtemp(prefix="run-", dir=source.parent.parent))
    cache = work / "digest-cache"
    try:
        figures = _paired_rounds(work, source, cache, rounds)
        for name in COLD:
            _merge_cache(cache / f"cold-{name}", cache / "warm")
        for name in STEPS:
            if name not in figures:
                figures[name] = run_step(name, work, source, cache)
                print(f"  {name}: {figures[name]['seconds']:.3f} s", file=sys.stderr, flush=True)
        return figures
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _row(what: str, ours: dict[str, Any], theirs: dict[str, Any] | None, label: str, with_sync: bool) -> str:
    """One table row: ours, the baseline, their ratio, peak RSS, bytes hashed."""
    base = _baseline(theirs, with_sync) if theirs is not None else None
    ratio = f"{ours['seconds'] / base:.2f}×" if base else "—"
    if theirs is not None and len(ours.get("rounds", ())) > 1 and len(theirs.get("rounds", ())) > 1:
        pairs = zip(ours["rounds"], theirs["rounds"], strict=True)
        each = [a["seconds"] / _baseline(b, with_sync) for a, b in pairs]
        ratio += f" ({min(each):.2f}–{max(each):.2f})"
    base_text = f"{label} {base:.3f} s" if base is not None else "—"
    rss = f"{ours['peak_rss_mib']:.0f} MiB" if ours.get("peak_rss_mib") and not with_cp(ours) else "—"
    return (f"| {what} | {ours['seconds']:.3f} s | {base_text} | {ratio} | {rss} | "
            f"{ours['bytes_hashed'] / (1 << 20):,.0f} MiB |")


def _within(ours: dict[str, Any], theirs: dict[str, Any], slack_s: float, with_sync: bool) -> str:
    """How many rounds met the issue's target (ours ≤ slack_s + 1.2 × the baseline), e.g. "4 of 4"."""
    pairs = list(zip(ours.get("rounds", [ours]), theirs.get("rounds", [theirs]), strict=True))
    met = sum(a["seconds"] <= slack_s + 1.2 * _baseline(b, with_sync) for a, b in pairs)
    return f"{met} of {len(pairs)}"


def _baseline(figures: dict[str, Any], with_sync: bool) -> float:
    """A baseline's seconds, with its fsync when asked."""
    return float(figures["seconds"] + (figures.get("sync_seconds", 0.0) if with_sync else 0.0))


def with_cp(figures: dict[str, Any]) -> bool:
    """A cp step: the Python process that ran cp is not what its peak RSS would be about."""
    return "sync_seconds" in figures


def table(f: dict[str, dict[str, Any]], gib: float) -> str:
    """The markdown table."""
    rows = [
        f"External-data ONNX of {gib:g} GiB (one data file); each step its own process; cold builds and "
        "their cp: the median round (every round's ratio in brackets).",
        "",
        f"Rounds within target: cold `build --copy` ≤ 1.2× `cp -r` + fsync: "
        f"{_within(f['build_copy'], f['cp_r'], 0.0, True)}; cold linked `build` ≤ 0.1 s + 1.2× `cp -al`: "
        f"{_within(f['build_link'], f['cp_al'], 0.1, False)}.",
        "",
        "| step | ge-console | baseline | ratio | peak RSS | model bytes hashed |",
        "|---|---|---|---|---|---|",
        _row("cold `build --copy` (copy, fsync; weights unread)", f["build_copy"], f["cp_r"],
             "`cp -r` + fsync", True),
        _row("the same, against `cp -r` alone (no fsync)", f["build_copy"], f["cp_r"], "`cp -r`", False),
        _row("cold `build` (linked; weights unread)", f["build_link"], f["cp_al"], "`cp -al`", False),
        _row("hashing every byte once, alone (sha256, streamed; what a build no longer does)",
             f["hash_only"], f["cp_al"], "`cp -al`", False),
        _row("no-op rebuild", f["noop_rebuild"], f["stat_walk"], "os.stat walk", False),
        _row("`reload --changed`'s look (nothing changed)", f["reload_changed"], f["stat_walk"],
             "os.stat walk", False),
        _row("config-only edit, copied repository", f["edit_copy"], None, "", False),
        _row("config-only edit, linked repository", f["edit_link"], None, "", False),
        _row("`cp -r` itself (its fsync not included)", f["cp_r"], None, "", False),
    ]
    return "\n".join(rows)


def main() -> int:
    """Make or reuse the model, run every step, print the table, write the JSON."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--gib", type=float, default=3.0, help="size of the weights (default 3)")
    parser.add_argument("--tensor-mib", type=int, default=256, help="one weight tensor (default 256)")
    parser.add_argument("--rounds", type=int, default=2,
                        help="rounds of each cold build beside its cp, alternating order (default 2)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--step", help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--source", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.step:
        print(json.dumps(_step(args.step, args.work, args.source)))
        return 0
    tensor_mib = min(args.tensor_mib, max(1, int(args.gib * 1024)))
    folder = model_dir(args.gib, tensor_mib)
    started = time.perf_counter()
    source = make_model(folder, args.gib, tensor_mib)
    print(f"model: {source} ({time.perf_counter() - started:.1f} s to make or find)", file=sys.stderr)
    wait = os.stat(folder / "model.onnx.data").st_mtime + 2.5 - time.time()
    time.sleep(max(0.0, wait))  # the digest cache trusts no file modified in the last 2 s
    figures = measure(source, max(1, args.rounds))
    print(table(figures, args.gib))
    result = {"gib": args.gib, "tensor_mib": tensor_mib, "rounds": args.rounds, "cpus": os.cpu_count(),
              "python": platform.python_version(), "load_average": os.getloadavg(), "steps": figures}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "build_scale.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
