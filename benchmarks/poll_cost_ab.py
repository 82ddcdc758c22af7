"""What a 1 s poll costs a busy server, measured in many short paired rounds.

One tritonserver with 50 trivial Python-backend models; wrk saturates one of them. Console-like pollers
run in their own processes the whole time, each switched on for its rounds only (so start-up, the first
polls that learn every model's config, and imports never fall inside a round). Each group of rounds has
one round with no poller ("off") and one per poller variant (`--nice`: the nice value of its polling
thread; `--tree`: the package of another source tree, e.g. the code before a change), in `round_order`
so slow drift of a noisy host hits every variant alike. Each round records:

- wrk's throughput;
- tritonserver's CPU (and its Python stubs') per request, from /proc;
- the poller process's CPU, and how many polls it made;
- how busy the whole host was (psutil), which says whether the run was CPU-bound.

A variant's loss is judged against "off" in the same group: each group's throughput ratio, the median
over the groups, and a bootstrap 90 % interval of that median.

On a shared 2-core host one pair's rounds differ by ±10 % or more whatever the poller does, so a 1 % effect
needs hundreds of pairs. The poll is amplified instead: polled every 0.1 s, ten polls a second cost about
ten times what one does (each poll is the same work), so the loss of a 1 s poll is about the measured
loss over ten (NOTES.md shows the scaling is not exact). By default the loaded model has two instances
and wrk eight connections, which keeps both cores busy: the worst case, where every cycle the poll takes
is one a request does not get (the console on the server's host).

    python3 benchmarks/poll_cost_ab.py                                # off vs on (~5 min)
    python3 benchmarks/poll_cost_ab.py --nice 0,10,19 --poll-interval 0.2   # priorities compared
    python3 benchmarks/poll_cost_ab.py --tree before=../old/src       # another source tree's poller too
    python3 benchmarks/poll_cost_ab.py --pool results/a.json results/b.json   # runs' pairs taken together
    python3 benchmarks/poll_cost_ab.py --poll-interval 1 --instances 1 --connections 4   # unamplified
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil

from console_overhead import (
    CORES,
    WRK_SCRIPT,
    machine,
    progress,
    server,
    server_cpu_s,
    write_repository,
    wrk_throughput,
)
from triton_ge_console.backend_glue.distribution import find_distribution
from triton_ge_console.backend_glue.installer import install_backend_dir
from triton_ge_console.sessions.loadgen.rounds import round_order

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "poll_cost_ab{suffix}.json"
DEFAULT_INTERVAL_S, DEFAULT_INSTANCES = 0.1, 2
MODELS = 50
# The child polls every interval while switched on; "on"/"off" on stdin switch it. Each command is answered,
# once it has taken effect, with how many polls were made so far.
SWITCHED_POLLER = textwrap.dedent("""
    import os, sys, threading, time
    from triton_ge_console.sessions.observe.poller import Poller
    from triton_ge_console.sessions.observe.snapshot import Endpoints
    poller = Poller("bench", Endpoints(sys.argv[1], None, sys.argv[2]))
    for _ in range(3):
        snapshot = poller.poll()  # learn the models' configs and prime the rates before any round
    assert snapshot.error is None, snapshot.error
    interval, nice, polls = float(sys.argv[3]), int(sys.argv[4]), [0]
    on, off, polling = threading.Event(), threading.Event(), threading.Lock()
    off.set()
    def loop():
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)  # this thread only (Linux)
        while True:
            on.wait()
            due = time.monotonic() + interval / 2  # one poll per interval, in the middle of it
            while not off.wait(max(0.0, due - time.monotonic())):
                with polling:
                    poller.poll()
                    polls[0] += 1
                due += interval
    threading.Thread(target=loop, daemon=True).start()
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() == "on":
            off.clear()
            on.set()
        elif line.strip() == "off":
            on.clear()
            off.set()
            with polling:  # a poll under way ends before the answer: none spills into the next round
                pass
        print(polls[0], flush=True)
    poller.close()
""")


@dataclass(frozen=True)
class Round:
    """One wrk run with one poller on (`variant` names it), or none ("off")."""

    variant: str
    rps: float
    requests: int
    server_cpu_us_per_request: float
    poller_cpu_ms: float
    polls: int
    host_busy_percent: float


class SwitchedPoller:
    """The poller child process and its on/off switch."""

    def __init__(self, http_url: str, metrics_url: str, interval_s: float, nice: int = 0,
                 tree: str | None = None) -> None:
        env = None if tree is None else {**os.environ, "PYTHONPATH": tree}  # the package from that tree
        self.process = subprocess.Popen(
            [sys.executable, "-c", SWITCHED_POLLER, http_url, metrics_url, str(interval_s), str(nice)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        if self._line() != "ready":
            raise RuntimeError("the poller process did not start")

    def _line(self) -> str:
        assert self.process.stdout is not None
        return self.process.stdout.readline().strip()

    def send(self, command: str) -> int:
        """Switch (or just ask); returns the polls made so far."""
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return int(self._line())

    def cpu_s(self) -> float:
        """CPU seconds the poller process has used."""
        times = psutil.Process(self.process.pid).cpu_times()
        return times.user + times.system

    def close(self) -> None:
        """End the child."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


@contextlib.contextmanager
def switched_poller(http_url: str, metrics_url: str, interval_s: float,
                    nice: int = 0, tree: str | None = None) -> Iterator[SwitchedPoller]:
    """A poller process for the whole run; always ended."""
    poller = SwitchedPoller(http_url, metrics_url, interval_s, nice, tree)
    try:
        yield poller
    finally:
        poller.close()


def one_round(url: str, pid: int, variant: str, poller: SwitchedPoller | None, args: argparse.Namespace,
              script: Path) -> Round:
    """Switch one poller on (none for "off"), run wrk, and account for everyone's CPU over the run."""
    polls_before = poller.send("on") if poller is not None else 0
    server_before, poller_before = server_cpu_s(pid), poller.cpu_s() if poller is not None else 0.0
    psutil.cpu_percent()  # start the host's busy window
    rps, requests = wrk_throughput(url, "m000", args.duration, args.connections, script)
    busy = psutil.cpu_percent()
    server_cpu = server_cpu_s(pid) - server_before
    poller_cpu = poller.cpu_s() - poller_before if poller is not None else 0.0
    polls = poller.send("off") - polls_before if poller is not None else 0
    return Round(variant, rps, requests, server_cpu * 1e6 / max(1, requests), poller_cpu * 1000, polls, busy)


def grouped_rounds(url: str, pid: int, pollers: dict[str, SwitchedPoller | None], args: argparse.Namespace,
                   script: Path) -> list[dict[str, Round]]:
    """Groups of one round per variant, in `round_order` (ABBA for two), so drift hits every variant alike."""
    names = list(pollers)
    groups = []
    for index in range(args.pairs):
        order = round_order(names, index)
        groups.append({name: one_round(url, pid, name, pollers[name], args, script) for name in order})
        if (index + 1) % 5 == 0:
            progress(f"{index + 1}/{args.pairs} groups")
    return groups


def bootstrap_median(values: list[float], draws: int = 4000, seed: int = 1) -> tuple[float, float]:
    """A 90 % bootstrap interval of the median (percentile method, fixed seed so reruns agree)."""
    rng = random.Random(seed)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(draws))
    return medians[int(0.05 * draws)], medians[int(0.95 * draws) - 1]


def versus_off(groups: list[dict[str, Round]], variant: str, interval_s: float) -> dict[str, Any]:
    """One variant against "off" in the same groups: losses and CPU increases as medians with intervals;
    the loss also per 1 s poll (scaled by the interval, see the module's docstring)."""
    pairs = [(group["off"], group[variant]) for group in groups]
    losses = [100.0 * (1 - on.rps / off.rps) for off, on in pairs]
    per_second_poll = [loss * interval_s for loss in losses]
    cpu_increase = [100.0 * (on.server_cpu_us_per_request / off.server_cpu_us_per_request - 1)
                    for off, on in pairs]
    ons = [on for _off, on in pairs]
    return {
        "loss_percent": {"median": statistics.median(losses), "ci90": bootstrap_median(losses),
                         "min": min(losses), "max": max(losses)},
        "loss_percent_per_1s_poll": {"median": statistics.median(per_second_poll),
                                     "ci90": bootstrap_median(per_second_poll)},
        "server_cpu_per_request_increase_percent": {
            "median": statistics.median(cpu_increase), "ci90": bootstrap_median(cpu_increase)},
        "rps": [on.rps for on in ons],
        "polls_per_round": statistics.median(r.polls for r in ons),
        "poller_cpu_ms_per_poll": sum(r.poller_cpu_ms for r in ons) / max(1, sum(r.polls for r in ons)),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start the server and one primed poller per nice value, then the grouped rounds."""
    dist = find_distribution()
    root = Path(tempfile.mkdtemp(prefix="ge-poll-ab-"))
    try:
        install_backend_dir(root / "backends", dist)
        names = write_repository(root / "repository", MODELS)
        loaded = root / "repository" / "m000" / "config.pbtxt"  # the model wrk loads: its instance count
        loaded.write_text(loaded.read_text().replace("count: 1", f"count: {args.instances}"))
        script = root / "post.lua"
        script.write_text(WRK_SCRIPT)
        with server(dist, root / "repository", root / "backends", names) as (http_url, metrics_url, pid), \
                contextlib.ExitStack() as stack:
            pollers: dict[str, SwitchedPoller | None] = {"off": None}
            for label, tree in [("", None), *args.tree]:
                for nice in args.nice:
                    pollers[f"{label + ', ' if label else ''}nice {nice}"] = stack.enter_context(
                        switched_poller(http_url, metrics_url, args.poll_interval, nice, tree))
            progress(f"{MODELS} models loaded, pollers primed; {args.pairs} groups of {args.duration} s")
            wrk_throughput(http_url, "m000", args.duration, args.connections, script)  # warm up
            groups = grouped_rounds(http_url, pid, pollers, args, script)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {"benchmark": "poll_cost_ab", "machine": machine(), "models": MODELS,
            "settings": {"groups": args.pairs, "duration_s": args.duration, "connections": args.connections,
                         "poll_interval_s": args.poll_interval, "load_generator": "wrk -t1",
                         "instances": args.instances, "poller_nice": args.nice,
                         "trees": {label: tree for label, tree in args.tree}},
            "host_busy_percent": statistics.median(r.host_busy_percent for g in groups for r in g.values()),
            "off_rps": [group["off"].rps for group in groups],
            "variants": {name: versus_off(groups, name, args.poll_interval) for name in list(pollers)[1:]},
            "rounds": [{name: asdict(r) for name, r in group.items()} for group in groups]}


def report(result: dict[str, Any]) -> None:
    """Markdown table on stdout, JSON in benchmarks/results/."""
    settings = result["settings"]
    interval, groups = settings["poll_interval_s"], settings["groups"]
    print(f"#### {result['models']} models, both cores busy: each poller variant on vs off, "
          f"polled every {interval:g} s, {groups} groups\n")
    table(result["variants"])
    print(f"\nhost busy during rounds ({CORES} cores, median): {result['host_busy_percent']:.0f} %; target: "
          f"a 1 s poll costs <= 1 % of throughput")
    suffix = "" if interval == DEFAULT_INTERVAL_S else f"_every_{interval:g}s"
    suffix += "" if settings["instances"] == DEFAULT_INSTANCES else f"_{settings['instances']}i"
    path = Path(str(RESULTS).format(suffix=suffix))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwrote {path}")


def table(variants: dict[str, dict[str, Any]]) -> None:
    """One markdown row per poller variant."""
    print("| poller | loss, median pair (90 % interval) | pairs' range | per 1 s poll (loss × interval) "
          "| server CPU per request | poller CPU per poll |\n|---|---|---|---|---|---|")
    for name, figures in variants.items():
        loss = figures["loss_percent"]
        print(f"| {name} | {with_interval(loss)} | {loss['min']:+.1f} … {loss['max']:+.1f} % | "
              f"{with_interval(figures['loss_percent_per_1s_poll'])} | "
              f"{with_interval(figures['server_cpu_per_request_increase_percent'])} | "
              f"{figures['poller_cpu_ms_per_poll']:.1f} ms |")


def with_interval(figure: dict[str, Any]) -> str:
    """'+0.12 % (-0.30 … +0.50)'."""
    low, high = figure["ci90"]
    return f"{figure['median']:+.2f} % ({low:+.2f} … {high:+.2f})"


def pooled(paths: list[Path]) -> dict[str, dict[str, Any]]:
    """Every variant against "off" over the groups of several saved runs of the same settings."""
    runs = [json.loads(path.read_text()) for path in paths]
    intervals = {run["settings"]["poll_interval_s"] for run in runs}
    if len(intervals) != 1:
        raise SystemExit(f"runs polled at different intervals ({sorted(intervals)}): not pooled")
    groups = [{name: Round(**fields) for name, fields in group.items()}
              for run in runs for group in run["rounds"]]
    interval = intervals.pop()
    return {name: versus_off(groups, name, interval) for name in groups[0] if name != "off"}


def labelled_tree(text: str) -> tuple[str, str]:
    """LABEL=SRC, SRC holding a triton_ge_console package."""
    label, _, tree = text.partition("=")
    if not label or not (Path(tree) / "triton_ge_console").is_dir():
        raise argparse.ArgumentTypeError(f"{text!r}: want LABEL=SRC, SRC holding triton_ge_console/")
    return label, str(Path(tree).resolve())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=40, help="groups of rounds (one round per variant)")
    parser.add_argument("--duration", type=int, default=3, help="seconds per wrk run")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--instances", type=int, default=DEFAULT_INSTANCES,
                        help="instances of the model under load (2 keeps both cores of this host busy)")
    parser.add_argument("--nice", type=lambda text: [int(v) for v in text.split(",")], default=[0],
                        help="one poller variant per nice value of its polling thread, e.g. 0,10,19")
    parser.add_argument("--tree", type=labelled_tree, action="append", default=[], metavar="LABEL=SRC",
                        help="also poll with the package in another source tree (e.g. before=../old/src)")
    parser.add_argument("--poll-interval", type=float, default=DEFAULT_INTERVAL_S,
                        help="seconds between polls while on (0.1 amplifies a 1 s poll's cost tenfold)")
    parser.add_argument("--pool", type=Path, nargs="+", metavar="JSON",
                        help="print saved runs' figures with their groups pooled (same settings)")
    args = parser.parse_args()
    if args.pool:
        table(pooled(args.pool))
        return 0
    if shutil.which("wrk") is None:
        print("wrk is not installed: apt-get install -y wrk", file=sys.stderr)
        return 1
    report(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
