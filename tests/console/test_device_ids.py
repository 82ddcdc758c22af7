"""A device line names the chip as npu-smi does (its card and chip) beside its logical id, and says when the
power is the card's."""

from __future__ import annotations

from triton_ge_console.console.widgets.devices import device_line
from triton_ge_console.sessions.observe.snapshot import DeviceSnapshot

DUO_CHIP = DeviceSnapshot(
    id="1", kind="npu", name="310P3", power_w=44.7, npu_id=2, chip_id=1, logical_id=1,
    power_note="the card's power", source="npu-smi+npu-exporter",
)  # fmt: skip


def test_line_names_card_and_chip_and_card_power() -> None:
    """NPU1 is npu-smi's NPU 2 chip 1; its 45 W is the card's."""
    for narrow in (False, True):
        text = device_line(DUO_CHIP, [], narrow).plain
        assert text.startswith("NPU1   310P3") and text.endswith("  npu 2 chip 1")  # after the columns
        assert "45 W (card)" in text


def test_emulated_line_is_unchanged_without_card_ids() -> None:
    """A device no tool numbered (CPU emulation) shows no card, and a chip's own power no mark."""
    plain = DeviceSnapshot(id="0", kind="cpu-emulated", name="910B", power_w=80.0)
    text = device_line(plain, []).plain
    assert text.startswith("NPU0   910B ") and "npu " not in text and "(card)" not in text
