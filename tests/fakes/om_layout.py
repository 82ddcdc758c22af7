"""An OM's bytes as GE lays them out, for the fakes and the tests (no CANN here): written field by field from
hicann/ge at ffdcbc9f7496c17a98c1d12762c61ed608ef3503, independently of ge-console's reader
(src/triton_ge_console/model_files/om_file.py) so that a test of the reader checks it against the sources:
- inc/framework/common/framework_types_internal.h:672 `struct ModelFileHeader` (256 bytes, field by field
  below), :703 `enum ModelPartitionType` (MODEL_DEF 0, WEIGHTS_DATA 1, TASK_INFO 2), :761
  `ModelPartitionMemInfo` {type, uint64 mem_offset, uint64 mem_size}, :767 `ModelPartitionTable` {uint32 num,
  entries at 8}; base/common/types.cc:539 MODEL_FILE_MAGIC_NUM 0x444F4D49, :604 MODEL_VERSION 0x20000000;
- base/common/helper/file_saver.cc:382 SaveWithFileHeader: the header, then the table, then each partition
  in table order; om_file_helper.cc GetPartitionTable: mem_offset counts from the table's end;
- graph_metadef/proto/ge_ir.proto:343 `ModelDef` {1 name, 7 graph, 11 map<string, AttrDef> attr}, :60
  `AttrDef` {2 bytes s}; compiler/api/generator/ge_generator.cc:597 ATC sets the model's `soc_version`.

The fake atc writes such an OM with its JSON description (what the fake acl builds the model from) in the
TASK_INFO partition, standing in for the task list a real OM's device runs; the fake acl reads the JSON from
there and the SoC from the ModelDef's attribute, as GE's CheckModelCompatibility reads it at load."""

from __future__ import annotations

import struct
from pathlib import Path

MAGIC = 0x444F4D49
MODEL_VERSION = 0x20000000
MODEL_DEF, WEIGHTS_DATA, TASK_INFO = 0, 1, 2


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def model_def(name: str, attrs: dict[str, str], graph: bytes = b"") -> bytes:
    """ge_ir.proto ModelDef: name (1), version (2, varint), graph (7, opaque here), attr (11) with string
    AttrDefs (s = 2), in field-number order as GE's deterministic serialization writes them."""
    body = _field(1, name.encode()) + _varint(2 << 3) + _varint(1)
    if graph:
        body += _field(7, graph)
    for key in sorted(attrs):
        body += _field(11, _field(1, key.encode()) + _field(2, _field(2, attrs[key].encode())))
    return body


def header(model_length: int, is_encrypt: int = 0, model_type: int = 1, magic: int = MAGIC,
           name: str = "model") -> bytes:
    """ModelFileHeader (framework_types_internal.h:672), field by field."""
    out = struct.pack("<III", magic, 256, MODEL_VERSION)  # magic, headsize, version
    out += bytes(64)  # checksum[MODEL_FILE_CHECKSUM_LENGTH 64]
    out += struct.pack("<I", model_length)  # length (the plaintext length, unencrypted)
    out += struct.pack("<BBBB", is_encrypt, 1, model_type, 0)  # is_encrypt, is_checksum, modeltype, genmode
    out += name.encode()[:31].ljust(32, b"\0")  # name[MODEL_NAME_LENGTH 32]
    out += struct.pack("<I", 0) + bytes(32)  # ops, userdefineinfo[32]
    out += struct.pack("<II", 1, 1)  # om_ir_version, model_num
    out += bytes(20) + bytes([0]) + bytes(3)  # platform_version[20], platform_type, padd[3]
    out += struct.pack("<Q", model_length)  # model_length
    out += bytes([0, 0]) + bytes(62)  # need_check_os_cpu_info, is_unknow_model, reserved[62]
    assert len(out) == 256
    return out


def om_bytes(partitions: list[tuple[int, bytes]], **header_fields: int) -> bytes:
    """Header, partition table and partitions, as FileSaver::SaveWithFileHeader writes one model."""
    table = struct.pack("<I4x", len(partitions))
    offset = 0
    for kind, data in partitions:
        table += struct.pack("<I4xQQ", kind, offset, len(data))
        offset += len(data)
    body = table + b"".join(data for _, data in partitions)
    return header(len(body), **header_fields) + body


def write_om(path: Path, soc_version: str, description: bytes, weights: bytes = b"\0" * 16) -> Path:
    """An OM of one model: its ModelDef with soc_version, weights, and `description` as its task info."""
    definition = model_def(path.stem, {"soc_version": soc_version})
    path.write_bytes(om_bytes([(MODEL_DEF, definition), (WEIGHTS_DATA, weights), (TASK_INFO, description)]))
    return path


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        value, shift, at = value | (byte & 0x7F) << shift, shift + 7, at + 1
        if byte < 0x80:
            return value, at


def _fields(data: bytes) -> list[tuple[int, bytes | int]]:
    """(number, value) of each field: bytes for length-delimited, the int for varints."""
    found: list[tuple[int, bytes | int]] = []
    at = 0
    while at < len(data):
        tag, at = _read_varint(data, at)
        if tag & 7 == 0:
            value, at = _read_varint(data, at)
            found.append((tag >> 3, value))
        elif tag & 7 == 2:
            length, at = _read_varint(data, at)
            found.append((tag >> 3, data[at:at + length]))
            at += length
        else:
            raise ValueError(f"wire type {tag & 7} is not in the fakes' OMs")
    return found


def read_om(path: Path) -> tuple[dict[str, str], bytes] | None:
    """(the ModelDef's string attributes, the TASK_INFO partition) of an OM laid out as above; None for any
    other file (the fakes' older JSON OMs)."""
    with path.open("rb") as stream:
        if stream.read(4) != struct.pack("<I", MAGIC):
            return None
        data = b"\0" * 4 + stream.read()
    (count,) = struct.unpack_from("<I", data, 256)
    at, parts = 264 + 24 * count, {}
    for index in range(count):
        kind, _, size = struct.unpack_from("<I4xQQ", data, 264 + 24 * index)
        parts[kind], at = data[at:at + size], at + size
    attrs = {}
    for number, entry in _fields(parts.get(MODEL_DEF, b"")):
        if number == 11 and isinstance(entry, bytes):
            kv = dict(_fields(entry))
            value = dict(_fields(kv[2])) if isinstance(kv.get(2), bytes) else {}
            if isinstance(kv.get(1), bytes) and isinstance(value.get(2), bytes):
                attrs[kv[1].decode()] = value[2].decode()
    return attrs, parts.get(TASK_INFO, b"")
