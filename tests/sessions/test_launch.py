"""One `ge` session launched from a spec (real tritonserver, ge glue, builder), shared by most tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import numpy as np
import pytest
import tritonclient.http as triton_http

from tests.sessions.conftest import ModuleSessions, module_sessions
from tests.sessions.helpers import write_ge_spec
from tests.waiting import wait_until
from triton_ge_console.cli import main
from triton_ge_console.sessions.act.changes import describe_changes, find_changes
from triton_ge_console.sessions.act.control import controller_for
from triton_ge_console.sessions.act.watch import watch_spec
from triton_ge_console.sessions.live import LiveSource
from triton_ge_console.sessions.observe.snapshot import Latency
from triton_ge_console.sessions.server.paths import STATE_DIR_ENV
from triton_ge_console.sessions.server.registry import Registry, SessionRecord

pytestmark = pytest.mark.server  # every test here starts a tritonserver

MODEL = "bert_model"


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleSessions]:
    """`up SPEC` once for the module; stopped at the end whatever happens."""
    with module_sessions(tmp_path_factory, "launch", write_ge_spec, {}) as up:
        yield up


@pytest.fixture
def session(shared: ModuleSessions, monkeypatch: pytest.MonkeyPatch) -> SessionRecord:
    """The shared session, with the CLI pointed at its state dir."""
    monkeypatch.setenv(STATE_DIR_ENV, str(shared.state_dir))
    return Registry().load(shared.records[0].name)


def bert_request(client: triton_http.InferenceServerClient, seq: int = 8) -> np.ndarray:
    """One request to the demo BERT; returns its pooled output."""
    inputs = []
    for name in ("input_ids", "attention_mask"):
        tensor = triton_http.InferInput(name, [1, seq], "INT64")
        tensor.set_data_from_numpy(np.ones((1, seq), dtype=np.int64))
        inputs.append(tensor)
    return client.infer(MODEL, inputs).as_numpy("pooled")


def hostport(record: SessionRecord) -> str:
    """host:port for tritonclient."""
    return record.http_url.removeprefix("http://")


def test_up_is_ready_and_status_json_has_the_contract_fields(session: SessionRecord,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["name"] == "gesession" and data["state"] == "ready"
    assert data["pid"] == session.pid and data["http_url"] == session.http_url
    assert data["grpc_url"] and data["metrics_url"].endswith("/metrics")
    assert Path(data["repository"], MODEL, "config.pbtxt").is_file()
    assert {"name": MODEL, "version": "1", "state": "READY"}.items() <= data["models"][0].items()
    assert session.session_dir is not None and Path(data["log_path"]).parent == session.session_dir


def test_ls_lists_the_session(session: SessionRecord, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ls"]) == 0
    out = capsys.readouterr().out
    assert "gesession" in out and "ready" in out and session.http_url in out


def test_the_server_runs_outside_the_repository_and_serves(session: SessionRecord) -> None:
    assert session.session_dir is not None and session.repository is not None
    assert session.repository.is_relative_to(session.session_dir)
    cmdline = Path(f"/proc/{session.pid}/cmdline").read_bytes().split(b"\0")
    assert b"--model-control-mode=explicit" in cmdline and b"--http-address=127.0.0.1" in cmdline
    assert Path(f"/proc/{session.pid}/cwd").resolve() == session.session_dir.resolve()
    client = triton_http.InferenceServerClient(hostport(session))
    try:
        assert bert_request(client).shape[0] == 1
    finally:
        client.close()


def test_percentiles_come_from_sampled_traces_with_summaries_off(session: SessionRecord) -> None:
    """The spec leaves summaries off (the default): the console samples the session's requests into its
    trace file and the snapshot's p50/p90/p99 come from there, labelled "trace"."""
    assert session.metrics_url is not None
    with urllib.request.urlopen(session.metrics_url, timeout=30) as page:
        assert b"nv_inference_request_summary_us" not in page.read()
    source = LiveSource.from_record(session, npu_smi=None)
    client = triton_http.InferenceServerClient(hostport(session))

    def traced() -> Latency | None:
        bert_request(client)
        model = source.poll().model(MODEL)
        return model.latency if model is not None and model.latency.source == "trace" else None

    try:
        latency = wait_until(traced, 60, what="p50/p99 from the session's trace file")
    finally:
        source.close()
        client.close()
    assert latency is not None and latency.p50_ms is not None and latency.p90_ms is not None
    assert latency.p99_ms is not None and 0 < latency.p50_ms <= latency.p90_ms <= latency.p99_ms
    assert list(session.session_dir.glob("trace.json*"))  # type: ignore[union-attr]


def test_unknown_model_is_one_clear_line(session: SessionRecord, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["load", "no_such_model"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "unknown model 'no_such_model'" in err and MODEL in err


def test_reload_under_load_fails_no_request_and_applies_the_new_config(session: SessionRecord) -> None:
    stop = threading.Event()
    counts = {"ok": 0, "failed": 0}
    errors: list[str] = []
    lock = threading.Lock()

    def client_loop() -> None:
        client = triton_http.InferenceServerClient(hostport(session), network_timeout=120)
        try:
            while not stop.is_set():
                try:
                    bert_request(client)
                    outcome = "ok"
                except Exception as exc:  # every failure counts, whatever its kind
                    outcome = "failed"
                    errors.append(str(exc))
                with lock:
                    counts[outcome] += 1
        finally:
            client.close()

    threads = [threading.Thread(target=client_loop) for _ in range(4)]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: counts["ok"] >= 8)
        override = {"max_batch_size": 4, "dynamic_batching": {"preferred_batch_size": [4]}}
        result = controller_for(session).reload(MODEL, json.dumps(override))
        served_before = counts["ok"]
        wait_until(lambda: counts["ok"] >= served_before + 8)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=120)
    assert result.ok, result.message
    assert counts["failed"] == 0, errors[:3]
    assert controller_for(session).model_config(MODEL)["max_batch_size"] == 4


def test_reload_of_a_broken_config_reports_it_and_the_old_model_still_answers(
        session: SessionRecord, capsys: pytest.CaptureFixture[str]) -> None:
    broken = json.dumps({"parameters": {"execution_mode": {"string_value": "warp-drive"}}})
    assert main(["reload", MODEL, "--config", broken]) == 1
    err = capsys.readouterr().err
    assert "execution_mode 'warp-drive'" in err and "Triton kept version 1 serving" in err
    client = triton_http.InferenceServerClient(hostport(session))
    try:
        assert bert_request(client).shape[0] == 1
    finally:
        client.close()


def test_attach_registers_the_server_and_down_only_detaches(session: SessionRecord,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["attach", session.http_url, "--name", "remote"]) == 0
    assert main(["status", "remote", "--json"]) == 0
    data = json.loads(capsys.readouterr().out.split("\n", 1)[1])
    assert data["attached"] and data["state"] == "ready"
    assert any(m["name"] == MODEL and m["state"] == "READY" for m in data["models"])
    assert main(["reload", MODEL, "-s", "remote"]) == 0
    assert main(["down", "remote"]) == 0
    assert "detached" in capsys.readouterr().out
    assert not Registry().exists("remote")
    assert controller_for(session).live()


def test_an_attached_session_without_a_metrics_url_reads_not_given_never_off(
        session: SessionRecord, capsys: pytest.CaptureFixture[str]) -> None:
    """Attached without --metrics-url (beside no default port 8000), a server's metrics are unknown, not off:
    status says they were not given and how to give them. Reproduced first: status printed "metrics off"."""
    assert main(["attach", session.http_url, "--name", "unmetered"]) == 0
    try:
        assert Registry().load("unmetered").metrics_url is None
        capsys.readouterr()
        assert main(["status", "unmetered"]) == 0
        out = capsys.readouterr().out
        assert "metrics off" not in out
        hint = "(ge-console down unmetered, then attach again with --metrics-url URL)"
        assert f"metrics not given {hint}" in out
    finally:
        assert main(["down", "unmetered"]) == 0


def test_reload_changed_rebuilds_from_the_spec_and_reloads_what_changed(
        shared: ModuleSessions, session: SessionRecord, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reload", "--changed"]) == 0
    assert "no model changed" in capsys.readouterr().out
    before = controller_for(session).model_config(MODEL)["max_batch_size"]
    write_ge_spec(shared.spec.parent, max_batch_size=6)
    assert main(["reload", "--changed"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{MODEL}: updated: max_batch_size {before} → 6"  # what changed, before what was done
    assert any(line.startswith(f"reload {MODEL}: new instance of version 1 READY") for line in out[1:])
    assert controller_for(session).model_config(MODEL)["max_batch_size"] == 6
    assert main(["reload", "--changed"]) == 0
    assert "no model changed" in capsys.readouterr().out


def test_reload_changed_of_an_instance_count_edit_serves_the_new_count(
        shared: ModuleSessions, session: SessionRecord, capsys: pytest.CaptureFixture[str]) -> None:
    control = controller_for(session)
    batch = control.model_config(MODEL)["max_batch_size"]  # only instance_group changes: updated in place
    spec = write_ge_spec(shared.spec.parent, max_batch_size=batch)
    plain = spec.read_text(encoding="utf-8")
    try:
        spec.write_text(plain + "    instance_group:\n      count: 2\n", encoding="utf-8")
        assert main(["reload", "--changed"]) == 0
        assert control.model_config(MODEL)["instance_group"][0]["count"] == 2
        capsys.readouterr()
        spec.write_text(plain, encoding="utf-8")
        assert main(["reload", "--changed"]) == 0
        out = capsys.readouterr().out
        assert control.model_config(MODEL)["instance_group"][0]["count"] == 1, out
        reloaded = [line for line in out.splitlines() if line.startswith(f"reload {MODEL}: new instance")]
        assert reloaded and "instance_group[0].count 2 → 1" in reloaded[0], out
    finally:
        spec.write_text(plain, encoding="utf-8")
        assert main(["reload", "--changed"]) == 0


def test_a_single_model_reload_counts_for_reload_changed(session: SessionRecord) -> None:
    assert session.repository is not None
    config = session.repository / MODEL / "config.pbtxt"
    original = config.read_text(encoding="utf-8")
    config.write_text(original + "\n# edited by hand\n", encoding="utf-8")
    try:
        assert find_changes(session).updated == (MODEL,)
        assert describe_changes(session, controller_for(session), find_changes(session)) == [
            f"{MODEL}: updated: its files changed; the fields its config.pbtxt sets are the ones served"]
        assert main(["reload", MODEL]) == 0
        assert find_changes(session).empty, "reload MODEL did not record the digest it loaded"
    finally:
        config.write_text(original, encoding="utf-8")
        assert main(["reload", MODEL]) == 0
    assert find_changes(session).empty


def test_unload_then_load_leave_reload_changed_with_nothing_to_do(session: SessionRecord) -> None:
    assert find_changes(session).empty
    assert main(["unload", MODEL]) == 0
    assert find_changes(session).empty, "reload --changed would load back a model the operator unloaded"
    assert main(["load", MODEL]) == 0
    assert find_changes(session).empty
    assert controller_for(session).model_config(MODEL)["name"] == MODEL


def test_watch_reloads_on_save_and_a_broken_edit_keeps_the_old_model(shared: ModuleSessions,
                                                                     session: SessionRecord) -> None:
    lines: list[str] = []
    stop = threading.Event()
    control = controller_for(session)
    watcher = threading.Thread(target=watch_spec, args=(session, control, lines.append, Registry(), stop),
                               kwargs={"debounce_ms": 100})
    watcher.start()
    try:
        wait_until(lambda: any(line.startswith("watching") for line in lines))
        _save_until(lambda: write_ge_spec(shared.spec.parent, max_batch_size=3),
                    lambda: any(f"reload {MODEL}" in line for line in lines))
        assert control.model_config(MODEL)["max_batch_size"] == 3
        shared.spec.write_text(shared.spec.read_text().replace("max_batch_size: 3", "max_batch_size: lots"))
        wait_until(lambda: any("spec not applied" in line for line in lines))
    finally:
        stop.set()
        watcher.join(timeout=30)
    problems = [line for line in lines if line.startswith("error:")]
    assert problems and "deploy.yaml:" in problems[0] and "max_batch_size" in problems[0]
    assert control.model_config(MODEL)["max_batch_size"] == 3
    client = triton_http.InferenceServerClient(hostport(session))
    try:
        assert bert_request(client).shape[0] == 1
    finally:
        client.close()


def test_the_watch_command_applies_saves_until_ctrl_c(shared: ModuleSessions, session: SessionRecord) -> None:
    env = {**os.environ, STATE_DIR_ENV: str(shared.state_dir), "PYTHONUNBUFFERED": "1"}
    watcher = subprocess.Popen([sys.executable, "-m", "triton_ge_console.cli", "watch", str(shared.spec)],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=_collect, args=(watcher.stdout, lines))
    reader.start()
    try:
        wait_until(lambda: any(line.startswith("watching") for line in lines))
        _save_until(lambda: write_ge_spec(shared.spec.parent, max_batch_size=5),
                    lambda: any(f"reload {MODEL}" in line for line in lines))
        assert controller_for(session).model_config(MODEL)["max_batch_size"] == 5
        watcher.send_signal(signal.SIGINT)
        assert watcher.wait(timeout=60) == 0
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()
        reader.join(timeout=10)
    assert "stopped watching" in "".join(lines)


def _collect(stream: IO[str] | None, lines: list[str]) -> None:
    """Append every line of a child's output as it arrives."""
    assert stream is not None
    for line in stream:
        lines.append(line)


def _save_until(save: Callable[[], object], reacted: Callable[[], bool], timeout: float = 120.0) -> None:
    """Save, then wait for the watcher's reaction; save again if it missed the first one.

    "watching" is printed just before watchfiles arms its inotify watch, so under load the first save
    can land before the watch exists. Saving the same content again is a new event, and the rebuild
    still finds the repository behind the spec.
    """
    deadline = time.monotonic() + timeout
    while True:
        save()
        try:
            wait_until(reacted, timeout=5.0)
            return
        except AssertionError:
            assert time.monotonic() < deadline, "timed out waiting for the watcher to react to a save"
