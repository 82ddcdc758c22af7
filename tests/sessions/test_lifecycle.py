"""Launch, kill, stop, restart and expose real servers; every bad input is one clear line on stderr."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
import tritonclient.grpc as triton_grpc
from tritonclient.utils import InferenceServerException

from tests.conftest import RunningServer
from tests.models import write_echo_model
from tests.sessions.helpers import group_processes, write_ge_spec
from tests.waiting import wait_until
from triton_ge_console.backend_glue.distribution import find_distribution
from triton_ge_console.cli import main
from triton_ge_console.session_states import DEAD
from triton_ge_console.sessions.act.control import ControlError, TritonControl, controller_for
from triton_ge_console.sessions.lifecycle import restart
from triton_ge_console.sessions.server.paths import STATE_DIR_ENV
from triton_ge_console.sessions.server.process import port_in_use
from triton_ge_console.sessions.server.registry import (
    Registry,
    SessionRecord,
    effective_state,
    grpc_token_header,
)


@pytest.fixture
def echo_repo(tmp_path: Path) -> Path:
    """A repository with one Python-backend model."""
    write_echo_model(tmp_path / "repo", "echo")
    return tmp_path / "repo"


def up(*args: object) -> int:
    """`ge-console up ...` in-process."""
    return main(["up", *(str(a) for a in args), "--timeout", "120"])


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    """The single line a failing command wrote to stderr."""
    err = capsys.readouterr().err.strip()
    assert err and "\n" not in err and "Traceback" not in err, err
    return err


def processes_mentioning(text: str) -> list[psutil.Process]:
    """Live processes whose command line contains text."""
    return [p for p in psutil.process_iter(["cmdline", "status"])
            if text in " ".join(p.info["cmdline"] or []) and p.info["status"] != psutil.STATUS_ZOMBIE]


def ports_of(record: SessionRecord) -> list[int]:
    """The three ports of a session."""
    return [int(url.rstrip("/metrics").rsplit(":", 1)[1]) for url in
            (record.http_url, record.grpc_url or "", record.metrics_url or "")]


@pytest.mark.server
def test_kill_9_of_the_server_reads_dead_within_2s_with_the_log_tail(
        echo_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert up(echo_repo, "--name", "victim") == 0
    record = Registry().load("victim")
    assert record.pid is not None
    os.kill(record.pid, signal.SIGKILL)
    killed = time.monotonic()
    while effective_state(Registry().load("victim")) != DEAD:
        assert time.monotonic() - killed < 2.0, "session did not read dead within 2 s"
        time.sleep(0.02)
    capsys.readouterr()
    assert main(["status", "victim", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["state"] == "dead" and data["log_tail"]
    assert data["exit_code"] == -signal.SIGKILL and "killed by SIGKILL" in data["error"]
    assert main(["down", "victim"]) == 0
    assert not group_processes(record.pid)


@pytest.mark.server
def test_restart_env_reaches_only_that_server_and_the_glue_pool_lives_in_the_session(
        echo_repo: Path) -> None:
    assert up(echo_repo, "--name", "envsvc") == 0
    registry = Registry()
    first = registry.load("envsvc")
    try:
        assert first.pid is not None and first.session_dir is not None
        first_env = server_environ(first.pid)
        assert first_env["GE_GLUE_RUN_DIR"] == str(first.session_dir / "ge-glue")
        assert first_env["GE_NPU_MEMORY_GIB"] == "64"
        assert "ASCEND_GLOBAL_LOG_LEVEL" not in first_env
        second = restart(first, registry, env={"ASCEND_GLOBAL_LOG_LEVEL": "1"})
        assert second.pid is not None
        assert server_environ(second.pid)["ASCEND_GLOBAL_LOG_LEVEL"] == "1"
        assert "ASCEND_GLOBAL_LOG_LEVEL" not in os.environ
    finally:
        assert main(["down", "envsvc"]) == 0


def server_environ(pid: int) -> dict[str, str]:
    """The environment a running process was started with."""
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


@pytest.mark.server
def test_restart_keeps_the_ports_and_down_leaves_no_process_and_frees_them(
        echo_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert up(echo_repo, "--name", "svc") == 0
    first = Registry().load("svc")
    assert first.pid is not None
    assert len(group_processes(first.pid)) >= 2, "server (the group leader) and its Python backend stub"
    assert up(echo_repo, "--name", "svc") == 1
    assert "already serving" in one_error_line(capsys)
    config = echo_repo / "echo" / "config.pbtxt"
    config.write_text(config.read_text().replace('string_value: "2"', 'string_value: "7"'))
    assert main(["reload", "--changed"]) == 0
    assert "reload echo: new instance of version 1 READY" in capsys.readouterr().out
    assert controller_for(first).model_config("echo")["parameters"]["scale"]["string_value"] == "7"
    assert main(["reload", "--changed"]) == 0
    assert "no model changed" in capsys.readouterr().out
    assert main(["restart"]) == 0
    second = Registry().load("svc")
    assert second.pid != first.pid and second.http_url == first.http_url
    assert not group_processes(first.pid)
    capsys.readouterr()
    assert main(["status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["state"] == "ready"
    assert second.pid is not None
    assert main(["down"]) == 0
    assert not group_processes(second.pid)
    assert not any(port_in_use(port) for port in ports_of(second))
    assert effective_state(Registry().load("svc")) == "stopped"
    assert main(["down", "svc"]) == 0
    assert "already stopped" in capsys.readouterr().out


def test_exposing_without_a_token_is_refused(echo_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert up(echo_repo, "--listen", "0.0.0.0") == 1
    err = one_error_line(capsys)
    assert "--listen 0.0.0.0" in err and "--token" in err
    assert Registry().names() == []


@pytest.mark.server
def test_an_exposed_server_restricts_its_control_apis_to_the_token(
        echo_repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GE_TEST_TOKEN", "s3cret-token")
    assert up(echo_repo, "--name", "exposed", "--listen", "0.0.0.0", "--token-env", "GE_TEST_TOKEN") == 0
    captured = capsys.readouterr()
    assert "warning: exposing Triton on 0.0.0.0" in captured.err
    assert "s3cret-token" not in captured.out + captured.err
    registry = Registry()
    record = registry.load("exposed")
    assert "s3cret-token" not in registry.path_for("exposed").read_text()
    assert record.token_ref is not None and record.token_ref.startswith("file:")
    assert stat.S_IMODE(Path(record.token_ref[5:]).stat().st_mode) == 0o600
    with pytest.raises(ControlError, match="token required"):
        TritonControl(record.http_url).index()
    assert any(m.name == "echo" and m.state == "READY" for m in controller_for(record).index())
    assert main(["reload", "echo"]) == 0
    for method, path in (("GET", "/v2/models/stats"), ("POST", "/v2/systemsharedmemory/region/r/register")):
        assert "restricted" in refused(f"{record.http_url}{path}", method)
    assert listening_addresses(ports_of(record)[2]) == {"127.0.0.1"}, "metrics stay on loopback"
    assert record.grpc_url is not None
    grpc_client = triton_grpc.InferenceServerClient(record.grpc_url)
    try:
        with pytest.raises(InferenceServerException, match="restricted"):
            grpc_client.get_model_repository_index()
        with pytest.raises(InferenceServerException, match="restricted"):
            grpc_client.get_inference_statistics()
        with pytest.raises(InferenceServerException, match="restricted"):
            grpc_client.register_system_shared_memory("r", "/ge_test_region", 64)
        index = grpc_client.get_model_repository_index(headers={grpc_token_header(): "s3cret-token"})
        assert [m.name for m in index.models] == ["echo"]
    finally:
        grpc_client.close()


def refused(url: str, method: str) -> str:
    """The body of Triton's refusal of a request sent without the token (fails if it was served)."""
    body = b'{"key": "/ge_test_region", "offset": 0, "byte_size": 64}' if method == "POST" else None
    try:
        urllib.request.urlopen(urllib.request.Request(url, data=body, method=method), timeout=10)
    except urllib.error.HTTPError as exc:
        return exc.read().decode("utf-8", errors="replace")
    raise AssertionError(f"{method} {url} was served without the token")


def listening_addresses(port: int) -> set[str]:
    """The local addresses something listens on at port."""
    return {c.laddr.ip for c in psutil.net_connections("tcp")
            if c.status == psutil.CONN_LISTEN and c.laddr.port == port}


@pytest.mark.server
def test_the_cli_detaches_and_another_process_sees_and_stops_the_server(
        echo_repo: Path, state_dir: Path) -> None:
    env = {**os.environ, STATE_DIR_ENV: str(state_dir)}
    cli = [sys.executable, "-m", "triton_ge_console.cli"]
    started = subprocess.run([*cli, "up", str(echo_repo), "--name", "cli"],
                             env=env, capture_output=True, text=True, timeout=180)
    assert started.returncode == 0, started.stderr
    assert "found via" in started.stdout and "session 'cli' ready" in started.stdout
    record = Registry().load("cli")
    assert record.pid is not None and effective_state(record) == "ready"
    status = subprocess.run([*cli, "status", "--json"],
                            env=env, capture_output=True, text=True, timeout=60)
    assert json.loads(status.stdout)["models"][0]["state"] == "READY"
    stopped = subprocess.run([*cli, "down", "cli"],
                             env=env, capture_output=True, text=True, timeout=60)
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    assert not group_processes(record.pid)
    assert not any(port_in_use(port) for port in ports_of(record))


@pytest.mark.server
def test_a_stop_whose_caller_is_killed_midway_still_reads_stopped(echo_repo: Path, state_dir: Path) -> None:
    """`down` is killed (as a kernel Jupyter gives up on, or a console killed while it stops its server)
    after its SIGTERM reached the server: the server goes all the same, and the session then reads
    stopped, not dead."""
    write_echo_model(echo_repo, "echo", unload_s=3)
    assert up(echo_repo, "--name", "halted") == 0
    record = Registry().load("halted")
    assert record.pid is not None and record.log_path is not None
    env = {**os.environ, STATE_DIR_ENV: str(state_dir)}
    stopper = subprocess.Popen([sys.executable, "-m", "triton_ge_console.cli", "down", "halted"], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: "Signal (15) received" in record.log_path.read_text(encoding="utf-8"), 60.0,
                   what="the server told to stop")
    finally:
        stopper.kill()
        stopper.wait(timeout=20)
    wait_until(lambda: not group_processes(record.pid), 60.0, what="the server gone")
    assert effective_state(Registry().load("halted")) == "stopped"


@pytest.mark.server
def test_status_reads_without_arming_the_servers_tracing(
        echo_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A one-shot status (of one session, or of all) asks and changes nothing: the sampled tracing a
    console keeps up for percentiles is not switched on for a look that ends at once."""
    assert up(echo_repo, "--name", "looked") == 0
    record = Registry().load("looked")
    setting_url = f"{record.http_url}/v2/models/echo/trace/setting"

    def trace_level() -> list[str]:
        with urllib.request.urlopen(setting_url, timeout=30) as answer:
            return list(json.loads(answer.read())["trace_level"])

    try:
        assert trace_level() == ["OFF"]
        capsys.readouterr()
        assert main(["status", "looked", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["state"] == "ready"
        assert main(["status", "--all", "--json"]) == 0
        assert "looked" in capsys.readouterr().out
        assert trace_level() == ["OFF"]
    finally:
        assert main(["down", "looked"]) == 0


@pytest.mark.server
def test_a_model_that_fails_to_load_reports_triton_error_and_leaves_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "broken"
    config = write_echo_model(repo, "echo") / "config.pbtxt"
    config.write_text(config.read_text().replace('key: "scale"', 'key: "other"'))
    assert up(repo, "--name", "broken") == 1
    err = one_error_line(capsys)
    assert "model 'echo' failed to load" in err and "KeyError: 'scale'" in err
    assert Registry().names() == []
    assert not processes_mentioning(str(repo))


@pytest.mark.server
def test_a_port_in_use_is_one_clear_line(echo_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert up(echo_repo, "--http-port", port) == 1
    assert f"http port {port} is already in use" in one_error_line(capsys)


def test_a_missing_binary_is_one_clear_line(echo_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert up(echo_repo, "--tritonserver", "/nonexistent/bin/tritonserver") == 1
    assert "--tritonserver /nonexistent/bin/tritonserver: no such file" in one_error_line(capsys)


@pytest.mark.server  # runs the real binary (it fails to start)
def test_a_missing_library_is_reported_from_the_log_and_leaves_nothing(
        echo_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dist = find_distribution()
    if dist.origin != "nvidia-pytriton" or dist.libs_dir is None:
        pytest.skip("needs the pytriton wheel, whose stub only finds its libraries through our environment")
    # named explicitly, the wheel's binary is run as a native install: without the wheel's bundled libraries
    assert up(echo_repo, "--name", "nolib", "--tritonserver", dist.binary) == 1
    err = one_error_line(capsys)
    assert "error while loading shared libraries" in err
    assert Registry().names() == []
    assert not processes_mentioning("runs/nolib")


def test_a_missing_repository_is_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert up(tmp_path / "nowhere") == 1
    assert f"{tmp_path / 'nowhere'}: no such spec file or model repository" in one_error_line(capsys)


def test_a_broken_spec_names_file_line_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_ge_spec(tmp_path / "spec")
    spec.write_text(spec.read_text().replace("max_batch_size: 8", "max_batch_size: lots"))
    assert up(spec) == 1
    err = one_error_line(capsys)
    assert f"{spec}:9:" in err and "max_batch_size" in err


def test_a_corrupt_session_file_is_one_clear_line(capsys: pytest.CaptureFixture[str]) -> None:
    registry = Registry()
    registry.root.mkdir(parents=True)
    registry.path_for("bad").write_text("name: bad\nhttp_url: [oops\n")
    assert main(["status", "bad"]) == 1
    err = one_error_line(capsys)
    assert str(registry.path_for("bad")) in err and "line 3" in err
    assert main(["ls"]) == 1
    assert "bad.yaml" in one_error_line(capsys)


def test_commands_on_a_stopped_session_say_what_to_do(capsys: pytest.CaptureFixture[str]) -> None:
    Registry().save(SessionRecord(
        name="old", pid=None, started_at=time.time(), http_url="http://127.0.0.1:1", grpc_url=None,
        metrics_url=None, repository=None, spec=None, backend_dir=None, log_path=None, token_ref=None,
        attached=False, session_dir=None, state="stopped"))
    assert main(["reload", "echo"]) == 1
    assert "session 'old' is stopped" in one_error_line(capsys)
    assert main(["reload"]) == 2


def test_attach_to_nothing_is_one_clear_line(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert main(["attach", f"http://127.0.0.1:{port}", "--name", "ghost"]) == 1
    assert "no Triton server answers there" in one_error_line(capsys)


def test_a_second_attach_of_the_same_server_is_refused_naming_the_first(
        triton_factory: Callable[..., RunningServer], python_backends: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    write_echo_model(tmp_path / "repo", "echo")
    server = triton_factory(tmp_path / "repo", python_backends, ("echo",))
    url = f"http://127.0.0.1:{server.ports.http}"
    assert main(["attach", url, "--name", "first"]) == 0
    capsys.readouterr()
    for again in (url, f"http://localhost:{server.ports.http}/"):  # the same server, however spelled
        assert main(["attach", again, "--name", "second"]) == 1
        assert capsys.readouterr().err == (
            f"ge-console: error: {url} is already attached as session 'first': "
            f"use -s first, or ge-console down first to attach it anew\n")
    assert not Registry().exists("second")
    assert main(["down", "first"]) == 0
    assert main(["attach", url, "--name", "second"]) == 0  # once detached, it may be attached again


@pytest.mark.server
def test_down_says_what_it_waits_for_then_what_it_did(tmp_path: Path, state_dir: Path) -> None:
    write_echo_model(tmp_path / "repo", "slow", unload_s=2.0)  # Triton waits for its unload on SIGTERM
    write_echo_model(tmp_path / "repo", "echo")
    assert up(tmp_path / "repo", "--name", "gen") == 0
    record = Registry().load("gen")
    env = {**os.environ, STATE_DIR_ENV: str(state_dir)}
    stopped = subprocess.run([sys.executable, "-m", "triton_ge_console.cli", "down", "gen"],
                             env=env, capture_output=True, text=True, timeout=60)
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.splitlines() == [
        f"stopping 'gen': waiting for tritonserver (pid {record.pid}) to unload 2 models (echo, slow)…",
        "session 'gen' stopped"]
