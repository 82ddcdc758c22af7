"""How long the console takes to start: `import triton_ge_console.console.app`, and a fresh process's wait for
the console's first frame and for its first frame with figures, beside `python -c pass`.

Each round runs, in fresh interpreters and in `round_order`, `python -c pass`, then for every source tree
(this checkout, and any `--compare NAME=SRC`, e.g. a `git archive` of main before a change) the import
alone and a start: the console over a recorded source (three models whose config.pbtxt files sit in a
temporary repository, so the dashboard's config line is read as in a real session) in Textual's headless
driver, 160x45. A start is timed from just before the parent starts the process to the first frame the app
hands its driver ("first frame": the dashboard waiting for its session) and to the first frame after the
first snapshot was drawn with a model selected ("figures"), on the one monotonic clock both processes read.
The recorded source answers its first poll once the first frame is out, as a server's answer (a few HTTP
calls) comes after the dashboard's first paint; what the first snapshot's drawing imports lies between the
two. The terminal driver's own start (a real TTY) is not in it.

    python3 benchmarks/console_start.py [--rounds 10] [--compare before=/tmp/before/src]

Prints a markdown table (median over rounds and range, seconds; with `--compare`, what this tree saves
against each other tree, round by round) and writes results/console_start.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from result_file import arguments, write_result
from triton_ge_console.sessions.loadgen.rounds import Spread, round_order
from triton_ge_console.sessions.observe.recorded import RecordedSource
from triton_ge_console.sessions.observe.snapshot import ServerSnapshot

HERE = Path(__file__).resolve()
THIS_SRC = str(HERE.parent.parent / "src")
SIZE = (160, 45)
MODELS = ("bert_model", "llama_model", "resnet_model")
CONFIG = 'backend: "ge"\nmax_batch_size: 8\ndynamic_batching { preferred_batch_size: [4, 8] }\n'
IMPORT = "import triton_ge_console.console.app"


class AfterFirstFrame(RecordedSource):
    """A recording whose first poll waits for the console's first frame."""

    def __init__(self, snapshots: list[ServerSnapshot], painted: threading.Event) -> None:
        super().__init__(snapshots, name="bench")
        self.painted = painted

    def poll(self) -> ServerSnapshot:
        """The recorded snapshot, once the first frame is out (at most 60 s on)."""
        self.painted.wait(60)
        return super().poll()


def child(repository: Path) -> None:
    """The console over a recorded snapshot until its first frame with figures; prints the moments seen."""
    from triton_ge_console.console.app import create_app
    from triton_ge_console.sessions.observe.snapshot import Endpoints, ModelSnapshot

    marks = {"imported": time.monotonic()}
    for name in MODELS:
        (repository / name / "1").mkdir(parents=True, exist_ok=True)
        (repository / name / "config.pbtxt").write_text(f'name: "{name}"\n{CONFIG}', encoding="utf-8")
    models = tuple(ModelSnapshot(name=name, version="1", state="READY", backend="ge") for name in MODELS)
    snapshot = ServerSnapshot(session="bench", taken_at=time.time(), live=True, ready=True,
                              endpoints=Endpoints("http://127.0.0.1:8000", None, None), models=models)
    painted = threading.Event()
    source = AfterFirstFrame([snapshot], painted)
    app = create_app(source, interval_s=0.05, repository=repository, max_polls=1)
    display = app._display

    def watched(screen: Any, renderable: Any) -> None:
        display(screen, renderable)
        now = time.monotonic()
        marks.setdefault("first_frame", now)
        painted.set()
        if "figures" not in marks and app.polls_done >= 1 and app.selected_model is not None:
            marks["figures"] = now
            app.exit()

    app._display = watched  # type: ignore[method-assign]
    app.run(headless=True, size=SIZE)
    print(json.dumps(marks), flush=True)


def timed(command: list[str], src: str | None) -> dict[str, float]:
    """Run a command in a fresh process; its wall time, and the moments it printed, from its launch."""
    env = {**os.environ, **({"PYTHONPATH": src} if src else {})}
    started = time.monotonic()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=True)
    figures = {"wall": time.monotonic() - started}
    lines = done.stdout.strip().splitlines()
    if lines and lines[-1].startswith("{"):
        figures.update({key: moment - started for key, moment in json.loads(lines[-1]).items()})
    return figures


def one_round(index: int, trees: dict[str, str], scratch: Path) -> dict[str, dict[str, float]]:
    """`python -c pass`, then each tree's import and start, in this round's order."""
    Step = tuple[str, str | None, list[str]]  # label, the source tree on PYTHONPATH, the command
    steps: list[Step] = [("python -c pass", None, [sys.executable, "-c", "pass"])]
    for name, tree in trees.items():
        steps.append((f"{name}: import", tree, [sys.executable, "-c", IMPORT]))
        steps.append((f"{name}: start", tree, [sys.executable, str(HERE), "--child", str(scratch / name)]))
    return {label: timed(command, src) for label, src, command in round_order(steps, index)}


FIGURES = ("wall", "imported", "first_frame", "figures")


def table(rounds: list[dict[str, dict[str, float]]], trees: list[str]) -> list[str]:
    """Median (range) over rounds of each figure, seconds; then, for each other tree, what this tree saves
    against it, the difference taken within each round (unresolved unless every round saw it above zero)."""
    lines = ["| run | wall s | imported s | first frame s | figures s |", "|---|---:|---:|---:|---:|"]
    for label in rounds[0]:
        cells = []
        for key in FIGURES:
            values = [run[label][key] for run in rounds if key in run[label]]
            cells.append(Spread.of(values).text("{:.3f}") if values else "—")
        lines.append(f"| {label} | {' | '.join(cells)} |")
    for other in trees[1:]:
        for step in ("import", "start"):
            mine, theirs = f"{trees[0]}: {step}", f"{other}: {step}"
            cells = []
            for key in FIGURES:
                saved = [run[theirs][key] - run[mine][key] for run in rounds if key in run[mine]]
                cells.append(Spread.of(saved).cost_text("{:.3f}") if saved else "—")
            lines.append(f"| {step}: {other} − {trees[0]} | {' | '.join(cells)} |")
    return lines


def main() -> None:
    """Rounds of every tree's import and start; the table and results/console_start.json."""
    parser = arguments(__doc__, "console_start", rounds=10)
    parser.add_argument("--compare", action="append", default=[], metavar="NAME=SRC",
                        help="another source tree timed in the same rounds")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)  # the start's own process
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    trees = {"this tree": THIS_SRC, **dict(item.split("=", 1) for item in args.compare)}
    load_before = os.getloadavg()
    rounds = []
    with tempfile.TemporaryDirectory(prefix="bench-console-start-") as scratch:
        for index in range(args.rounds):
            rounds.append(one_round(index, trees, Path(scratch) / str(index)))
            print(f"round {index + 1}/{args.rounds}", file=sys.stderr, flush=True)
    print("\n".join(table(rounds, list(trees))))
    write_result(args.json, {"benchmark": "console_start", "trees": trees, "rounds": rounds}, load_before)


if __name__ == "__main__":
    main()
