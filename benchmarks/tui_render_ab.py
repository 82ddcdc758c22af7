"""The dashboard refresh of `tui_render.py` for two source trees side by side: which code costs more.

A change's cost is smaller than the machine's drift over minutes, so one run of each is not enough: this
runs `tui_render.py` in rounds, once with the package from `--baseline-src` and once with this checkout's
`src` (each its own interpreter, PYTHONPATH pointing at that tree), which goes first alternating from round
to round, and prints per run each scenario's total p50 / p95 and render ÷ the same repaints.

    git archive main src | tar -x -C /tmp/main      # the code to compare against, e.g.
    python3 benchmarks/tui_render_ab.py --baseline-src /tmp/main/src [--rounds 4] [--refreshes 60]

Every run's figures go to results/tui_render_ab.json; results/tui_render.json is left as the last run
of this checkout's code wrote it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OURS = HERE.parent / "src"
RESULTS = HERE / "results"


def one_run(src: Path, refreshes: int) -> dict[str, Any]:
    """tui_render.py once with the package from `src`, in a fresh interpreter; its JSON."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    command = [sys.executable, str(HERE / "tui_render.py"), f"--refreshes={refreshes}"]
    subprocess.run(command, env=env, check=True, capture_output=True, text=True)
    result: dict[str, Any] = json.loads((RESULTS / "tui_render.json").read_text(encoding="utf-8"))
    return result


def figures(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Per scenario: total p50 / p95, update and render p50, render ÷ the same repaints, load average."""
    return [{"scenario": s["scenario"], "total_p50": s["summary"]["total_ms"]["p50"],
             "total_p95": s["summary"]["total_ms"]["p95"], "update_p50": s["summary"]["update_ms"]["p50"],
             "render_p50": s["summary"]["render_ms"]["p50"], "ratio": s["render_over_same_repaints"],
             "load": s["load_average"]} for s in result["scenarios"]]


def table(runs: list[dict[str, Any]]) -> str:
    """One markdown row per run and scenario, in the order they ran."""
    rows = ["| round | code | scenario | total p50 ms | total p95 ms | update p50 | render p50 | render ÷ "
            "same repaints | load |", "|---|---|---|---|---|---|---|---|---|"]
    for run in runs:
        for s in run["figures"]:
            rows.append(f"| {run['round']} | {run['code']} | {s['scenario']} | {s['total_p50']:.2f} | "
                        f"{s['total_p95']:.2f} | {s['update_p50']:.2f} | {s['render_p50']:.2f} | "
                        f"{s['ratio']:.2f} | {s['load']:.1f} |")
    return "\n".join(rows)


def main() -> None:
    """Both trees in rounds, which goes first alternating; table and JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-src", type=Path, required=True, help="the other tree's src directory")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--refreshes", type=int, default=60)
    args = parser.parse_args()
    trees = (("baseline", args.baseline_src.resolve()), ("this checkout", OURS))
    runs: list[dict[str, Any]] = []
    last_ours: dict[str, Any] | None = None
    for number in range(1, args.rounds + 1):
        for code, src in trees if number % 2 else trees[::-1]:
            result = one_run(src, args.refreshes)
            last_ours = result if src == OURS else last_ours
            runs.append({"round": number, "code": code, "figures": figures(result)})
            print("\n".join(table(runs[-1:]).splitlines()[2:]), flush=True)  # this run's rows
    print(f"\n{table(runs)}")
    payload = {"benchmark": "tui_render_ab", "baseline_src": str(args.baseline_src), "rounds": args.rounds,
               "refreshes": args.refreshes, "runs": runs,
               "machine": {"python": platform.python_version(), "cpus": os.cpu_count()}}
    (RESULTS / "tui_render_ab.json").write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    if last_ours is not None:
        (RESULTS / "tui_render.json").write_text(json.dumps(last_ours, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
