"""`attach k8s:` from outside the cluster: each pod is reached through port-forwards made by the real
`kubernetes` client against the stand-in API server (tests/fleet/k8s_api.py), which answers the websocket
upgrade as the API server and kubelet do and relays to a real tritonserver on 127.0.0.1."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest
import tritonclient.grpc as triton_grpc

from tests.conftest import RunningServer
from tests.fleet.k8s_api import TOKEN, recorded_api
from tests.models import write_echo_model
from tests.waiting import wait_until
from triton_ge_console.cli import main
from triton_ge_console.fleet.k8s_discovery import PodMember, api_client
from triton_ge_console.fleet.k8s_forward import PortForwards
from triton_ge_console.sessions.server.paths import STATE_DIR_ENV
from triton_ge_console.sessions.server.registry import Registry

TARGET = "k8s:serving/app.kubernetes.io/instance=seed"
PORTS = (("http", 8000), ("grpc", 8001), ("metrics", 8002))
A, B = "seed-6b8f7c9d54-4xk2p", "seed-6b8f7c9d54-q9wzm"
CLI = [sys.executable, "-m", "triton_ge_console.cli"]
READER = "attach output reader"


# attach's exit is bounded: the follower's stop (5 s), each forward's accept thread (5 s), the retry thread
# (5 s); 1-3 s measured on a loaded host. The tests stop one forward, so 30 s is twice the sum.
EXIT_S = 30
SIGINT_BIT = 1 << (signal.SIGINT - 1)  # in /proc/PID/status's signal masks


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sessions go to this test's own state dir (the attach subprocess inherits it)."""
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))


@pytest.fixture
def server(triton_factory: object, python_backends: Path, tmp_path: Path) -> RunningServer:
    """One real tritonserver with the echo model: what every pod's ports lead to."""
    write_echo_model(tmp_path / "repo", "echo")
    return triton_factory(  # type: ignore[operator, no-any-return]
        tmp_path / "repo", python_backends, ("echo",), ("--exit-timeout-secs=3",)
    )


@pytest.fixture
def attach_lines() -> Iterator[tuple[list[str], list[subprocess.Popen[str]]]]:
    """Output lines of the attach processes a test starts (it appends them); every one is stopped, and the
    threads reading their output end with them."""
    lines: list[str] = []
    started: list[subprocess.Popen[str]] = []
    yield lines, started
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait()
    readers = [t for t in threading.enumerate() if t.name.startswith(READER)]
    for reader in readers:
        reader.join(10)
    assert not [t for t in readers if t.is_alive()], "a reader of attach's output still runs"


def _start(argv: list[str], lines: list[str], started: list[subprocess.Popen[str]]) -> subprocess.Popen[str]:
    """`ge-console attach ...` in its own process (stdout and stderr into lines)."""
    process = subprocess.Popen([*CLI, "attach", *argv], env={**os.environ, "PYTHONUNBUFFERED": "1"},
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    started.append(process)
    threading.Thread(target=_collect, args=(process.stdout, lines), daemon=True,
                     name=f"{READER} {process.pid}").start()
    return process


def _interrupt(attach: subprocess.Popen[str]) -> int:
    """Ctrl-C, as from the terminal attach runs in; its exit code. An ignored SIGINT is said at once (a
    shell without job control starts a background job ignoring it, and its children inherit that)."""
    with open(f"/proc/{attach.pid}/status", encoding="ascii") as status:
        masks = dict(line.split(":", 1) for line in status if line.startswith("Sig"))
    assert int(masks["SigCgt"], 16) & SIGINT_BIT, f"attach does not catch SIGINT: {masks}"
    attach.send_signal(signal.SIGINT)
    return attach.wait(timeout=EXIT_S)


def _collect(stream: IO[str] | None, lines: list[str]) -> None:
    """Every line until the stream ends."""
    assert stream is not None
    for line in stream:
        lines.append(line.rstrip("\n"))


def _line(lines: list[str], prefix: str) -> str:
    """The first line starting with prefix, once there is one."""
    return wait_until(lambda: next((line for line in lines if line.startswith(prefix)), ""), timeout=60,
                      what=f"a line {prefix!r} in {lines}")


def _refused(port: int) -> bool:
    """Nothing listens on 127.0.0.1:port any more."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def _status_row(name: str, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    """`status --all --json`'s row for one session, polled now."""
    capsys.readouterr()
    main(["status", "--all", "--json", "--interval", "0.5"])
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    return dict(rows[name])


def test_a_pod_is_polled_live_through_its_port_forwards_and_they_close_with_it(
    server: RunningServer, tmp_path: Path, attach_lines: tuple[list[str], list[subprocess.Popen[str]]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Outside the cluster (a kubeconfig), `attach k8s:` forwards pod A's ports to 127.0.0.1: the console
    polls its server through them (health, index, metrics over HTTP; gRPC too). The recorded watch then
    deletes A (deletionTimestamp, then DELETED) and readies B: A's session leaves, its listeners and the
    connection open through it close, and the API server sees its websockets closed. Ctrl-C closes B's."""
    lines, started = attach_lines
    ports = {8000: server.ports.http, 8001: server.ports.grpc, 8002: server.ports.metrics}
    with recorded_api(tmp_path, ["pods-list-1.json"], ["pods-watch-1.jsonl"], hold_watches=True,
                      upstream={A: ports, B: ports}) as (script, kubeconfig):
        attach = _start([TARGET, "--kubeconfig", str(kubeconfig)], lines, started)
        assert "via port-forward" in _line(lines, "following ")
        _line(lines, f"joined: {A} at http://127.0.0.1:")
        record = Registry().load(A)
        row = _status_row(A, capsys)
        assert row["health"] == "ready" and row["version"], row
        assert (row["models_ready"], row["models_total"]) == (1, 1) and row["requests_per_s"] == 0, row
        assert record.grpc_url is not None
        grpc = triton_grpc.InferenceServerClient(record.grpc_url)
        try:
            assert grpc.is_model_ready("echo")
        finally:
            grpc.close()
        assert {pod for pod, *_ in script.upgrades} == {A}
        assert {port for _, asked, _, _ in script.upgrades for port in asked} == {8000, 8001, 8002}
        assert {(auth, protocol) for _, _, auth, protocol in script.upgrades} == {
            (f"Bearer {TOKEN}", "v4.channel.k8s.io")
        }
        held = http.client.HTTPConnection("127.0.0.1", int(record.http_url.rsplit(":", 1)[1]), timeout=30)
        held.request("GET", "/v2/health/live")  # answered, and the connection kept open
        response = held.getresponse()
        assert response.status == 200 and response.read() == b""
        script.release.set()  # the recorded watch: B ready, A deleted
        _line(lines, f"left: {A}")
        _line(lines, f"joined: {B} at http://127.0.0.1:")
        assert held.sock is not None and held.sock.recv(1) == b""  # the one open through A's forward closed
        held.close()
        assert _refused(int(record.http_url.rsplit(":", 1)[1]))
        assert _refused(int(record.metrics_url.rsplit(":", 1)[1].split("/")[0]))  # type: ignore[union-attr]
        wait_until(lambda: all(f.client_gone.is_set() for f in script.forwards if f.pod == A), timeout=20,
                   what="A's websockets closed by the client")
        b_http = int(Registry().load(B).http_url.rsplit(":", 1)[1])
        assert _status_row(B, capsys)["health"] == "ready"
        assert _interrupt(attach) == 0
    assert any(line.startswith(f"left: {B}") for line in lines)
    assert _refused(b_http) and Registry().names() == []
    assert not [line for line in lines if "Traceback" in line or "Exception in thread" in line], lines


def test_a_pod_with_metrics_off_is_polled_without_a_metrics_forward(
    triton_factory: object, python_backends: Path, tmp_path: Path,
    attach_lines: tuple[list[str], list[subprocess.Popen[str]]], capsys: pytest.CaptureFixture[str],
) -> None:
    """A pod whose tritonserver runs with --allow-metrics=false (a real one here) is forwarded on http and
    grpc only, and the console polls it as ready with metrics off, not a connection error on a port nobody
    opened; `status` says 'metrics off'. Seen failing first: 8002 was forwarded and the row carried its
    connection error; then status said 'not given' as for a session attached by hand."""
    write_echo_model(tmp_path / "repo", "echo")
    server = triton_factory(  # type: ignore[operator]
        tmp_path / "repo", python_backends, ("echo",), ("--exit-timeout-secs=3", "--allow-metrics=false")
    )
    lines, started = attach_lines
    upstream = {A: {8000: server.ports.http, 8001: server.ports.grpc}}
    with recorded_api(tmp_path, ["pods-list-metrics-off.json"], [], upstream=upstream) as (script, config):
        attach = _start([TARGET, "--kubeconfig", str(config)], lines, started)
        _line(lines, f"joined: {A} at http://127.0.0.1:")
        routes = _line(lines, f"forwarding pod {A}: ")
        assert "-> 8001" in routes and "metrics" not in routes, routes
        assert Registry().load(A).metrics_url is None
        row = _status_row(A, capsys)
        assert (row["health"], row["models_ready"], row["error"]) == ("ready", 1, None), row
        assert main(["status", A]) == 0
        assert "  metrics off" in capsys.readouterr().out  # as Triton runs, not 'not given'
        assert _interrupt(attach) == 0
    assert 8002 not in {port for _, asked, _, _ in script.upgrades for port in asked}
    assert not [line for line in lines if "Traceback" in line or "Exception in thread" in line], lines


def test_a_refused_port_forward_is_one_line_naming_the_pod_and_the_permission(tmp_path: Path) -> None:
    """403 (RBAC) and 404 (pod gone) at the upgrade: one warning line each saying which pod and why; the
    pod is not added. A pod the API server forwards is."""
    said: list[str] = []
    with recorded_api(tmp_path, [], [], upstream={B: {8000: 1, 8001: 1, 8002: 1}},
                      forbidden=(A,)) as (script, kubeconfig):
        forwards = PortForwards("serving", api_client(kubeconfig).configuration, said.append)
        try:
            found = forwards.update({pod: PodMember(pod, "10.244.2.17", PORTS) for pod in (A, B, "gone")})
        finally:
            forwards.close()
    assert list(found) == [B] and found[B].ip == "127.0.0.1"
    refused = [line for line in said if line.startswith("warning:")]
    assert refused == [
        "warning: pod serving/gone: port-forward failed: the pod is gone (404 Not Found); not added for now "
        "(asked again, at most a minute apart)",
        f"warning: pod serving/{A}: the API server refused the port-forward (403 Forbidden): "
        "RBAC must allow 'create' on pods/portforward in namespace serving; not added for now (asked "
        "again, at most a minute apart)",
    ]
    assert [pod for pod, *_ in script.upgrades] == [B]  # refused before the upgrade


def test_a_port_forward_that_never_opens_is_given_up_after_the_deadline(tmp_path: Path) -> None:
    """An API server that accepts the upgrade and never answers: the pod's check gives up at the deadline
    (one line, not added); once a pod is forwarded, a connection whose forward stalls is closed at the
    deadline and said once, instead of holding the poll that made it."""
    said: list[str] = []
    with recorded_api(tmp_path, [], [], upstream={B: {8000: 1, 8001: 1, 8002: 1}}) as (script, kubeconfig):
        script.stalled.add(A)
        configuration = api_client(kubeconfig).configuration
        forwards = PortForwards("serving", configuration, said.append, open_timeout_s=1)
        try:
            found = forwards.update({pod: PodMember(pod, "10.244.2.17", PORTS) for pod in (A, B)})
            assert list(found) == [B]
            script.stalled.add(B)
            with socket.create_connection(("127.0.0.1", found[B].ports[0][1]), timeout=10) as conn:
                assert conn.recv(1024) == b""  # closed after the deadline, not held until the test's timeout
        finally:
            forwards.close()
    stalled = [line for line in said if "within 1 s" in line]
    assert stalled == [
        f"warning: pod serving/{A}: the API server did not open a port-forward to port 8000 within 1 s; "
        "not added for now (asked again, at most a minute apart)",
        f"warning: pod serving/{B}: the API server did not open a port-forward to port 8000 within 1 s",
    ]


def test_a_refused_pod_is_asked_again_and_joins_once_forwarded(tmp_path: Path) -> None:
    """A pod refused when it joined (here RBAC, fixed a moment later) is asked again in the background and
    published once the API server forwards to it; the refusal is said once, however often it was asked."""
    said: list[str] = []
    published: list[dict[str, PodMember]] = []
    upstream = {pod: {8000: 1, 8001: 1, 8002: 1} for pod in (A, B)}
    with recorded_api(tmp_path, [], [], upstream=upstream, forbidden=(A,)) as (script, kubeconfig):
        configuration = api_client(kubeconfig).configuration
        forwards = PortForwards("serving", configuration, said.append, publish=published.append, retry_s=0.2)
        try:
            assert list(forwards.update({pod: PodMember(pod, "10.244.2.17", PORTS) for pod in (A, B)})) == [B]
            wait_until(lambda: script.refusals.count(A) >= 2, timeout=30,
                       what="the refused pod asked again")
            script.forbidden.discard(A)
            wait_until(lambda: A in published[-1], timeout=30, what=f"{A} published once forwarded")
        finally:
            forwards.close()
    assert sorted(published[-1]) == [A, B] and published[-1][A].ip == "127.0.0.1"
    assert len([line for line in said if line.startswith(f"warning: pod serving/{A}:")]) == 1
    assert any(line.startswith(f"forwarding pod {A}:") for line in said)


def test_a_pod_asked_again_holds_up_no_member_change(tmp_path: Path) -> None:
    """While a refused pod is asked again and the API server leaves that question unanswered, a pod that
    joins is forwarded at once: the asking again is done outside the forwards' lock."""
    upstream = {pod: {8000: 1, 8001: 1, 8002: 1} for pod in (A, B)}
    with recorded_api(tmp_path, [], [], upstream=upstream, forbidden=(A,)) as (script, kubeconfig):
        configuration = api_client(kubeconfig).configuration
        forwards = PortForwards("serving", configuration, lambda _line: None, open_timeout_s=60, retry_s=0.1)
        try:
            assert list(forwards.update({A: PodMember(A, "10.244.2.17", PORTS)})) == []
            script.stalled.add(A)
            script.forbidden.discard(A)
            wait_until(lambda: A in script.stalls, timeout=30, what=f"{A} asked again, unanswered")
            joined: list[list[str]] = []
            members = {pod: PodMember(pod, "10.244.2.17", PORTS) for pod in (A, B)}
            thread = threading.Thread(target=lambda: joined.append(list(forwards.update(members))),
                                      daemon=True)
            thread.start()
            thread.join(20)  # the question about A stays out for up to 60 s
            assert joined == [[B]], "a member change waited for a pod being asked again"
        finally:
            forwards.close()


def test_the_kubelet_error_channel_is_reported_once(tmp_path: Path) -> None:
    """When the kubelet cannot reach the pod's port it says so on the port's error channel: the relay ends
    and the console says it once, however many connections meet it."""
    said: list[str] = []
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    with recorded_api(tmp_path, [], [], upstream={A: {8000: closed, 8001: closed, 8002: closed}}) as (
        _, kubeconfig
    ):
        forwards = PortForwards("serving", api_client(kubeconfig).configuration, said.append)
        try:
            metrics = dict(forwards.update({A: PodMember(A, "10.244.2.17", PORTS)})[A].ports)["metrics"]
            for _ in range(3):
                with socket.create_connection(("127.0.0.1", metrics), timeout=30) as conn:
                    assert conn.recv(1) == b""
            wait_until(lambda: any("port 8002" in line for line in said), what="the kubelet's error")
        finally:
            forwards.close()
    errors = [line for line in said if "port 8002" in line]
    assert errors == [f"warning: pod serving/{A}: port 8002: error forwarding port 8002 to pod {A}, uid "
                      f"0f5c3a8e-2d7b-4c1e-9a64-7b8d2e5f1c30: [Errno 111] Connection refused"]


@pytest.fixture
def chatty_port() -> Iterator[int]:
    """A port whose server, once a client says something, sends it data without end (a pod mid-response);
    its threads end with the test (shutdown wakes an accept or a send blocked in them; close does not)."""
    listener = socket.create_server(("127.0.0.1", 0))
    conns: list[socket.socket] = []
    talkers: list[threading.Thread] = []

    def talk(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            conn.recv(16)
            while True:
                conn.sendall(b"x" * 65536)

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                conns.append(listener.accept()[0])
                talkers.append(threading.Thread(target=talk, args=(conns[-1],), daemon=True))
                talkers[-1].start()

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    yield listener.getsockname()[1]
    listener.shutdown(socket.SHUT_RDWR)
    server.join(10)
    for conn in conns:
        with contextlib.suppress(OSError):
            conn.shutdown(socket.SHUT_RDWR)
    for thread in talkers:
        thread.join(10)
    listener.close()
    assert not [t for t in (server, *talkers) if t.is_alive()], "a thread of the chatty port still runs"


def test_connections_ended_mid_response_close_their_websockets(
    tmp_path: Path, chatty_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client hanging up while the pod still sends, and a pod leaving while its connections stream: every
    port-forward websocket is closed, and no thread of the client's proxy dies on a closed socket (closing
    our end under it did: EPIPE/ECONNRESET, the websocket left open)."""
    died: list[threading.ExceptHookArgs] = []
    monkeypatch.setattr(threading, "excepthook", died.append)
    upstream = {A: {8000: chatty_port, 8001: chatty_port, 8002: chatty_port}}
    with recorded_api(tmp_path, [], [], upstream=upstream) as (script, kubeconfig):
        forwards = PortForwards("serving", api_client(kubeconfig).configuration, lambda line: None)
        try:
            http_port = dict(forwards.update({A: PodMember(A, "10.244.2.17", PORTS)})[A].ports)["http"]
            for _ in range(20):
                with socket.create_connection(("127.0.0.1", http_port), timeout=30) as conn:
                    conn.sendall(b"go")
                    assert conn.recv(65536)
            streaming = [socket.create_connection(("127.0.0.1", http_port), timeout=30) for _ in range(5)]
            for conn in streaming:
                conn.sendall(b"go")
                assert conn.recv(65536)
            forwards.update({})  # the pod left
            for conn in streaming:
                wait_until(lambda conn=conn: not conn.recv(1 << 20), what="the stream closed")  # type: ignore[misc]
                conn.close()
            wait_until(lambda: all(f.client_gone.is_set() for f in script.forwards), timeout=20,
                       what="every websocket closed by the client")
        finally:
            forwards.close()
    assert len(script.forwards) == 26 and died == []


def test_once_cannot_port_forward(capsys: pytest.CaptureFixture[str]) -> None:
    """A forward lives while attach runs, so `--once --via port-forward` is refused in one line."""
    assert main(["attach", TARGET, "--once", "--via", "port-forward"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--once cannot keep a port-forward open" in err[0]


def test_sigterm_stops_attach_and_closes_its_forwards_and_sessions(
    tmp_path: Path, attach_lines: tuple[list[str], list[subprocess.Popen[str]]]
) -> None:
    """SIGTERM (a service manager, `kill`) ends `attach --via port-forward` as Ctrl-C does: the forwards
    close and their sessions, whose local ports die with the process, are removed."""
    lines, started = attach_lines
    with recorded_api(tmp_path, ["pods-list-1.json"], [], upstream={A: {8000: 1, 8001: 1, 8002: 1}}) as (
        _, kubeconfig
    ):
        attach = _start([TARGET, "--kubeconfig", str(kubeconfig), "--via", "port-forward"], lines, started)
        _line(lines, f"joined: {A} at http://127.0.0.1:")
        local = int(Registry().load(A).http_url.rsplit(":", 1)[1])
        attach.send_signal(signal.SIGTERM)
        assert attach.wait(timeout=EXIT_S) == 0, lines
    assert any(line.startswith(f"left: {A}") for line in lines)
    assert any(line.startswith("stopped following") for line in lines)
    assert Registry().names() == [] and _refused(local)


def test_auto_forwards_only_outside_the_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--via auto`: pod addresses in a pod with no kubeconfig (its service account) and with --once, a
    port-forward with a kubeconfig; an explicit choice is kept."""
    from triton_ge_console.cli import build_parser
    from triton_ge_console.fleet.k8s_attach import via

    parser = build_parser()
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")

    def chosen(*argv: str) -> str:
        return via(parser.parse_args(["attach", TARGET, *argv]))

    assert chosen() == "pod-ip"
    assert chosen("--kubeconfig", str(tmp_path / "kubeconfig")) == "port-forward"
    assert chosen("--kubeconfig", str(tmp_path / "kubeconfig"), "--once") == "pod-ip"
    assert chosen("--via", "port-forward") == "port-forward"
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    assert chosen() == "port-forward"
