"""A session on the IPv6 loopback: up, ready, down with its ports freed."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.models import write_echo_model
from triton_ge_console.cli import main
from triton_ge_console.sessions.act.control import controller_for
from triton_ge_console.sessions.server.process import port_in_use
from triton_ge_console.sessions.server.registry import Registry, effective_state

pytestmark = pytest.mark.server  # every test here starts a tritonserver


def _ipv6_loopback() -> bool:
    """Whether this machine can bind ::1 (containers often have IPv6 switched off)."""
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback on this machine")
def test_up_on_ipv6_loopback_serves_there_and_down_frees_the_ports(tmp_path: Path) -> None:
    write_echo_model(tmp_path / "repo", "echo")
    assert main(["up", str(tmp_path / "repo"), "--name", "six", "--listen", "::1", "--timeout", "120"]) == 0
    record = Registry().load("six")
    assert record.http_url.startswith("http://[::1]:") and (record.grpc_url or "").startswith("[::1]:")
    assert (record.metrics_url or "").startswith("http://[::1]:")
    assert any(m.name == "echo" and m.state == "READY" for m in controller_for(record).index())
    ports = [int(url.split("]:")[1].split("/")[0]) for url in
             (record.http_url, record.grpc_url or "", record.metrics_url or "")]
    assert all(port_in_use(port, "::1") for port in ports)
    assert main(["down", "six"]) == 0
    assert not any(port_in_use(port, "::1") for port in ports)
    assert effective_state(Registry().load("six")) == "stopped"
