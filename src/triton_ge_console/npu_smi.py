"""Ascend's `npu-smi` tool: finding and running it, and reading its tables (`npu-smi info`, `-t usages`,
`-m`) into plain values; both the repository (which SoC to build for, how many NPUs) and the device
telemetry read it.

Handles the real layouts: 910-class cards with HBM ("Chip" or "Chip Phy-ID" rows, HBM-Usage column),
310/310P cards without HBM ("Chip Device" rows, Memory-Usage only, power "NA" on 310P), the 950 series
(npu-smi 25.7: "NPU ID" and "Name" in cells of their own, no chip id on the second line), "NA"/"-" values,
`used/ total` without a space, a process table after the devices, and usage keys that vary by version.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from triton_ge_console.errors import GeConsoleError

PAIR = re.compile(r"(\d+|NA|-)\s*/\s*(\d+|NA|-)")


class NpuSmiError(GeConsoleError, RuntimeError):
    """npu-smi failed or printed something we cannot read."""


@dataclass(frozen=True)
class NpuSmiChip:
    """One chip row pair of the `npu-smi info` table; None where the table says NA or nothing."""

    npu_id: int
    chip_id: int
    logical_id: int | None  # the Device column (310, 310P); 910-class tables have none
    name: str | None
    health: str | None
    power_w: float | None
    temperature_c: float | None
    aicore_percent: float | None
    memory_used_mb: int | None
    memory_total_mb: int | None
    hbm_used_mb: int | None
    hbm_total_mb: int | None
    bus_id: str | None
    phy_id: int | None = None  # the "Chip  Phy-ID" column (A3 / 910_93 tables)


@dataclass(frozen=True)
class ChipIds:
    """One compute chip of `npu-smi info -m`: its card, chip, logical id and (where printed) physical id."""

    npu_id: int
    chip_id: int
    logical_id: int
    phy_id: int | None
    name: str


def number(token: str | None) -> float | None:
    """A float from a table token; NA, '-' and junk are None."""
    try:
        return float(token) if token is not None else None
    except ValueError:
        return None


def _integer(token: str | None) -> int | None:
    """An int from a table token; NA, '-' and junk are None."""
    value = number(token)
    return int(value) if value is not None else None


def _cells(line: str) -> list[str]:
    """The |-separated cells of a table line, stripped."""
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _device_rows(text: str) -> tuple[list[str], list[list[str]]]:
    """The header's second line cells and the device lines' cells (process table and borders excluded); the
    950 layout's separate "NPU ID" and "Name" cells are joined into one, as the other layouts print them."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if "Health" in line and "Power(W)" in line), None)
    if start is None or start + 1 >= len(lines):
        raise NpuSmiError("npu-smi info: no device table header (Health / Power(W)) found")
    split_name = _cells(lines[start])[:2] == ["NPU ID", "Name"]
    rows: list[list[str]] = []
    for line in lines[start + 1:]:
        if "Process id" in line or "Process name" in line or "No running processes" in line:
            break
        if line.startswith("|"):
            cells = _cells(line)
            rows.append([f"{cells[0]} {cells[1]}".strip(), *cells[2:]] if split_name and len(cells) > 1
                        else cells)
    if not rows:
        raise NpuSmiError("npu-smi info: the device table header has no second line")
    return rows[0], rows[1:]


def parse_info_table(text: str) -> list[NpuSmiChip]:
    """Parse `npu-smi info` into one NpuSmiChip per chip, in table order."""
    header, rows = _device_rows(text)
    second_id = {"Device": "device", "Phy-ID": "phy"}.get(header[0].split()[-1]) if header[0] else None
    has_hbm = any("HBM-Usage" in cell for cell in header)
    if len(rows) % 2:
        raise NpuSmiError(f"npu-smi info: {len(rows)} device lines, expected pairs")
    return [
        _chip(rows[index], rows[index + 1], index // 2, second_id, has_hbm)
        for index in range(0, len(rows), 2)
    ]


def one_chip_per_npu(text: str) -> bool:
    """Whether the table prints no chip id at all (the 950 layout: one chip per NPU, numbered by NPU ID)."""
    header, _ = _device_rows(text)
    return not header[0]


def _chip(
    first: list[str], second: list[str], order: int, second_id: str | None, has_hbm: bool
) -> NpuSmiChip:
    """One chip from its two table lines; second_id says what the number after the chip id is."""
    if len(first) < 3 or len(second) < 3:
        raise NpuSmiError(f"npu-smi info: unexpected row {' | '.join(first)}")
    npu_and_name = first[0].split(None, 1)
    figures = first[2].split()
    ids = second[0].split()
    usage = second[2].split(None, 1)
    pairs = PAIR.findall(usage[1] if len(usage) > 1 else "")
    memory = pairs[0] if pairs else (None, None)
    hbm = pairs[1] if has_hbm and len(pairs) > 1 else (None, None)
    npu_id = _integer(npu_and_name[0]) if npu_and_name else None
    second_number = _integer(ids[1]) if len(ids) > 1 else None
    return NpuSmiChip(
        npu_id=npu_id if npu_id is not None else order,
        chip_id=_integer(ids[0] if ids else None) or 0,
        logical_id=second_number if second_id == "device" else None,
        phy_id=second_number if second_id == "phy" else None,
        name=npu_and_name[1].strip() if len(npu_and_name) > 1 else None,
        health=first[1] or None,
        power_w=number(figures[0] if figures else None),
        temperature_c=number(figures[1] if len(figures) > 1 else None),
        aicore_percent=number(usage[0] if usage else None),
        memory_used_mb=_integer(memory[0]),
        memory_total_mb=_integer(memory[1]),
        hbm_used_mb=_integer(hbm[0]),
        hbm_total_mb=_integer(hbm[1]),
        bus_id=second[1] if second[1] not in ("", "NA") else None,
    )


def parse_usages(text: str) -> dict[int, dict[str, str]]:
    """Parse `npu-smi info -t usages -i N` into {chip id: {key: value}}.

    Each chip's block ends with its `Chip ID` line; a block without one (one-chip cards on old
    versions) is chip 0.
    """
    chips: dict[int, dict[str, str]] = {}
    block: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if not sep or not key or key in ("NPU ID", "Chip Count"):
            continue
        if key == "Chip ID":
            chips[_integer(value) or 0] = block
            block = {}
        else:
            block[key] = value
    if block:
        chips.setdefault(0 if not chips else max(chips) + 1, block)
    return chips


def parse_board(text: str) -> dict[str, str]:
    """Parse `npu-smi info -t board -i N` (one NPU's `Key : value` lines, as usages prints them): its
    Software Version (the driver), Firmware Version and Compatibility among them."""
    return next(iter(parse_usages(text).values()), {})


def parse_chip_map(text: str) -> list[ChipIds]:
    """Parse `npu-smi info -m` by its header: NPU ID, Chip ID, Chip Logic ID, then Chip Name (newer versions
    add Chip Phy-ID); chips without a logic id (each card's Mcu) are not compute devices and are left out. The
    950 series prints `NPU ID  Slot ID  Chip ID  Chip Phy-ID  Chip Name`, no logic id: its chips get logical
    ids in row order (see `logic_ids_printed`)."""
    lines = [line for line in text.splitlines() if line.strip()]
    start = next((i for i, line in enumerate(lines) if "NPU ID" in line and "Chip ID" in line), None)
    names = re.split(r"\s{2,}", lines[start].strip()) if start is not None else []
    logic = "Chip Logic ID" if "Chip Logic ID" in names else "Chip Phy-ID"
    if start is None or not {"NPU ID", "Chip ID", logic} <= set(names) or names[-1] != "Chip Name":
        raise NpuSmiError(f"npu-smi info -m: no 'Chip Logic ID' (or 950-series 'Chip Phy-ID') header found"
                          f"{f' (columns {names})' if names else ''}")
    chips: list[ChipIds] = []
    for line in lines[start + 1:]:
        cells = dict(zip(names, line.split(None, len(names) - 1), strict=False))
        npu, chip, logical = (_integer(cells.get(k)) for k in ("NPU ID", "Chip ID", logic))
        if npu is None or chip is None or logical is None:
            continue  # an Mcu row ('-' logic id), or not a chip row
        logical = logical if logic == "Chip Logic ID" else len(chips)
        chips.append(ChipIds(npu, chip, logical, _integer(cells.get("Chip Phy-ID")),
                             cells.get("Chip Name", "").strip()))
    return chips


def logic_ids_printed(text: str) -> bool:
    """Whether an `npu-smi info -m` output prints logical ids (every layout but the 950 series')."""
    return "Chip Logic ID" in text


def find_npu_smi() -> Path | None:
    """npu-smi on PATH, if installed."""
    found = shutil.which("npu-smi")
    return Path(found) if found else None


def run_npu_smi(binary: Path, *args: str, timeout: float = 15.0) -> str:
    """Run npu-smi and return its output; failures raise NpuSmiError with its own message."""
    try:
        done = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=timeout,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NpuSmiError(f"{binary} {' '.join(args)}: {exc}") from exc
    if done.returncode != 0:
        lines = (done.stderr.strip() or done.stdout.strip()).splitlines()
        last = lines[-1] if lines else ""
        raise NpuSmiError(f"{binary} {' '.join(args)}: exit {done.returncode}: {last}")
    return done.stdout


def host_npu_count() -> int | None:
    """How many NPUs npu-smi lists on this host (the chips of `npu-smi info`); None without npu-smi, when it
    fails, or when it lists none."""
    binary = find_npu_smi()
    if binary is None:
        return None
    try:
        return len(parse_info_table(run_npu_smi(binary, "info"))) or None
    except (NpuSmiError, OSError, ValueError):
        return None
