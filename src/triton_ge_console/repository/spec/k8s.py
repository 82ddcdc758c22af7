"""The spec's `kubernetes:` section: what `ge-console k8s render` needs, checked where it is written."""

from __future__ import annotations

import re

import yaml

from triton_ge_console.repository.spec.nodes import Reader, join
from triton_ge_console.repository.spec.types import KubernetesSpec

KUBERNETES_KEYS = (
    "namespace",
    "name",
    "image",
    "replicas",
    "repository",
    "token_secret",
    "token_secret_key",
    "npu_resource",
    "resources",
    "service_monitor",
)
REPOSITORY_KEYS = ("pvc", "image", "path")
RESOURCE_KEYS = ("cpu", "memory")

# The API server's own rules (k8s.io/apimachinery validation): RFC 1123 labels for namespaces, RFC 1035
# labels for Service names, RFC 1123 subdomains for Secrets and claims, resource.Quantity for amounts.
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]{1,253}$")
EXTENDED_RESOURCE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
QUANTITY = re.compile(r"^([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
_NAME_RULES = {
    "namespace": (DNS_LABEL, "a DNS label (lowercase letters, digits and '-', up to 63)"),
    "name": (DNS_1035_LABEL, "a DNS-1035 label (lowercase letters, digits and '-', starting with a letter)"),
    "token_secret": (DNS_SUBDOMAIN, "a DNS subdomain (lowercase letters, digits, '-' and '.')"),
    "token_secret_key": (SECRET_KEY, "a Secret key (letters, digits, '-', '_' and '.')"),
    "npu_resource": (EXTENDED_RESOURCE, "an extended resource name like huawei.com/Ascend910"),
}


def read_kubernetes(reader: Reader, node: yaml.Node) -> KubernetesSpec | None:
    """The `kubernetes:` section, or None when a problem was recorded."""
    entries = reader.mapping(node, "kubernetes", KUBERNETES_KEYS)
    if entries is None:
        return None
    fields: dict[str, object] = {}
    for key, (pattern, wording) in _NAME_RULES.items():
        if key in entries:
            fields[key] = _matching(reader, entries[key][1], join("kubernetes", key), pattern, wording)
    if "image" in entries:
        fields["image"] = reader.text(entries["image"][1], "kubernetes.image")
    if "replicas" in entries:
        fields["replicas"] = reader.integer(entries["replicas"][1], "kubernetes.replicas", 0)
    if "service_monitor" in entries:
        monitor = entries["service_monitor"][1]
        fields["service_monitor"] = reader.boolean(monitor, "kubernetes.service_monitor")
    sections = [
        read(reader, entries[key][1])
        for key, read in (("repository", _repository), ("resources", _resources))
        if key in entries
    ]
    if any(value is None for value in fields.values()) or None in sections:
        return None
    for section in sections:
        fields.update(section or {})
    return KubernetesSpec(**fields)  # type: ignore[arg-type]


def _matching(
    reader: Reader, node: yaml.Node, path: str, pattern: re.Pattern[str], wording: str
) -> str | None:
    """A string the API server accepts for this field."""
    value = reader.text(node, path)
    if value is not None and not pattern.match(value):
        reader.problems.add(node, path, f"'{value}' is not {wording}")
        return None
    return value


def _repository(reader: Reader, node: yaml.Node) -> dict[str, object] | None:
    """`repository: {pvc: CLAIM | image: IMAGE, path: /models}`: exactly one of pvc and image."""
    entries = reader.mapping(node, "kubernetes.repository", REPOSITORY_KEYS)
    if entries is None:
        return None
    if ("pvc" in entries) == ("image" in entries):
        reader.problems.add(node, "kubernetes.repository", "give exactly one of 'pvc' and 'image'")
        return None
    fields: dict[str, object] = {}
    if "pvc" in entries:
        fields["repository_pvc"] = _matching(
            reader, entries["pvc"][1], "kubernetes.repository.pvc", DNS_SUBDOMAIN, "a DNS subdomain"
        )
    if "image" in entries:
        fields["repository_image"] = reader.text(entries["image"][1], "kubernetes.repository.image")
    if "path" in entries:
        path = reader.text(entries["path"][1], "kubernetes.repository.path")
        if path is not None and not path.startswith("/"):
            reader.problems.add(entries["path"][1], "kubernetes.repository.path", "must be an absolute path")
            path = None
        fields["repository_path"] = path
    return None if None in fields.values() else fields


def _resources(reader: Reader, node: yaml.Node) -> dict[str, object] | None:
    """`resources: {cpu: "4", memory: 32Gi}` as Kubernetes quantities."""
    entries = reader.mapping(node, "kubernetes.resources", RESOURCE_KEYS)
    if entries is None:
        return None
    fields: dict[str, object] = {}
    for key, (_, value_node) in entries.items():
        path = join("kubernetes.resources", key)
        value = reader.scalar_text(value_node, path)
        if value is not None and not QUANTITY.match(value):
            wording = "is not a Kubernetes quantity (e.g. 4, 500m, 32Gi)"
            reader.problems.add(value_node, path, f"'{value}' {wording}")
            value = None
        fields[key] = value
    return None if None in fields.values() else fields
