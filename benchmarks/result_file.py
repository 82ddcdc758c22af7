"""A benchmark script's result file, and the head of its command line that names it: the figures, with the
machine they were measured on, as JSON in benchmarks/results/ (or --json PATH)."""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def arguments(doc: str | None, name: str, rounds: int) -> argparse.ArgumentParser:
    """A benchmark's command line, its head given: the docstring as its help, --rounds, --json
    (results/NAME.json by default)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--json", type=Path, default=RESULTS / f"{name}.json")
    return parser


def machine(load_before: tuple[float, float, float] | None = None, **versions: str) -> dict[str, Any]:
    """What the figures were measured on: the platform, its CPUs, Python and any library `versions`, and how
    loaded it was (now, or before and after the run when told the load before it)."""
    now = os.getloadavg()
    loads = ({"load_average": now} if load_before is None
             else {"load_average_before": load_before, "load_average_after": now})
    return {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version(),
            **versions, **loads}


def write_result(path: Path, figures: dict[str, Any], load_before: tuple[float, float, float] | None = None,
                 **versions: str) -> None:
    """The figures with the machine they were measured on, as pretty JSON (its folder made); says where."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**figures, "machine": machine(load_before, **versions)}, indent=2) + "\n")
    print(f"wrote {path}", file=sys.stderr, flush=True)
