"""Health follows a model's instances across reconfigurations: new names, counts and kinds read OK, and
FAILING is said only when an instance a request may be sent to is gone (real tritonserver)."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as triton_http

from tests.sessions.test_launch import hostport
from tests.waiting import wait_until
from triton_ge_console.cli import main
from triton_ge_console.sessions.act.control import controller_for
from triton_ge_console.sessions.live import LiveSource
from triton_ge_console.sessions.observe.health import stub_instances
from triton_ge_console.sessions.server.registry import Registry, SessionRecord
from triton_ge_console.triton_terms import FAILING, HEALTH_OK

pytestmark = pytest.mark.server
KEY = ("echo", "1")


@pytest.fixture
def session(echo_repo: Path) -> Iterator[SessionRecord]:
    """A running session serving the echo model with one instance, stopped after the test."""
    assert main(["up", str(echo_repo), "--name", "tuned", "--timeout", "120"]) == 0
    yield Registry().load("tuned")
    main(["down", "tuned"])


def stubs(record: SessionRecord) -> dict[int, str]:
    """The echo model's instance processes: pid -> instance name."""
    assert record.pid is not None
    return {instance.pid: instance.name for instance in stub_instances(record.pid).get(KEY, ())}


def reconfigured(record: SessionRecord, config: dict[str, object] | None, count: int) -> dict[int, str]:
    """Reload the model (with a config override, or from its edited repository) and wait until only the
    new instances run (Triton ends the old ones a second or two after the swap)."""
    before = set(stubs(record))
    result = controller_for(record).reload("echo", json.dumps(config) if config else None)
    assert result.ok, result.message
    return wait_until(lambda: (now := stubs(record)) and not before & set(now) and len(now) == count and now,
                      what=f"{count} new instance processes")


def serves(record: SessionRecord) -> bool:
    """Whether a request to the model succeeds now."""
    client = triton_http.InferenceServerClient(hostport(record))
    try:
        data = triton_http.InferInput("INPUT0", [1, 4], "FP32")
        data.set_data_from_numpy(np.ones((1, 4), dtype=np.float32))
        return bool(client.infer("echo", [data]).as_numpy("OUTPUT0")[0, 0] == 2.0)
    finally:
        client.close()


def test_health_follows_instances_across_count_and_kind_changes(session: SessionRecord) -> None:
    source = LiveSource.from_record(session, npu_smi=None)
    try:
        def health() -> tuple[str, str | None]:
            model = source.poller.poll().model("echo")
            assert model is not None and model.state == "READY"
            return model.health, model.reason

        assert health() == (HEALTH_OK, None)
        two = reconfigured(session, {"instance_group": [{"count": 2, "kind": "KIND_CPU"}]}, 2)
        assert sorted(two.values()) != ["echo_0"], "the new instances have new names"
        assert [health(), health()] == [(HEALTH_OK, None)] * 2 and serves(session)

        victim = min(two)
        os.kill(victim, signal.SIGKILL)
        wait_until(lambda: victim not in stubs(session))
        state, reason = health()
        assert state == FAILING and f"instance process gone: {two[victim]}" in str(reason), reason

        assert session.repository is not None
        config = session.repository / "echo" / "config.pbtxt"  # the notebook's way: edit, then reload
        groups = "instance_group [ { count: 3 kind: KIND_CPU } ]\n"
        config.write_text(config.read_text(encoding="utf-8") + groups, encoding="utf-8")
        reconfigured(session, None, 3)
        assert [health(), health()] == [(HEALTH_OK, None)] * 2 and serves(session)

        reconfigured(session, {"instance_group": [{"count": 1, "kind": "KIND_MODEL"}]}, 1)
        assert [health(), health()] == [(HEALTH_OK, None)] * 2 and serves(session)
    finally:
        source.poller.close()
