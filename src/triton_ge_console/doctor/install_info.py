"""What an Ascend install says about itself: the `key=value` files its packages leave behind.

The files and their keys, as real hosts show them (tests/data/hosts/SOURCES.md):
- `<toolkit>/<arch>-linux/ascend_toolkit_install.info`: `package_name=Ascend-cann-toolkit`, `version=8.3.RC2`,
  `arch`, `path` (the toolkit's home is `ascend-toolkit/latest` up to CANN 8.3, `cann` from 8.5 on);
- `<toolkit>/version.cfg` (older layouts and containers): `toolkit_running_version=[8.2.0.2.220:8.2.RC2]`;
- `<root>/driver/version.info`: `Version=24.1.rc2.2`, `compatible_version_fw=[7.0.0,7.2.99]` (the firmware
  versions this driver works with);
- `<root>/firmware/version.info`: `Version=7.1.0.11.220`.
Standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

DEFAULT_ROOT = Path("/usr/local/Ascend")  # where the driver, firmware and CANN packages install by default
# the toolkit's home, as set_env.sh exports it, else where each CANN generation installs it
TOOLKIT_ENV = ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME")
TOOLKIT_HOMES = ("ascend-toolkit/latest", "cann")


def read_info(path: Path) -> dict[str, str]:
    """A `key=value` file as a dict (keys as written; later lines win); {} when it cannot be read."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line)
    return {key.strip(): value.strip() for key, value in pairs}


@dataclass(frozen=True)
class Toolkit:
    """A CANN toolkit found on this host."""

    home: Path
    info_file: Path
    version: str | None
    arch: str | None


def find_toolkit(env: dict[str, str], root: Path) -> Toolkit | None:
    """The CANN toolkit the environment points at, else the default homes under root."""
    homes = [Path(env[name]) for name in TOOLKIT_ENV if env.get(name)]
    homes += [root / home for home in TOOLKIT_HOMES]
    for home in homes:
        for info_file in sorted(home.glob("*-linux/ascend_toolkit_install.info")):
            info = read_info(info_file)
            return Toolkit(home, info_file, info.get("version"), info.get("arch"))
        running = read_info(home / "version.cfg").get("toolkit_running_version")
        if running:  # `[8.2.0.2.220:8.2.RC2]`: the inner version, then the release
            return Toolkit(home, home / "version.cfg", running.strip("[]").split(":")[-1], None)
    return None


def version_of(path: Path) -> str | None:
    """The `Version=` of a driver or firmware version.info."""
    return read_info(path).get("Version")


def _numbers(version: str) -> tuple[int, ...]:
    """7.1.0.11.220 → (7, 1, 0, 11, 220); the leading numeric parts only."""
    parts = []
    for part in version.split("."):
        if not part.isdigit():
            break
        parts.append(int(part))
    return tuple(parts)


def firmware_ranges(driver_info: dict[str, str]) -> list[tuple[str, str]]:
    """The driver's `compatible_version_fw=[low,high],...` as (low, high) pairs."""
    return re.findall(r"\[([\w.]+),([\w.]+)\]", driver_info.get("compatible_version_fw", ""))


def firmware_fits(firmware: str, ranges: list[tuple[str, str]]) -> bool | None:
    """Whether the firmware version falls in one of the driver's ranges (None: no range, or unreadable)."""
    have = _numbers(firmware)
    if not ranges or not have:
        return None
    for low, high in ranges:
        lo, hi = _numbers(low), _numbers(high)
        if lo and hi and lo <= have[:len(lo)] and have[:len(hi)] <= hi:
            return True
    return False
