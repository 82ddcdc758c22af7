"""Run a notebook on a fresh kernel (this interpreter) in a tmp cwd and state dir; read what it produced."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
from nbclient import NotebookClient

from triton_ge_console.sessions.lifecycle import down
from triton_ge_console.sessions.server.registry import Registry, effective_state

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


@dataclass
class ExecutedNotebook:
    """A notebook after execution: its cells with outputs, and the widget state nbclient stored."""

    nb: nbformat.NotebookNode
    state_dir: Path

    def facts(self) -> dict[str, Any]:
        """The JSON that cells tagged `facts:<name>` printed last, by name."""
        found: dict[str, Any] = {}
        for cell in self.nb.cells:
            for tag in cell.get("metadata", {}).get("tags", []):
                if tag.startswith("facts:"):
                    found[tag.split(":", 1)[1]] = last_json(stdout_of(cell))
        return found

    def widgets(self, model_name: str | None = None) -> list[dict[str, Any]]:
        """The stored widget models' states, optionally only one kind (e.g. "ButtonModel", "LinesModel")."""
        state = self.nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
        return [entry["state"] for entry in state.values()
                if model_name is None or entry.get("model_name") == model_name]


def last_json(text: str) -> Any:
    """The last JSON document a cell printed (it starts at the last line opening with { or [)."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(("{", "["))]
    if not starts:
        raise ValueError(f"no JSON in the cell's output: {text[-500:]!r}")
    return json.loads("\n".join(lines[starts[-1]:]))


def stdout_of(cell: nbformat.NotebookNode) -> str:
    """Everything a cell printed to stdout."""
    return "".join(o.get("text", "") for o in cell.get("outputs", [])
                   if o.get("output_type") == "stream" and o.get("name") == "stdout")


def stop_cell() -> nbformat.NotebookNode:
    """What a user runs when done with notebook 02 or 03 (their last cell says so): stop(), its outcome
    printed as the `facts:cleanup`."""
    return nbformat.v4.new_code_cell("print(json.dumps(stop(), indent=1))",
                                     metadata={"tags": ["facts:cleanup"]})


def kernel_env(workdir: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The kernel's environment: this interpreter first on PATH, isolated state and temp dirs."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["GE_CONSOLE_STATE_DIR"] = str(workdir / "state")
    env["TMPDIR"] = str(workdir / "tmp")
    env.update(extra or {})
    return env


def stop_leftover_sessions(state_dir: Path) -> list[str]:
    """Stop every session a notebook left running in its state dir (a failed cell skips its clean-up)."""
    registry = Registry(state_dir / "sessions")
    stopped = []
    for record in registry.list():
        if not record.attached and effective_state(record) != "stopped":
            down(record, registry)
            stopped.append(record.name)
    return stopped


@contextlib.contextmanager
def executed(name: str, workdir: Path, env: dict[str, str] | None = None, timeout: int = 240,
             then: Sequence[nbformat.NotebookNode] = ()) -> Iterator[ExecutedNotebook]:
    """Run notebooks/<name> top to bottom on a fresh python3 kernel, cwd in `workdir`, then the cells a user
    would add and run (`then`, appended); stop what it left."""
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nb.cells.extend(then)
    for folder in ("run", "tmp", "state"):
        (workdir / folder).mkdir(parents=True, exist_ok=True)
    client = NotebookClient(nb, kernel_name="python3", timeout=timeout, store_widget_state=True,
                            resources={"metadata": {"path": str(workdir / "run")}})
    try:
        client.execute(env=kernel_env(workdir, env))
        yield ExecutedNotebook(nb, workdir / "state")
    finally:
        stop_leftover_sessions(workdir / "state")
