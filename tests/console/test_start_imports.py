"""The console's first frame waits for no library that only a later step needs: the Triton clients (a
model command, a test request), protobuf (a config.pbtxt read once figures arrive), numpy and ONNX (the
builder, the load generator) are imported where they are used."""

from __future__ import annotations

import subprocess
import sys

import pytest

# What each start imports before the app's first frame: its app module, and the session's live source
# (`ge-console console -s NAME` builds it before the app runs).
STARTS = {
    "session": ("triton_ge_console.console.app", "triton_ge_console.sessions.live",
                "triton_ge_console.console.launch_session"),
    "fleet": ("triton_ge_console.console.fleet_app", "triton_ge_console.fleet.members"),
}
# Together 0.3-0.5 s of a loaded host's 1 s to the first frame (benchmarks/console_start.py).
LATER = ("tritonclient", "grpc", "google.protobuf", "numpy", "ml_dtypes", "onnx", "onnxruntime", "gevent",
         "geventhttpclient")


@pytest.mark.parametrize("start", sorted(STARTS))
def test_the_console_starts_without_the_clients_protobuf_numpy_or_onnx(start: str) -> None:
    """A fresh interpreter that imports what a start imports has loaded none of LATER."""
    probe = f"import sys, {', '.join(STARTS[start])}; print(' '.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                          check=True)
    modules = done.stdout.split()
    loaded = [name for name in LATER if any(m == name or m.startswith(f"{name}.") for m in modules)]
    assert loaded == [], f"the {start} console's start imported {loaded}"
