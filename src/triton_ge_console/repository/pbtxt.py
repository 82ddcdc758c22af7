"""Read and write Triton's config.pbtxt through tritonclient's model_config_pb2 and protobuf text_format."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

ModelConfig = model_config_pb2.ModelConfig

_POSITION = re.compile(r"^(\d+):(\d+) : (.*)$", re.DOTALL)


@dataclass(frozen=True)
class ConfigSyntaxError(ValueError):
    """config.pbtxt text that protobuf cannot parse, with its position."""

    path: str
    line: int | None
    column: int | None
    message: str

    def __str__(self) -> str:
        where = ":".join(str(p) for p in (self.path, self.line, self.column) if p is not None)
        return f"{where}: {self.message}"


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
        raise ConfigSyntaxError(str(path), line, column, message.strip()) from None
    return config


def load(path: Path) -> model_config_pb2.ModelConfig:
    """Parse a config.pbtxt file."""
    return loads(path.read_text(encoding="utf-8"), path)


def dumps(config: model_config_pb2.ModelConfig) -> str:
    """Stable, readable text for a config: fields in proto order, UTF-8 kept as written."""
    return str(text_format.MessageToString(config, as_utf8=True, use_short_repeated_primitives=True))
