"""Reading a server log incrementally and recognising GE/ACL failures with what to try next."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

# Triton's glog-style prefix: level letter + MMDD, e.g. "E1130 10:55:01.123 ..."
_LEVEL = re.compile(r"^([IWEF])\d{4} ")
_ACL_CODE = re.compile(
    r"\b(?:ACL|acl)[ _-]?(?:error|ret|ERROR)?\s*(?:code)?\s*[:=]?\s*(5\d{5}|1\d{5}|2\d{5})\b")

PLOG_HINT = ("turn on plog: ASCEND_SLOG_PRINT_TO_STDOUT=1 ASCEND_GLOBAL_LOG_LEVEL=1, "
             "then restart (palette: plog)")
DUMP_HINT = "dump the graph for the next restart (palette: dump_graph) and inspect ge_onnx*.pbtxt"
PROFILE_HINT = "profile the next run (palette: profiling) to see which operator fails or stalls"


@dataclass(frozen=True)
class GeFailure:
    """A known GE/ACL failure pattern and the next step an operator takes."""

    marker: str
    title: str
    advice: str


GE_FAILURES = (
    GeFailure("aclgrphParseONNX execute failed", "GE could not parse the ONNX model",
              f"check the opset and unsupported operators; {PLOG_HINT}; {DUMP_HINT}"),
    GeFailure("CompileGraph failed", "GE could not compile the graph",
              f"check input shapes and dynamic dims in the config; {DUMP_HINT}; {PLOG_HINT}"),
    GeFailure("execute model failed", "the model failed while executing on the device",
              f"check inputs match the model's shapes/dtypes; {PLOG_HINT}; {PROFILE_HINT}"),
)


@dataclass(frozen=True)
class LogLine:
    """One server log line with its level (I/W/E/F, or None) and any GE failure it shows."""

    text: str
    level: str | None
    failure: GeFailure | None


def classify(text: str) -> LogLine:
    """Level and GE failure of one log line."""
    match = _LEVEL.match(text)
    level = match.group(1) if match else None
    return LogLine(text, level, ge_failure(text))


def ge_failure(text: str) -> GeFailure | None:
    """The known GE failure a line reports, including bare ACL error codes."""
    for failure in GE_FAILURES:
        if failure.marker in text:
            return failure
    code = _ACL_CODE.search(text)
    if code:
        return GeFailure(code.group(0), f"AscendCL error {code.group(1)}",
                         f"look the code up in CANN's aclError list; {PLOG_HINT}")
    return None


class LogTail:
    """Reads only what was appended to a log since the last read; copes with truncation and absence."""

    def __init__(self, path: Path | None, start_bytes_from_end: int = 256 * 1024) -> None:
        self.path = path
        self._offset: int | None = None
        self._partial = ""
        self._backlog = start_bytes_from_end

    def read_new(self) -> list[LogLine]:
        """Complete lines appended since the last call (the first call reads the recent tail)."""
        if self.path is None:
            return []
        try:
            size = self.path.stat().st_size
            if self._offset is None:
                self._offset = max(0, size - self._backlog)
            if size < self._offset:
                self._offset, self._partial = 0, ""
            with open(self.path, "rb") as handle:
                handle.seek(self._offset)
                chunk = handle.read()
        except OSError:
            return []
        self._offset += len(chunk)
        text = self._partial + chunk.decode("utf-8", errors="replace")
        lines = text.split("\n")
        self._partial = lines.pop()
        return [classify(line) for line in lines if line.strip()]


def matches(line: LogLine, level: str | None, search: str) -> bool:
    """Whether a line passes the level filter (this level or worse) and the case-insensitive search."""
    if level is not None and _rank(line.level) < _rank(level):
        return False
    return not search or search.lower() in line.text.lower()


def _rank(level: str | None) -> int:
    """Severity order I < W < E < F; unlevelled continuation lines rank as info."""
    return "IWEF".index(level) if level in ("I", "W", "E", "F") else 0
