"""Find the serving pods of `k8s:NAMESPACE/SELECTOR` through the Kubernetes API and follow them (list, then
watch from the list's resourceVersion; relist when the watch expires with 410 Gone).

A member is a ready pod and its pod address, which routes from inside the cluster (or a network that
routes pod IPs); outside, `k8s_forward` reaches it through port-forwards instead. Pods are handled as the
API's plain JSON (the client's `raw_object`), not as models.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from triton_ge_console.errors import GeConsoleError, InputError
from triton_ge_console.triton_args import switched_off
from triton_ge_console.triton_terms import DEFAULT_PORTS

TARGET_PREFIX = "k8s:"
HTTP_GONE = 410
RETRY_CAP_S = 30.0
MembersCallback = Callable[[dict[str, "PodMember"]], None]


class DiscoveryError(GeConsoleError, RuntimeError):
    """The cluster could not be asked (configuration, connection, permission); one line saying why."""


@dataclass(frozen=True)
class K8sTarget:
    """Which pods form the fleet: a namespace and a label selector."""

    namespace: str
    selector: str

    @classmethod
    def parse(cls, text: str) -> K8sTarget:
        """`k8s:NAMESPACE/SELECTOR`, e.g. `k8s:serving/app.kubernetes.io/instance=seed`."""
        namespace, _, selector = text.removeprefix(TARGET_PREFIX).partition("/")
        if not text.startswith(TARGET_PREFIX) or not namespace or not selector:
            raise InputError(f"{text!r}: expected k8s:NAMESPACE/SELECTOR, e.g. k8s:serving/app=triton")
        return cls(namespace, selector)

    @property
    def label(self) -> str:
        """How sessions found here record where they came from."""
        return f"{TARGET_PREFIX}{self.namespace}/{self.selector}"


@dataclass(frozen=True)
class PodMember:
    """One ready serving pod and where its endpoints answer."""

    pod: str
    ip: str
    ports: tuple[tuple[str, int], ...]  # ("http", 8000), ("grpc", 8001), ("metrics", 8002) unless off

    def serves(self, kind: str) -> bool:
        """Whether the pod has that endpoint (metrics may be off)."""
        return kind in dict(self.ports)

    def url(self, kind: str) -> str:
        """host:port of one endpoint (IPv6 pod addresses in brackets)."""
        host = f"[{self.ip}]" if ":" in self.ip else self.ip
        return f"{host}:{dict(self.ports)[kind]}"


def member_of(pod: dict[str, Any]) -> PodMember | None:
    """The member a pod is, when it is Running, Ready, addressed and not being deleted; else None."""
    metadata, status = pod.get("metadata") or {}, pod.get("status") or {}
    conditions = status.get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    if status.get("phase") != "Running" or not ready or metadata.get("deletionTimestamp"):
        return None
    ip = status.get("podIP")
    if not ip or not metadata.get("name"):
        return None
    return PodMember(str(metadata["name"]), str(ip), _ports(pod))


def _ports(pod: dict[str, Any]) -> tuple[tuple[str, int], ...]:
    """The container ports named http, grpc and metrics (as `k8s render` names them), else Triton's; no
    metrics when the container's tritonserver arguments turn them off (a declared port need not be open)."""
    containers = (pod.get("spec") or {}).get("containers") or []
    named = {
        port.get("name"): int(port["containerPort"])
        for container in containers
        for port in container.get("ports") or []
        if "containerPort" in port
    }
    metrics_off = any(switched_off(_command_line(container), "--allow-metrics") for container in containers)
    return tuple((kind, named.get(kind, default)) for kind, default in DEFAULT_PORTS.items()
                 if not (kind == "metrics" and metrics_off))


def _command_line(container: dict[str, Any]) -> list[str]:
    """A container's command and arguments, as its process sees them (less $(VAR) expansion)."""
    return [str(arg) for arg in [*(container.get("command") or []), *(container.get("args") or [])]]


def api_client(kubeconfig: Path | None = None, context: str | None = None) -> client.ApiClient:
    """A client from the kubeconfig ($KUBECONFIG, ~/.kube/config), or the pod's service account in-cluster."""
    try:
        if kubeconfig is None and in_cluster():
            configuration = client.Configuration()
            config.load_incluster_config(client_configuration=configuration)
            return client.ApiClient(configuration)
        path = str(kubeconfig) if kubeconfig is not None else None
        return config.new_client_from_config(config_file=path, context=context)
    except (config.ConfigException, OSError) as exc:
        raise DiscoveryError(f"no Kubernetes configuration: {exc}") from None


def in_cluster() -> bool:
    """Inside a pod with no kubeconfig of its own."""
    has_kubeconfig = bool(os.environ.get("KUBECONFIG")) or Path("~/.kube/config").expanduser().is_file()
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and not has_kubeconfig


class PodFollower:
    """Keeps the set of ready pods of a target current and reports every change of it."""

    def __init__(self, target: K8sTarget, api: client.ApiClient, on_change: MembersCallback,
                 watch_timeout_s: int = 60, request_timeout_s: float = 10.0,
                 on_error: Callable[[str], None] | None = None) -> None:
        self.target = target
        self.core = client.CoreV1Api(api)
        self.on_change = on_change
        self.on_error = on_error
        self.members: dict[str, PodMember] = {}
        self._watch_timeout_s = watch_timeout_s
        self._request_timeout_s = request_timeout_s
        self._stop = threading.Event()
        self._lock = threading.Lock()  # stop() and the start of a watch exclude each other
        self._watching = threading.Event()  # a watch request is open
        self._watch: watch.Watch | None = None
        self.last_error: str | None = None  # why the last list or watch failed while following

    def sync(self) -> str:
        """List the pods now; returns the list's resourceVersion to watch from."""
        try:
            response = self.core.list_namespaced_pod(
                self.target.namespace, label_selector=self.target.selector,
                _preload_content=False, _request_timeout=self._request_timeout_s,
            )
            pod_list = json.loads(response.data)  # type: ignore[attr-defined]  # raw: _preload_content
        except ApiException as exc:
            reason = f"listing pods failed: {exc.status} {exc.reason}"
            raise DiscoveryError(f"{self.target.label}: {reason}") from None
        except (OSError, HTTPError) as exc:
            raise DiscoveryError(f"{self.target.label}: the API server does not answer: {exc}") from None
        pods = [member_of(pod) for pod in pod_list.get("items") or []]
        self._set({m.pod: m for m in pods if m is not None})
        return str((pod_list.get("metadata") or {}).get("resourceVersion") or "")

    def follow(self) -> None:
        """List, then watch until `stop()`; a 410 Gone (history compacted) lists again, and a lost API
        server is asked again with backoff (the members stay as last seen meanwhile)."""
        version = self.sync()
        failures = 0
        while not self._stop.is_set():
            try:
                version = self._watch_once(version) if version else self.sync()
                failures = 0
            except ApiException as exc:
                version = ""  # relist: 410 Gone, or whatever else the server refused
                if exc.status != HTTP_GONE:
                    failures = self._failed(f"watch refused: {exc.status} {exc.reason}", failures)
            except (OSError, HTTPError, DiscoveryError) as exc:
                version = ""
                failures = self._failed(str(exc), failures)

    def _failed(self, reason: str, failures: int) -> int:
        """Note why the last request failed and wait before the next (1, 2, 4 ... 30 s)."""
        self.last_error = reason
        pause = min(RETRY_CAP_S, 2.0**failures)
        if self.on_error is not None:
            self.on_error(f"{reason}; asking again in {pause:.0f}s")
        self._stop.wait(pause)
        return failures + 1

    def _watch_once(self, version: str) -> str:
        """One watch request; returns the resourceVersion to resume from."""
        with self._lock:
            if self._stop.is_set():
                return version
            self._watch = current = watch.Watch()
            self._watching.set()
        try:
            stream = current.stream(
                self.core.list_namespaced_pod, self.target.namespace, label_selector=self.target.selector,
                resource_version=version, timeout_seconds=self._watch_timeout_s,
                allow_watch_bookmarks=True,
            )
            for event in stream:
                version = self._apply(event) or version
                if self._stop.is_set():
                    break
            return version
        finally:
            self._watching.clear()

    def _apply(self, event: dict[str, Any]) -> str | None:
        """One watch event into the member set; returns the event's resourceVersion."""
        pod = event.get("raw_object") or {}
        metadata = pod.get("metadata") or {}
        name = metadata.get("name")
        if event.get("type") in ("ADDED", "MODIFIED", "DELETED") and name:
            member = None if event["type"] == "DELETED" else member_of(pod)
            members = {k: v for k, v in self.members.items() if k != name}
            if member is not None:
                members[name] = member
            self._set(members)
        version = metadata.get("resourceVersion")
        return str(version) if version else None

    def _set(self, members: dict[str, PodMember]) -> None:
        """Replace the member set, telling the callback only when it changed."""
        if members != self.members:
            self.members = members
            self.on_change(dict(members))

    def stop(self, timeout: float = 5.0) -> None:
        """End `follow()` (from another thread): an open watch is cut, not waited out. The client can only
        cut a response that has begun, so this tries again until the watch is closed or timeout passes."""
        with self._lock:
            self._stop.set()
            current = self._watch
        deadline = time.monotonic() + timeout
        while current is not None and self._watching.is_set() and time.monotonic() < deadline:
            current.stop()
            time.sleep(0.02)
