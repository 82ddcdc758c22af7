"""An OM's own soc_version attribute, read from the header, the partition table and the ModelDef as GE lays
them out (the bytes built by tests/fakes/om_layout.py from hicann/ge's struct definitions, cited there), and
nothing read or invented from a file that is not such an OM."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import BinaryIO

import pytest

from tests.fakes import om_layout
from triton_ge_console.model_files import om_file


def _om(tmp_path: Path, soc: str = "Ascend910B3", name: str = "model.om", **header: int) -> Path:
    definition = om_layout.model_def("model", {"atc_version": "8.0.RC1", "soc_version": soc},
                                     graph=b"\x0a\x04main" * 1000)  # a graph the reader skips
    data = om_layout.om_bytes([(om_layout.MODEL_DEF, definition), (om_layout.WEIGHTS_DATA, bytes(4096)),
                               (om_layout.TASK_INFO, b"{}")], **header)
    (tmp_path / name).write_bytes(data)
    return tmp_path / name


def test_the_soc_version_attribute_of_an_om_atc_wrote(tmp_path: Path) -> None:
    """The attribute ATC's SetOmSystemInfo writes into the root model: the value, no problem."""
    assert om_file.soc_version(_om(tmp_path)) == om_file.OmAttribute("Ascend910B3")
    assert om_file.soc_version(_om(tmp_path, "Ascend310P3")).value == "Ascend310P3"
    assert om_file.read_model_attribute(_om(tmp_path), "atc_version").value == "8.0.RC1"


def test_the_model_def_may_follow_other_partitions(tmp_path: Path) -> None:
    """Partitions are walked in table order (LoadModelPartitionTable), not assumed first."""
    definition = om_layout.model_def("m", {"soc_version": "Ascend910B4"})
    data = om_layout.om_bytes([(om_layout.WEIGHTS_DATA, bytes(300)), (om_layout.MODEL_DEF, definition)])
    (tmp_path / "m.om").write_bytes(data)
    assert om_file.soc_version(tmp_path / "m.om").value == "Ascend910B4"


def test_an_older_om_with_the_tiny_partition_table(tmp_path: Path) -> None:
    """model_length 0 (an older OM): `length` gives the size and the table is TinyModelPartitionTable, 32-bit
    offsets and sizes (framework_types_internal.h:746-754; om_file_helper.cc LoadModelPartitionTable)."""
    definition = om_layout.model_def("old", {"soc_version": "Ascend310P3"})
    table = struct.pack("<I", 2) + struct.pack("<III", 1, 0, 8) + struct.pack("<III", 0, 8, len(definition))
    body = table + bytes(8) + definition
    head = bytearray(om_layout.header(len(body)))
    struct.pack_into("<Q", head, 184, 0)  # model_length (offset 184 in ModelFileHeader): 0, `length` stays
    (tmp_path / "old.om").write_bytes(bytes(head) + body)
    assert om_file.soc_version(tmp_path / "old.om").value == "Ascend310P3"


@pytest.mark.parametrize(("content", "said"), [
    (b"an OM", "not an OM: 5 bytes, shorter than GE's 256-byte model header"),
    (b'{"fake_om": 1}'.ljust(300), "not an OM: magic 0x6166227B, GE's is 0x444F4D49"),
], ids=["short", "json"])
def test_a_file_that_is_not_an_om_gives_no_soc(tmp_path: Path, content: bytes, said: str) -> None:
    """Too short for the header, or another magic: None, and the reason names the file."""
    (tmp_path / "x.om").write_bytes(content)
    assert om_file.soc_version(tmp_path / "x.om") == om_file.OmAttribute(None, f"{tmp_path / 'x.om'}: {said}")


def test_an_encrypted_om_gives_no_soc(tmp_path: Path) -> None:
    """is_encrypt set: the model partition is ciphertext, so nothing is read from it."""
    found = om_file.soc_version(_om(tmp_path, is_encrypt=1))
    assert found.value is None
    assert found.problem == (f"{tmp_path / 'model.om'}: encrypted (is_encrypt=1): its model cannot be read "
                             "without the key")


def test_a_truncated_om_gives_no_soc(tmp_path: Path) -> None:
    """A copy cut short: the header's model_length no longer matches, as GE's ParseModelContent checks."""
    path = _om(tmp_path)
    path.write_bytes(path.read_bytes()[:-100])
    found = om_file.soc_version(path)
    assert found.value is None and found.problem is not None
    assert found.problem.startswith(f"{path}: truncated or padded: its header says ")


def test_a_partition_past_the_end_is_refused(tmp_path: Path) -> None:
    """A table whose partition runs past the file (the header's length patched to match): truncated."""
    path = _om(tmp_path)
    data = bytearray(path.read_bytes())
    struct.pack_into("<Q", data, 256 + 8 + 8 + 8, 1 << 40)  # the first partition's mem_size
    path.write_bytes(bytes(data))
    found = om_file.soc_version(path)
    assert found.value is None and found.problem is not None and "runs past the end" in found.problem


def test_an_om_without_the_attribute_or_with_an_empty_one(tmp_path: Path) -> None:
    """No soc_version in the model (or an empty one, which GE does not check either): None, said so."""
    definition = om_layout.model_def("m", {"atc_version": "8.0"})
    (tmp_path / "m.om").write_bytes(om_layout.om_bytes([(om_layout.MODEL_DEF, definition)]))
    assert om_file.soc_version(tmp_path / "m.om").problem == (
        f"{tmp_path / 'm.om'}: its model carries no soc_version attribute")
    assert om_file.soc_version(_om(tmp_path, "")).problem == (
        f"{tmp_path / 'model.om'}: its soc_version attribute is empty")


def test_a_large_om_is_read_by_seeking(tmp_path: Path) -> None:
    """Weights of a sparse 3 GB file after the model def: read in well under its size (bytes read counted)."""
    definition = om_layout.model_def("big", {"soc_version": "Ascend910B3"})
    weights = 3 << 30
    path = tmp_path / "big.om"
    table = struct.pack("<I4x", 2) + struct.pack("<I4xQQ", 0, 0, len(definition)) + struct.pack(
        "<I4xQQ", 1, len(definition), weights)
    body_len = len(table) + len(definition) + weights
    with path.open("wb") as out:
        out.write(om_layout.header(body_len) + table + definition)
        out.truncate(256 + body_len)  # sparse: the weights are never written
    opened: list[CountingReader] = []
    real_open = Path.open

    def counting_open(self: Path, mode: str = "r") -> CountingReader:
        opened.append(CountingReader(real_open(self, mode)))
        return opened[-1]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Path, "open", counting_open)
        assert om_file.soc_version(path).value == "Ascend910B3"
    assert [0 < r.count < 4096 for r in opened] == [True]


class CountingReader:
    """A binary file that counts the bytes read from it."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream, self.count = stream, 0

    def __enter__(self) -> CountingReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stream.close()

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read(size)
        self.count += len(data)
        return data

    def seek(self, offset: int) -> int:
        return self.stream.seek(offset)

    def tell(self) -> int:
        return self.stream.tell()
