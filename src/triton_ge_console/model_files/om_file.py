"""What an OM says of itself: the `soc_version` attribute ATC writes into its model, the one GE checks at
load, read from the file as GE lays it out, so an OM built without `ge-console convert` (no `.atc.json`
beside it) still says what it was built for.

The layout, as hicann/ge writes and loads it (inc/framework/common/framework_types_internal.h
ModelFileHeader, ModelPartitionTable / TinyModelPartitionTable, ModelPartitionType; base/common/helper/
model_parser_base.cc ParseModelContent; base/common/helper/om_file_helper.cc
OmFileLoadHelper::LoadModelPartitionTable and CheckModelCompatibility; base/common/helper/file_saver.cc
SaveWithFileHeader): a 256-byte header (magic 0x444F4D49, `is_encrypt`, `model_length`, `model_num`, ...),
then the first model's partition table (`num`, then per partition its type, offset and size: 64-bit offsets
and sizes when `model_length` is set, 32-bit in the older "tiny" table), then the partitions one after
another. The MODEL_DEF partition is GE's ModelDef protobuf (graph_metadef/proto/ge_ir.proto): its field 11
is `map<string, AttrDef> attr`, where ATC's GeGenerator::Impl::SetOmSystemInfo (compiler/api/generator/
ge_generator.cc) stores `soc_version` as an AttrDef string (field 2, `s`). Only the root model (the first)
carries it (model_helper.cc LoadModelData).

Bounded: the header and table are read, then only the ModelDef's top-level field headers and its attribute
entries; the graphs and the weights are skipped by seeking, so a 13 GB OM costs a few kilobytes of reads.
Nothing is guessed: a file this module cannot read (not an OM, truncated, encrypted, a flow or bundle model)
gives no SoC and a reason naming the file.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from triton_ge_console.errors import InputError

MAGIC = 0x444F4D49  # framework_types_internal.h / base/common/types.cc MODEL_FILE_MAGIC_NUM ("IMOD")
HEADER_LEN = 256  # MODEL_FILE_HEAD_LEN, sizeof(ModelFileHeader)
# ModelFileHeader, little-endian as on every Ascend host (x86_64, aarch64): magic, headsize, version,
# checksum[64], length, is_encrypt, is_checksum, modeltype, genmode, name[32], ops, userdefineinfo[32],
# om_ir_version, model_num, platform_version[20], platform_type, padd[3], model_length,
# need_check_os_cpu_info, is_unknow_model, reserved[62]
HEADER = struct.Struct("<III64sIBBBB32sI32sII20sB3xQBB62s")
TABLE = struct.Struct("<I4x")  # ModelPartitionTable: num, then 8-aligned ModelPartitionMemInfo entries
ENTRY = struct.Struct("<I4xQQ")  # ModelPartitionMemInfo: type (enum), mem_offset, mem_size
TINY_TABLE = struct.Struct("<I")  # TinyModelPartitionTable: num
TINY_ENTRY = struct.Struct("<III")  # TinyModelPartitionMemInfo: type, mem_offset, mem_size (32-bit)
MODEL_DEF = 0  # ModelPartitionType::MODEL_DEF
FLOW_MODEL, BUNDLE_MODEL = 3, 5  # ModelHeaderType: loaded another way, not read here
MAX_PARTITIONS = 8  # OmFileLoadHelper::CheckPartitionTableNum: 1 to PARTITION_SIZE (5) + 3
MODEL_ATTR = 11  # ModelDef.attr (ge_ir.proto)
ATTR_STRING = 2  # AttrDef.s
MAX_KEY = 4096  # an attribute name longer than this is not one ATC writes
MAX_VALUE = 1 << 16  # nor a soc_version value


class OmFormatError(InputError):
    """The file is not an OM this module can read (caught here: it becomes OmAttribute.problem)."""


@dataclass(frozen=True)
class OmAttribute:
    """A string attribute an OM's root model carries, or why there is none (`problem` names the file)."""

    value: str | None
    problem: str | None = None


def read_model_attribute(path: Path, key: str) -> OmAttribute:
    """The OM's own string attribute `key` (e.g. soc_version), never invented: None with the reason when
    the file is not an OM this reads or its model does not carry the attribute."""
    try:
        with path.open("rb") as stream:
            size = path.stat().st_size
            start, length = _model_def(stream, size)
            value = _string_attribute(stream, start, start + length, key)
    except OSError as exc:
        return OmAttribute(None, f"{path}: cannot read it ({exc.strerror or exc})")
    except OmFormatError as exc:
        return OmAttribute(None, f"{path}: {exc}")
    if not value:  # GE's CheckModelCompatibility checks nothing for an empty one either
        return OmAttribute(None, f"{path}: its model carries no {key} attribute" if value is None
                           else f"{path}: its {key} attribute is empty")
    return OmAttribute(value)


def soc_version(path: Path) -> OmAttribute:
    """The SoC the OM was built for, as ATC wrote it into the model (what GE checks at load)."""
    return read_model_attribute(path, "soc_version")


def _exact(stream: BinaryIO, count: int, what: str) -> bytes:
    """`count` bytes, or OmFormatError saying the file ends inside `what`."""
    data = stream.read(count)
    if len(data) != count:
        raise OmFormatError(f"truncated: the file ends inside {what}")
    return data


def _model_def(stream: BinaryIO, size: int) -> tuple[int, int]:
    """Offset and length of the root model's MODEL_DEF partition, checked as GE checks them at load."""
    if size < HEADER_LEN:
        raise OmFormatError(f"not an OM: {size} bytes, shorter than GE's {HEADER_LEN}-byte model header")
    fields = HEADER.unpack(_exact(stream, HEADER_LEN, "the model header"))
    magic, length, encrypted, model_type, model_length = (fields[i] for i in (0, 4, 5, 7, 16))
    if magic != MAGIC:
        raise OmFormatError(f"not an OM: magic 0x{magic:08X}, GE's is 0x{MAGIC:08X}")
    if encrypted:
        raise OmFormatError(f"encrypted (is_encrypt={encrypted}): its model cannot be read without the key")
    if model_type in (FLOW_MODEL, BUNDLE_MODEL):
        raise OmFormatError(f"a {'flow' if model_type == FLOW_MODEL else 'bundle'} model (modeltype "
                            f"{model_type}), whose partitions this does not read")
    said = model_length or length  # ParseModelContent: model_length, or length in older OMs
    if said != size - HEADER_LEN:
        raise OmFormatError(f"truncated or padded: its header says {said} bytes follow the {HEADER_LEN}-byte "
                            f"header, the file has {size - HEADER_LEN}")
    table, entry = (TABLE, ENTRY) if model_length else (TINY_TABLE, TINY_ENTRY)
    (count,) = table.unpack(_exact(stream, table.size, "the partition table"))
    if not 1 <= count <= MAX_PARTITIONS:
        raise OmFormatError(f"its partition table has {count} partitions (GE loads 1 to {MAX_PARTITIONS})")
    partitions = [entry.unpack(_exact(stream, entry.size, "the partition table")) for _ in range(count)]
    offset = HEADER_LEN + table.size + entry.size * count
    for kind, _, length in partitions:  # one after another, as LoadModelPartitionTable walks them
        if offset + length > size:
            raise OmFormatError(f"truncated: partition type {kind} ({length} bytes at {offset}) runs past "
                                f"the end ({size} bytes)")
        if kind == MODEL_DEF:
            return offset, length
        offset += length
    raise OmFormatError("it has no MODEL_DEF partition")


def _varint(stream: BinaryIO, end: int) -> int:
    """One protobuf base-128 varint, not past `end`."""
    value = shift = 0
    while True:
        if stream.tell() >= end or shift > 63:
            raise OmFormatError("its model definition is not a readable protobuf (a varint runs on)")
        byte = stream.read(1)
        if not byte:
            raise OmFormatError("truncated: the file ends inside the model definition")
        value |= (byte[0] & 0x7F) << shift
        if byte[0] < 0x80:
            return value
        shift += 7


def _fields(stream: BinaryIO, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """(number, wire type, value start, value length or the varint) of each field in [start, end), by
    seeking past length-delimited values (the graphs) without reading them."""
    stream.seek(start)
    found = []
    while stream.tell() < end:
        tag = _varint(stream, end)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            found.append((number, wire, stream.tell(), _varint(stream, end)))
            continue
        length = {1: 8, 5: 4}.get(wire)
        if length is None and wire == 2:
            length = _varint(stream, end)
        if length is None or stream.tell() + length > end:
            raise OmFormatError(f"its model definition is not a readable protobuf (field {number}, wire "
                                f"type {wire})")
        found.append((number, wire, stream.tell(), length))
        stream.seek(stream.tell() + length)
    return found


def _bytes_field(stream: BinaryIO, field: tuple[int, int, int, int], limit: int) -> bytes | None:
    """A length-delimited field's bytes, None when it is longer than `limit` (not what is looked for)."""
    _, _, start, length = field
    if length > limit:
        return None
    stream.seek(start)
    return _exact(stream, length, "the model definition")


def _string_attribute(stream: BinaryIO, start: int, end: int, key: str) -> str | None:
    """ModelDef.attr[key].s, None when absent; OmFormatError when it is there but not a string."""
    wanted = key.encode()
    for entry in (f for f in _fields(stream, start, end) if f[0] == MODEL_ATTR and f[1] == 2):
        parts = _fields(stream, entry[2], entry[2] + entry[3])  # the map entry: 1 key, 2 AttrDef
        names = [_bytes_field(stream, p, MAX_KEY) for p in parts if p[0] == 1 and p[1] == 2]
        if names != [wanted]:
            continue
        values = [p for p in parts if p[0] == 2 and p[1] == 2]
        strings = [f for v in values for f in _fields(stream, v[2], v[2] + v[3])
                   if f[0] == ATTR_STRING and f[1] == 2]
        text = _bytes_field(stream, strings[-1], MAX_VALUE) if strings else None
        if text is None:
            raise OmFormatError(f"its {key} attribute is not a string")
        try:
            return text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise OmFormatError(f"its {key} attribute is not UTF-8 text") from exc
    return None
