"""`ge-console --help` starts quickly: building the parser imports no model, client or UI library."""

from __future__ import annotations

import subprocess
import sys

import pytest

# Each costs 0.1-1 s to import; none is needed to print help.
HEAVY = ("onnx", "onnxruntime", "aiohttp", "tritonclient", "grpc", "numpy", "google.protobuf", "textual",
         "rich", "psutil", "yaml")
PROBE = """
import sys
from triton_ge_console.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print("MODULES", " ".join(sorted(sys.modules)))
"""


HELP_COMMANDS = (["--help"], ["bench", "--help"], ["validate", "--help"], ["up", "--help"],
                 ["devices", "--help"], ["doctor", "--help"], ["build", "--help"],
                 ["backend", "install", "--help"])


@pytest.mark.parametrize("argv", HELP_COMMANDS, ids=" ".join)
def test_help_imports_no_heavy_library(argv: list[str]) -> None:
    """Help is printed, and the process that printed it never imported a heavy library."""
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, timeout=60,
                          check=True)
    help_text, _, modules_line = done.stdout.rpartition("MODULES ")
    assert help_text.startswith("usage: ge-console")
    modules = set(modules_line.split())
    loaded = sorted(m for m in modules if m.split(".")[0] in HEAVY or m.startswith(HEAVY))
    assert loaded == [], f"ge-console {' '.join(argv)} imported {loaded}"


@pytest.mark.parametrize(("verb", "subcommand"), [("k8s", "render"), ("backend", "install")])
def test_a_verb_with_subcommands_alone_prints_its_own_help(verb: str, subcommand: str) -> None:
    """`ge-console k8s` with no subcommand shows k8s's usage and subcommands (not the top-level help) and
    exits 2, a usage error."""
    done = subprocess.run([sys.executable, "-m", "triton_ge_console.cli", verb],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith(f"usage: ge-console {verb} ")
    assert subcommand in done.stderr
