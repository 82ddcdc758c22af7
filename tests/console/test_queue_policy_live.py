"""A queue policy against a real tritonserver: a 1-request queue under a burst refuses and times out
requests, and the console, `status --json` and `bench --json` report the same counts."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widgets import Static

from tests.waiting import until
from triton_ge_console.cli import main
from triton_ge_console.console.app import GEConsoleApp
from triton_ge_console.console.launch_session import open_record
from triton_ge_console.console.widgets.detail import DetailPane
from triton_ge_console.console.widgets.models import ModelsTable, model_fields
from triton_ge_console.sessions.server.paths import STATE_DIR_ENV
from triton_ge_console.sessions.server.registry import Registry

from .conftest import SIZE
from .leftovers import stop_leftover_sessions

pytestmark = [pytest.mark.timeout(400), pytest.mark.server]  # starts a tritonserver

# At the default level 2 one request may wait; the policy's own timeout (10 s) never expires, a request's
# 1 ms override does. Level 1 queues without limit and takes no override.
SPEC = """\
name: queued
server:
  metrics: {interval_ms: 500}
models:
  - name: bert_model
    backend: ge
    source: demo:bert
    max_batch_size: 1
    dynamic_batching:
      priority_levels: 2
      default_priority_level: 2
      priority_queue_policy:
        1: {timeout_action: REJECT}
      default_queue_policy:
        timeout_action: REJECT
        default_timeout_microseconds: 10000000
        allow_timeout_override: true
        max_queue_size: 1
    thresholds:
      timed_out: 1
"""
BENCH = ["--timeout-us", "1000", "--warmup-ms", "0", "--window-ms", "300", "--max-windows", "3",
         "--shape", "input_ids:8", "--shape", "attention_mask:8", "--quiet"]


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private state dir; every session started in it is stopped afterwards."""
    root = tmp_path / "state"
    monkeypatch.setenv(STATE_DIR_ENV, str(root))
    try:
        yield root
    finally:
        stop_leftover_sessions(root)


def _json_of(capsys: pytest.CaptureFixture[str], *args: str) -> object:
    """Run a ge-console command in-process; its JSON on stdout."""
    capsys.readouterr()
    assert main(list(args)) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _server_fail_count(http_url: str) -> int:
    """Triton's own statistics: failed requests of bert_model."""
    with urllib.request.urlopen(f"{http_url}/v2/models/bert_model/stats", timeout=10) as response:
        stats = json.loads(response.read())["model_stats"][0]["inference_stats"]
    return int(stats["fail"]["count"])


async def test_burst_is_refused_and_timed_out_and_every_view_counts_the_same(
        state: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "deploy.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    assert main(["up", str(spec), "--name", "queued", "--timeout", "180"]) == 0
    record = Registry().load("queued")
    assert record.http_url is not None
    report = _json_of(capsys, "bench", "bert_model", "--session", "queued", "--json", "--concurrency", "12",
                      *BENCH)
    assert isinstance(report, dict)
    rows = report["rows"]
    rejected, timed_out = sum(r["rejected"] for r in rows), sum(r["timed_out"] for r in rows)
    assert rejected > 0 and timed_out > 0, rows
    assert all(r["errors"] == 0 and r["requests"] > 0 for r in rows), rows
    again = _json_of(capsys, "bench", "bert_model", "--session", "queued", "--json", "--priority", "1",
                     "--concurrency", "4", *BENCH)
    assert isinstance(again, dict)
    first = again["rows"]
    assert [(r["rejected"], r["timed_out"], r["errors"]) for r in first] == [(0, 0, 0)], first

    status = _json_of(capsys, "status", "queued", "--json")
    assert isinstance(status, dict)
    (model,) = [m for m in status["models"] if m["name"] == "bert_model"]
    assert model["timed_out_total"] == timed_out
    # Triton counts a queue timeout as a failed request (reason REJECTED); a full queue's refusal, never
    reasons = dict(model["failures_by_reason"])
    assert reasons["REJECTED"] == timed_out and _server_fail_count(record.http_url) == sum(reasons.values())
    assert main(["status", "queued"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if "model bert_model v1: READY" in x]
    assert "failed: " in line and f"REJECTED {timed_out}" in line

    opened = open_record(record, Registry(), interval_s=0.5)
    app = GEConsoleApp(opened.source, opened.options)
    async with app.run_test(size=SIZE) as pilot:
        def shown() -> int | None:
            snapshot = app.connection.last_good
            found = snapshot.model("bert_model") if snapshot is not None else None
            return found.timed_out_total if found is not None else None

        await until(pilot, lambda: shown() == timed_out, timeout=60, what="timed-out count in the console")
        snapshot = app.connection.last_good
        assert snapshot is not None
        found = snapshot.model("bert_model")
        assert found is not None
        cells = model_fields(found, app.options.thresholds["bert_model"])
        assert cells[11] == (str(timed_out), "bold red", True)  # T/O, over the spec's threshold
        table = app.screen.query_one(ModelsTable)
        assert f" {timed_out} " in table.render_line(1).text.split("ge ", 1)[1]
        info = app.screen.query_one(DetailPane).query_one("#detail-info", Static)
        await until(pilot, lambda: f"timed out in queue {timed_out}" in str(info.render()), what="detail")
        assert "queue 1, timeout 10000000µs REJECT (overridable)" in str(info.render())
    assert main(["down", "queued"]) == 0
