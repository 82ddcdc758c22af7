"""Reading a server log incrementally and recognising GE/ACL failures with what to try next."""

from __future__ import annotations

import contextlib
import datetime
import re
from dataclasses import dataclass
from pathlib import Path

# Triton's glog-style prefix: level letter + MMDD, e.g. "E1130 10:55:01.123 ..."
_LEVEL = re.compile(r"^([IWEF])\d{4} ")
# A port tritonserver could not bind: Triton 2.51's own "Socket 'HOST:PORT' already in use" (HTTP, gRPC,
# metrics; main.cc) or the OS's words, which gRPC's core logs first (seen by taking each port by hand).
PORT_TAKEN = ("' already in use", "Address already in use")
_QUOTED_PORT = re.compile(r"'[^' ]*:(\d+)'")
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

# Every log substring we act on, in one place. A start failure's cause is the first of CAUSES found
# (most telling first); FATAL lines mean the server will never get its models READY.
FATAL = ("error while loading shared libraries",)
EXIT_TIMEOUT = "Exit timeout expired"  # Triton's main.cc when models outlive --exit-timeout-secs
CAUSES = ("failed to load", *PORT_TAKEN, *FATAL, "failed to start", "Internal:",
          "Invalid argument", "error:", "UNAVAILABLE")
FAILURES = (*(f.marker for f in GE_FAILURES), "ACL error", *CAUSES, EXIT_TIMEOUT)


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
    """Reads only what was appended to a log since the last read, at most its last `backlog` bytes at a
    time (a large backlog: only its end matters); copes with truncation and absence."""

    def __init__(self, path: Path | None, backlog: int = 256 * 1024, start: int | None = None) -> None:
        self.path = path
        self.backlog = backlog
        self.truncated = False  # the last read found the file shorter than before, and started over
        self._offset: int | None = start
        self._partial = ""

    def read_new(self) -> list[LogLine]:
        """Complete lines appended since the last call (the first call reads the recent tail)."""
        return [classify(line) for line in self.read_lines() if line.strip()]

    def read_lines(self) -> list[str]:
        """The complete lines appended since the last call, as text (blank lines included)."""
        self.truncated = False
        if self.path is None:
            return []
        try:
            size = self.path.stat().st_size
            if self._offset is not None and size < self._offset:
                self._offset, self._partial, self.truncated = 0, "", True
            start = max(self._offset or 0, size - self.backlog)
            with open(self.path, "rb") as handle:
                handle.seek(start)
                chunk = handle.read(size - start)
        except OSError:
            return []
        skipped, self._offset = start > (self._offset or 0), start + len(chunk)
        lines = ("" if skipped else self._partial) + chunk.decode("utf-8", errors="replace")
        *complete, self._partial = lines.split("\n")
        return complete[1:] if skipped else complete  # a skip cuts the first line


def log_size(path: Path | None) -> int | None:
    """The log's size now, so a LogTail started there reads only what comes after (None: no log)."""
    try:
        return path.stat().st_size if path is not None else None
    except OSError:
        return None


def last_lines(path: Path | None, count: int, max_bytes: int = 1 << 20) -> list[str]:
    """The last `count` non-empty lines of a log (from at most its last `max_bytes`; [] without one)."""
    lines = LogTail(path, backlog=max_bytes).read_lines()
    return [line for line in lines if line.strip()][-count:]


def log_cause(path: Path, max_lines: int = 400) -> str:
    """The most telling line of a server log (a load error, port clash, missing library), else its tail."""
    if not path.is_file():
        return f"(no log at {path})"
    lines = last_lines(path, max_lines)
    for marker in CAUSES:
        for line in lines:
            if marker in line:
                return line.strip()[:500]
    tail = lines[-3:]
    return " | ".join(tail)[:500] if tail else "(log is empty)"


def port_taken(text: str) -> bool:
    """Whether a server's words say a port it was to listen on is taken."""
    return any(marker in text for marker in PORT_TAKEN)


def quoted_port(text: str) -> int | None:
    """The port a server's words quote ('HOST:PORT'), if they do."""
    match = _QUOTED_PORT.search(text)
    return int(match.group(1)) if match else None


def is_failure(text: str) -> bool:
    """Whether a log line reports a failure worth highlighting (an error line or a known marker)."""
    if _LEVEL.match(text) is not None and text[0] in "EF":
        return True
    return any(marker in text for marker in FAILURES) or ge_failure(text) is not None


def matches(line: LogLine, level: str | None, search: str) -> bool:
    """Whether a line passes the level filter (this level or worse) and the case-insensitive search."""
    if level is not None and _rank(line.level) < _rank(level):
        return False
    return not search or search.lower() in line.text.lower()


def _rank(level: str | None) -> int:
    """Severity order I < W < E < F; unlevelled continuation lines rank as info."""
    return "IWEF".index(level) if level in ("I", "W", "E", "F") else 0


# Triton's model_lifecycle.cc at the start of a load, and once it serves it; its log time is UTC (common's
# logging.cc: gmtime_r), month and day without a year, to the microsecond.
_LOG_TIME = r"^[IWE](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{6}) \d+ model_lifecycle\.cc:\d+\] "
_LOADING = re.compile(_LOG_TIME + r'"loading: (.+):(\d+)"')
_LOADED = re.compile(r"^I\d{4} .* model_lifecycle\.cc:\d+\] \"successfully loaded '(.+)'\"")
_LOAD_FAILED = re.compile(r"^E\d{4} .* model_lifecycle\.cc:\d+\] \"failed to load '(.+)' version (\d+)")
FULL_LOG_BYTES = 64 << 20  # a log read whole for its loads: more than any session writes without verbose


class LoadTimes:
    """When the load Triton serves each model version from began (epoch seconds), by its log: a Python stub
    started before it belongs to an earlier generation of that version, which Triton no longer serves."""

    def __init__(self, path: Path | None) -> None:
        self._tail = LogTail(path, backlog=FULL_LOG_BYTES, start=0)
        self._loading: dict[tuple[str, str], float] = {}  # loads begun, not yet served or failed
        self._served: dict[tuple[str, str], float] = {}

    def served_since(self) -> dict[tuple[str, str], float]:
        """(model, version) → when the load now served began (read incrementally)."""
        lines = self._tail.read_lines()
        if self._tail.truncated:  # a new log: what the old one said is gone with it
            self._loading, self._served = {}, {}
        for line in lines:
            self._take(line)
        return dict(self._served)

    def _take(self, line: str) -> None:
        """Follow one log line's load, success or failure."""
        if match := _LOADING.match(line):
            self._loading[(match[7], match[8])] = _utc_epoch(*(int(part) for part in match.groups()[:6]))
        elif match := _LOADED.match(line):
            for key in [key for key in self._loading if key[0] == match[1]]:
                self._served[key] = self._loading.pop(key)
        elif match := _LOAD_FAILED.match(line):
            self._loading.pop((match[1], match[2]), None)


def _utc_epoch(month: int, day: int, hour: int, minute: int, second: int, micros: int) -> float:
    """A log time (no year: this year's, or last year's when that would be in the future) as epoch seconds."""
    utc = datetime.timezone.utc
    now = datetime.datetime.now(utc)
    for year in (now.year, now.year - 1):
        with contextlib.suppress(ValueError):  # 29 February of a year without it
            moment = datetime.datetime(year, month, day, hour, minute, second, micros, tzinfo=utc)
            if moment <= now + datetime.timedelta(days=1):
                return moment.timestamp()
    return 0.0
