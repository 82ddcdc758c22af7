"""The poller with servers that are gone, going, or never were: it reports, never raises, never holds on."""

from __future__ import annotations

import urllib.parse
from pathlib import Path

import psutil
import pytest

from tests.models import write_echo_model
from triton_ge_console.backend_glue.installer import install_backend_dir
from triton_ge_console.sessions.live import LiveSource
from triton_ge_console.sessions.observe.poller import Poller
from triton_ge_console.sessions.observe.snapshot import Endpoints
from triton_ge_console.sessions.server.process import free_port


def test_unreachable_server_gives_a_dead_snapshot_not_an_exception() -> None:
    """Nothing listens on the port: live False with the reason, models empty."""
    port = free_port()
    poller = Poller("gone", Endpoints(f"http://127.0.0.1:{port}", None, f"http://127.0.0.1:{port}/metrics"))
    try:
        snapshot = poller.poll()
    finally:
        poller.close()
    assert not snapshot.live and not snapshot.ready and snapshot.models == ()
    assert snapshot.error is not None and "connection refused" in snapshot.error
    assert snapshot.session == "gone" and snapshot.taken_at > 0


def test_garbage_answering_endpoint_is_reported(tmp_path: Path) -> None:
    """A host name that does not resolve and a malformed URL are errors in the snapshot, not exceptions."""
    source = LiveSource("nowhere", Endpoints("http://no-such-host.invalid:1", None, None))
    try:
        snapshot = source.poll()
    finally:
        source.close()
    assert not snapshot.live and snapshot.error
    assert source.history.latest is snapshot
    with pytest.raises(ValueError, match="not an http"):
        Poller("bad", Endpoints("ftp://example.org", None, None))


def test_polled_server_still_stops_gracefully(triton_factory, triton_dist, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Between polls the poller holds a connection only to the metrics port, whose idle connections do not
    hold up Triton's exit: SIGTERM shuts it down cleanly (exit 0, not SIGKILL), in seconds."""
    write_echo_model(tmp_path / "repository", "m", instances=1)
    install_backend_dir(tmp_path / "backends", triton_dist)
    server = triton_factory(tmp_path / "repository", tmp_path / "backends", ("m",))
    poller = Poller("stopping", Endpoints(server.http_url, None, server.metrics_url))
    try:
        assert poller.poll().live and poller.poll().live
        held = {c.laddr.port for c in psutil.Process(server.process.pid).net_connections("tcp")
                if c.status == psutil.CONN_ESTABLISHED}
        assert held == {urllib.parse.urlsplit(server.metrics_url).port}  # one kept for the next poll
        assert server.process.stop() == 0  # within stop's 15 s: an idle HTTP connection would hold it 30 s
        after = poller.poll()
    finally:
        poller.close()
    assert not after.live and after.error


def test_restricted_apis_need_the_token(triton_factory, triton_dist, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """An exposed server restricts the repository index and config: without the token the snapshot says
    so; with it (LiveSource's token header) everything reads."""
    write_echo_model(tmp_path / "repository", "m", instances=1)
    install_backend_dir(tmp_path / "backends", triton_dist)
    restricted = "--http-restricted-api=model-repository,model-config,trace:x-ge-console-token=s3cret"
    server = triton_factory(tmp_path / "repository", tmp_path / "backends", ("m",), (restricted,))
    endpoints = Endpoints(server.http_url, None, server.metrics_url)
    without = LiveSource("no-token", endpoints)
    with_token = LiveSource("token", endpoints, token="s3cret")
    try:
        refused, allowed = without.poll(), with_token.poll()
    finally:
        without.close()
        with_token.close()
    assert refused.live and refused.error is not None and "repository/index" in refused.error
    assert allowed.error is None and allowed.model("m") is not None
    assert allowed.model("m").backend == "python"  # type: ignore[union-attr]
