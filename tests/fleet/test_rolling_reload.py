"""`ge-console reload MODEL --fleet` across three real tritonservers under load: one server at a time, no
failed request, and a stop at a broken server that leaves the rest untouched."""

from __future__ import annotations

import re
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as triton_http

from tests.conftest import RunningServer, run_triton
from tests.models import echo_config, write_echo_model
from triton_ge_console.backend_glue.distribution import TritonDistribution
from triton_ge_console.cli import main
from triton_ge_console.sessions.server.paths import STATE_DIR_ENV


@pytest.fixture(scope="module")
def fleet_servers(triton_dist: TritonDistribution, python_backends: Path,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[tuple[RunningServer, Path]]]:
    """Three servers, each on its own copy of a repository with the echo model (scale 2)."""
    root = tmp_path_factory.mktemp("rolling")
    backends = python_backends
    repos = [root / f"repo{i}" for i in (1, 2, 3)]
    for repo in repos:
        write_echo_model(repo, "echo")
    extra = ("--exit-timeout-secs=3",)
    with run_triton(triton_dist, repos[0], backends, ("echo",), extra) as one, \
         run_triton(triton_dist, repos[1], backends, ("echo",), extra) as two, \
         run_triton(triton_dist, repos[2], backends, ("echo",), extra) as three:
        yield list(zip([one, two, three], repos, strict=True))


@pytest.fixture
def attached(fleet_servers: list[tuple[RunningServer, Path]], tmp_path: Path,
             monkeypatch: pytest.MonkeyPatch) -> list[tuple[RunningServer, Path]]:
    """The three servers as sessions s1..s3 of this test's own state dir."""
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    for index, (server, _) in enumerate(fleet_servers, 1):
        name = f"s{index}"
        assert main(["attach", server.http_url, "--name", name, "--metrics-url", server.metrics_url]) == 0
    return fleet_servers


def _scale(server: RunningServer) -> float:
    """What the served echo model multiplies by (its `scale`), from one request."""
    client = triton_http.InferenceServerClient(server.http_hostport)
    try:
        data = triton_http.InferInput("INPUT0", [1, 4], "FP32")
        data.set_data_from_numpy(np.ones((1, 4), dtype=np.float32))
        return float(client.infer("echo", [data]).as_numpy("OUTPUT0")[0, 0])
    finally:
        client.close()


def _set_scale(repo: Path, scale: str) -> None:
    """Edit the echo model's config in one repository (what a new release would do)."""
    (repo / "echo" / "config.pbtxt").write_text(
        echo_config(scale=scale), encoding="utf-8")


class Load:
    """Requests to every server, back to back, counting successes and failures."""

    def __init__(self, servers: list[RunningServer]) -> None:
        self.servers = servers
        self.ok = 0
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._send, args=(s,), daemon=True) for s in servers]

    def _send(self, server: RunningServer) -> None:
        client = triton_http.InferenceServerClient(server.http_hostport)
        data = triton_http.InferInput("INPUT0", [1, 4], "FP32")
        data.set_data_from_numpy(np.ones((1, 4), dtype=np.float32))
        try:
            while not self._stop.is_set():
                try:
                    client.infer("echo", [data])
                    self.ok += 1
                except Exception as exc:
                    self.failed.append(str(exc))
        finally:
            client.close()

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(10)


def test_rolling_reload_under_load_loses_no_request(attached: list[tuple[RunningServer, Path]],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Every server ends on the new release, one after the other, with no failed request meanwhile."""
    for _, repo in attached:
        _set_scale(repo, "3")
    capsys.readouterr()
    with Load([server for server, _ in attached]) as load:
        assert main(["reload", "echo", "--fleet"]) == 0
    out = capsys.readouterr().out
    assert load.failed == [] and load.ok > 0
    assert [_scale(server) for server, _ in attached] == [3.0, 3.0, 3.0]
    order = [line.split(":")[0] for line in out.splitlines() if re.match(r"^s\d: reload echo", line)]
    assert order == ["s1", "s2", "s3"]
    assert "  s3: reloaded; serving v1" in out


def test_rolling_reload_stops_at_a_broken_server(attached: list[tuple[RunningServer, Path]],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """s2's new release is broken: s1 runs the new one, s2 keeps serving its old one, s3 is untouched."""
    before = [_scale(server) for server, _ in attached]
    (one, repo1), (two, repo2), (three, repo3) = attached
    _set_scale(repo1, "5")
    _set_scale(repo3, "5")
    (repo2 / "echo" / "config.pbtxt").write_text('name: "echo"\nbackend: "no_such_backend"\n')
    capsys.readouterr()
    try:
        assert main(["reload", "echo", "--fleet"]) == 1
        out = capsys.readouterr().out
        assert [_scale(one), _scale(two), _scale(three)] == [5.0, before[1], before[2]]
        assert "s2: reload echo failed" in out and "Triton kept version 1 serving" in out
        assert "  s1: reloaded; serving v1" in out
        assert "  s2: failed; serving v1" in out
        assert "  s3: untouched; serving v1" in out
    finally:
        shutil.rmtree(repo2 / "echo")
        write_echo_model(repo2, "echo")


def test_reload_fleet_without_a_model_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """`reload --fleet` naming no model: exit 2 and one line, before any server is asked."""
    assert main(["reload", "--fleet"]) == 2
    assert capsys.readouterr().err == "ge-console: error: reload --fleet needs MODEL\n"
