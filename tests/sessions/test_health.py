"""Reloads that really reload, and model health from what a model does (real tritonserver, ge glue)."""

from __future__ import annotations

import itertools
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as triton_http

from tests.models import write_echo_model
from tests.sessions.conftest import module_state_dir
from tests.sessions.helpers import write_ge_spec
from tests.sessions.test_launch import bert_request, hostport
from tests.waiting import wait_until
from triton_ge_console.cli import main
from triton_ge_console.sessions.act.control import controller_for
from triton_ge_console.sessions.launcher import LaunchError, LaunchOptions, launch
from triton_ge_console.sessions.lifecycle import down
from triton_ge_console.sessions.live import LiveSource
from triton_ge_console.sessions.observe.health import stub_instances
from triton_ge_console.sessions.server.paths import STATE_DIR_ENV
from triton_ge_console.sessions.server.paths import session_dir as paths_session_dir
from triton_ge_console.sessions.server.registry import Registry, SessionRecord
from triton_ge_console.sessions.server.shm import SHM_DIR, SHM_PREFIX_FILE
from triton_ge_console.triton_terms import FAILING, HEALTH_OK

pytestmark = pytest.mark.server  # every test here starts a tritonserver

MODEL = "bert_model"
KEY = (MODEL, "1")
NAMES = itertools.count()


@pytest.fixture(scope="module")
def module_state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A state dir for the module; every session started in it is stopped at the end."""
    with module_state_dir(tmp_path_factory, "health") as root:
        yield root


@pytest.fixture
def session(module_state: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SessionRecord]:
    """A running ge session of its own for each test (a test may break it), stopped after it."""
    monkeypatch.setenv(STATE_DIR_ENV, str(module_state / "state"))
    name = f"health{next(NAMES)}"
    record = launch(LaunchOptions(source=write_ge_spec(module_state / name, name=name), timeout=240,
                                  exit_timeout_s=5))
    yield record
    registry = Registry()
    if registry.exists(name) and registry.load(name).state != "stopped":
        down(registry.load(name), registry, timeout=10.0)


def stub_pids(record: SessionRecord) -> set[int]:
    """The pids of the model's instance processes."""
    assert record.pid is not None
    return {instance.pid for instance in stub_instances(record.pid).get(KEY, ())}


def status_models(capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, object]]:
    """`status --json`'s models by name."""
    assert main(["status", "--json"]) == 0
    return {m["name"]: m for m in json.loads(capsys.readouterr().out)["models"]}


class Load:
    """Clients sending requests in a loop, counting what succeeded and what failed."""

    def __init__(self, record: SessionRecord, clients: int = 3) -> None:
        self.record = record
        self.ok = self.failed = 0
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._loop) for _ in range(clients)]

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=120)

    def _loop(self) -> None:
        client = triton_http.InferenceServerClient(hostport(self.record), network_timeout=120)
        try:
            while not self._stop.is_set():
                try:
                    bert_request(client)
                    with self._lock:
                        self.ok += 1
                except Exception as exc:  # every failure counts, whatever its kind
                    with self._lock:
                        self.failed += 1
                        self.errors.append(str(exc))
        finally:
            client.close()

    def served(self, more: int) -> Callable[[], bool]:
        """A condition: `more` requests succeeded from now on."""
        target = self.ok + more
        return lambda: self.ok >= target


def test_plain_reloads_under_load_start_new_instances_and_fail_no_request(session: SessionRecord) -> None:
    control = controller_for(session)
    with Load(session) as load:
        wait_until(load.served(5))
        for _ in range(10):
            before = stub_pids(session)
            result = control.reload(MODEL)
            assert result.ok and "new instance" in result.message, result.message
            wait_until(lambda b=before: stub_pids(session) and not stub_pids(session) & b)  # type: ignore[misc]
            wait_until(load.served(3))
    assert load.failed == 0, load.errors[:3]
    log = session.log_path.read_text(encoding="utf-8") if session.log_path else ""
    assert log.count(f"loading: {MODEL}:") >= 11


def test_a_reload_the_log_does_not_confirm_is_not_called_a_new_instance(session: SessionRecord) -> None:
    control = controller_for(session)
    control.log_path = session.session_dir / "quiet.log" if session.session_dir else None
    assert control.log_path is not None
    control.log_path.write_text("", encoding="utf-8")
    result = control.reload(MODEL)
    assert not result.ok and "its log shows no new instance" in result.message


def test_a_killed_instance_is_failing_within_two_polls_and_one_reload_recovers(
        session: SessionRecord, capsys: pytest.CaptureFixture[str]) -> None:
    source = LiveSource.from_record(session, npu_smi=None)
    try:
        assert source.poller.poll().model(MODEL).health == HEALTH_OK  # type: ignore[union-attr]
        (victim,) = stub_pids(session)
        os.kill(victim, signal.SIGKILL)
        wait_until(lambda: not stub_pids(session))
        with pytest.raises(Exception, match="not healthy"):
            bert_request(triton_http.InferenceServerClient(hostport(session)))
        polls = [source.poller.poll().model(MODEL) for _ in range(2)]
    finally:
        source.poller.close()
    assert polls[0] is not None and polls[0].health == FAILING and polls[0].state == "READY"
    assert "instance process" in str(polls[0].reason)
    row = status_models(capsys)[MODEL]
    assert row["health"] == FAILING and "instance process" in str(row["reason"])
    assert main(["reload", MODEL]) == 0
    assert "new instance" in capsys.readouterr().out
    assert stub_pids(session) and victim not in stub_pids(session)
    assert bert_request(triton_http.InferenceServerClient(hostport(session))).shape[0] == 1
    assert status_models(capsys)[MODEL]["health"] == HEALTH_OK


def test_failing_every_request_is_failing_even_with_its_instance_alive(session: SessionRecord) -> None:
    source = LiveSource.from_record(session, npu_smi=None)
    client = triton_http.InferenceServerClient(hostport(session))
    try:
        source.poller.poll()
        for _ in range(3):  # a request the model refuses: wrong sequence length for the mask
            ids = triton_http.InferInput("input_ids", [1, 8], "INT64")
            ids.set_data_from_numpy(np.ones((1, 8), dtype=np.int64))
            mask = triton_http.InferInput("attention_mask", [1, 4], "INT64")
            mask.set_data_from_numpy(np.ones((1, 4), dtype=np.int64))
            with pytest.raises(Exception):  # noqa: B017 - any refusal
                client.infer(MODEL, [ids, mask])
        failing = source.poller.poll().model(MODEL)
        bert_request(client)
        healthy = source.poller.poll().model(MODEL)
    finally:
        client.close()
        source.poller.close()
    assert failing is not None and failing.health == FAILING and "every request failed" in str(failing.reason)
    assert healthy is not None and healthy.health == HEALTH_OK and healthy.reason is None


def test_unload_and_down_of_a_broken_model_are_bounded_and_leave_no_shared_memory(
        session: SessionRecord, capsys: pytest.CaptureFixture[str]) -> None:
    assert session.session_dir is not None
    prefix = (session.session_dir / SHM_PREFIX_FILE).read_text(encoding="ascii").strip()
    assert list(SHM_DIR.glob(f"{prefix}*")), "the run's stubs do not use the run's region prefix"
    (victim,) = stub_pids(session)
    os.kill(victim, signal.SIGKILL)
    client = triton_http.InferenceServerClient(hostport(session))
    for _ in range(3):
        with pytest.raises(Exception, match="not healthy"):
            bert_request(client)
    client.close()
    started = time.monotonic()
    code = main(["unload", MODEL])
    unload_s = time.monotonic() - started
    out, err = capsys.readouterr()
    assert unload_s < 30, f"unload took {unload_s:.0f}s"
    if code == 0:
        assert "unloaded" in out
    else:
        assert "cannot finish unloading" in err and "instance process" in err
    started = time.monotonic()
    assert main(["down", "--timeout", "10"]) == 0
    assert time.monotonic() - started < 30
    assert "stopped" in capsys.readouterr().out
    assert not list(SHM_DIR.glob(f"{prefix}*"))
    assert not stub_pids(session)


def test_a_start_cut_short_leaves_no_shared_memory(module_state: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A start whose timeout ends while a model initialises kills the server: its stub's region goes too."""
    monkeypatch.setenv(STATE_DIR_ENV, str(module_state / "state"))
    repo = module_state / "slow-repo"
    model_py = write_echo_model(repo) / "1" / "model.py"
    slow = "    def initialize(self, args):\n        __import__('time').sleep(120)\n"
    model_py.write_text(model_py.read_text().replace("    def initialize(self, args):\n", slow))
    seen: list[Path] = []
    stop = threading.Event()

    def watch_regions() -> None:
        while not stop.is_set():
            prefix_file = paths_session_dir("slow") / SHM_PREFIX_FILE
            if prefix_file.is_file():
                seen.extend(SHM_DIR.glob(prefix_file.read_text(encoding="ascii").strip() + "*"))
            stop.wait(0.05)

    watcher = threading.Thread(target=watch_regions)
    watcher.start()
    try:
        with pytest.raises(LaunchError):
            launch(LaunchOptions(source=repo, name="slow", timeout=8, exit_timeout_s=1))
    finally:
        stop.set()
        watcher.join()
    assert seen, "the stub never had a region with the run's prefix"
    assert not [region for region in set(seen) if region.exists()]
