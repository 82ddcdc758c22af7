"""`ge-console k8s render`: every manifest validates against the Kubernetes schemas, offline, and the spec's
`kubernetes:` section is checked where it is written."""

from __future__ import annotations

import importlib.resources
import json
import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from referencing import Registry, Resource

from triton_ge_console.cli import main
from triton_ge_console.fleet.k8s_render import RenderError, render
from triton_ge_console.repository.spec.load import SpecError, load_spec

ROOT = Path(__file__).resolve().parents[2]
# The newest Kubernetes whose schemas ship inside kubernetes-validate (no network needed).
K8S_VERSION = kubernetes_validate.latest_version()

ONE_MODEL = "models:\n  - {name: m, backend: ge, source: demo:bert}\n"
IMAGE_SPEC = """
name: seed
models:
  - name: llama_model
    backend: ge
    source: demo:llama
  - name: bert_model
    backend: ge
    source: demo:bert
    instance_group: {device_ids: [1, 3]}
kubernetes:
  namespace: serving
  image: registry.example/triton-ge:2.51
  replicas: 3
  repository: {image: registry.example/models:7, path: /srv/repo}
  token_secret: ge-token
  resources: {cpu: 4, memory: 32Gi}
  service_monitor: true
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "deploy.yaml"
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def _render(tmp_path: Path, text: str) -> dict[str, dict[str, Any]]:
    """Run the CLI and read back what it wrote, by kind."""
    out = tmp_path / "manifests"
    assert main(["k8s", "render", str(_write(tmp_path, text)), "-o", str(out)]) == 0
    return {doc["kind"]: doc for doc in (yaml.safe_load(p.read_text()) for p in sorted(out.glob("*.yaml")))}


def _validate(manifest: dict[str, Any]) -> None:
    """Strict schema validation (unknown fields are errors too) against the bundled schemas."""
    kubernetes_validate.validate(manifest, K8S_VERSION, strict=True)


def _validate_part(value: Any, definition: str) -> None:
    """One part of an object against a definition of the bundled schemas (for the ServiceMonitor, whose
    CRD schema does not ship with them: its metadata and selector are Kubernetes' own types)."""
    folder = f"kubernetes-json-schema/v{K8S_VERSION}-local-strict"
    path = importlib.resources.files("kubernetes_validate") / folder / "_definitions.json"
    definitions = json.loads(path.read_text(encoding="utf-8"))
    resource = Resource.from_contents(definitions)
    registry: Registry[Any] = Registry().with_resource(definitions["$id"], resource)
    schema = {"$ref": f"{definitions['$id']}#/$defs/{definition}"}
    jsonschema.Draft202012Validator(schema, registry=registry).validate(value)


def test_image_repository_manifests_validate_and_ask_for_npus(tmp_path: Path) -> None:
    """Deployment and Service pass the schemas; NPUs, token, probes and repository are where they belong."""
    docs = _render(tmp_path, IMAGE_SPEC)
    assert set(docs) == {"Deployment", "Service", "ServiceMonitor"}
    _validate(docs["Deployment"])
    _validate(docs["Service"])
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    (server,) = pod["containers"]
    assert docs["Deployment"]["spec"]["replicas"] == 3
    assert server["resources"]["limits"]["huawei.com/Ascend910"] == 4  # device ids up to 3
    assert server["readinessProbe"]["httpGet"] == {"path": "/v2/health/ready", "port": "http"}
    assert server["livenessProbe"]["httpGet"] == {"path": "/v2/health/live", "port": "http"}
    token_ref = next(e for e in server["env"] if e["name"] == "GE_CONSOLE_TOKEN")
    assert token_ref["valueFrom"]["secretKeyRef"] == {"name": "ge-token", "key": "token"}
    restricted = [a for a in server["args"] if a.startswith("--http-restricted-api=")]
    assert restricted and restricted[0].endswith("=$(GE_CONSOLE_TOKEN)")  # expanded by the kubelet
    assert "--load-model=bert_model" in server["args"]
    (copier,) = pod["initContainers"]
    assert copier["image"] == "registry.example/models:7"
    assert "/srv/repo/." in copier["command"]
    assert {p["name"]: p["port"] for p in docs["Service"]["spec"]["ports"]} == {
        "http": 8000, "grpc": 8001, "metrics": 8002,
    }
    monitor = docs["ServiceMonitor"]
    assert (monitor["apiVersion"], monitor["spec"]["endpoints"]) == (
        "monitoring.coreos.com/v1", [{"port": "metrics", "path": "/metrics"}],
    )
    _validate_part(monitor["metadata"], "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
    _validate_part(monitor["spec"]["selector"], "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector")
    with pytest.raises(jsonschema.ValidationError):
        _validate_part({"matchLabel": {}}, "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector")


def test_seed_spec_renders_with_defaults_from_a_claim(tmp_path: Path) -> None:
    """The seed spec (no kubernetes: section) renders with the defaults: a read-only claim, one replica."""
    out = tmp_path / "out"
    assert main(["k8s", "render", str(ROOT / "examples" / "seed.yaml"), "-o", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["deployment.yaml", "service.yaml"]
    deployment = yaml.safe_load((out / "deployment.yaml").read_text())
    _validate(deployment)
    _validate(yaml.safe_load((out / "service.yaml").read_text()))
    pod = deployment["spec"]["template"]["spec"]
    assert pod["volumes"][0]["persistentVolumeClaim"] == {"claimName": "seed-models", "readOnly": True}
    assert pod["containers"][0]["resources"]["limits"]["huawei.com/Ascend910"] == 2
    assert deployment["metadata"]["namespace"] == "default"


def test_schema_validation_catches_a_broken_manifest(tmp_path: Path) -> None:
    """The check can fail: a misspelt field of the rendered Deployment is refused by the strict schema."""
    deployment = _render(tmp_path, IMAGE_SPEC)["Deployment"]
    deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbes"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        _validate(deployment)


def test_no_token_is_written_anywhere(tmp_path: Path) -> None:
    """The token is only ever a Secret reference: no manifest carries a literal restricted-API key."""
    docs = _render(tmp_path, IMAGE_SPEC)
    text = yaml.safe_dump(docs)
    assert "x-ge-console-token=$(GE_CONSOLE_TOKEN)" in text
    assert "value: $(" not in text and "secretKeyRef" in text


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        ("  namespace: Serving\n", "deploy.yaml:6:14 kubernetes.namespace: 'Serving' is not a DNS label"),
        ("  replicas: -1\n", "deploy.yaml:6:13 kubernetes.replicas: must be >= 0"),
        ("  repository: {pvc: a, image: b}\n", "deploy.yaml:6:15 kubernetes.repository: give exactly one"),
        ("  resources: {memory: 32GB}\n", "deploy.yaml:6:23 kubernetes.resources.memory: '32GB' is not a"),
        ("  npu_resources: huawei.com/Ascend910\n",  # a value good for the key it resembles: one error
         "deploy.yaml:6:3 kubernetes.npu_resources: unknown key 'npu_resources'; "
         "did you mean 'npu_resource'?"),
        ("  service_monitor: yes please\n", "deploy.yaml:6:20 kubernetes.service_monitor: must be true or"),
    ],
)
def test_kubernetes_section_errors_name_line_and_field(tmp_path: Path, section: str, expected: str) -> None:
    """A bad value in `kubernetes:` is one problem at its own line and column."""
    path = _write(tmp_path, f"{ONE_MODEL}\n\nkubernetes:\n{section}")
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    (problem,) = caught.value.problems
    assert str(problem).replace(str(path), "deploy.yaml").startswith(expected)


def test_a_name_kubernetes_refuses_asks_for_kubernetes_name(tmp_path: Path) -> None:
    """A spec named like a Python identifier cannot name a Service: one line says which key to set."""
    spec = load_spec(_write(tmp_path, f"name: my_seed\n{ONE_MODEL}"))
    with pytest.raises(RenderError, match=r"'my_seed' is not a Kubernetes name.*set kubernetes\.name"):
        render(spec)
    out = tmp_path / "out"
    assert main(["k8s", "render", str(tmp_path / "deploy.yaml"), "-o", str(out)]) == 1
    assert not out.exists()


def test_kubectl_client_dry_run(tmp_path: Path) -> None:
    """`kubectl apply --dry-run=client` where a cluster is configured; it needs the API server's discovery
    even for a client-side dry run (without one it stops at 'unable to recognize ... connection refused')."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed (Debian: apt-get install kubernetes-client)")
    reachable = subprocess.run([kubectl, "version", "--request-timeout=3s"], capture_output=True, timeout=30)
    if reachable.returncode != 0:
        pytest.skip("no Kubernetes API server reachable: even a client-side dry run needs the server's API "
                    "discovery (any kubectl, Debian's kubernetes-client included)")
    out = tmp_path / "out"
    assert main(["k8s", "render", str(_write(tmp_path, IMAGE_SPEC)), "-o", str(out)]) == 0
    for name in ("deployment.yaml", "service.yaml"):
        done = subprocess.run([kubectl, "apply", "--dry-run=client", "-f", str(out / name)],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr


def test_a_port_the_extra_args_move_is_the_one_the_container_declares(tmp_path: Path) -> None:
    """Triton obeys the last --metrics-port of its arguments (the extra ones come last), so the container's
    ports, the Service's target and the ServiceMonitor follow it. Seen failing first: 8002 was declared."""
    docs = _render(tmp_path, f"{ONE_MODEL}server: {{extra_args: [--metrics-port, '9102']}}\n")
    server = docs["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert [p["containerPort"] for p in server["ports"]] == [8000, 8001, 9102]
    assert [p["port"] for p in docs["Service"]["spec"]["ports"]] == [8000, 8001, 9102]


def test_claim_path_and_fixed_ports(tmp_path: Path) -> None:
    """A repository in a folder of the claim, and the spec's fixed ports, reach the server's arguments."""
    docs = _render(tmp_path, f"{ONE_MODEL}server: {{http_port: 9000, grpc_port: 9001}}\n"
                             "kubernetes: {repository: {pvc: shared-models, path: /teams/nlp/}}\n")
    _validate(docs["Deployment"])
    _validate(docs["Service"])
    server = docs["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert "--model-repository=/mnt/model-repository/teams/nlp" in server["args"]
    assert [p["containerPort"] for p in server["ports"]] == [9000, 9001, 8002]
    assert "initContainers" not in docs["Deployment"]["spec"]["template"]["spec"]


@pytest.mark.parametrize("extra", [
    "['--allow-metrics=false']", "[--allow-metrics, 'off']", "['--allow-metrics=0']",
    "['--allow-metrics=true', '--allow-metrics', 'False']",  # Triton obeys the last
])
def test_metrics_turned_off_in_the_extra_args_declare_no_metrics_port(
    tmp_path: Path, extra: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """With metrics off Triton opens no metrics port: no container or Service port, no ServiceMonitor (even
    when asked for), no scrape annotation; the probes stay on the http port. Seen failing first: the
    metrics port, its Service port and the ServiceMonitor were all rendered."""
    spec = IMAGE_SPEC + f"server: {{extra_args: {extra}}}\n"
    docs = _render(tmp_path, spec)
    assert set(docs) == {"Deployment", "Service"}
    _validate(docs["Deployment"])
    _validate(docs["Service"])
    server = docs["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert [p["name"] for p in server["ports"]] == ["http", "grpc"]
    assert [p["targetPort"] for p in docs["Service"]["spec"]["ports"]] == ["http", "grpc"]
    assert not [a for a in server["args"] if a.startswith(("--metrics-port", "--metrics-interval"))]
    assert "prometheus" not in yaml.safe_dump(docs)
    assert "no ServiceMonitor (kubernetes.service_monitor): server.extra_args turn" in capsys.readouterr().out
    assert {server[p]["httpGet"]["port"] for p in ("startupProbe", "livenessProbe", "readinessProbe")} == {
        "http"}


def test_metrics_turned_back_on_by_a_later_argument_keep_the_metrics_port(tmp_path: Path) -> None:
    """Only the last --allow-metrics counts: off, then on again, renders the metrics port and monitor."""
    extra = "server: {extra_args: [--allow-metrics=false, --allow-metrics=1]}\n"
    docs = _render(tmp_path, IMAGE_SPEC + extra)
    assert set(docs) == {"Deployment", "Service", "ServiceMonitor"}
    assert [p["name"] for p in docs["Service"]["spec"]["ports"]] == ["http", "grpc", "metrics"]
