"""NPUs as DeviceSnapshots, read through Ascend's `npu-smi` (the `npu-smi info` table, `npu-smi info -t
usages -i N` and `-m`, parsed in triton_ge_console.npu_smi): memory from HBM or DDR, logical ids from the
table, `-m` or the row order."""

from __future__ import annotations

from pathlib import Path

from triton_ge_console.display import MIB
from triton_ge_console.npu_smi import (
    ChipIds,
    NpuSmiChip,
    NpuSmiError,
    logic_ids_printed,
    number,
    one_chip_per_npu,
    parse_chip_map,
    parse_info_table,
    parse_usages,
    run_npu_smi,
)
from triton_ge_console.sessions.observe.snapshot import DeviceSnapshot

SOURCE = "npu-smi"

# Usage keys by meaning, preferred first; names differ across CANN / driver versions and chip kinds.
UTILIZATION_KEYS = (
    "NPU Utilization(%)", "Aicore Usage Rate(%)", "AICore Usage Rate(%)", "AI Core Usage Rate(%)",
)
HBM_CAPACITY_KEYS = ("HBM Capacity(MB)",)
HBM_RATE_KEYS = ("HBM Usage Rate(%)",)
MEMORY_CAPACITY_KEYS = ("DDR Capacity(MB)", "Memory Capacity(MB)")
MEMORY_RATE_KEYS = ("DDR Usage Rate(%)", "Memory Usage Rate(%)")


def _first(values: dict[str, str], keys: tuple[str, ...]) -> float | None:
    """The first of `keys` present with a numeric value."""
    for key in keys:
        value = number(values.get(key))
        if value is not None:
            return value
    return None


def device_from(chip: NpuSmiChip, usages: dict[str, str] | None, ids: ChipIds | None = None,
                id_source: str | None = None) -> DeviceSnapshot:
    """A DeviceSnapshot for one chip, from the table, its usages block and its ids where available."""
    usages = usages or {}
    utilization = _first(usages, UTILIZATION_KEYS)
    if utilization is None:
        utilization = chip.aicore_percent
    used_mb, total_mb = _memory_mb(chip, usages)
    logical = chip.logical_id if chip.logical_id is not None else (ids.logical_id if ids else None)
    return DeviceSnapshot(
        id=str(logical) if logical is not None else f"{chip.npu_id}.{chip.chip_id}",
        kind="npu",
        name=chip.name,
        utilization=None if utilization is None else utilization / 100.0,
        memory_used_bytes=None if used_mb is None else int(used_mb * MIB),
        memory_total_bytes=None if total_mb is None else int(total_mb * MIB),
        temperature_c=chip.temperature_c,
        power_w=chip.power_w,
        health=chip.health,
        source=SOURCE,
        npu_id=chip.npu_id,
        chip_id=chip.chip_id,
        logical_id=logical,
        phy_id=chip.phy_id if chip.phy_id is not None else (ids.phy_id if ids else None),
        bus_id=chip.bus_id,
        id_source=id_source,
    )


def _memory_mb(chip: NpuSmiChip, usages: dict[str, str]) -> tuple[float | None, float | None]:
    """(used, total) MB: HBM where the card has it, else its DDR memory; table figures before rates."""
    if chip.hbm_total_mb:
        return chip.hbm_used_mb, chip.hbm_total_mb
    hbm_total = _first(usages, HBM_CAPACITY_KEYS)
    if hbm_total:
        rate = _first(usages, HBM_RATE_KEYS)
        return (None if rate is None else hbm_total * rate / 100.0), hbm_total
    if chip.memory_total_mb:
        return chip.memory_used_mb, chip.memory_total_mb
    total = _first(usages, MEMORY_CAPACITY_KEYS)
    rate = _first(usages, MEMORY_RATE_KEYS)
    return (None if total is None or rate is None else total * rate / 100.0), total


def read_npu_smi(binary: Path, timeout: float = 15.0) -> list[DeviceSnapshot]:
    """Every chip npu-smi reports, utilization refined by `-t usages` per NPU where that works; logical ids
    from the table's Device column, else from `npu-smi info -m`, else (950 layout) from the row order."""
    table = run_npu_smi(binary, "info", timeout=timeout)
    chips = parse_info_table(table)
    usages: dict[int, dict[int, dict[str, str]]] = {}
    for npu_id in sorted({chip.npu_id for chip in chips}):
        try:
            usages[npu_id] = parse_usages(run_npu_smi(binary, "info", "-t", "usages", "-i", str(npu_id),
                                                      timeout=timeout))
        except NpuSmiError:
            usages[npu_id] = {}
    ids, id_source = _chip_ids(binary, chips, timeout)
    if not ids and one_chip_per_npu(table):
        ids, id_source = _row_order_ids(chips), ROW_ORDER
    return [
        device_from(chip, usages[chip.npu_id].get(chip.chip_id), ids.get((chip.npu_id, chip.chip_id)),
                    id_source)
        for chip in chips
    ]


ROW_ORDER = ("npu-smi info row order (950 layout: one chip per NPU and no logical id printed; AscendCL "
             "numbers the visible NPUs in this order)")


def _row_order_ids(chips: list[NpuSmiChip]) -> dict[tuple[int, int], ChipIds]:
    """Logical ids 0.. in table order, for a layout that prints none (one chip per NPU)."""
    return {(c.npu_id, c.chip_id): ChipIds(c.npu_id, c.chip_id, order, None, c.name or "")
            for order, c in enumerate(chips)}


def _chip_ids(
    binary: Path, chips: list[NpuSmiChip], timeout: float
) -> tuple[dict[tuple[int, int], ChipIds], str]:
    """(card, chip) → ids from `npu-smi info -m` (logical ids where the table has no Device column, physical
    ids where `-m` prints them), and what gave the logical ids."""
    has_device_column = all(chip.logical_id is not None for chip in chips)
    if has_device_column and all(chip.phy_id is not None for chip in chips):
        return {}, "npu-smi info (Device column)"
    try:
        text = run_npu_smi(binary, "info", "-m", timeout=timeout)
        mapped = parse_chip_map(text)
    except NpuSmiError as exc:
        if has_device_column:
            return {}, "npu-smi info (Device column)"
        return {}, f"unknown: npu-smi info has no Device column and {exc}"
    source = ("npu-smi info (Device column)" if has_device_column else "npu-smi info -m (Chip Logic ID)"
              if logic_ids_printed(text) else "npu-smi info -m row order (950 layout: no Chip Logic ID)")
    return {(c.npu_id, c.chip_id): c for c in mapped}, source
