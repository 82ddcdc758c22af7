"""Read and write Triton's config.pbtxt through tritonclient's model_config_pb2 and protobuf text_format."""

from __future__ import annotations

import contextlib
import difflib
import re
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from triton_ge_console.display import printable
from triton_ge_console.errors import GeConsoleError

ModelConfig = model_config_pb2.ModelConfig

_POSITION = re.compile(r"^(\d+):(\d+) : (.*)$", re.DOTALL)
_LONG_QUOTE = re.compile(r"(['\"])([^'\"]{40})[^'\"]{20,}\1")
_NO_FIELD = re.compile(r'Message type "([\w.]+)" has no field named "(\w+)"')


@dataclass(frozen=True)
class ConfigSyntaxError(GeConsoleError, ValueError):
    """config.pbtxt text that protobuf cannot parse, with its position."""

    path: str
    line: int | None
    column: int | None
    message: str

    def __str__(self) -> str:
        where = ":".join(str(p) for p in (self.path, self.line, self.column) if p is not None)
        return printable(f"{where}: {self.message}")


def _did_you_mean(message: str) -> str:
    """For protobuf's 'has no field named' refusal, the field of that message the name most resembles."""
    found = _NO_FIELD.search(message)
    if not found:
        return ""
    full_name, field = found.groups()
    try:
        descriptor = model_config_pb2.DESCRIPTOR.pool.FindMessageTypeByName(full_name)
    except KeyError:
        return ""
    close = difflib.get_close_matches(field, [f.name for f in descriptor.fields], n=1, cutoff=0.6)
    return f" Did you mean \"{close[0]}\"?" if close else ""


def loads(text: str, path: str | Path = "config.pbtxt") -> model_config_pb2.ModelConfig:
    """Parse config.pbtxt text; syntax errors carry file:line:column."""
    config = model_config_pb2.ModelConfig()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as exc:
        line, column = exc.GetLine(), exc.GetColumn()
        message = str(exc)
        match = _POSITION.match(message)
        if match:
            line, column, message = int(match.group(1)), int(match.group(2)), match.group(3)
        said = excerpted(message.strip()) + _did_you_mean(message)
        raise ConfigSyntaxError(str(path), line, column, said) from None
    return config


def excerpted(message: str) -> str:
    """protobuf's message with any long quoted token cut to an excerpt (it quotes whole tokens)."""
    return _LONG_QUOTE.sub(lambda m: f"{m.group(1)}{m.group(2)}… ({len(m.group(0)) - 2} chars){m.group(1)}",
                           message)


def load(path: Path) -> model_config_pb2.ModelConfig:
    """Parse a config.pbtxt file."""
    return loads(path.read_text(encoding="utf-8"), path)


def dumps(config: model_config_pb2.ModelConfig) -> str:
    """Stable, readable text for a config: fields in proto order, UTF-8 kept as written."""
    return str(text_format.MessageToString(config, as_utf8=True, use_short_repeated_primitives=True))


# --- Positions of fields, for errors found after parsing (text_format keeps none) -------------------------

_TOKEN = re.compile(
    r"\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'|#[^\n]*|[{}\[\]<>:,;]|[^\s{}\[\]<>:,;\"'#]+"
)
_OPEN = {"{": "}", "<": ">"}

FieldKey = tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class FieldSite:
    """Where one field occurrence starts in config text (1-based line and column) and its scalar text."""

    line: int
    column: int
    value: str | None  # scalar value as written (strings unquoted), None for messages


def field_sites(text: str) -> dict[FieldKey, FieldSite]:
    """Every field occurrence keyed by its path, e.g. (("input", 1), ("dims", 0)); best effort, no raise."""
    tokens = _tokens(text)
    sites: dict[FieldKey, FieldSite] = {}
    with contextlib.suppress(IndexError):  # unfinished text: keep what was found
        _scan_message(tokens, 0, (), sites, closing=None)
    return sites


def _tokens(text: str) -> list[tuple[str, int, int]]:
    """Tokens of text with their 1-based line and column, comments dropped."""
    line_starts = [0] + [i + 1 for i, char in enumerate(text) if char == "\n"]
    result: list[tuple[str, int, int]] = []
    line = 0
    for match in _TOKEN.finditer(text):
        if match.group().startswith("#"):
            continue
        while line + 1 < len(line_starts) and line_starts[line + 1] <= match.start():
            line += 1
        result.append((match.group(), line + 1, match.start() - line_starts[line] + 1))
    return result


def _scan_message(tokens: list[tuple[str, int, int]], i: int, prefix: FieldKey,
                  sites: dict[FieldKey, FieldSite], closing: str | None) -> int:
    """Record the fields of one message starting at token i; returns the index after its closing token."""
    counts: dict[str, int] = {}
    while i < len(tokens):
        token, line, column = tokens[i]
        if token == closing:
            return i + 1
        if token in ",;":
            i += 1
            continue
        i = i + 2 if tokens[i + 1][0] == ":" else i + 1
        i = _scan_value(tokens, i, token, line, column, prefix, sites, counts)
    return i


def _scan_value(tokens: list[tuple[str, int, int]], i: int, name: str, line: int, column: int,
                prefix: FieldKey, sites: dict[FieldKey, FieldSite], counts: dict[str, int]) -> int:
    """Record one field's value (scalar, message or list) at token i; returns the index after it."""
    if tokens[i][0] != "[":
        return _scan_element(tokens, i, name, (line, column), prefix, sites, counts)
    i += 1
    while tokens[i][0] != "]":
        if tokens[i][0] == ",":
            i += 1
            continue
        i = _scan_element(tokens, i, name, (tokens[i][1], tokens[i][2]), prefix, sites, counts)
    return i + 1


def _scan_element(tokens: list[tuple[str, int, int]], i: int, name: str, where: tuple[int, int],
                  prefix: FieldKey, sites: dict[FieldKey, FieldSite], counts: dict[str, int]) -> int:
    """Record one scalar or message element of a field; returns the index after it."""
    index = counts.get(name, 0)
    counts[name] = index + 1
    key = (*prefix, (name, index))
    token = tokens[i][0]
    if token in _OPEN:
        sites[key] = FieldSite(where[0], where[1], None)
        return _scan_message(tokens, i + 1, key, sites, closing=_OPEN[token])
    value = token
    i += 1
    while token[:1] in "\"'" and i < len(tokens) and tokens[i][0][:1] in "\"'":
        value, i = value + tokens[i][0], i + 1  # adjacent strings concatenate
    sites[key] = FieldSite(where[0], where[1], _unquote(value))
    return i


def _unquote(value: str) -> str:
    """The text of a (possibly concatenated) quoted scalar, or the bare token."""
    if value[:1] not in "\"'":
        return value
    parts = re.findall(r"\"((?:[^\"\\]|\\.)*)\"|'((?:[^'\\]|\\.)*)'", value)
    return "".join(double or single for double, single in parts)


_PATH_PART = re.compile(r"([A-Za-z_]\w*)(?:\[([^\]]*)\])?")


def locate(sites: dict[FieldKey, FieldSite], field_path: str) -> FieldSite | None:
    """Where a field path like `input[1].dims` or `parameters["device_ids"]` is written, or its nearest
    written ancestor; None when nothing on the path is written.

    A quoted index names a map entry (its `key`) or a list element (its `name`)."""
    found: FieldSite | None = None
    prefix: FieldKey = ()
    for name, index in _PATH_PART.findall(field_path):
        key = _resolve(sites, prefix, name, index)
        if key is None:
            break
        prefix = key
        found = sites[key]
    return found


def _resolve(sites: dict[FieldKey, FieldSite], prefix: FieldKey, name: str, index: str) -> FieldKey | None:
    """The site key of one path part below prefix."""
    if index[:1] in ("\"", "'"):
        wanted = index[1:-1]
        for key in sites:
            if len(key) == len(prefix) + 2 and key[: len(prefix)] == prefix and key[len(prefix)][0] == name \
                    and key[-1][0] in ("key", "name") and sites[key].value == wanted:
                return key[:-1]
        return None
    key = (*prefix, (name, int(index) if index.lstrip("-").isdigit() else 0))
    return key if key in sites else None
