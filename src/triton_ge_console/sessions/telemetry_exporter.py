"""Read NPUs from a MindX DL npu-exporter's Prometheus endpoint (`npu_chip_info_*`, label `id`)."""

from __future__ import annotations

from triton_ge_console.sessions.metrics import MetricTable, scrape_metrics
from triton_ge_console.sessions.snapshot import DeviceSnapshot
from triton_ge_console.sessions.stats import HttpEndpoint

MIB = 1024 * 1024
SOURCE = "npu-exporter"
# health_status is 1 when the chip is healthy, 0 when not (MindX DL documentation).
HEALTH_NAMES = {1.0: "OK", 0.0: "Unhealthy"}


def _per_chip(table: MetricTable, name: str) -> dict[str, float]:
    """Values of one npu_chip_info metric keyed by the chip's `id` label."""
    return {s.label("id") or "": s.value for s in table.samples(name) if s.label("id") is not None}


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
        ))
    return devices


def read_exporter(endpoint: HttpEndpoint) -> list[DeviceSnapshot]:
    """Scrape an npu-exporter and return its chips; errors propagate (EndpointError, MetricsError)."""
    return devices_from_exporter(scrape_metrics(endpoint))
