"""The notebooks' device rows name the chip as npu-smi does and say when the power is the card's."""

from __future__ import annotations

from triton_ge_console.sessions.observe.history import SnapshotHistory
from triton_ge_console.sessions.observe.snapshot import DeviceSnapshot
from triton_ge_console.widgets.devices import DeviceRow, device_extras


def test_row_title_and_extras() -> None:
    """Card and chip in the title; '(card)' after a 310P's power."""
    device = DeviceSnapshot(id="0", kind="npu", name="310P3", power_w=44.7, npu_id=2, chip_id=0, logical_id=0,
                            power_note="the card's power", health="OK", source="npu-smi")
    row = DeviceRow("0")
    row.update(device, SnapshotHistory(), 0.0, 60.0)
    assert row.title.value.startswith("<b>NPU0</b> <small>(npu 2 chip 0)</small> 310P3")
    assert device_extras(device) == "45 W (card)  OK  (npu-smi)"
