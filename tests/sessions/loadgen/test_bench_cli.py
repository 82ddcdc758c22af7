"""`ge-console bench`: output schemas, sessions, and a clear error with the right exit code for bad input."""

from __future__ import annotations

import csv
import datetime
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import RunningServer
from triton_ge_console.cli import main
from triton_ge_console.sessions.loadgen.bench_cli import failure_text
from triton_ge_console.sessions.loadgen.report import client_bound_warnings
from triton_ge_console.sessions.loadgen.run import ROW_FIELDS, BenchRow

pytestmark = pytest.mark.timeout(120)

FAST = ["--window-ms", "300", "--warmup-ms", "200", "--max-windows", "4", "--quiet"]
REQUIRED = {"throughput_rps", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "server_queue_ms", "server_compute_ms"}


def bench(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run `ge-console bench ...` in-process; (exit code, stdout, stderr)."""
    try:
        code = main(["bench", *args])
    except SystemExit as exit_:  # argparse usage errors
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_json_has_its_context_and_one_row_per_step(bench_server: RunningServer,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """--json on stdout: what the run measured against, and one object per concurrency."""
    before = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    code, out, err = bench(capsys, "delay", "--url", bench_server.grpc_hostport, "--concurrency", "1,2",
                           "--json", *FAST)
    assert code == 0, err
    document = json.loads(out)
    context = document["context"]
    assert context["input_shapes"] == {"INPUT0": [1]}  # its -1 dim sent as 1, no batch dim (max_batch_size 0)
    with urllib.request.urlopen(f"{bench_server.http_url}/v2", timeout=10) as response:
        assert context["server_version"] == json.loads(response.read())["version"]
    assert re.fullmatch(r"[0-9a-f]{64}", context["config_digest"])
    assert before <= datetime.datetime.fromisoformat(context["started_at"]) <= datetime.datetime.now(
        datetime.timezone.utc)
    assert (context["model"], context["protocol"], context["batch_size"]) == ("delay", "grpc", 1)
    client = context["client"]
    assert client["cores"] == os.cpu_count() and client["cpu"]
    assert len(client["load_average_before"]) == 3 and len(client["load_average_after"]) == 3
    assert isinstance(document["warnings"], list)
    rows = document["rows"]
    assert [row["concurrency"] for row in rows] == [1, 2]
    for row in rows:
        assert set(row) >= REQUIRED and set(row) == set(ROW_FIELDS)
        assert row["rate"] is None and row["throughput_rps"] > 0 and row["p50_ms"] > 0


def test_csv_file_and_rate_mode(bench_server: RunningServer, capsys: pytest.CaptureFixture[str],
                                tmp_path: Path) -> None:
    """--csv FILE over HTTP in rate mode: a header of every field, one line per rate; the table on stdout."""
    target = tmp_path / "out.csv"
    code, out, err = bench(capsys, "delay", "--url", bench_server.http_hostport, "--protocol", "http",
                           "--rate", "30,60", "--distribution", "poisson", "--csv", str(target), *FAST)
    assert code == 0, err
    records = list(csv.DictReader(io.StringIO(target.read_text())))
    assert tuple(records[0]) == ROW_FIELDS
    assert [float(r["rate"]) for r in records] == [30.0, 60.0]
    assert all(r["concurrency"] == "" and float(r["throughput_rps"]) > 0 for r in records)
    assert "delay over http" in out and "p99 ms" in out and "30/s" in out


def test_progress_lines_go_to_stderr(bench_server: RunningServer, capsys: pytest.CaptureFixture[str]) -> None:
    """Without a terminal, one progress line per finished step on stderr; stdout stays clean JSON."""
    args = [a for a in FAST if a != "--quiet"]
    code, out, err = bench(capsys, "delay", "--url", bench_server.grpc_hostport, "--json", *args)
    assert code == 0
    assert json.loads(out)["rows"][0]["concurrency"] == 1
    assert "[1/1] concurrency 1:" in err and "req/s" in err


def test_session_name_resolves_through_the_registry(
        bench_server: RunningServer, capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """--session NAME uses the address the session registry recorded for the protocol."""
    registry = pytest.importorskip("triton_ge_console.sessions.server.registry")
    monkeypatch.setenv("GE_CONSOLE_STATE_DIR", str(tmp_path))
    registry.Registry().save(registry.SessionRecord(
        name="lab", pid=None, started_at=time.time(), http_url=bench_server.http_url,
        grpc_url=bench_server.grpc_hostport, metrics_url=bench_server.metrics_url, repository=None, spec=None,
        backend_dir=None, log_path=None, token_ref=None, attached=True, session_dir=None, state="ready"))
    digests = set()
    for protocol in ("grpc", "http"):
        code, out, err = bench(capsys, "delay", "--session", "lab", "--protocol", protocol, "--json", *FAST)
        assert code == 0, err
        document = json.loads(out)
        assert document["rows"][0]["protocol"] == protocol
        digests.add(document["context"]["config_digest"])
    assert len(digests) == 1  # the same config, whichever protocol reported it
    code, _, err = bench(capsys, "delay", "--session", "nope", *FAST)
    assert code == 2 and "no session named 'nope'" in err


@pytest.mark.parametrize(("args", "message"), [
    (["--concurrency", "0"], "every concurrency must be at least 1"),
    (["--concurrency", "two"], "expected integers"),
    (["--rate", "0"], "every rate must be > 0"),
    (["--rate", "-3"], "every rate must be > 0"),
    (["--rate", "10", "--concurrency", "2"], "not allowed with argument"),
    (["--shape", "INPUT0"], "expected NAME:DIMS"),
    (["--shape", "NOPE:3"], "has no such input"),
    (["--input", "INPUT0=/no/such/file.npy"], "no such file"),
    (["--batch-size", "2"], "does not batch"),
    (["--warmup-ms", "-1"], "must not be negative"),
])
def test_bad_arguments_exit_2_with_a_clear_message(
        bench_server: RunningServer, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    """Usage errors: exit code 2, the offending option and value in one line on stderr."""
    code, out, err = bench(capsys, "delay", "--url", bench_server.grpc_hostport, *FAST, *args)
    assert code == 2
    assert message in err and out == ""
    assert "Traceback" not in err


def test_unknown_model_exits_2(bench_server: RunningServer, capsys: pytest.CaptureFixture[str]) -> None:
    """A model the server does not serve is a bad argument, named with the server's words."""
    code, _, err = bench(capsys, "ghost", "--url", bench_server.grpc_hostport, *FAST)
    assert code == 2
    assert err.strip().splitlines() == [
        f"ge-console: error: model 'ghost' is not served at {bench_server.grpc_hostport}: "
        "Request for unknown model: 'ghost' is not found (READY: broken, delay, echo)"]


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_runtime_failures_exit_1(bench_server: RunningServer, capsys: pytest.CaptureFixture[str],
                                 protocol: str) -> None:
    """A model whose every request fails, and a server that is not there: exit code 1, one line."""
    url = bench_server.grpc_hostport if protocol == "grpc" else bench_server.http_hostport
    code, _, err = bench(capsys, "broken", "--url", url, "--protocol", protocol, *FAST)
    assert code == 1 and "every request failed" in err and "model says no" in err
    code, _, err = bench(capsys, "delay", "--url", "127.0.0.1:9", "--protocol", protocol, *FAST)
    assert code == 1 and "cannot talk to Triton at 127.0.0.1:9" in err
    assert len(err.strip().splitlines()) == 1


def test_failure_text_names_the_step_and_cause() -> None:
    """Failed requests (some or all) and empty windows each get one line saying what to do."""
    base = dict.fromkeys(ROW_FIELDS)
    base.update(model="m", protocol="grpc", batch_size=1, concurrency=4, throughput_rps=0.0,
                inferences_per_s=0.0, requests=0, errors=0, windows=3, stable=False)
    assert failure_text(BenchRow(**{**base, "errors": 7, "first_error": "boom"})) == \
        "every request failed at concurrency 4: boom"
    assert failure_text(BenchRow(**{**base, "errors": 2, "requests": 9, "first_error": "boom"})) == \
        "2 requests failed at concurrency 4: boom"
    assert "try a longer --window-ms" in failure_text(BenchRow(**base))


def test_a_client_far_slower_than_the_server_is_named_the_bottleneck() -> None:
    """Client latency far above the server's queue + compute gets a warning; close figures or gaps do not."""
    base = dict.fromkeys(ROW_FIELDS)
    base.update(model="m", protocol="grpc", batch_size=1, concurrency=8, throughput_rps=900.0,
                inferences_per_s=900.0, requests=2700, errors=0, windows=3, stable=True, client_cpu=0.98)
    slow_client = BenchRow(**{**base, "avg_ms": 9.0, "server_queue_ms": 0.5, "server_compute_ms": 1.0})
    assert client_bound_warnings([slow_client]) == [
        "concurrency 8: client latency 9.00 ms is 6.0x the server's 1.50 ms (queue + compute): the client or "
        "the network is the bottleneck, not the model (generator CPU 98%)"]
    server_bound = BenchRow(**{**base, "avg_ms": 9.0, "server_queue_ms": 3.0, "server_compute_ms": 5.5})
    tiny_gap = BenchRow(**{**base, "avg_ms": 0.6, "server_queue_ms": 0.05, "server_compute_ms": 0.1})
    unknown = BenchRow(**{**base, "avg_ms": 9.0})
    assert client_bound_warnings([server_bound, tiny_gap, unknown]) == []


def test_ctrl_c_keeps_the_steps_already_measured(bench_server: RunningServer) -> None:
    """SIGINT mid-sweep: the finished steps are still written, exit code 130, nothing left running."""
    command = [sys.executable, "-m", "triton_ge_console.cli", "bench", "delay",
               "--url", bench_server.grpc_hostport, "--concurrency", "1,2,4,8", "--json",
               "--window-ms", "300", "--warmup-ms", "100", "--max-windows", "20"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        seen = [process.stderr.readline() for _ in range(1)]
        while not seen[-1].startswith("[1/4] concurrency 1:") and seen[-1] and len(seen) < 50:
            seen.append(process.stderr.readline())  # skip anything else (warnings) before the first step
        assert seen[-1].startswith("[1/4] concurrency 1:"), seen
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130
    rows = json.loads(out)["rows"]
    assert 1 <= len(rows) < 4 and rows[0]["concurrency"] == 1
    assert "interrupted:" in err and "of 4 steps measured" in err


def test_a_sessions_token_goes_under_the_header_each_protocol_expects(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """HTTP sends the session's header as is; gRPC under Triton's restricted-protocol metadata key."""
    from triton_ge_console.sessions.loadgen.bench_shared import resolve_endpoint
    from triton_ge_console.sessions.server import registry

    monkeypatch.setenv("GE_CONSOLE_STATE_DIR", str(tmp_path))
    registry.Registry().save(registry.SessionRecord(
        name="locked", pid=None, started_at=time.time(), http_url="127.0.0.1:1", grpc_url="127.0.0.1:2",
        metrics_url=None, repository=None, spec=None, backend_dir=None, log_path=None,
        token_ref=registry.store_token(tmp_path / "locked", "s3cret"), attached=True, session_dir=None,
        state="ready"))
    header = registry.TOKEN_HEADER
    assert resolve_endpoint("locked", None, "http") == ("127.0.0.1:1", {header: "s3cret"})
    assert resolve_endpoint("locked", None, "grpc") == ("127.0.0.1:2",
                                                        {registry.grpc_token_header(header): "s3cret"})
