"""Discovery of serving pods through the real `kubernetes` client, against recorded API responses served on
127.0.0.1: ready pods join the fleet, departed ones leave, an expired watch lists again."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from tests.fleet.k8s_api import RECORDED, TOKEN, recorded_api
from tests.waiting import wait_until
from triton_ge_console.cli import main
from triton_ge_console.fleet.k8s_attach import RegistryMembers, session_name
from triton_ge_console.fleet.k8s_discovery import K8sTarget, PodFollower, PodMember, api_client, member_of
from triton_ge_console.sessions.server.registry import Registry

TARGET = "k8s:serving/app.kubernetes.io/instance=seed"
PORTS = (("http", 8000), ("grpc", 8001), ("metrics", 8002))
A, B, C = "seed-6b8f7c9d54-4xk2p", "seed-6b8f7c9d54-q9wzm", "seed-6b8f7c9d54-zr7tn"


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sessions go to this test's own state dir."""
    monkeypatch.setenv("GE_CONSOLE_STATE_DIR", str(tmp_path / "state"))


def test_target_parsing() -> None:
    """NAMESPACE is up to the first '/'; the selector may contain more (label prefixes)."""
    target = K8sTarget.parse(TARGET)
    assert (target.namespace, target.selector) == ("serving", "app.kubernetes.io/instance=seed")
    for bad in ("k8s:serving", "k8s:/app=x", "serving/app=x"):
        with pytest.raises(ValueError, match="k8s:NAMESPACE/SELECTOR"):
            K8sTarget.parse(bad)


def test_follower_tracks_ready_pods_through_watch_and_relist(tmp_path: Path) -> None:
    """List → {A}; watch: B ready, C pending, A deleted → {B}; watch expires (410) → relist → {B, C}."""
    changes: list[set[str]] = []
    lists = ["pods-list-1.json", "pods-list-2.json"]
    watches = ["pods-watch-1.jsonl", "pods-watch-2-expired.jsonl"]
    with recorded_api(tmp_path, lists, watches) as (script, kubeconfig):
        follower = PodFollower(K8sTarget.parse(TARGET), api_client(kubeconfig),
                               lambda members: changes.append(set(members)), watch_timeout_s=30)
        thread = threading.Thread(target=follower.follow, daemon=True)
        thread.start()
        wait_until(lambda: len(changes) >= 4)
        assert script.idle_watch.wait(20)  # watching again after the relist
        follower.stop()
        thread.join(10)
        assert not thread.is_alive()
    assert changes[:4] == [{A}, {A, B}, {B}, {B, C}]
    assert follower.members[C] == PodMember(C, "10.244.3.8", PORTS)
    paths = [(path, query.get("watch"), query.get("resourceVersion")) for path, query, _ in script.requests]
    assert paths[:4] == [
        ("/api/v1/namespaces/serving/pods", None, None),
        ("/api/v1/namespaces/serving/pods", ["true"], ["48211"]),  # from the list's resourceVersion
        ("/api/v1/namespaces/serving/pods", ["true"], ["48270"]),  # resumed after the bookmark
        ("/api/v1/namespaces/serving/pods", None, None),  # 410 Expired: listed again
    ]
    assert {tuple(query["labelSelector"]) for _, query, _ in script.requests} == {
        ("app.kubernetes.io/instance=seed",)
    }
    assert {auth for _, _, auth in script.requests} == {f"Bearer {TOKEN}"}


def test_members_become_attached_sessions_and_leave_with_their_pods(tmp_path: Path) -> None:
    """Joined pods are saved as attached sessions at their pod address; a departed pod's session is
    forgotten, while a session this target did not add is never touched."""
    registry = Registry(tmp_path / "sessions")
    lines: list[str] = []
    target = K8sTarget.parse(TARGET)
    mirror = RegistryMembers(registry, target, lines.append, prefix="prod", token="t0ken")
    a = PodMember(A, "10.244.2.17", PORTS)
    b = PodMember(B, "fd00::21", (("http", 9000), ("grpc", 9001), ("metrics", 9002)))
    mirror({A: a, B: b})
    record = registry.load(f"prod-{B}")
    assert (record.http_url, record.grpc_url, record.metrics_url) == (
        "http://[fd00::21]:9000", "[fd00::21]:9001", "http://[fd00::21]:9002/metrics",
    )
    assert record.attached and record.discovered_by == TARGET and record.token_ref
    mirror({B: b})
    assert registry.names() == [f"prod-{B}"]
    assert lines[-1] == f"left: prod-{A} (pod 10.244.2.17:8000)"
    assert session_name("p", "x" * 80) != session_name("p", "x" * 79 + "y")
    assert len(session_name("p", "x" * 80)) == 64


def test_cli_attach_once_adds_the_ready_pods(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`attach k8s:... --once` registers the ready pods (not the unready one); `ls` shows them."""
    with recorded_api(tmp_path, ["pods-list-1.json"], []) as (_, kubeconfig):
        assert main(["attach", TARGET, "--once", "--kubeconfig", str(kubeconfig)]) == 0
    out = capsys.readouterr().out
    assert f"joined: {A} at http://10.244.2.17:8000" in out and "1 ready pod(s)" in out
    assert main(["ls", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["name"], row["attached"]) == (A, True)


def test_cli_attach_says_when_the_api_server_does_not_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A closed API server port is one line on stderr and exit code 1."""
    with recorded_api(tmp_path, [], []) as (_, kubeconfig):
        pass  # shut down: the kubeconfig now points at a closed port
    assert main(["attach", TARGET, "--once", "--kubeconfig", str(kubeconfig)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ge-console: error: ") and "does not answer" in err[0]


def test_attach_once_over_a_port_forward_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """--once cannot keep a port-forward open: one error line and exit code 2, before any API is asked."""
    assert main(["attach", TARGET, "--once", "--via", "port-forward"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "ge-console: error: --once cannot keep a port-forward open (it lives while attach runs); "
        "drop --once, or use --via pod-ip"]


def test_attach_url_still_needs_a_name(capsys: pytest.CaptureFixture[str]) -> None:
    """Only k8s: targets name their sessions themselves; a URL without --name is a usage error."""
    assert main(["attach", "http://127.0.0.1:1"]) == 2
    assert "attach URL needs --name" in capsys.readouterr().err


def test_a_lost_api_server_keeps_the_members_and_is_asked_again(tmp_path: Path) -> None:
    """When the API server goes away mid-watch the follower says so, keeps the last members, and stops
    promptly when asked (also while it waits to ask again)."""
    changes: list[set[str]] = []
    errors: list[str] = []
    with recorded_api(tmp_path, ["pods-list-1.json"], []) as (script, kubeconfig):
        follower = PodFollower(K8sTarget.parse(TARGET), api_client(kubeconfig),
                               lambda members: changes.append(set(members)), on_error=errors.append)
        thread = threading.Thread(target=follower.follow, daemon=True)
        thread.start()
        assert script.idle_watch.wait(20)
    wait_until(lambda: errors)
    assert "asking again in" in errors[0] and changes == [{A}] and set(follower.members) == {A}
    follower.stop()
    thread.join(10)
    assert not thread.is_alive()


def test_a_pod_with_metrics_turned_off_joins_with_metrics_off(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pod whose tritonserver arguments turn metrics off (as `k8s render` writes it for
    `--allow-metrics=false` in the extra arguments) joins with no metrics URL, so readers say 'metrics off'
    rather than failing to connect to a port nobody opened. Seen failing first: it was given 8002."""
    with recorded_api(tmp_path, ["pods-list-metrics-off.json"], []) as (_, kubeconfig):
        assert main(["attach", TARGET, "--once", "--kubeconfig", str(kubeconfig)]) == 0
    assert f"joined: {A} at http://10.244.2.17:8000" in capsys.readouterr().out
    record = Registry().load(A)
    assert (record.http_url, record.grpc_url, record.metrics_url) == (
        "http://10.244.2.17:8000", "10.244.2.17:8001", None,
    )
    pod = json.loads((RECORDED / "pods-list-metrics-off.json").read_text())["items"][0]
    assert member_of(pod) == PodMember(A, "10.244.2.17", PORTS[:2])
    (container,) = pod["spec"]["containers"]
    container["ports"].append({"name": "metrics", "containerPort": 8002, "protocol": "TCP"})
    assert member_of(pod) == PodMember(A, "10.244.2.17", PORTS[:2])  # a port declared is not one open
    container["args"].append("--allow-metrics=true")  # the last one counts
    assert member_of(pod) == PodMember(A, "10.244.2.17", PORTS)
