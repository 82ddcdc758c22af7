"""Read NPUs from a MindX DL npu-exporter's Prometheus endpoint (`npu_chip_info_*`, label `id`).

The `id` label is the chip's physical id (mind-cluster npu-exporter builds its labels from the chip's PhyId),
not the logical id AscendCL and npu-smi's Device column use: `map_to_logical` renames the chips before
they are merged with other sources."""

from __future__ import annotations

import dataclasses
from collections import Counter

from triton_ge_console.display import MIB
from triton_ge_console.sessions.observe.metrics import MetricTable, scrape_metrics
from triton_ge_console.sessions.observe.snapshot import DeviceSnapshot
from triton_ge_console.sessions.observe.stats import HttpEndpoint

SOURCE = "npu-exporter"
# health_status is 1 when the chip is healthy, 0 when not (MindX DL documentation); -1 when the exporter
# could not ask the driver (mind-cluster's changelog: DCMI / hccn_tool call failed).
HEALTH_NAMES = {1.0: "OK", 0.0: "Unhealthy", -1.0: "unknown"}
# npu-exporter reports a 310P's power from the card's MCU (collectPower: GetMcuPowerInfo(CardId)).
BOARD_POWER = "the card's power (npu-exporter reads a 310P's MCU), the same figure for each chip on it"


def _per_chip(table: MetricTable, name: str) -> dict[str, float]:
    """Values of one npu_chip_info metric keyed by the chip's `id` label."""
    return {s.label("id") or "": s.value for s in table.samples(name) if s.label("id") is not None}


def _chip_labels(table: MetricTable, label: str) -> dict[str, str]:
    """One label's value of any chip metric, per chip id."""
    found: dict[str, str] = {}
    for name in sorted(table.names()):
        if name.startswith("npu_chip_info_"):
            for sample in table.samples(name):
                chip, value = sample.label("id"), sample.label(label)
                if chip is not None and value:
                    found.setdefault(chip, value)
    return found


def _chip_names(table: MetricTable) -> dict[str, str]:
    """The `model_name` label of any chip metric, per chip id (e.g. "910A-Ascend-V1", "Ascend910B3")."""
    names: dict[str, str] = {}
    for name in sorted(table.names()):
        if name.startswith("npu_chip_info_"):
            for sample in table.samples(name):
                chip, model = sample.label("id"), sample.label("model_name")
                if chip is not None and model:
                    names.setdefault(chip, model)
    return names


def devices_from_exporter(table: MetricTable) -> list[DeviceSnapshot]:
    """One DeviceSnapshot per chip id the exporter reports."""
    utilization = _per_chip(table, "npu_chip_info_utilization")
    hbm_used = _per_chip(table, "npu_chip_info_hbm_used_memory")
    hbm_total = _per_chip(table, "npu_chip_info_hbm_total_memory")
    ddr_used = _per_chip(table, "npu_chip_info_used_memory")
    ddr_total = _per_chip(table, "npu_chip_info_total_memory")
    temperature = _per_chip(table, "npu_chip_info_temperature")
    power = _per_chip(table, "npu_chip_info_power")
    health = _per_chip(table, "npu_chip_info_health_status")
    names = _chip_names(table)
    buses = _chip_labels(table, "pcie_bus_info")
    chips = sorted(set(utilization) | set(hbm_total) | set(ddr_total) | set(health) | set(names),
                   key=lambda c: (int(c) if c.isdigit() else 1 << 30, c))
    devices = []
    for chip in chips:
        use_hbm = hbm_total.get(chip, 0) > 0
        used = (hbm_used if use_hbm else ddr_used).get(chip)
        total = (hbm_total if use_hbm else ddr_total).get(chip)
        devices.append(DeviceSnapshot(
            id=chip,
            kind="npu",
            name=names.get(chip),
            utilization=None if chip not in utilization else utilization[chip] / 100.0,
            memory_used_bytes=None if used is None else int(used * MIB),
            memory_total_bytes=None if total is None else int(total * MIB),
            temperature_c=temperature.get(chip),
            power_w=power.get(chip),
            health=None if chip not in health else HEALTH_NAMES.get(health[chip], f"code {health[chip]:g}"),
            source=SOURCE,
            phy_id=int(chip) if chip.isdigit() else None,
            bus_id=buses.get(chip),
            id_source="npu-exporter id label (PhyId): not mapped to a logical id",
            power_note=BOARD_POWER if "310P" in (names.get(chip) or "") and chip in power else None,
        ))
    return devices


def map_to_logical(exporter: list[DeviceSnapshot], known: list[DeviceSnapshot]) -> list[DeviceSnapshot]:
    """Exporter chips renamed to their logical ids, matched with chips another source (npu-smi) knows by
    physical id, else by a PCIe bus id only one chip has. A chip that matches none keeps `phy N` as its id,
    so its readings are not merged into another NPU; without any other source the ids stay as labelled."""
    if not known:
        return exporter
    by_phy = {d.phy_id: d for d in known if d.phy_id is not None and d.logical_id is not None}
    bus_counts = Counter(d.bus_id for d in known if d.bus_id)
    by_bus = {
        d.bus_id: d for d in known if d.bus_id and bus_counts[d.bus_id] == 1 and d.logical_id is not None
    }
    exporter_buses = Counter(e.bus_id for e in exporter)
    mapped = []
    for device in exporter:
        match = by_phy.get(device.phy_id) if device.phy_id is not None else None
        how = "physical id"
        if match is None and device.bus_id and exporter_buses[device.bus_id] == 1:
            match, how = by_bus.get(device.bus_id), "PCIe bus id"
        if match is None:
            mapped.append(dataclasses.replace(device, id=f"phy {device.phy_id}"))
            continue
        mapped.append(dataclasses.replace(
            device, id=match.id, logical_id=match.logical_id, npu_id=match.npu_id, chip_id=match.chip_id,
            id_source=f"npu-exporter PhyId {device.phy_id} matched by {how} with {match.source}",
        ))
    return mapped


def read_exporter(endpoint: HttpEndpoint) -> list[DeviceSnapshot]:
    """Scrape an npu-exporter and return its chips; errors propagate (EndpointError, MetricsError)."""
    return devices_from_exporter(scrape_metrics(endpoint))
