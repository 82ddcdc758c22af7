"""The host checks of `ge-console doctor`, each a status, one line, and what to do.

Like Huawei's msprechecker, it reads what a new host has before anything is served: the CANN toolkit and
its version, driver and firmware (their version.info files, npu-smi), the NPUs and their ids, pyACL, ATC,
tritonserver and its Python backend, the glue, /dev/shm and the process limits. A host without NPUs is not
a failure: the models run in CPU emulation (ONNX Runtime), and the checks say so.
"""

from __future__ import annotations

import importlib.util
import os
import resource
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from triton_ge_console.doctor import install_info
from triton_ge_console.npu_smi import (
    ChipIds,
    NpuSmiChip,
    NpuSmiError,
    parse_board,
    parse_chip_map,
    parse_info_table,
    run_npu_smi,
)

OK, WARN, FAIL, INFO = "ok", "warn", "fail", "info"
VISIBLE_ENV = "ASCEND_RT_VISIBLE_DEVICES"
EMULATION = "models run in CPU emulation (ONNX Runtime)"
# Triton's Python backend gives each model instance a shared-memory region of shm-default-byte-size
# (1 MiB unless set) that grows by shm-growth-byte-size to hold a request's tensors (python_backend
# src/python_be.cc, TRITONBACKEND_Initialize); Docker's /dev/shm is 64 MiB unless --shm-size says more.
PYTHON_BACKEND_REGION = 1 << 20
# Triton's container guide runs tritonserver with `--ulimit memlock=-1` (pinned host memory). Open files:
# each client connection, Python-backend stub (its shared memory and message queues) and model file holds
# descriptors in tritonserver; the common default of 1024 is the limit servers first run into.
OPEN_FILES_WANTED = 4096


@dataclass(frozen=True)
class Check:
    """One finding: what was checked, how it stands, one line, and what to do (empty when nothing)."""

    name: str
    status: str  # ok | warn | fail | info
    line: str
    action: str = ""


@dataclass(frozen=True)
class Host:
    """Where the checks look: the environment, the Ascend root, /dev/shm, npu-smi and the interpreter."""

    env: Mapping[str, str]
    ascend_root: Path = install_info.DEFAULT_ROOT
    shm: Path = Path("/dev/shm")
    npu_smi: Path | None = None
    python: str = "python3"
    tritonserver: str | None = None
    shm_needed: int | None = None  # bytes the spec's models need in /dev/shm (None: no spec given)
    shm_detail: str = ""


@dataclass
class Facts:
    """What earlier checks found that later ones use."""

    chips: list[NpuSmiChip] = field(default_factory=list)
    ids: list[ChipIds] = field(default_factory=list)
    npu: bool = False
    onnx_runtime: bool = False  # CPU emulation can run here


def _npu_smi_binary(host: Host) -> Path | None:
    """npu-smi: the one given, else on PATH."""
    if host.npu_smi is not None:
        return host.npu_smi
    found = shutil.which("npu-smi", path=host.env.get("PATH"))
    return Path(found) if found else None


def check_npu_smi(host: Host, facts: Facts) -> Check:
    """npu-smi answers and lists NPUs: the driver is loaded."""
    binary = _npu_smi_binary(host)
    if binary is None:
        return Check("npu-smi", INFO, f"npu-smi not found: no NPU driver on this host; {EMULATION}",
                     "on an Atlas host, install the NPU driver (it brings npu-smi) and add it to PATH")
    try:
        text = run_npu_smi(binary, "info")
        facts.chips = parse_info_table(text)
    except NpuSmiError as exc:
        return Check("npu-smi", FAIL, f"npu-smi info failed: {exc}",
                     "check the driver is installed for this kernel (dmesg, /dev/davinci*) and that this "
                     "user may use the NPUs (group HwHiAiUser)")
    facts.npu = bool(facts.chips)
    header = next((line for line in text.splitlines() if "npu-smi" in line and "Version" in line), "")
    version = header.strip("| ").split("Version:")[-1].strip() if header else None
    names = sorted({chip.name for chip in facts.chips if chip.name})
    sick = [f"NPU {c.npu_id} chip {c.chip_id} {c.health}" for c in facts.chips
            if c.health not in ("OK", None)]
    line = (f"{len(facts.chips)} chip(s) ({', '.join(names) or 'unnamed'}), "
            f"driver {version or 'version unknown'} (npu-smi {binary})")
    if sick:
        return Check("npu-smi", WARN, f"{line}; not OK: {'; '.join(sick)}",
                     "see `npu-smi info -t health -i N` for the alarm before serving on those chips")
    return Check("npu-smi", OK, line)


def check_cann(host: Host, facts: Facts) -> Check:
    """The CANN toolkit and its version (ascend_toolkit_install.info)."""
    env = dict(host.env)
    toolkit = install_info.find_toolkit(env, host.ascend_root)
    if toolkit is None:
        looked = ", ".join([f"${n}" for n in install_info.TOOLKIT_ENV]
                           + [str(host.ascend_root / h) for h in install_info.TOOLKIT_HOMES])
        if not facts.npu:
            return Check("cann", INFO, f"no CANN toolkit (looked at {looked})",
                         "on an Atlas host, install the CANN toolkit and `source <toolkit>/set_env.sh`")
        return Check("cann", FAIL, f"no CANN toolkit found (looked at {looked})",
                     "install the CANN toolkit matching the driver and `source <toolkit>/set_env.sh`")
    line = (f"CANN toolkit {toolkit.version or 'of unknown version'} at {toolkit.home} "
            f"({toolkit.info_file.name})")
    if not any(env.get(n) for n in install_info.TOOLKIT_ENV):
        set_env = (toolkit.home.parent if toolkit.home.name == "latest" else toolkit.home) / "set_env.sh"
        return Check("cann", WARN, f"{line}; its environment is not set (no $ASCEND_HOME_PATH)",
                     f"`source {set_env}` before ge-console up, so pyACL, ATC and GE find their libraries")
    return Check("cann", OK, line)


def check_driver_firmware(host: Host, facts: Facts) -> list[Check]:
    """The driver's version.info, and the firmware: its version.info, what the card reports to npu-smi, and
    whether it is one the driver accepts."""
    driver_file = host.ascend_root / "driver" / "version.info"
    driver_info = install_info.read_info(driver_file)
    if "Version" in driver_info:
        driver = Check("driver", OK, f"driver {driver_info['Version']} ({driver_file})")
    else:
        driver = Check("driver", FAIL if facts.npu else INFO, f"no driver version.info at {driver_file}",
                       "install the NPU driver package (Ascend-hdk-*-npu-driver) for this card")
    return [driver, check_firmware(host, facts, driver_info)]


def _board(host: Host, facts: Facts) -> tuple[dict[str, str], str]:
    """What the first NPU reports of itself (`npu-smi info -t board -i N`: Firmware Version, Compatibility),
    and the command that said it; ({}, "") without an NPU or where npu-smi cannot say."""
    binary = _npu_smi_binary(host)
    if not facts.chips or binary is None:
        return {}, ""
    command = ("info", "-t", "board", "-i", str(facts.chips[0].npu_id))
    try:
        return parse_board(run_npu_smi(binary, *command)), f"npu-smi {' '.join(command)}"
    except NpuSmiError:
        return {}, ""


def check_firmware(host: Host, facts: Facts, driver_info: dict[str, str]) -> Check:
    """The firmware: the installed package's version.info, else what the card reports to npu-smi (a
    container often mounts no firmware folder); against the driver's ranges and npu-smi's own verdict."""
    firmware_file = host.ascend_root / "firmware" / "version.info"
    package = install_info.version_of(firmware_file)
    board, asked = _board(host, facts)
    running = board.get("Firmware Version")
    firmware = package or running
    if firmware is None:
        return Check("firmware", FAIL if facts.npu else INFO, f"no firmware version.info at {firmware_file}",
                     "install the NPU firmware package (Ascend-hdk-*-npu-firmware) after the driver")
    ranges = install_info.firmware_ranges(driver_info)
    fits = install_info.firmware_fits(firmware, ranges)
    wanted = ", ".join(f"{lo}-{hi}" for lo, hi in ranges)
    verdict = board.get("Compatibility")
    if package is None:
        where = f"{asked}: Compatibility {verdict}" if verdict else asked
    else:
        where = str(firmware_file)
    if fits is False:  # a warning: hosts run firmware past the range (24.1.rc2 with 7.3.0.1.231, SOURCES.md)
        return Check("firmware", WARN, f"firmware {firmware} is outside the range driver "
                     f"{driver_info.get('Version')} names ({wanted})",
                     "check Huawei's driver/firmware compatibility table for this pair; install the "
                     "firmware released with this driver if it is not listed")
    said = f", within the driver's {wanted}" if fits else ""
    line = f"firmware {firmware}{said} ({where})"
    if verdict not in (None, "OK"):
        return Check("firmware", WARN, f"{line}; npu-smi reports Compatibility {verdict} ({asked})",
                     "install the firmware released with this driver (Huawei's compatibility table)")
    if package and running and package != running:
        return Check("firmware", WARN, f"{line}; the card reports {running} ({asked}), the installed "
                     f"package {package}",
                     "a card runs the firmware it last booted with: reboot after installing firmware, or "
                     "install the package the card is meant to run")
    return Check("firmware", OK, line)


def _visible(env: Mapping[str, str]) -> list[int] | None:
    """ASCEND_RT_VISIBLE_DEVICES as ids (None: unset, all devices visible)."""
    text = env.get(VISIBLE_ENV)
    if text is None or not text.strip():
        return None
    return [int(part) for part in text.replace(" ", "").split(",") if part.lstrip("-").isdigit()]


def check_devices(host: Host, facts: Facts) -> Check:
    """The NPUs this process sees and their ids: npu-smi's logical (and physical) ids, and the user ids
    aclrtSetDevice takes under ASCEND_RT_VISIBLE_DEVICES (CANN runtime API, aclrtGetLogicDevIdByUserDevId:
    the variable's ids are logical ones, a process's user id N is the N-th of them)."""
    if not facts.npu:
        return Check("devices", INFO, "no NPU visible")
    binary = _npu_smi_binary(host)
    try:
        facts.ids = parse_chip_map(run_npu_smi(binary, "info", "-m")) if binary else []
    except NpuSmiError:
        facts.ids = []
    logical = [c.logical_id for c in facts.ids] or list(range(len(facts.chips)))
    visible = _visible(host.env)
    if visible is None:
        return Check("devices", OK, f"all {len(logical)} NPU(s) visible, logical ids {_ids(logical)} "
                     f"({VISIBLE_ENV} unset: user id = logical id){_phys(facts.ids)}")
    unknown = [i for i in visible if i not in logical]
    if unknown:
        return Check("devices", FAIL, f"{VISIBLE_ENV}={host.env[VISIBLE_ENV]} names {_ids(unknown)}, "
                     f"not among npu-smi's logical ids {_ids(logical)}",
                     f"set {VISIBLE_ENV} to ids `npu-smi info -m` lists as Chip Logic ID")
    pairs = ", ".join(f"user {user} = logical {lid}" for user, lid in enumerate(visible))
    seen = [c for c in facts.ids if c.logical_id in visible]
    return Check("devices", OK, f"{len(visible)} of {len(logical)} NPU(s) visible ({VISIBLE_ENV}="
                 f"{host.env[VISIBLE_ENV]}): {pairs}; the spec's device_ids are npu-smi's logical ids"
                 f"{_phys(seen)}")


def _ids(values: list[int]) -> str:
    """Device ids as one comma list for a check's line ("none" so an empty list still reads)."""
    return ",".join(str(v) for v in values) or "none"


def _phys(ids: list[ChipIds]) -> str:
    """The logical→physical chip map where npu-smi gave one, so the ids match the host's own tools."""
    pairs = [f"{c.logical_id}→{c.phy_id}" for c in ids if c.phy_id is not None]
    return f"; logical→physical {', '.join(pairs)}" if pairs else ""


def check_pyacl(host: Host, facts: Facts) -> Check:
    """`import acl` in a fresh interpreter with this environment (a broken library path kills only it)."""
    try:
        done = subprocess.run([host.python, "-c", "import acl"], env=dict(host.env), capture_output=True,
                              text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check("pyacl", FAIL, f"could not run {host.python}: {exc}")
    if done.returncode == 0:
        return Check("pyacl", OK, "pyACL (`import acl`) imports: .om models run through AscendCL")
    last = (done.stderr.strip().splitlines() or ["no message"])[-1]
    status = FAIL if facts.npu else INFO
    return Check("pyacl", status, f"`import acl` fails: {last}",
                 "`source <toolkit>/set_env.sh` (it puts pyACL on PYTHONPATH and its libraries on "
                 "LD_LIBRARY_PATH) in the shell that runs ge-console")


def check_atc(host: Host, facts: Facts) -> Check:
    """ATC, which `ge-console convert` runs to turn ONNX into .om."""
    found = shutil.which("atc", path=host.env.get("PATH"))
    if found:
        return Check("atc", OK, f"atc at {found}: `ge-console convert` can build .om models")
    return Check("atc", WARN if facts.npu else INFO, "atc not on PATH: `ge-console convert` cannot build .om "
                 "models",
                 "`source <toolkit>/set_env.sh` (ATC ships with the CANN toolkit)")


SERVER_EXTRA = "python3 -m pip install 'triton-ge-console[server]'"


def check_triton(host: Host, facts: Facts) -> list[Check]:
    """tritonserver and its Python backend (library and a stub for this Python)."""
    from triton_ge_console.backend_glue.distribution import DistributionError, find_distribution

    try:
        dist = find_distribution(host.tritonserver)
    except DistributionError as exc:
        return [Check("tritonserver", FAIL, str(exc).split(";")[0],
                      f"{SERVER_EXTRA}, or put tritonserver on PATH"),
                Check("python-backend", FAIL, "Triton's Python backend: no tritonserver to look beside",
                      f"{SERVER_EXTRA} (the nvidia-pytriton wheel brings both)")]
    checks = [Check("tritonserver", OK, f"{dist.binary} (found via {dist.origin})")]
    library = dist.python_backend_dir / "libtriton_python.so" if dist.python_backend_dir else None
    stub = dist.stub_for()
    if library is None or not library.is_file() or stub is None:
        what = "libtriton_python.so" if library is None or not library.is_file() else "a stub for this Python"
        checks.append(Check("python-backend", FAIL, f"Triton's Python backend is incomplete: no {what}",
                            "install a tritonserver build with the Python backend (the container's "
                            "/opt/tritonserver/backends/python, or the nvidia-pytriton wheel)"))
    else:
        checks.append(Check("python-backend", OK, f"{library.parent} (stub {stub})"))
    return checks


def check_glue(host: Host, facts: Facts) -> Check:
    """The GE glue (the Python backend model ge and npu_ge run as) and ONNX Runtime, which CPU emulation
    runs the models' ONNX through."""
    from triton_ge_console.backend_glue.installer import GLUE_MODEL_PY, NATIVE_NPU_GE

    facts.onnx_runtime = importlib.util.find_spec("onnxruntime") is not None
    missing = [what for what, there in (("the GE glue's model.py", GLUE_MODEL_PY.is_file()),
                                        ("ONNX Runtime", facts.onnx_runtime)) if not there]
    if missing:
        return Check("glue", FAIL, f"{' and '.join(missing)} not installed here ({host.python})",
                     SERVER_EXTRA)
    native = f"; native npu_ge at {NATIVE_NPU_GE}" if NATIVE_NPU_GE.is_file() else ""
    return Check("glue", OK, f"the GE glue ({GLUE_MODEL_PY.parent}) with ONNX Runtime{native}")


def check_shm(host: Host, facts: Facts) -> Check:
    """/dev/shm: its size against what the spec's models put there (a region per Python-backend instance,
    grown to hold a request's tensors)."""
    try:
        stat = os.statvfs(host.shm)
    except OSError as exc:
        return Check("shm", FAIL, f"{host.shm}: {exc.strerror}", "Triton's Python backend needs /dev/shm")
    total, free = stat.f_blocks * stat.f_frsize, stat.f_bavail * stat.f_frsize
    line = f"{host.shm} {_mib(total)} ({_mib(free)} free)"
    if host.shm_needed is None:
        return Check("shm", OK if free >= 64 << 20 else WARN, f"{line}; no spec given to weigh it against",
                     "" if free >= 64 << 20 else "give the container more with --shm-size (docker) or an "
                     "emptyDir medium: Memory")
    need = f"the spec's models need about {_mib(host.shm_needed)}{host.shm_detail}"
    if host.shm_needed > free:
        return Check("shm", FAIL, f"{line}; {need}",
                     f"give it at least {_mib(host.shm_needed)} (docker --shm-size, or a larger tmpfs)")
    return Check("shm", OK, f"{line}; {need}")


def _mib(count: int) -> str:
    """Bytes as whole MiB, the unit docker's --shm-size and the tmpfs sizes are read in."""
    return f"{count / (1 << 20):,.0f} MiB"


def check_limits(host: Host, facts: Facts) -> list[Check]:
    """The open-file and locked-memory limits tritonserver inherits."""
    nofile, hard_nofile = resource.getrlimit(resource.RLIMIT_NOFILE)
    memlock, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    checks = []
    if nofile != resource.RLIM_INFINITY and nofile < OPEN_FILES_WANTED:
        checks.append(Check("open-files", WARN, f"open-file limit {nofile} (under {OPEN_FILES_WANTED})",
                            f"`ulimit -n {_limit(hard_nofile)}` (the hard limit; docker --ulimit nofile=...) "
                            "before ge-console up"))
    else:
        checks.append(Check("open-files", OK, f"open-file limit {_limit(nofile)}"))
    if memlock != resource.RLIM_INFINITY:
        checks.append(Check("memlock", WARN, f"locked-memory limit {_limit(memlock)} (not unlimited)",
                            "`ulimit -l unlimited` (docker --ulimit memlock=-1, as Triton's container guide "
                            "runs it)"))
    else:
        checks.append(Check("memlock", OK, "locked-memory limit unlimited"))
    return checks


def _limit(value: int) -> str:
    """A resource limit as ulimit writes it: unlimited, a count, or MiB when it is a size that large."""
    if value == resource.RLIM_INFINITY:
        return "unlimited"
    return f"{value}" if value < 1 << 20 else _mib(value)


CHECKS: tuple[Callable[[Host, Facts], Check | list[Check]], ...] = (
    check_npu_smi, check_driver_firmware, check_cann, check_devices, check_pyacl, check_atc, check_triton,
    check_glue, check_shm, check_limits,
)


def run_checks(host: Host) -> list[Check]:
    """Every check, in order (npu-smi first: whether there are NPUs decides what a missing piece means)."""
    facts = Facts()
    found: list[Check] = []
    for check in CHECKS:
        result = check(host, facts)
        found.extend(result if isinstance(result, list) else [result])
    if not facts.npu:
        found.append(Check("mode", INFO, f"no NPU on this host: {EMULATION}, labelled CPU emulation")
                     if facts.onnx_runtime else
                     Check("mode", INFO, "no NPU on this host, and ONNX Runtime is not installed here (CPU "
                           "emulation runs the models through it): no model can run", SERVER_EXTRA))
    return found
