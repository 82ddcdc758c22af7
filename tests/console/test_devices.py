"""The device lines: labelled columns, cpu-emulated drawn as normal, and the memory the glue reports."""

from __future__ import annotations

import pytest

from tests.sessions.observe.telemetry.test_telemetry import GLUE_METRICS
from triton_ge_console.console.widgets.devices import NO_DEVICES, device_rows
from triton_ge_console.display import memory
from triton_ge_console.sessions.observe.metrics import parse_metrics
from triton_ge_console.sessions.observe.snapshot import DeviceSnapshot, ServerSnapshot
from triton_ge_console.sessions.observe.telemetry.devices import devices_from_glue

GIB, MIB = 1024**3, 1024**2


def _snapshot(*devices: DeviceSnapshot) -> ServerSnapshot:
    return ServerSnapshot(session="t", taken_at=0.0, devices=devices)


def _text(pieces: tuple[tuple[str, str], ...]) -> str:
    return "".join(text for text, _ in pieces)


@pytest.mark.parametrize("width", [160, 100])
def test_every_device_column_is_labelled_above_its_figures(width: int) -> None:
    """A header line names each column, so a missing temperature reads as such, not as a stray dash."""
    npu = DeviceSnapshot("3", "npu", "910B3", 0.5, 30 * GIB, 64 * GIB, 61.0, 180.0, "OK", "npu-smi")
    header, line = (_text(row) for row in device_rows(_snapshot(npu), {}, width))
    for label in ("NPU", "NAME", "KIND", "UTIL", "HBM", "TEMP", "POWER", "HEALTH"):
        assert label in header.split(), label
    for label, figure in (("TEMP", "61°C"), ("POWER", "180 W")):  # right-aligned: they end together
        assert header.index(label) + len(label) == line.index(figure) + len(figure), label
    for label, figure in (("NPU", "NPU3"), ("KIND", "npu"), ("HEALTH", "OK")):  # left-aligned: start together
        assert header.index(label) == line.index(figure), label


def test_cpu_emulated_is_drawn_as_normal_and_a_real_npu_stands_out() -> None:
    emulated = DeviceSnapshot("0", "cpu-emulated", None, 0.1, MIB, 64 * GIB, source="ge-glue")
    npu = DeviceSnapshot("1", "npu", "910B3", 0.1, GIB, 64 * GIB, source="npu-smi")
    styles = {kind: style for row in device_rows(_snapshot(emulated, npu), {})[1:]
              for text, style in row if (kind := text.strip()) in ("cpu-emulated", "npu")}
    assert styles == {"cpu-emulated": "", "npu": "cyan"}


def test_the_memory_the_glue_reports_for_an_emulated_device_is_shown() -> None:
    """The glue's ge_device_memory_used_bytes (1 MiB of a 64 GiB emulated device) is not rounded to 0.0."""
    (device,) = devices_from_glue(parse_metrics(GLUE_METRICS))
    line = _text(device_rows(_snapshot(device), {})[1])
    assert "1.0 MiB/64.0 GiB" in line


@pytest.mark.parametrize(("used", "total", "text"), [
    (None, None, "—"), (int(21.4 * GIB), 64 * GIB, "21.4/64.0 GiB"),
    (9_552_814, 64 * GIB, "9.1 MiB/64.0 GiB"),
    (300 * MIB, 64 * GIB, "300 MiB/64.0 GiB"), (1010 * MIB, 64 * GIB, "1.0 GiB/64.0 GiB"),
    (512 * 1024, 64 * GIB, "512 KiB/64.0 GiB"), (None, 2 * GIB, "—/2.0 GiB"),
])
def test_memory_reads_in_the_unit_that_shows_it(used: int | None, total: int | None, text: str) -> None:
    assert memory(used, total) == text


def test_no_devices_is_a_note_without_labels() -> None:
    assert device_rows(_snapshot(), {}) == [NO_DEVICES]
