"""Kubernetes manifests for a deployment spec: a Deployment, a Service and optionally a ServiceMonitor (only
while Triton serves metrics: its extra arguments may turn them off).

Plain dicts in the API's own shape (apps/v1, v1, monitoring.coreos.com/v1), written as YAML; nothing here
talks to a cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from triton_ge_console.backend_glue.settings import MEMORY_ENV
from triton_ge_console.errors import GeConsoleError
from triton_ge_console.files import write_atomic
from triton_ge_console.repository.spec.k8s import DNS_1035_LABEL
from triton_ge_console.repository.spec.types import DeploymentSpec, KubernetesSpec
from triton_ge_console.sessions.server.access import restriction_argument
from triton_ge_console.sessions.server.token_header import TOKEN_HEADER
from triton_ge_console.triton_args import port_option, switched_off
from triton_ge_console.triton_terms import DEFAULT_PORTS

# Triton's own default ports, used when the spec leaves a port at 0 (pick free), which a pod cannot do.
TOKEN_ENV = "GE_CONSOLE_TOKEN"  # the container's variable; Kubernetes expands $(VAR) in args from it
MODELS_MOUNT = "/models"
CLAIM_MOUNT = "/mnt/model-repository"
APP_LABEL = "triton-ge-console"


class RenderError(GeConsoleError, ValueError):
    """The spec cannot run in Kubernetes as written; one line naming the field to set."""


@dataclass(frozen=True)
class Manifest:
    """One rendered object and the file it goes to."""

    filename: str
    body: dict[str, Any]


def render(spec: DeploymentSpec) -> list[Manifest]:
    """Every manifest the spec needs, in apply order."""
    k8s = spec.kubernetes
    name = object_name(spec)
    manifests = [
        Manifest("deployment.yaml", deployment(spec, name)),
        Manifest("service.yaml", service(spec, name)),
    ]
    if k8s.service_monitor and metrics_served(spec):
        manifests.append(Manifest("servicemonitor.yaml", service_monitor(k8s, name)))
    return manifests


def object_name(spec: DeploymentSpec) -> str:
    """kubernetes.name, else the spec's name when the API server accepts it as a Service name."""
    if spec.kubernetes.name:
        return spec.kubernetes.name
    if DNS_1035_LABEL.match(spec.name):
        return spec.name
    where = spec.path or "the spec"
    raise RenderError(
        f"{where}: the deployment name '{spec.name}' is not a Kubernetes name "
        "(lowercase letters, digits and '-', starting with a letter): set kubernetes.name"
    )


def labels(name: str) -> dict[str, str]:
    """The recommended app labels; the Service and ServiceMonitor select pods by the first two."""
    return {"app.kubernetes.io/name": APP_LABEL, "app.kubernetes.io/instance": name}


def npu_count(spec: DeploymentSpec) -> int:
    """NPUs a pod asks the device plugin for: device ids index the container's NPUs, so highest id + 1."""
    ids = [i for model in spec.models for i in model.instance_group.device_ids]
    return max(ids) + 1 if ids else 0


def metrics_served(spec: DeploymentSpec) -> bool:
    """Whether Triton opens its metrics port: not when the extra arguments' last --allow-metrics is off."""
    return not switched_off(spec.server.extra_args, "--allow-metrics")


def ports(spec: DeploymentSpec) -> dict[str, int]:
    """Container ports: the spec's fixed ones, Triton's defaults for those left free; a port the extra
    arguments give wins, as Triton obeys the last (the spec's loader has made sure it is a number).
    No metrics port while metrics are off: nothing listens there."""
    server = spec.server
    chosen = {"http": server.http_port, "grpc": server.grpc_port}
    if metrics_served(spec):
        chosen["metrics"] = server.metrics_port
    return {kind: port_option(server.extra_args, f"--{kind}-port") or port or DEFAULT_PORTS[kind]
            for kind, port in chosen.items()}


def _metadata(k8s: KubernetesSpec, name: str) -> dict[str, Any]:
    """Object metadata with the app labels plus who made it."""
    return {
        "name": name,
        "namespace": k8s.namespace,
        "labels": {**labels(name), "app.kubernetes.io/managed-by": "ge-console"},
    }


def deployment(spec: DeploymentSpec, name: str) -> dict[str, Any]:
    """The Deployment running tritonserver with the GE backend."""
    k8s = spec.kubernetes
    pod: dict[str, Any] = {"containers": [_server_container(spec)], "volumes": [_models_volume(k8s, name)]}
    if k8s.repository_image:
        pod["initContainers"] = [_repository_copier(k8s)]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(k8s, name),
        "spec": {
            "replicas": k8s.replicas,
            "selector": {"matchLabels": labels(name)},
            "template": {"metadata": {"labels": labels(name)}, "spec": pod},
        },
    }


def _server_container(spec: DeploymentSpec) -> dict[str, Any]:
    """tritonserver: its arguments, ports, probes, NPUs and the token from the Secret."""
    k8s = spec.kubernetes
    npus = npu_count(spec)
    limits: dict[str, Any] = {"memory": k8s.memory, **({k8s.npu_resource: npus} if npus else {})}
    return {
        "name": "tritonserver",
        "image": k8s.image,
        "command": ["tritonserver"],
        "args": server_arguments(spec),
        "ports": [{"name": kind, "containerPort": port} for kind, port in ports(spec).items()],
        "env": [
            {"name": TOKEN_ENV, "valueFrom": {"secretKeyRef": _secret_ref(spec)}},
            {"name": MEMORY_ENV, "value": f"{spec.server.npu_memory_gib:g}"},
        ],
        "resources": {"requests": {"cpu": k8s.cpu, "memory": k8s.memory}, "limits": limits},
        "volumeMounts": [
            {"name": "model-repository", "mountPath": _mount(k8s), "readOnly": _mount(k8s) == CLAIM_MOUNT}
        ],
        **_probes(),
    }


def _probes() -> dict[str, Any]:
    """Triton's health endpoints (never restricted): live for liveness, ready (all models) for readiness;
    a startup probe gives model loading up to five minutes before liveness counts."""
    def probe(path: str, period: int, failures: int) -> dict[str, Any]:
        """An HTTP GET probe on the container's http port."""
        check = {"path": path, "port": "http"}
        return {"httpGet": check, "periodSeconds": period, "failureThreshold": failures}

    return {
        "startupProbe": probe("/v2/health/live", 5, 60),
        "livenessProbe": probe("/v2/health/live", 10, 3),
        "readinessProbe": probe("/v2/health/ready", 5, 3),
    }


def _secret_ref(spec: DeploymentSpec) -> dict[str, str]:
    """Where the container's token variable comes from."""
    return {"name": token_secret(spec), "key": spec.kubernetes.token_secret_key}


def token_secret(spec: DeploymentSpec) -> str:
    """The Secret holding the access token: kubernetes.token_secret, else NAME-token."""
    return spec.kubernetes.token_secret or f"{object_name(spec)}-token"


def server_arguments(spec: DeploymentSpec) -> list[str]:
    """tritonserver's arguments in the pod: every interface on the pod address, restricted APIs behind the
    token (expanded by Kubernetes from the Secret, so it is in no manifest), the spec's server options."""
    server, chosen = spec.server, ports(spec)
    # health stays open: the kubelet's probes send no token
    restriction = restriction_argument(f"$({TOKEN_ENV})", TOKEN_HEADER, public_health=True)
    arguments = [
        f"--model-repository={repository_path(spec.kubernetes)}",
        "--model-control-mode=explicit",
        *[f"--load-model={model.name}" for model in spec.models],
        *[f"--{kind}-port={port}" for kind, port in chosen.items()],
        f"--http-restricted-api={restriction}",
        f"--grpc-restricted-protocol={restriction}",
    ]
    if metrics_served(spec):
        arguments.append(f"--metrics-interval-ms={server.metrics_interval_ms}")
    if metrics_served(spec) and server.summary_latencies:
        arguments.append("--metrics-config=summary_latencies=true")
    arguments += [f"--backend-config={backend},{key}={value}"
                  for backend, key, value in server.backend_config]
    if server.log_verbose:
        arguments.append(f"--log-verbose={server.log_verbose}")
    return [*arguments, *server.extra_args]


def _mount(k8s: KubernetesSpec) -> str:
    """Where the repository volume is mounted in the server container."""
    return MODELS_MOUNT if k8s.repository_image else CLAIM_MOUNT


def repository_path(k8s: KubernetesSpec) -> str:
    """The model repository as the server sees it."""
    if k8s.repository_image:
        return MODELS_MOUNT
    inside = (k8s.repository_path or "/").strip("/")
    return f"{CLAIM_MOUNT}/{inside}" if inside else CLAIM_MOUNT


def _models_volume(k8s: KubernetesSpec, name: str) -> dict[str, Any]:
    """The claim (read-only), or an emptyDir the init container fills from the repository image."""
    if k8s.repository_image:
        return {"name": "model-repository", "emptyDir": {}}
    claim = k8s.repository_pvc or f"{name}-models"
    return {"name": "model-repository", "persistentVolumeClaim": {"claimName": claim, "readOnly": True}}


def _repository_copier(k8s: KubernetesSpec) -> dict[str, Any]:
    """Copies the repository out of its image into the shared emptyDir before the server starts."""
    source = (k8s.repository_path or MODELS_MOUNT).rstrip("/") or "/"
    return {
        "name": "model-repository",
        "image": k8s.repository_image,
        "command": ["cp", "-R", f"{source}/.", "/repository/"],
        "volumeMounts": [{"name": "model-repository", "mountPath": "/repository"}],
    }


def service(spec: DeploymentSpec, name: str) -> dict[str, Any]:
    """A ClusterIP Service for HTTP, gRPC and (when served) metrics."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(spec.kubernetes, name),
        "spec": {
            "selector": labels(name),
            "ports": [
                {"name": kind, "port": port, "targetPort": kind, "protocol": "TCP"}
                for kind, port in ports(spec).items()
            ],
        },
    }


def service_monitor(k8s: KubernetesSpec, name: str) -> dict[str, Any]:
    """A Prometheus Operator ServiceMonitor scraping the Service's metrics port."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": _metadata(k8s, name),
        "spec": {
            "selector": {"matchLabels": labels(name)},
            "namespaceSelector": {"matchNames": [k8s.namespace]},
            "endpoints": [{"port": "metrics", "path": "/metrics"}],
        },
    }


def write_manifests(manifests: list[Manifest], directory: Path) -> list[Path]:
    """Write each manifest atomically (a reader never sees half a file); returns the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for manifest in manifests:
        target = directory / manifest.filename
        write_atomic(target, yaml.safe_dump(manifest.body, sort_keys=False))
        written.append(target)
    return written
