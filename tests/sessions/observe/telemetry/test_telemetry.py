"""NPU telemetry: recorded npu-smi layouts, an npu-exporter served over real HTTP, merging, `devices`."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import http.server
import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.waiting import wait_until
from triton_ge_console.display import MIB
from triton_ge_console.npu_smi import (
    NpuSmiError,
    find_npu_smi,
    parse_chip_map,
    parse_info_table,
    parse_usages,
)
from triton_ge_console.sessions.observe.metrics import parse_metrics
from triton_ge_console.sessions.observe.snapshot import DeviceSnapshot
from triton_ge_console.sessions.observe.stats import HttpEndpoint
from triton_ge_console.sessions.observe.telemetry import devices_cli as telemetry_commands
from triton_ge_console.sessions.observe.telemetry.devices import (
    DeviceTelemetry,
    devices_from_glue,
    merge_devices,
)
from triton_ge_console.sessions.observe.telemetry.exporter import map_to_logical, read_exporter
from triton_ge_console.sessions.observe.telemetry.npu_smi import ROW_ORDER, device_from, read_npu_smi
from triton_ge_console.sessions.server.paths import STATE_DIR_ENV
from triton_ge_console.sessions.server.registry import Registry, SessionRecord

DATA = Path(__file__).resolve().parents[3] / "data" / "telemetry"


def main(argv: list[str]) -> int:
    """`ge-console <argv>` for the devices command alone (other areas' commands are not imported)."""
    parser = argparse.ArgumentParser(prog="ge-console")
    telemetry_commands.register(parser.add_subparsers())
    args = parser.parse_args(argv)
    return int(args.func(args))
NPU_SMI = DATA / "npu_smi"
FAKES = Path(__file__).resolve().parents[3] / "fakes"


def _table(layout: str) -> str:
    return (NPU_SMI / layout / "info.txt").read_text()


def test_910_with_hbm_and_process_table() -> None:
    """Atlas 800 9010: eight 910s with HBM, two in Warning; the process table after them is ignored."""
    chips = parse_info_table(_table("910_9010"))
    assert [c.npu_id for c in chips] == list(range(8)) and {c.logical_id for c in chips} == {None}
    assert [c.health for c in chips].count("Warning") == 2 and chips[3].power_w == 206.9
    assert (chips[0].hbm_used_mb, chips[0].hbm_total_mb) == (0, 32768)
    assert (chips[0].memory_used_mb, chips[0].memory_total_mb) == (4252, 15137)
    device = device_from(chips[0], None)
    assert device.memory_total_bytes == 32768 * MIB and device.memory_used_bytes == 0
    assert device.temperature_c == 42 and device.utilization == 0.0 and device.source == "npu-smi"


def test_910b_used_slash_total_without_space() -> None:
    """910B4 (npu-smi 24.1.1) prints `26838/ 32768`: HBM used and total are still read."""
    chips = parse_info_table(_table("910b4"))
    assert [(c.name, c.hbm_used_mb, c.hbm_total_mb) for c in chips] == [
        ("910B4", 26838, 32768), ("910B4", 29356, 32768)]
    assert [c.bus_id for c in chips] == ["0000:C1:00.0", "0000:C2:00.0"]


def test_a3_phy_id_rows_and_dash_power() -> None:
    """A3 (910_93): `Chip  Phy-ID` rows, two chips per NPU, the second die's power printed as `-`."""
    chips = parse_info_table(_table("a3_910"))
    ids = [(c.npu_id, c.chip_id, c.logical_id, c.phy_id) for c in chips]
    assert ids == [(0, 0, None, 0), (0, 1, None, 1)]  # logical ids come from `npu-smi info -m`
    assert chips[0].power_w == 178.5 and chips[1].power_w is None
    assert chips[1].hbm_used_mb == 3195


def test_950_layout_npu_id_and_name_cells() -> None:
    """Ascend 950PR (npu-smi 25.7.rc1): `NPU ID` and `Name` in cells of their own, no chip id on the second
    line, `NPU Util(%)`, two NPUs in Alarm; the process table after them is ignored."""
    chips = parse_info_table(_table("950pr"))
    assert [(c.npu_id, c.chip_id, c.name, c.health) for c in chips] == [
        (0, 0, "Ascend950PR", "Alarm"), (1, 0, "Ascend950PR", "Alarm"), (2, 0, "Ascend950PR", "OK")]
    assert [(c.hbm_used_mb, c.hbm_total_mb) for c in chips] == [
        (90633, 114688), (30492, 114688), (5413, 131072)]
    assert chips[0].power_w == 205.7 and chips[0].temperature_c == 71 and chips[0].aicore_percent == 100
    assert [c.bus_id for c in chips] == ["0000:71:00.0", "0000:61:00.0", "0000:81:00.0"]
    assert {(c.logical_id, c.phy_id) for c in chips} == {(None, None)}
    single = parse_info_table(_table("950pr_single"))  # "No running processes found" right after the NPU
    assert [(c.npu_id, c.hbm_used_mb, c.hbm_total_mb, c.health) for c in single] == [(0, 5239, 131072, "OK")]


def test_310p3_without_hbm_and_na_power() -> None:
    """Atlas 300I Duo: `Chip Device` rows give the logical ids, power is NA, memory is DDR."""
    chips = parse_info_table(_table("310p3_duo"))
    rows = [(c.npu_id, c.chip_id, c.logical_id, c.name) for c in chips]
    assert rows == [(2, 0, 0, "310P3"), (2, 1, 1, "310P3")]
    assert all(c.power_w is None and c.hbm_total_mb is None for c in chips)
    device = device_from(chips[1], None)
    assert device.memory_used_bytes == 1412 * MIB and device.memory_total_bytes == 43693 * MIB
    assert device.power_w is None and device.temperature_c == 43


def test_310_device_column_maps_logical_ids() -> None:
    """Ascend 310 (npu-smi 21.0.4): four chips of NPU 6 are devices 3..6."""
    chips = parse_info_table(_table("310"))
    assert [c.logical_id for c in chips] == [3, 4, 5, 6] and {c.npu_id for c in chips} == {6}
    assert chips[0].memory_total_mb == 8192 and chips[0].power_w == 12.8


def test_usages_blocks_end_with_chip_id() -> None:
    """`-t usages`: each chip's keys come before its `Chip ID` line; keys differ by chip kind."""
    duo = parse_usages((NPU_SMI / "310p3_duo" / "usages.txt").read_text())
    assert sorted(duo) == [0, 1] and duo[1]["DDR Capacity(MB)"] == "43693"
    assert duo[0]["Ctrlcpu Usage Rate(%)"] == "2"
    assert "HBM Capacity(MB)" not in duo[0] and "Vectorcore Usage Rate(%)" in duo[0]
    b64 = parse_usages((NPU_SMI / "usages_910b_64g.txt").read_text())
    assert b64[0]["HBM Capacity(MB)"] == "65536" and b64[0]["Aivector Usage Rate(%)"] == "0"


def test_usages_refine_utilization_and_fill_memory() -> None:
    """Usage keys are preferred for utilization; capacity × rate fills memory a table lacks."""
    chip = parse_info_table(_table("a3_910"))[0]
    usages = {"NPU Utilization(%)": "42", "Aicore Usage Rate(%)": "40"}
    assert device_from(chip, usages).utilization == pytest.approx(0.42)
    bare = parse_info_table(_table("910_9010"))[0]
    no_hbm = type(bare)(**{**bare.__dict__, "hbm_total_mb": None, "hbm_used_mb": None})
    filled = device_from(no_hbm, parse_usages((NPU_SMI / "usages_910b_64g.txt").read_text())[0])
    assert filled.memory_total_bytes == 65536 * MIB and filled.memory_used_bytes == int(65536 * 0.03 * MIB)


def test_unreadable_table_is_a_clear_error() -> None:
    """Text without the device table header raises NpuSmiError naming what is missing."""
    with pytest.raises(NpuSmiError, match="no device table header"):
        parse_info_table("dcmi model initialized failed, because the device is used. ret is -8020\n")


@pytest.fixture
def fake_npu_smi(monkeypatch: pytest.MonkeyPatch) -> Path:
    """The recorded-output npu-smi first on PATH."""
    monkeypatch.setenv("PATH", f"{FAKES}:{__import__('os').environ['PATH']}")
    found = find_npu_smi()
    assert found is not None and found.parent == FAKES
    return found


def test_read_npu_smi_through_the_fake_binary(fake_npu_smi: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reader runs `info` then `-t usages -i N` per NPU; a card without usages keeps table figures."""
    monkeypatch.setenv("NPU_SMI_FAKE_LAYOUT", "310p3_duo")
    duo = read_npu_smi(fake_npu_smi)
    assert [(d.id, d.name, d.memory_total_bytes) for d in duo] == [
        ("0", "310P3", 44280 * MIB), ("1", "310P3", 43693 * MIB)]
    monkeypatch.setenv("NPU_SMI_FAKE_LAYOUT", "910b4")  # no usages recorded: the fake refuses, table stays
    assert [d.memory_used_bytes for d in read_npu_smi(fake_npu_smi)] == [26838 * MIB, 29356 * MIB]


EXPORTER_TEXT = (DATA / "npu_exporter_910a.txt").read_bytes()


@contextlib.contextmanager
def serve_metrics(text: bytes) -> Iterator[str]:
    """A real HTTP server on a free loopback port answering /metrics with `text`."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = text if self.path == "/metrics" else b"not found"
            self.send_response(200 if self.path == "/metrics" else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.fixture
def exporter_url() -> Iterator[str]:
    """The recorded npu-exporter answer served over real HTTP."""
    with serve_metrics(EXPORTER_TEXT) as url:
        yield url


def test_exporter_chips_over_http(exporter_url: str) -> None:
    """npu_chip_info_* per `id`: MB to bytes, percent to ratio, health 1/0 to OK/Unhealthy."""
    endpoint = HttpEndpoint(exporter_url)
    try:
        devices = read_exporter(endpoint)
    finally:
        endpoint.close()
    assert [d.id for d in devices] == ["0", "1", "2", "3"]
    first = devices[0]
    assert first.name == "910A-Ascend-V1" and first.source == "npu-exporter"
    assert first.utilization == pytest.approx(0.63) and first.power_w == 88.2 and first.temperature_c == 41
    assert (first.memory_used_bytes, first.memory_total_bytes) == (26838 * MIB, 32768 * MIB)
    assert devices[2].health == "Unhealthy" and devices[1].health == "OK"


GLUE_METRICS = """\
# HELP ge_device_utilization_ratio Busy fraction of the device over the last seconds (0..1)
# TYPE ge_device_utilization_ratio gauge
ge_device_utilization_ratio{device="0",kind="cpu-emulated"} 0.25
# HELP ge_device_memory_used_bytes Device memory held by loaded models
# TYPE ge_device_memory_used_bytes gauge
ge_device_memory_used_bytes{device="0",kind="cpu-emulated"} 1048576
# HELP ge_device_memory_total_bytes Device memory capacity
# TYPE ge_device_memory_total_bytes gauge
ge_device_memory_total_bytes{device="0",kind="cpu-emulated"} 68719476736
"""


def test_merge_fills_gaps_and_names_every_source() -> None:
    """Glue figures win; npu-smi adds what the glue lacks; `source` lists who contributed."""
    glue = devices_from_glue(parse_metrics(GLUE_METRICS))
    assert glue == [DeviceSnapshot(id="0", kind="cpu-emulated", utilization=0.25, memory_used_bytes=1048576,
                                   memory_total_bytes=68719476736, source="ge-glue", logical_id=0,
                                   id_source="ge-glue (the AscendCL device id it runs on)")]
    chips = parse_info_table(_table("910b4"))
    ids = {(c.npu_id, c.chip_id): c for c in parse_chip_map((NPU_SMI / "910b4" / "info_m.txt").read_text())}
    smi = [device_from(c, None, ids[(c.npu_id, c.chip_id)], "npu-smi info -m") for c in chips]
    merged = merge_devices(glue, smi)
    assert [d.id for d in merged] == ["0", "1"]
    assert merged[0].utilization == 0.25 and merged[0].temperature_c == 30 and merged[0].name == "910B4"
    assert merged[0].source == "ge-glue+npu-smi" and merged[1].source == "npu-smi"
    assert (merged[0].npu_id, merged[0].chip_id, merged[0].bus_id) == (0, 0, "0000:C1:00.0")


def test_a_utilization_the_glue_cannot_know_is_none_and_npu_smi_may_fill_it() -> None:
    """NaN (prometheus-cpp writes "Nan"), as the glue sets it while an emulated npu_ge model over several
    NPUs runs, is no figure: None, the memory figures kept, and another source's utilization used."""
    glue = devices_from_glue(parse_metrics(GLUE_METRICS.replace("} 0.25", "} Nan")))
    assert [(d.id, d.utilization, d.memory_used_bytes) for d in glue] == [("0", None, 1048576)]
    chips = parse_info_table(_table("910b4"))
    ids = {(c.npu_id, c.chip_id): c for c in parse_chip_map((NPU_SMI / "910b4" / "info_m.txt").read_text())}
    smi = [device_from(c, None, ids[(c.npu_id, c.chip_id)], "npu-smi info -m") for c in chips]
    merged = merge_devices(glue, smi)
    assert merged[0].utilization == smi[0].utilization and merged[0].source == "ge-glue+npu-smi"


def test_chip_map_gives_logical_ids_where_the_table_has_none(
    fake_npu_smi: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """910-class tables have no Device column: `npu-smi info -m` gives the logical ids (Mcu rows skipped), and
    the device says so; a layout without a recorded `-m` leaves them unknown, named by card and chip."""
    monkeypatch.setenv("NPU_SMI_FAKE_LAYOUT", "910_9010")
    devices = read_npu_smi(fake_npu_smi)
    ids = [(d.id, d.npu_id, d.chip_id, d.logical_id) for d in devices]
    assert ids == [(str(n), n, 0, n) for n in range(8)]
    assert {d.id_source for d in devices} == {"npu-smi info -m (Chip Logic ID)"}
    monkeypatch.setenv("NPU_SMI_FAKE_LAYOUT", "a3_910")
    a3 = read_npu_smi(fake_npu_smi)
    assert [(d.id, d.npu_id, d.chip_id, d.logical_id, d.phy_id) for d in a3] == [
        ("0", 0, 0, 0, 0), ("1", 0, 1, 1, 1)]
    monkeypatch.setenv("NPU_SMI_FAKE_LAYOUT", "310p3_duo")
    duo = read_npu_smi(fake_npu_smi)
    assert [(d.npu_id, d.chip_id, d.logical_id) for d in duo] == [(2, 0, 0), (2, 1, 1)]
    assert {d.id_source for d in duo} == {"npu-smi info (Device column)"}


def test_950_devices_carry_ids_in_row_order(fake_npu_smi: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """950 layout with no `-m` logical ids: npu_id from the table, chip 0, logical ids in row order, and the
    source says so."""
    monkeypatch.setenv("NPU_SMI_FAKE_LAYOUT", "950pr")
    assert main(["devices", "--json"]) == 0
    devices = json.loads(capsys.readouterr().out)
    assert [(d["id"], d["npu_id"], d["chip_id"], d["logical_id"]) for d in devices] == [
        ("0", 0, 0, 0), ("1", 1, 0, 1), ("2", 2, 0, 2)]
    assert {d["id_source"] for d in devices} == {ROW_ORDER}
    assert devices[0]["health"] == "Alarm" and devices[0]["memory_total_bytes"] == 114688 * MIB


def test_950_chip_map_without_logic_ids() -> None:
    """The 950 series' `-m` columns (`NPU ID  Slot ID  Chip ID  Chip Phy-ID  Chip Name`, as SwanHubX/SwanLab
    PR #1719 parses on an Ascend950PR with npu-smi 25.7.rc1) have no logic id: row order, phy ids kept."""
    text = "\t".join(f"{name:<31}" for name in ("NPU ID", "Slot ID", "Chip ID", "Chip Phy-ID", "Chip Name"))
    rows = ["\t".join(f"{cell:<31}" for cell in row) for row in (("0", "1", "0", "0", "Ascend950PR"),
                                                                   ("1", "2", "0", "3", "Ascend950PR"))]
    chips = parse_chip_map("\n".join(["\t" + text, *("\t" + r for r in rows)]))
    assert [(c.npu_id, c.chip_id, c.logical_id, c.phy_id, c.name) for c in chips] == [
        (0, 0, 0, 0, "Ascend950PR"), (1, 0, 1, 3, "Ascend950PR")]


def test_chip_map_with_phy_ids() -> None:
    """The five-column `-m` (with Chip Phy-ID): every compute chip, the Mcu left out."""
    chips = parse_chip_map((NPU_SMI / "a3_910" / "info_m.txt").read_text())
    assert [(c.npu_id, c.chip_id, c.logical_id, c.phy_id, c.name) for c in chips] == [
        (0, 0, 0, 0, "Ascend910"), (0, 1, 1, 1, "Ascend910")]
    with pytest.raises(NpuSmiError, match="Chip Logic ID"):
        parse_chip_map("Error: this query is not supported on this device.\n")

    # columns are read by name: one more (the 950 series adds Slot ID) in another place changes nothing
    text = (NPU_SMI / "a3_910" / "info_m.txt").read_text().replace("NPU ID   ", "Slot ID  NPU ID", 1)
    moved = [line.replace("\t0", "\t7  0", 1) if i else line for i, line in enumerate(text.splitlines())]
    chips = parse_chip_map("\n".join(moved))
    assert [(c.npu_id, c.logical_id, c.phy_id) for c in chips] == [(0, 0, 0), (0, 1, 1)]


def test_devices_json_with_fake_npu_smi(fake_npu_smi: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str], exporter_url: str) -> None:
    """`ge-console devices --json`: every chip with npu_id, chip_id and logical_id; the exporter's chips
    (labelled by physical id) join npu-smi's only where they are matched, never by equal numbers alone."""
    monkeypatch.setenv("NPU_SMI_FAKE_LAYOUT", "910b4")
    with serve_metrics((DATA / "npu_exporter_910b.txt").read_bytes()) as url:
        assert main(["devices", "--json", "--exporter-url", url]) == 0
    devices = json.loads(capsys.readouterr().out)
    assert [(d["id"], d["npu_id"], d["chip_id"], d["logical_id"]) for d in devices] == [
        ("0", 0, 0, 0), ("1", 1, 0, 1)]
    assert [d["source"] for d in devices] == ["npu-smi+npu-exporter"] * 2
    assert [d["phy_id"] for d in devices] == [0, 1]  # matched by bus id; the exporter's physical ids join
    monkeypatch.setenv("NPU_SMI_FAKE_LAYOUT", "310p3_duo")  # another machine than the 910A exporter's
    assert main(["devices", "--json", "--exporter-url", exporter_url]) == 0
    devices = json.loads(capsys.readouterr().out)
    assert [d["id"] for d in devices] == ["0", "1", "phy 0", "phy 1", "phy 2", "phy 3"]
    first = devices[0]
    assert first["name"] == "310P3" and first["health"] == "OK" and first["temperature_c"] == 45
    assert first["power_w"] is None and first["source"] == "npu-smi"  # NA stays unknown
    assert (first["npu_id"], first["chip_id"], first["logical_id"]) == (2, 0, 0)
    assert devices[2]["phy_id"] == 0 and devices[2]["logical_id"] is None
    assert devices[4]["source"] == "npu-exporter" and devices[4]["health"] == "Unhealthy"


def test_devices_table_and_missing_sources(fake_npu_smi: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The table prints NA figures as '-'; with no source at all the command says so and fails."""
    monkeypatch.setenv("NPU_SMI_FAKE_LAYOUT", "310p3_duo")
    assert main(["devices"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["ID", "NAME", "KIND", "HEALTH"] and len(lines) == 3
    assert "310P3" in lines[1] and " - " in lines[1] and "1.5/43.2 GiB" in lines[1]
    monkeypatch.setenv("PATH", "/nonexistent")
    assert main(["devices", "--json"]) == 1
    assert "npu-smi is not on PATH" in capsys.readouterr().err


def held_npu_smi(folder: Path, gate: Path, fake: Path) -> Path:
    """An npu-smi that answers (as the fake) only once the test lets go of its lock on `gate`."""
    script = folder / "npu-smi"
    script.write_text(f"#!{sys.executable}\nimport fcntl, os, sys\n"
                      f"with open({str(gate)!r}) as gate:\n    fcntl.flock(gate, fcntl.LOCK_SH)\n"
                      f"os.execv({str(fake)!r}, [{str(fake)!r}, *sys.argv[1:]])\n", encoding="utf-8")
    script.chmod(0o755)
    return script


def test_telemetry_refreshes_in_the_background(fake_npu_smi: Path, monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    """A read returns at once while npu-smi has not answered yet; the readings appear once it did."""
    monkeypatch.setenv("NPU_SMI_FAKE_LAYOUT", "910b4")
    gate = tmp_path / "gate"
    gate.touch()
    with gate.open() as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # npu-smi cannot answer until this is released
        telemetry = DeviceTelemetry(held_npu_smi(tmp_path, gate, fake_npu_smi), min_interval_s=60, timeout=10)
        try:
            first = telemetry.devices(None)
            assert first == () and telemetry.errors == {}, "the read waited for npu-smi (and timed out)"
            fcntl.flock(held, fcntl.LOCK_UN)
            wait_until(lambda: [d.id for d in telemetry.devices(None)] == ["0", "1"], 30, what="readings")
            assert telemetry.errors == {}
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)
            telemetry.close()


def test_devices_of_a_session_from_glue_metrics(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """`devices --session NAME` reads the glue's ge_device_* from its session's /metrics (no npu-smi)."""
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    monkeypatch.setenv("PATH", "/nonexistent")
    with serve_metrics(GLUE_METRICS.encode()) as url:
        Registry().save(SessionRecord(
            name="emulated", pid=None, started_at=0.0, http_url="http://127.0.0.1:1", grpc_url=None,
            metrics_url=url, repository=None, spec=None, backend_dir=None, log_path=None, token_ref=None,
            attached=True, session_dir=None))
        assert main(["devices", "--json", "--session", "emulated"]) == 0
        devices = json.loads(capsys.readouterr().out)
        assert main(["devices", "--session", "emulated"]) == 0
    # the 1 MiB the glue holds on its emulated 64 GiB device reads as such, not as 0.0 GiB
    assert "1.0 MiB/64.0 GiB" in capsys.readouterr().out.splitlines()[1]
    assert [(d["id"], d["kind"], d["source"], d["utilization"]) for d in devices] == [
        ("0", "cpu-emulated", "ge-glue", 0.25)]
    assert main(["devices", "--session", "no-such-session"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("ge-console: error:") and "no-such-session" in error and "\n" not in error


def _exporter(name: str) -> list[DeviceSnapshot]:
    """A recorded npu-exporter answer, read over real HTTP."""
    with serve_metrics((DATA / name).read_bytes()) as url:
        endpoint = HttpEndpoint(url)
        try:
            return read_exporter(endpoint)
        finally:
            endpoint.close()


def test_exporter_910b_hbm_only_and_unknown_health() -> None:
    """A 910B has HBM families only; health -1 (the driver could not be asked) is unknown, not a fault."""
    first, second = _exporter("npu_exporter_910b.txt")
    assert (first.memory_used_bytes, first.memory_total_bytes) == (26838 * MIB, 32768 * MIB)
    assert first.name == "910B4-Ascend-V1" and first.phy_id == 0 and first.bus_id == "0000:C1:00.0"
    assert (first.health, second.health) == ("OK", "unknown") and first.power_note is None
    assert first.logical_id is None and "PhyId" in (first.id_source or "")


def test_exporter_310p_ddr_only_and_board_power() -> None:
    """A 310P has DDR families only; its power is the card's, the same on both chips, and says so."""
    chips = _exporter("npu_exporter_310p.txt")
    assert [(d.memory_used_bytes, d.memory_total_bytes) for d in chips] == [
        (1529 * MIB, 44280 * MIB), (1412 * MIB, 43693 * MIB)]
    assert [d.power_w for d in chips] == [44.7, 44.7]
    assert all(d.power_note and "card's power" in d.power_note for d in chips)


def test_exporter_physical_ids_are_mapped_to_logical_ids() -> None:
    """In a container that sees a host's chips 4 and 5 as logical 0 and 1, the exporter's `id` 4 belongs to
    logical 0: matched by physical id, else by a bus id only one chip has; unmatched chips stay apart."""
    exporter = [dataclasses.replace(d, id=str(4 + i), phy_id=4 + i)
                for i, d in enumerate(_exporter("npu_exporter_910b.txt"))]
    smi = [DeviceSnapshot(id="0", kind="npu", logical_id=0, npu_id=4, chip_id=0, phy_id=4, source="npu-smi"),
           DeviceSnapshot(id="1", kind="npu", logical_id=1, npu_id=5, chip_id=0, bus_id="0000:C2:00.0",
                          source="npu-smi")]
    mapped = map_to_logical(exporter, smi)
    assert [(d.id, d.logical_id, d.npu_id, d.phy_id) for d in mapped] == [("0", 0, 4, 4), ("1", 1, 5, 5)]
    assert "physical id" in (mapped[0].id_source or "") and "bus id" in (mapped[1].id_source or "")
    merged = merge_devices(smi, mapped)
    assert [(d.id, d.memory_used_bytes) for d in merged] == [("0", 26838 * MIB), ("1", 29356 * MIB)]
    apart = map_to_logical(exporter, smi[:1])
    assert [d.id for d in apart] == ["0", "phy 5"]
    assert map_to_logical(exporter, []) == exporter  # nothing to map with: as labelled


@pytest.mark.parametrize("layout", sorted(p.name for p in NPU_SMI.iterdir() if (p / "info.txt").is_file()))
def test_every_recorded_layout_names_card_chip_and_logical_id(
    layout: str, fake_npu_smi: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`devices --json` on each recorded npu-smi output: npu_id, chip_id and logical_id on every chip, id
    being the logical id, and the source of it named."""
    monkeypatch.setenv("NPU_SMI_FAKE_LAYOUT", layout)
    assert main(["devices", "--json"]) == 0
    devices = json.loads(capsys.readouterr().out)
    assert devices
    for device in devices:
        assert None not in (device["npu_id"], device["chip_id"], device["logical_id"]), device
        assert device["id"] == str(device["logical_id"]) and device["id_source"].startswith("npu-smi info")
