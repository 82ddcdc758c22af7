"""`ge-console doctor`: run for real on this host (no NPU: CPU emulation), and against recorded Ascend hosts
(their npu-smi tables replayed by tests/fakes/npu-smi, their version files under tests/data/hosts/)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.models import dense_model

TESTS = Path(__file__).resolve().parents[1]
FAKES = TESTS / "fakes"
HOSTS = TESTS / "data" / "hosts"
ASCEND_VARIABLES = ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME", "ASCEND_RT_VISIBLE_DEVICES")


def doctor(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, dict[str, Any]]]:
    """Run `ge-console doctor --json`; its exit code and each check by name."""
    base = {k: v for k, v in os.environ.items() if k not in ASCEND_VARIABLES and k != "NPU_SMI_FAKE_LAYOUT"}
    base["PATH"] = os.pathsep.join(p for p in base["PATH"].split(os.pathsep) if p != str(FAKES))
    done = subprocess.run([sys.executable, "-m", "triton_ge_console.cli", "doctor", "--json", *args],
                          env={**base, **(env or {})}, capture_output=True, text=True, timeout=120)
    assert done.stderr == "", done.stderr
    return done.returncode, {check["name"]: check for check in json.loads(done.stdout)}


def on_host(layout: str, **env: str) -> dict[str, str]:
    """The environment of a recorded host: the fake npu-smi replaying its table (a telemetry layout, or a
    recorded host's npu_smi folder) first on PATH."""
    folder = HOSTS / layout / "npu_smi"
    return {"PATH": f"{FAKES}{os.pathsep}{os.environ['PATH']}",
            "NPU_SMI_FAKE_LAYOUT": str(folder) if folder.is_dir() else layout, **env}


def test_here_without_an_npu_every_check_runs_and_says_cpu_emulation() -> None:
    """This machine has no NPU, CANN or pyACL: nothing fails, each missing Ascend piece is info with what
    to do, Triton and the glue are found, and the last line says the models run in CPU emulation."""
    code, checks = doctor()
    assert code == 0
    assert set(checks) >= {"npu-smi", "driver", "firmware", "cann", "devices", "pyacl", "atc", "tritonserver",
                           "python-backend", "glue", "shm", "open-files", "memlock", "mode"}
    for name in ("npu-smi", "driver", "cann", "pyacl", "atc"):
        assert checks[name]["status"] == "info" and checks[name]["action"], checks[name]
    assert "No module named 'acl'" in checks["pyacl"]["line"]
    assert checks["tritonserver"]["status"] == checks["python-backend"]["status"] == "ok"
    assert checks["glue"]["status"] == "ok"
    assert "CPU emulation" in checks["mode"]["line"]


def test_the_text_report_gives_each_check_one_line_and_what_to_do() -> None:
    """Without --json: one line per check (status, name, finding), and an arrow line for what to do."""
    done = subprocess.run([sys.executable, "-m", "triton_ge_console.cli", "doctor"], capture_output=True,
                          text=True, timeout=120, env={k: v for k, v in os.environ.items()
                                                       if k not in ASCEND_VARIABLES})
    lines = done.stdout.splitlines()
    assert lines[0].startswith("info  npu-smi ")
    assert any(line.strip().startswith("→ ") for line in lines)
    assert lines[-1].startswith("info  mode ") and "CPU emulation" in lines[-1]


def test_a_910b4_host_with_cann_8_3() -> None:
    """vllm-ascend#5606's host: two 910B4-1 at npu-smi 25.2.2, CANN 8.3.RC2 under ASCEND_HOME_PATH. Its
    driver version.info was not posted, so the driver check fails for want of it (as on a host where it
    is missing), and the exit code says so."""
    root = HOSTS / "vllm_ascend_5606"
    code, checks = doctor("--ascend-root", str(root), env=on_host(
        "vllm_ascend_5606", ASCEND_HOME_PATH=str(root / "ascend-toolkit" / "latest")))
    assert checks["npu-smi"]["status"] == "ok"
    assert checks["npu-smi"]["line"].startswith("2 chip(s) (910B4-1), driver 25.2.2")
    assert checks["cann"]["status"] == "ok" and "CANN toolkit 8.3.RC2" in checks["cann"]["line"]
    assert checks["devices"]["line"].startswith("all 2 NPU(s) visible, logical ids 0,1")
    assert checks["driver"]["status"] == "fail" and checks["driver"]["action"]
    assert "mode" not in checks
    assert code == 1


def test_a_documented_host_with_cann_8_5_driver_and_firmware() -> None:
    """Huawei's fault-diagnosis guide's collection: driver 24.1.rc1 accepting firmware 7.0.0-7.2.99, firmware
    7.1.0.11.220, CANN 8.5.0 in the `cann` home; ASCEND_HOME_PATH unset, which is a warning naming the
    set_env.sh to source."""
    root = HOSTS / "atlas800_doc"
    _, checks = doctor("--ascend-root", str(root), env=on_host("atlas800_doc"))
    assert checks["npu-smi"]["line"].startswith("8 chip(s) (xxx), driver 23.0.rc2.3")
    assert checks["driver"] == {"name": "driver", "status": "ok", "action": "",
                                "line": f"driver 24.1.rc1 ({root}/driver/version.info)"}
    assert "firmware 7.1.0.11.220, within the driver's 7.0.0-7.2.99" in checks["firmware"]["line"]
    assert checks["cann"]["status"] == "warn" and "CANN toolkit 8.5.0" in checks["cann"]["line"]
    assert f"source {root}/cann/set_env.sh" in checks["cann"]["action"]


def test_a_mindie_container_whose_toolkit_says_its_version_in_version_cfg(tmp_path: Path) -> None:
    """A MindIE 2.1.RC2 container: no ascend_toolkit_install.info, the version in version.cfg (8.2.RC2);
    driver 24.1.rc2.2 with firmware 7.3.0.1.231 (a pair a public install guide shows) is outside the
    7.0.0-7.2.99 the driver names: a warning to check, not a failure."""
    root = tmp_path / "Ascend"
    shutil.copytree(HOSTS / "mindie_21rc2", root)
    (root / "firmware").mkdir()
    (root / "firmware" / "version.info").write_text("Version=7.3.0.1.231\n")
    _, checks = doctor("--ascend-root", str(root), env=on_host(
        "910b4", ASCEND_HOME_PATH=str(root / "ascend-toolkit" / "latest")))
    assert "CANN toolkit 8.2.RC2" in checks["cann"]["line"] and "version.cfg" in checks["cann"]["line"]
    assert checks["firmware"]["status"] == "warn"
    assert "7.3.0.1.231 is outside the range driver 24.1.rc2.2 names (7.0.0-7.2.99)" \
        in checks["firmware"]["line"]


def test_visible_devices_map_user_ids_to_npu_smi_logical_ids() -> None:
    """ASCEND_RT_VISIBLE_DEVICES=4,5 on an 8-NPU 910 host: the process's user ids 0 and 1 are npu-smi's
    logical ids 4 and 5 (CANN runtime API, aclrtGetLogicDevIdByUserDevId)."""
    _, checks = doctor(env=on_host("910_9010", ASCEND_RT_VISIBLE_DEVICES="4,5"))
    assert checks["devices"]["status"] == "ok"
    assert "2 of 8 NPU(s) visible (ASCEND_RT_VISIBLE_DEVICES=4,5): user 0 = logical 4, user 1 = logical 5" \
        in checks["devices"]["line"]


def test_a_visible_device_npu_smi_does_not_list_fails() -> None:
    """ASCEND_RT_VISIBLE_DEVICES naming an id the host does not have fails, saying where the ids come from."""
    code, checks = doctor(env=on_host("910b4", ASCEND_RT_VISIBLE_DEVICES="0,9"))
    assert checks["devices"]["status"] == "fail"
    assert "names 9, not among npu-smi's logical ids 0,1" in checks["devices"]["line"]
    assert "Chip Logic ID" in checks["devices"]["action"]
    assert code == 1


def _spec(folder: Path, instances: int) -> Path:
    """A spec of one model whose outputs come from its ONNX: y and z, FP32 [N, 2**20], at batch 64 (512 MiB
    a response)."""
    (folder / "m.onnx").write_bytes(dense_model(features=4, outputs=1 << 20))
    spec = folder / "deploy.yaml"
    spec.write_text(f"name: big\nmodels:\n  - name: lm\n    backend: ge\n    source: m.onnx\n"
                    f"    max_batch_size: 64\n    instance_group: {{count: {instances}}}\n")
    return spec


def test_shm_is_weighed_against_the_specs_largest_responses(tmp_path: Path) -> None:
    """Each Python-backend instance's region (1 MiB) grown to one full response (read from the ONNX): one
    instance needs 513 MiB, which /dev/shm here holds."""
    _, checks = doctor("--spec", str(_spec(tmp_path, 1)))
    assert checks["shm"]["status"] == "ok"
    assert "the spec's models need about 513 MiB (lm's response 512.0 MiB)" in checks["shm"]["line"]


def test_shm_smaller_than_the_models_need_fails_naming_the_size(tmp_path: Path) -> None:
    """64 such instances need more than /dev/shm has here: a failure naming the size to give it."""
    code, checks = doctor("--spec", str(_spec(tmp_path, 64)))
    need = 64 * ((1 << 20) + 2 * 64 * (1 << 20) * 4)
    assert need > shutil.disk_usage("/dev/shm").free
    assert checks["shm"]["status"] == "fail"
    assert f"give it at least {need / (1 << 20):,.0f} MiB" in checks["shm"]["action"]
    assert code == 1


def test_visible_devices_keep_their_physical_ids() -> None:
    """An A3 card whose `npu-smi info -m` prints Chip Phy-ID: under ASCEND_RT_VISIBLE_DEVICES=1 the line maps
    user 0 to logical 1 and that to its physical id, as without the variable (it dropped the physical ids)."""
    _, checks = doctor(env=on_host("a3_910", ASCEND_RT_VISIBLE_DEVICES="1"))
    assert checks["devices"]["status"] == "ok"
    assert "user 0 = logical 1" in checks["devices"]["line"]
    assert checks["devices"]["line"].endswith("; logical→physical 1→1")


def test_pyacl_and_atc_of_a_recorded_host_read_ok() -> None:
    """With CANN's pieces there (the fake acl importable, the fake atc on PATH): pyacl and atc are ok, each
    line naming what was found."""
    code, checks = doctor("--ascend-root", str(HOSTS / "atlas800_doc"), env=on_host(
        "atlas800_doc", PYTHONPATH=os.pathsep.join([str(FAKES), os.environ.get("PYTHONPATH", "")])))
    assert checks["pyacl"] == {"name": "pyacl", "status": "ok", "action": "",
                               "line": "pyACL (`import acl`) imports: .om models run through AscendCL"}
    assert checks["atc"]["status"] == "ok" and checks["atc"]["line"].startswith(f"atc at {FAKES / 'atc'}")
    assert code == 0


def test_limits_below_what_tritonserver_wants_are_warnings_with_what_to_do() -> None:
    """1024 open files and 64 KiB of locked memory (common defaults): both warn, each saying the ulimit to
    set; the exit code stays 0 (warnings)."""
    import resource

    def lower() -> None:
        for which, soft in ((resource.RLIMIT_NOFILE, 1024), (resource.RLIMIT_MEMLOCK, 64 << 10)):
            hard = resource.getrlimit(which)[1]
            resource.setrlimit(which, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))

    env = {k: v for k, v in os.environ.items() if k not in ASCEND_VARIABLES}
    done = subprocess.run([sys.executable, "-m", "triton_ge_console.cli", "doctor", "--json"], env=env,
                          capture_output=True, text=True, timeout=120, preexec_fn=lower)
    checks = {check["name"]: check for check in json.loads(done.stdout)}
    assert checks["open-files"]["status"] == "warn" and "open-file limit 1024" in checks["open-files"]["line"]
    assert checks["open-files"]["action"].startswith("`ulimit -n ")
    assert checks["memlock"]["status"] == "warn" and "locked-memory limit 65536" in checks["memlock"]["line"]
    assert checks["memlock"]["action"].startswith("`ulimit -l unlimited`")
    assert done.returncode == 0


def test_a_tritonserver_that_is_not_there_fails_saying_how_to_get_one(tmp_path: Path) -> None:
    """--tritonserver naming no file: the tritonserver check fails saying what to install; doctor exits 1."""
    code, checks = doctor("--tritonserver", str(tmp_path / "tritonserver"))
    assert checks["tritonserver"]["status"] == "fail"
    assert "pip install" in checks["tritonserver"]["action"]
    assert code == 1


def test_a_container_without_firmware_files_reads_the_firmware_from_npu_smi(tmp_path: Path) -> None:
    """A container that mounts the driver but not /usr/local/Ascend/firmware (as MindIE's containers run):
    the firmware the card runs comes from `npu-smi info -t board -i N` (Firmware Version, and npu-smi's own
    Compatibility verdict), replayed from the guide's collection; it failed for want of version.info."""
    root = tmp_path / "Ascend"
    shutil.copytree(HOSTS / "atlas800_doc", root, ignore=shutil.ignore_patterns("firmware"))
    _, checks = doctor("--ascend-root", str(root), env=on_host("atlas800_doc"))
    assert checks["firmware"]["status"] == "ok", checks["firmware"]
    assert checks["firmware"]["line"] == ("firmware 7.1.0.7.220, within the driver's 7.0.0-7.2.99 "
                                          "(npu-smi info -t board -i 0: Compatibility OK)")


def test_a_card_running_other_firmware_than_the_package_installed_is_a_warning() -> None:
    """The guide's collection: firmware/version.info says 7.1.0.11.220, the card reports 7.1.0.7.220 (its
    collection is not one machine at one moment, SOURCES.md; on one host this is a package installed and
    not yet booted): a warning naming both."""
    _, checks = doctor("--ascend-root", str(HOSTS / "atlas800_doc"), env=on_host("atlas800_doc"))
    assert checks["firmware"]["status"] == "warn"
    assert ("the card reports 7.1.0.7.220 (npu-smi info -t board -i 0), the installed package 7.1.0.11.220"
            in checks["firmware"]["line"])
    assert "reboot" in checks["firmware"]["action"]


def test_without_the_server_extra_every_check_is_still_there_and_nothing_claims_the_models_run() -> None:
    """A host where `pip install triton-ge-console` left out the [server] extra (here: an interpreter run
    without site-packages, so neither the nvidia-pytriton wheel nor ONNX Runtime is there): tritonserver,
    its Python backend and the glue each fail with what to install, and the mode line does not say the
    models run in CPU emulation under an ONNX Runtime that is not there (the last two checks were left out
    and the mode line said so)."""
    env = {k: v for k, v in os.environ.items() if k not in ASCEND_VARIABLES and k != "TRITONSERVER"}
    env["PYTHONPATH"] = str(TESTS.parent / "src")  # this checkout's package; -S leaves out any install of it
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep)
                                  if not (Path(p) / "tritonserver").exists())
    done = subprocess.run([sys.executable, "-S", "-m", "triton_ge_console.cli", "doctor", "--json"], env=env,
                          capture_output=True, text=True, timeout=120)
    checks = {check["name"]: check for check in json.loads(done.stdout)}
    for name in ("tritonserver", "python-backend", "glue"):
        assert checks[name]["status"] == "fail" and "pip install" in checks[name]["action"], checks[name]
    assert "ONNX Runtime" in checks["glue"]["line"]
    assert "run in CPU emulation" not in checks["mode"]["line"]
    assert "ONNX Runtime is not installed" in checks["mode"]["line"]
    assert done.returncode == 1


def test_a_tritonserver_without_its_python_backend_fails_that_check(tmp_path: Path) -> None:
    """A tritonserver binary with no backends folder beside it: tritonserver is found, the Python backend
    check fails naming libtriton_python.so, and doctor exits 1."""
    binary = tmp_path / "bin" / "tritonserver"
    binary.parent.mkdir()
    binary.write_text("#!/bin/sh\nexit 0\n")
    binary.chmod(0o755)
    code, checks = doctor("--tritonserver", str(binary))
    assert checks["tritonserver"]["status"] == "ok" and str(binary) in checks["tritonserver"]["line"]
    assert checks["python-backend"]["status"] == "fail"
    assert "no libtriton_python.so" in checks["python-backend"]["line"]
    assert code == 1
