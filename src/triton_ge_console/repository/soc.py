"""ATC's --soc_version for the NPUs this host can see, and the SoC an OM was built for (when known).

The value is "Ascend" + the chip name `npu-smi info` shows (Ascend910B3, Ascend310P3, Ascend310). Plain
`Ascend910B` is the legacy 910-class SoC, not the 910B series. On A3 the table shows only "Ascend910": the
value is Chip Name + "_" + NPU Name from `npu-smi info -t board`, which this module does not guess; the
950 series likewise (the table shows "Ascend950PR", the SoC is e.g. Ascend950PR_9579 on a board whose NPU
Name is 9579).
An OM carries the SoC it was built for as its model's `soc_version` attribute (ATC's GeGenerator
SetOmSystemInfo writes it), which GE checks at load (hicann/ge base/common/helper/om_file_helper.cc
OmFileLoadHelper::CheckModelCompatibility → aclrtCheckArchCompatibility): `model_files.om_file` reads it, so
an OM ATC wrote without `ge-console convert` is judged too. That attribute is the truth at load and comes
first; convert's record beside the OM (`<om>.atc.json`: the SoC and the ATC command) stands in when the OM
cannot be read (encrypted, not GE's layout), and each verdict names which source it used.

AscendCL loads an OM on any SoC of the NpuArch it was built for (an OM for Ascend910B3 runs on a 910B4);
another NpuArch fails at load with 500002 (ACL_ERROR_GE_FAILURE). The NpuArch of each SoC family is as
hicann's operator libraries map SocVersion to NpuArch (PlatformInfo::GetCurNpuArch in their platform
stubs): ASCEND910 DAV_1001, ASCEND910B and ASCEND910_93 DAV_2201, ASCEND310P DAV_2002, ASCEND310B
DAV_3002, ASCEND950 DAV_3510. A SoC outside that table (Ascend310) is compared by name.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

from triton_ge_console.model_files import om_file
from triton_ge_console.npu_smi import (
    NpuSmiError,
    find_npu_smi,
    parse_info_table,
    run_npu_smi,
)

LEGACY_910 = "Ascend910B"
NPU_ARCHS = (
    (re.compile(r"^Ascend910B\d$|^Ascend910_93\d\d$"), "DAV_2201"),
    (re.compile(r"^Ascend910(A|B|ProA|ProB|PremiumA)?$"), "DAV_1001"),
    (re.compile(r"^Ascend310P\d$"), "DAV_2002"),
    (re.compile(r"^Ascend310B\d$"), "DAV_3002"),
    (re.compile(r"^Ascend950"), "DAV_3510"),
)
RECORD_SUFFIX = ".atc.json"
_CHIP = re.compile(r"^\d{3}[A-Z]?\d?$")  # 310, 310P3, 910B4
_CACHE: dict[str, tuple[float, tuple[str, ...]]] = {}
CACHE_S = 30.0


def soc_from_chip_name(name: str | None) -> str | None:
    """ATC's SoC value for a chip name from `npu-smi info` (None where the table cannot tell)."""
    if name is None or not _CHIP.match(name.strip()):
        return None  # "Ascend910" on A3, a masked name
    return f"Ascend{name.strip()}"


def visible_soc_versions(npu_smi: Path | None = None) -> tuple[str, ...]:
    """The SoC values of the NPUs npu-smi shows (cached briefly); () without npu-smi or NPUs."""
    binary = npu_smi or find_npu_smi()
    if binary is None:
        return ()
    cached = _CACHE.get(str(binary))
    if cached is not None and time.monotonic() - cached[0] < CACHE_S:
        return cached[1]
    try:
        chips = parse_info_table(run_npu_smi(binary, "info"))
    except NpuSmiError:
        return ()
    found = tuple(sorted({soc for soc in (soc_from_chip_name(c.name) for c in chips) if soc}))
    _CACHE[str(binary)] = (time.monotonic(), found)
    return found


def record_path(om_path: Path) -> Path:
    """Where convert records what an OM was built for."""
    return om_path.with_name(om_path.name + RECORD_SUFFIX)


def write_record(om_path: Path, soc_version: str, command: list[str]) -> None:
    """Remember the SoC (and ATC command) an OM was built with."""
    record = {"soc_version": soc_version, "atc": command}
    record_path(om_path).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def read_record(om_path: Path) -> dict[str, object] | None:
    """What convert recorded beside an OM (its SoC and ATC command), None without a readable record."""
    try:
        record = json.loads(record_path(om_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


@dataclass(frozen=True)
class BuiltFor:
    """The SoC an OM was built for and where that was read (said beside every verdict)."""

    soc: str
    source: str  # "its soc_version attribute", or the record's file name


def built_for(om_path: Path) -> BuiltFor | None:
    """The SoC an OM was built for: its own soc_version attribute (what GE checks at load), else what
    convert recorded beside it; None when neither says."""
    own = om_file.soc_version(om_path).value
    if own is not None:
        return BuiltFor(own, "its soc_version attribute")
    soc = (read_record(om_path) or {}).get("soc_version")
    return BuiltFor(soc, record_path(om_path).name) if isinstance(soc, str) and soc else None


def stale_record(om_path: Path) -> str | None:
    """What is wrong when convert's record names another SoC than the OM's own attribute: the OM was built
    again without convert, so the record (its SoC and ATC command) describes another build; None otherwise."""
    own = om_file.soc_version(om_path).value
    recorded = (read_record(om_path) or {}).get("soc_version")
    if own is None or not isinstance(recorded, str) or not recorded or recorded == own:
        return None
    return (f"{record_path(om_path).name} says {om_path.name} was built for {recorded}, but the OM's own "
            f"soc_version attribute is {own} (what GE checks at load): the OM was built again without "
            f"convert, so the record's ATC command is not this OM's; convert it again or delete the record")


def npu_arch(soc: str) -> str | None:
    """The NpuArch of a SoC value, None outside the known families."""
    return next((arch for pattern, arch in NPU_ARCHS if pattern.match(soc)), None)


def loads_on(built: str, visible: str) -> bool:
    """Whether AscendCL loads an OM built for `built` on a `visible` NPU: the same NpuArch (or name)."""
    arch = npu_arch(built)
    return built == visible or (arch is not None and arch == npu_arch(visible))


def mismatch(om_path: Path, visible: tuple[str, ...] | None = None) -> tuple[str, str] | None:
    """("error", why) when this host's NPUs would refuse the OM (another NpuArch), ("warning", what) when
    only the SoC name differs, None when it matches or nobody can tell; npu-smi is asked only for an OM
    whose SoC is known."""
    built = built_for(om_path)
    if built is None:
        return None
    soc = built.soc
    visible = visible_soc_versions() if visible is None else visible
    if not visible or soc in visible:
        return None
    said = (f"{om_path.name} was built for {soc} ({built.source}), but this host's NPUs are "
            f"{', '.join(visible)}")
    if all(loads_on(soc, v) for v in visible):
        return "warning", (f"{said}: the same NpuArch ({npu_arch(soc)}), so AscendCL loads it; "
                           f"--soc-version {visible[0]} builds for this chip exactly")
    return "error", (f"{said}: another NpuArch, so AscendCL refuses it at load (ACL error 500002, "
                     f"ACL_ERROR_GE_FAILURE); rebuild it with --soc-version {visible[0]}")
