"""The front door's plan: the port it picks is free where it will listen."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from triton_ge_console.session_states import READY
from triton_ge_console.sessions.frontdoor import serve
from triton_ge_console.sessions.server.registry import SessionRecord, store_token


def test_a_free_port_is_looked_for_on_the_address_the_door_binds(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Told to listen on 0.0.0.0, the door checks the port there, not on 127.0.0.1 (a port taken on another
    address would fail its bind). Nothing is bound here: the check is watched, not made."""
    record = SessionRecord(name="locked", pid=None, started_at=time.time(), http_url="http://127.0.0.1:9",
                           grpc_url="127.0.0.1:10", metrics_url=None, repository=None, spec=None,
                           backend_dir=None, log_path=None, attached=True, session_dir=tmp_path, state=READY,
                           token_ref=store_token(tmp_path, "sk-door"))
    asked: list[str] = []

    def free_port(host: str = "127.0.0.1") -> int:
        asked.append(host)
        return 18999

    monkeypatch.setattr(serve, "free_port", free_port)
    plan = serve.plan_door(record, host="0.0.0.0")
    assert (asked, plan.port, plan.token) == (["0.0.0.0"], 18999, "sk-door")
