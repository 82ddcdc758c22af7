"""A restart that fails keeps the session (stopped, with why); a later restart brings it back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.models import write_echo_model
from triton_ge_console.cli import main
from triton_ge_console.sessions.act.control import controller_for
from triton_ge_console.sessions.server.registry import Registry, effective_state

pytestmark = pytest.mark.server  # every test here starts a tritonserver


def test_a_failed_restart_keeps_the_session_stopped_and_a_fixed_one_restarts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = tmp_path / "repo"
    config = write_echo_model(repo, "echo") / "config.pbtxt"
    good = config.read_text()
    assert main(["up", str(repo), "--name", "phoenix", "--token", "t0ken", "--timeout", "120"]) == 0
    first = Registry().load("phoenix")
    config.write_text(good.replace('key: "scale"', 'key: "other"'))  # the model now fails to load
    capsys.readouterr()
    assert main(["restart", "phoenix", "--timeout", "120"]) == 1
    err = capsys.readouterr().err.strip()
    assert "model 'echo' failed to load" in err and "\n" not in err, err
    kept = Registry().load("phoenix")
    assert effective_state(kept) == "stopped" and kept.token_ref == first.token_ref
    assert kept.http_url == first.http_url and kept.repository == first.repository
    assert main(["status", "phoenix", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["state"] == "stopped" and "failed to load" in status["error"]
    config.write_text(good)
    assert main(["restart", "phoenix", "--timeout", "120"]) == 0
    again = Registry().load("phoenix")
    assert effective_state(again) == "ready" and again.http_url == first.http_url and again.last_error is None
    assert any(m.name == "echo" and m.state == "READY" for m in controller_for(again).index())
