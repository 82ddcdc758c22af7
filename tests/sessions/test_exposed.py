"""An exposed session is locked: every endpoint wants the token, and what it leaves on disk is private.

Tests stay on loopback, so the token is forced on (a session with a token restricts exactly as an exposed
one does; `--listen` only changes the bind address).
"""

from __future__ import annotations

import json
import stat
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pytest
import tritonclient.grpc as triton_grpc
from tritonclient.utils import InferenceServerException

from tests.models import write_echo_model
from tests.sessions.helpers import group_processes
from triton_ge_console.cli import main
from triton_ge_console.sessions.act.control import ControlError, TritonControl
from triton_ge_console.sessions.launcher import LaunchOptions, launch
from triton_ge_console.sessions.loadgen.run import LoadError, LoadSpec, run_load_sync
from triton_ge_console.sessions.server.access import TRITON_CATEGORIES, token_headers
from triton_ge_console.sessions.server.registry import Registry, SessionRecord, grpc_token_header

pytestmark = pytest.mark.server  # every test here starts a tritonserver

TOKEN = "locked-s3cret"
WRONG = "locked-guess"
ECHO_INFER = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32",
                                     "data": [1, 2, 3, 4]}]}).encode()
HTTP_ENDPOINTS = (  # (method, path): one per Triton restricted-API category, and then some
    ("GET", "/v2/health/live"),
    ("GET", "/v2/health/ready"),
    ("GET", "/v2/models/echo/ready"),
    ("GET", "/v2"),
    ("GET", "/v2/models/echo"),
    ("POST", "/v2/models/echo/infer"),
    ("GET", "/v2/models/echo/config"),
    ("POST", "/v2/repository/index"),
    ("GET", "/v2/models/echo/stats"),
    ("GET", "/v2/systemsharedmemory/status"),
    ("GET", "/v2/trace/setting"),
    ("GET", "/v2/logging"),
)
HEALTH_PATHS = {"/v2/health/live", "/v2/health/ready", "/v2/models/echo/ready"}


@pytest.fixture
def echo_repo(tmp_path: Path) -> Path:
    """A repository with one Python-backend model."""
    write_echo_model(tmp_path / "repo", "echo")
    return tmp_path / "repo"


def http_call(url: str, method: str, headers: dict[str, str]) -> tuple[int, str]:
    """Status and body of one HTTP call (errors included)."""
    body = ECHO_INFER if path_of(url).endswith("/infer") else b"{}" if method == "POST" else None
    request = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", errors="replace")


def path_of(url: str) -> str:
    """The path part of a URL."""
    return "/" + url.split("://", 1)[1].split("/", 1)[1]


def grpc_calls(client: triton_grpc.InferenceServerClient) -> dict[str, Callable[[dict[str, str]], Any]]:
    """One gRPC call per restricted protocol category, each taking the metadata to send."""
    tensor = triton_grpc.InferInput("INPUT0", [1, 4], "FP32")
    tensor.set_data_from_numpy(np.ones((1, 4), dtype=np.float32))
    return {
        "live": lambda h: client.is_server_live(headers=h),
        "ready": lambda h: client.is_server_ready(headers=h),
        "model_ready": lambda h: client.is_model_ready("echo", headers=h),
        "server_metadata": lambda h: client.get_server_metadata(headers=h),
        "model_metadata": lambda h: client.get_model_metadata("echo", headers=h),
        "infer": lambda h: client.infer("echo", [tensor], headers=h),
        "config": lambda h: client.get_model_config("echo", headers=h),
        "index": lambda h: client.get_model_repository_index(headers=h),
        "statistics": lambda h: client.get_inference_statistics(headers=h),
        "shared_memory": lambda h: client.get_system_shared_memory_status(headers=h),
        "trace": lambda h: client.get_trace_settings(headers=h),
        "logging": lambda h: client.get_log_settings(headers=h),
    }


def test_triton_251_accepts_exactly_the_categories_we_restrict(triton_dist: Any) -> None:
    import subprocess

    shown = subprocess.run([str(triton_dist.binary), "--help"], capture_output=True, text=True,
                           env=triton_dist.environment(), timeout=60)
    text = " ".join((shown.stdout + shown.stderr).split())
    allowed = text.split("Allowed APIs:", 1)[1].split("GRPC:", 1)[0]
    assert sorted(a.strip(" .") for a in allowed.split(",")) == sorted(TRITON_CATEGORIES)


def test_every_endpoint_refuses_a_missing_or_wrong_token_and_serves_with_it(
        echo_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record = launch(LaunchOptions(source=echo_repo, name="locked", token=TOKEN, timeout=120))
    header = record.token_header
    for method, path in HTTP_ENDPOINTS:
        url = record.http_url + path
        for sent in ({}, {header: WRONG}):
            status, body = http_call(url, method, sent)
            assert status == 403 and "restricted" in body, (method, path, sent, status, body)
        status, body = http_call(url, method, {header: TOKEN})
        assert status == 200, (method, path, status, body)
    assert record.grpc_url is not None
    client = triton_grpc.InferenceServerClient(record.grpc_url)
    try:
        for name, call in grpc_calls(client).items():
            for sent in ({}, {grpc_token_header(header): WRONG}):
                with pytest.raises(InferenceServerException, match="restricted"):
                    call(sent)
                    pytest.fail(f"gRPC {name} was served with {sent}")
            call(token_headers(record, "grpc"))  # served with the token (raises otherwise)
    finally:
        client.close()
    refused_in_our_words(record)
    attach_sends_the_token(record, capsys)


def refused_in_our_words(record: SessionRecord) -> None:
    """Our clients say "token refused" for a wrong token and "token required" for none."""
    with pytest.raises(ControlError, match="token refused"):
        TritonControl(record.http_url, WRONG).index()
    with pytest.raises(ControlError, match="token required"):
        TritonControl(record.http_url).model_config("echo")
    assert record.grpc_url is not None
    spec = LoadSpec(model="echo", url=record.grpc_url, protocol="grpc", concurrency=(1,),
                    headers={grpc_token_header(record.token_header): WRONG}, max_windows=1,
                    stable_windows=1)
    with pytest.raises(LoadError, match="token refused"):
        run_load_sync(spec)


def attach_sends_the_token(record: SessionRecord, capsys: pytest.CaptureFixture[str]) -> None:
    """`attach` with a wrong token says so; with the right one it reads the server; detaching forgets it."""
    capsys.readouterr()
    assert main(["attach", record.http_url, "--name", "remote", "--token", WRONG]) == 1
    assert "token refused" in capsys.readouterr().err
    assert main(["attach", record.http_url, "--name", "remote", "--token", TOKEN]) == 0
    remote = Registry().load("remote")
    assert remote.models == ("echo",) and remote.token_ref is not None
    assert main(["down", "remote"]) == 0
    assert not Path(remote.token_ref[5:]).exists(), "detaching removes the token file too"


def test_public_health_leaves_only_liveness_and_readiness_open(
        echo_repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GE_TEST_TOKEN", TOKEN)
    assert main(["up", str(echo_repo), "--name", "probed", "--token-env", "GE_TEST_TOKEN",
                 "--public-health", "--timeout", "120"]) == 0
    record = Registry().load("probed")
    assert record.public_health
    for method, path in HTTP_ENDPOINTS:
        status, body = http_call(record.http_url + path, method, {})
        if path in HEALTH_PATHS:
            assert status == 200, (path, body)
        else:
            assert status == 403 and "restricted" in body, (path, status, body)
    capsys.readouterr()
    assert main(["status", "probed", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["models"][0]["state"] == "READY"  # the CLI sends the token
    for protocol in ("grpc", "http"):  # so does bench, on each protocol under the header it expects
        assert main(["bench", "echo", "--session", "probed", "--protocol", protocol, "--window-ms", "200",
                     "--warmup-ms", "0", "--max-windows", "3", "--quiet", "--json"]) == 0
        (row,) = json.loads(capsys.readouterr().out)["rows"]
        assert row["requests"] > 0 and row["errors"] == 0, row


def test_a_session_is_private_on_disk_and_in_memory(
        echo_repo: Path, state_dir: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GE_TEST_TOKEN", TOKEN)
    assert main(["up", str(echo_repo), "--name", "private", "--token-env", "GE_TEST_TOKEN",
                 "--timeout", "120"]) == 0
    registry = Registry()
    record = registry.load("private")
    assert record.pid is not None and record.session_dir is not None and record.token_ref is not None
    http_call(record.http_url + "/v2/models/echo/infer", "POST", {record.token_header: TOKEN})
    for folder in (state_dir, state_dir / "runs", state_dir / "sessions", record.session_dir):
        assert mode(folder) == 0o700, folder
    for path in (record.session_dir / "server.log", Path(record.token_ref[5:]), registry.path_for("private")):
        assert mode(path) == 0o600, path
    exposed = [p for p in record.session_dir.rglob("*") if mode(p) & 0o077 and not p.is_symlink()]
    assert exposed == []
    processes = group_processes(record.pid)
    assert len(processes) >= 2, "the server and its echo stub"
    for process in processes:
        assert umask(process.pid) == 0o077, process.cmdline()
        assert TOKEN not in "".join(process.environ().values()), process.cmdline()
    regions = shm_regions(processes)
    assert regions, "the Python backend maps its shared-memory regions"
    assert {path: mode(path) for path in regions} == dict.fromkeys(regions, 0o600)
    assert main(["down", "private"]) == 0
    assert not Path(record.token_ref[5:]).exists(), "down removes the token file"
    capsys.readouterr()
    assert main(["restart", "private"]) == 1, "never restarted without the token it had"
    assert "start it again with ge-console up ... --token" in capsys.readouterr().err


def mode(path: Path) -> int:
    """The permission bits of a path."""
    return stat.S_IMODE(path.lstat().st_mode)


def umask(pid: int) -> int:
    """A process's umask, as the kernel reports it."""
    for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
        if line.startswith("Umask:"):
            return int(line.split()[1], 8)
    raise AssertionError(f"no Umask line for {pid}")


def shm_regions(processes: list[psutil.Process]) -> list[Path]:
    """The /dev/shm files our server's processes have mapped (only ours, never another test's)."""
    regions: set[Path] = set()
    for process in processes:
        for line in Path(f"/proc/{process.pid}/maps").read_text(encoding="utf-8").splitlines():
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and fields[5].startswith("/dev/shm/") and " (deleted)" not in fields[5]:
                regions.add(Path(fields[5]))
    return sorted(regions)
