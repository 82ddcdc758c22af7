"""CANN diagnostics an operator switches on for the next server restart, as the environment they need."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

DIAGNOSTICS = ("plog", "dump_graph", "profiling")


def diagnostic_env(enabled: Iterable[str], out_dir: Path) -> dict[str, str]:
    """Environment variables CANN reads at start-up for each enabled diagnostic."""
    env: dict[str, str] = {}
    chosen = set(enabled)
    if "plog" in chosen:
        env.update({"ASCEND_SLOG_PRINT_TO_STDOUT": "1", "ASCEND_GLOBAL_LOG_LEVEL": "1"})
    if "dump_graph" in chosen:
        env.update({"DUMP_GE_GRAPH": "2", "DUMP_GRAPH_LEVEL": "2",
                    "DUMP_GRAPH_PATH": str(out_dir / "ge_graphs")})
    if "profiling" in chosen:
        options = f'{{"output":"{out_dir / "profiling"}","task_trace":"on","aicpu":"on"}}'
        env.update({"PROFILING_MODE": "true", "PROFILING_OPTIONS": options})
    return env
