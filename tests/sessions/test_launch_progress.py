"""`up` reports how long Triton has been loading the models (Triton itself says nothing meanwhile), and
says a session is up only once its metrics port answers too."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.models import write_echo_model
from triton_ge_console.repository.progress import Feed
from triton_ge_console.sessions.launcher import LaunchError, LaunchOptions, launch
from triton_ge_console.sessions.lifecycle import down
from triton_ge_console.sessions.server.process import free_port, http_ok
from triton_ge_console.sessions.server.registry import Registry


@pytest.mark.server  # launches a real tritonserver
def test_the_wait_for_ready_models_reports_its_elapsed_time(tmp_path: Path) -> None:
    """A model whose initialize takes 1.5 s: the elapsed hook hears "loading echo" past a second, and
    the step lines still come through the same feed."""
    repo = tmp_path / "repo"
    model_py = write_echo_model(repo) / "1" / "model.py"
    slow = "    def initialize(self, args):\n        __import__('time').sleep(1.5)\n"
    model_py.write_text(model_py.read_text().replace("    def initialize(self, args):\n", slow))
    lines: list[str] = []
    waits: list[tuple[str, float]] = []
    registry = Registry()
    record = launch(LaunchOptions(source=repo, name="slowish", timeout=120), registry,
                    Feed(lines.append, elapsed=lambda what, seconds: waits.append((what, seconds))))
    try:
        assert http_ok(record.metrics_url or "")  # up means the console's first poll finds metrics
        loading = [seconds for what, seconds in waits if what == "loading echo"]
        assert max(loading) >= 1.0
        metrics_wait = f"waiting for metrics port {urlsplit(record.metrics_url or '').port}"
        assert {what for what, _ in waits} <= {"loading echo", metrics_wait}
        assert any(line.startswith("repository: ") for line in lines)
    finally:
        down(record, registry)


@pytest.mark.server  # launches a real tritonserver
def test_up_is_not_up_until_the_metrics_port_answers(tmp_path: Path) -> None:
    """Triton opens its metrics port after the HTTP one, so READY models alone do not make a session up (a
    console polling at once found "connection refused"). The window is brief; here it is made lasting: a
    later --metrics-port (Triton's last one wins) moves the metrics away from the recorded port, so `up`
    must time out naming that port instead of reporting the session up."""
    write_echo_model(tmp_path / "repo")
    recorded, elsewhere = free_port(), free_port()
    registry = Registry()
    with pytest.raises(LaunchError, match=rf"metrics port {recorded} did not answer within 20s"):
        launch(LaunchOptions(source=tmp_path / "repo", name="latemetrics", metrics_port=recorded, timeout=20,
                             extra_args=(f"--metrics-port={elsewhere}",)), registry)
    assert not registry.exists("latemetrics")  # the failed start left nothing behind


@pytest.mark.server  # launches a real tritonserver
def test_up_with_metrics_turned_off_does_not_wait_for_them(tmp_path: Path) -> None:
    """--allow-metrics=false: Triton opens no metrics port, so `up` must not wait for one."""
    write_echo_model(tmp_path / "repo")
    registry = Registry()
    record = launch(LaunchOptions(source=tmp_path / "repo", name="nometrics", timeout=120,
                                  extra_args=("--allow-metrics=false",)), registry)
    try:
        assert not http_ok(record.metrics_url or "")
    finally:
        down(record, registry)
