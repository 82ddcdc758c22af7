"""Repository-wide NPU checks of the GE models, as `validate` applies them to config.pbtxt files: NPU ids
the host lacks (when npu-smi says how many) and an NPU over its capacity, each model charged as
spec.devices.model_charges places it (npu_ge: a full copy on every NPU of device_ids, every NPU of the host
when none are given), as the glue's ledger would at load."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from triton_ge_console.backend_glue.settings import GlueConfigError, device_memory_bytes
from triton_ge_console.ge_backends import GE_BACKENDS, npu_ge_repeated_id_problem
from triton_ge_console.repository.rules.findings import Finding, error
from triton_ge_console.repository.rules.ge import param_field, parameter
from triton_ge_console.repository.spec.devices import model_charges, over_committed
from triton_ge_console.repository.spec.types import InstanceGroupSpec

MODEL_FILES = ("model.om", "model.onnx")


def instance_group(config: mc.ModelConfig, host_devices: int | None = None) -> InstanceGroupSpec | None:
    """The GE model's instances and NPUs from its config, None when its parameters are malformed or name an
    npu_ge NPU twice (rules.ge reports both; an npu_ge model without device_ids runs on every NPU of the
    host: None when that count is unknown)."""
    ids_text = parameter(config, "device_ids") or parameter(config, "DEVICEIDS") or "0"
    parallel_text = parameter(config, "tensor_parallel") or "1"
    if config.backend == "npu_ge":
        ids_text, parallel_text = parameter(config, "device_ids") or "", "1"
        if not ids_text:
            if not host_devices:
                return None
            ids_text = ",".join(str(d) for d in range(host_devices))
    try:
        ids = tuple(int(part) for part in ids_text.split(",") if part.strip())
        parallel = int(parallel_text)
    except ValueError:
        return None  # rules.ge reports the malformed value
    count = sum(max(group.count, 1) for group in config.instance_group) or 1
    repeated = config.backend == "npu_ge" and npu_ge_repeated_id_problem(ids) is not None
    if not ids or parallel < 1 or len(ids) % parallel or repeated:
        return None
    return InstanceGroupSpec(count, ids, parallel)


def model_bytes(folder: Path) -> int | None:
    """Size of the newest version's model file (what the glue's memory estimate starts from)."""
    versions = sorted((p for p in folder.iterdir() if p.is_dir() and p.name.isdigit()),
                      key=lambda p: int(p.name))
    for version in reversed(versions):
        for name in MODEL_FILES:
            if (version / name).is_file():
                return (version / name).stat().st_size
    return None


def check_devices(configs: Mapping[str, tuple[mc.ModelConfig, Path]],
                  host_devices: int | None) -> list[tuple[str, Finding]]:
    """(model, finding) for an NPU the host lacks and for an NPU its models over-commit."""
    found: list[tuple[str, Finding]] = []
    loads: dict[int, list[tuple[str, int]]] = {}
    capacities: list[int] = []
    for name, (config, folder) in configs.items():
        group = instance_group(config, host_devices) if config.backend in GE_BACKENDS else None
        if group is None:
            continue
        missing = [d for d in group.device_ids if host_devices is not None and d >= host_devices]
        if missing and host_devices is not None:
            message = f"NPU {missing[0]} does not exist: this host has {host_devices} "
            found.append((name, error(param_field("device_ids"), message + f"(ids 0-{host_devices - 1})")))
        capacities += [c for c in (_capacity(config),) if c is not None]
        _charge(loads, name, config, group, model_bytes(folder))
    if capacities:
        found += [(last, error(param_field("device_ids"), message))
                  for last, message in over_committed(loads, min(capacities))]
    return found


def _charge(loads: dict[int, list[tuple[str, int]]], name: str, config: mc.ModelConfig,
            group: InstanceGroupSpec, size: int | None) -> None:
    """Add what the model holds on each of its NPUs."""
    if size is None:
        return
    params = {key: str(value.string_value) for key, value in config.parameters.items()}
    for device, held in model_charges(config.backend, group, params, size):
        loads.setdefault(device, []).append((name, held))


def _capacity(config: mc.ModelConfig) -> int | None:
    """An emulated NPU's capacity as the glue reads it (parameter npu_memory_gib, else its default)."""
    value = parameter(config, "npu_memory_gib")
    params = {"npu_memory_gib": {"string_value": value}} if value is not None else {}
    try:
        return device_memory_bytes({"parameters": params}, config.name)
    except GlueConfigError:
        return None
