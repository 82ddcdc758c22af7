"""Whole-deployment NPU checks of a spec: every named NPU exists on this host (when npu-smi says how many),
and no NPU holds more model memory than it has: an npu_ge model a full copy on every NPU of its device_ids
(one per GE session there, ge_backends), a ge instance its model on its NPU (1/N of it on each NPU of a
tensor-parallel group, a what-if of CPU emulation only)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import yaml

from triton_ge_console.backend_glue.ledger import human_bytes
from triton_ge_console.display import GIB
from triton_ge_console.ge_backends import npu_ge_sessions_per_npu, stoi
from triton_ge_console.repository import demo_models
from triton_ge_console.repository.spec.nodes import Problems, join
from triton_ge_console.repository.spec.types import InstanceGroupSpec, ModelSpec, ServerSpec


def model_bytes(model: ModelSpec) -> int | None:
    """What one instance of the model holds on its NPUs, estimated by its model file (None: unknown)."""
    path = model.om_path or model.onnx_path
    if path is not None:
        try:
            return path.stat().st_size
        except OSError:
            return None
    return len(demo_models.demo_bytes(model.source)) if demo_models.is_demo(model.source) else None


def npu_ge_copies(group: InstanceGroupSpec, parameters: Mapping[str, str]) -> int:
    """Full copies of an npu_ge model on each of its NPUs, from its instances and parameters."""
    def integer(key: str) -> int | None:
        return stoi(parameters[key]) if key in parameters else None

    return npu_ge_sessions_per_npu(group.count, len(group.device_ids), integer("device_exec_blocks"),
                                   integer("instance_exec_blocks"), integer("static_model") == 1)


def model_charges(backend: str, group: InstanceGroupSpec, parameters: Mapping[str, str],
                  size: int) -> list[tuple[int, int]]:
    """(NPU, bytes) a model holds: npu_ge a full copy per session on every NPU of device_ids (it
    replicates); ge each instance its model on its NPU, 1/N on each NPU of a tensor-parallel what-if."""
    if backend == "npu_ge":
        copies = npu_ge_copies(group, parameters)
        return [(device, size * copies) for device in group.device_ids]  # each named once: load, rules
    share = -(-size // group.tensor_parallel)  # ceiling: the ledger charges whole bytes
    return [(device, share) for devices in group.instance_devices() for device in devices]


def device_loads(models: Sequence[ModelSpec]) -> dict[int, list[tuple[str, int]]]:
    """Per NPU, (model, bytes) of every model on it, as model_charges places them."""
    loads: dict[int, list[tuple[str, int]]] = {}
    for model in models:
        size = model_bytes(model)
        if size is None:
            continue
        for device, held in model_charges(model.backend, model.instance_group, dict(model.parameters), size):
            loads.setdefault(device, []).append((model.name, held))
    return loads


def check_devices(problems: Problems, items: Sequence[yaml.Node], models: Sequence[ModelSpec],
                  server: ServerSpec, host_devices: int | None) -> None:
    """Record an NPU id the host lacks and an NPU over its capacity, at the model's instance_group."""
    nodes = {m.name: (item, f"models[{i}]") for i, (item, m) in enumerate(zip(items, models, strict=True))}
    for model in models:
        if host_devices is None:
            break
        missing = [d for d in model.instance_group.device_ids if d >= host_devices]
        if missing:
            node, path = _group_node(nodes[model.name])
            problems.add(_value(node, "device_ids") or node, join(path, "device_ids"),
                         f"NPU {missing[0]} does not exist: this host has {host_devices} "
                         f"(ids 0-{host_devices - 1})")
    for last, message in over_committed(device_loads(models), int(server.npu_memory_gib * GIB)):
        node, path = _group_node(nodes[last])
        problems.add(node, path, message)


def over_committed(loads: dict[int, list[tuple[str, int]]], capacity: int) -> list[tuple[str, str]]:
    """(the last model placed, why) for each NPU whose models together need more than its capacity."""
    found = []
    for device, held in sorted(loads.items()):
        total = sum(size for _, size in held)
        if total > capacity:
            holders = ", ".join(f"{name} {human_bytes(size)}" for name, size in held)
            found.append((held[-1][0], f"NPU {device} would hold {human_bytes(total)} of its "
                                       f"{human_bytes(capacity)} ({holders})"))
    return found


def _group_node(found: tuple[yaml.Node, str]) -> tuple[yaml.Node, str]:
    """The model's instance_group node and path (the model entry itself when it has none)."""
    item, path = found
    group = _value(item, "instance_group")
    return (group, join(path, "instance_group")) if group is not None else (item, path)


def _value(node: yaml.Node, key: str) -> yaml.Node | None:
    """The value node of key in a mapping node."""
    if isinstance(node, yaml.MappingNode):
        return next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key), None)
    return None
