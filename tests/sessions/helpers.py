"""Test material for sessions: a GE spec and process-group checks (the echo model is in tests/models.py)."""

from __future__ import annotations

import os
from pathlib import Path

import psutil

GE_SPEC = """\
name: {name}
server:
  metrics:
    interval_ms: 500
models:
  - name: bert_model
    backend: ge
    source: demo:bert
    max_batch_size: {max_batch_size}
    dynamic_batching:
      max_queue_delay_microseconds: 100
"""


def write_ge_spec(folder: Path, name: str = "gesession", max_batch_size: int = 8) -> Path:
    """A one-model deployment spec served by the `ge` glue (CPU-emulated demo BERT)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "deploy.yaml"
    path.write_text(GE_SPEC.format(name=name, max_batch_size=max_batch_size), encoding="utf-8")
    return path


def group_processes(pgid: int) -> list[psutil.Process]:
    """Live (non-zombie) processes of a process group."""
    found = []
    for process in psutil.process_iter(["status"]):
        try:
            if os.getpgid(process.pid) == pgid and process.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(process)
        except (ProcessLookupError, psutil.Error):
            continue
    return found
