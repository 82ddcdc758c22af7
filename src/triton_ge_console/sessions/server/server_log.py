"""Reading a server log incrementally and recognising GE/ACL failures with what to try next."""

from __future__ import annotations

import contextlib
import datetime
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

from triton_ge_console.files import write_atomic

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
        self._partial = b""

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
                self._offset, self._partial, self.truncated = 0, b"", True
            start = max(self._offset or 0, size - self.backlog)
            with open(self.path, "rb") as handle:
                handle.seek(start)
                chunk = handle.read(size - start)
        except OSError:
            return []
        skipped, self._offset = start > (self._offset or 0), start + len(chunk)
        *complete, self._partial = ((b"" if skipped else self._partial) + chunk).split(b"\n")
        lines = [line.decode("utf-8", errors="replace") for line in complete]
        return lines[1:] if skipped else lines  # a skip cuts the first line

    @property
    def line_end(self) -> int | None:
        """Where the last complete line read ends (a LogTail started there reads on from the next one)."""
        return None if self._offset is None else self._offset - len(self._partial)


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


LOADS_SUFFIX = ".loads"  # beside the log: its loads as far as the session's supervisor has read it
INDEX_EVERY_BYTES = 1 << 20  # the index is written again once the log grew this much (or a load changed)
LoadKey = tuple[str, str]  # (model, version)


class LoadTimes:
    """When the load Triton serves each model version from began (epoch seconds), by its log: a Python stub
    started before it belongs to an earlier generation of that version, which Triton no longer serves.

    The session's supervisor reads its log as it grows and keeps what it found in an index beside it
    (`save`); a new reader (`status` runs in a fresh process) starts from that index and reads only the log
    written since, rather than the whole log from its start."""

    def __init__(self, path: Path | None, resume: bool = True) -> None:
        self.path = path
        self._resume = resume
        self._tail: LogTail | None = None  # made at the first read: the index is newest then
        self._loading: dict[LoadKey, float] = {}  # loads begun, not yet served or failed
        self._served: dict[LoadKey, float] = {}
        self._saved: tuple[int, dict[LoadKey, float], dict[LoadKey, float]] | None = None

    def served_since(self) -> dict[LoadKey, float]:
        """(model, version) → when the load now served began (read incrementally)."""
        if self._tail is None:
            self._tail = self._start()
        lines = self._tail.read_lines()
        if self._tail.truncated:  # a new log: what the old one said is gone with it
            self._loading, self._served = {}, {}
        for line in lines:
            self._take(line)
        return dict(self._served)

    def _start(self) -> LogTail:
        """A tail of the log from where its index got (its loads taken from it), else from its start."""
        index = _read_index(self.path) if self._resume and self.path is not None else None
        if index is None:
            return LogTail(self.path, backlog=FULL_LOG_BYTES, start=0)
        offset, self._loading, self._served = index
        return LogTail(self.path, backlog=FULL_LOG_BYTES, start=offset)

    def save(self) -> None:
        """Write the index of what was read (private, atomic) when a load changed or the log grew enough."""
        end = self._tail.line_end if self._tail is not None else None
        if self.path is None or end is None:
            return
        if self._saved is not None and self._saved[1:] == (self._loading, self._served) and (
                0 <= end - self._saved[0] < INDEX_EVERY_BYTES):
            return
        try:
            inode = self.path.stat().st_ino
            write_atomic(loads_index(self.path), json.dumps({
                "inode": inode, "offset": end,
                "loading": [[*key, began] for key, began in self._loading.items()],
                "served": [[*key, began] for key, began in self._served.items()]}))
        except OSError:
            return
        self._saved = (end, dict(self._loading), dict(self._served))

    def _take(self, line: str) -> None:
        """Follow one log line's load, success or failure."""
        if match := _LOADING.match(line):
            self._loading[(match[7], match[8])] = _utc_epoch(*(int(part) for part in match.groups()[:6]))
        elif match := _LOADED.match(line):
            for key in [key for key in self._loading if key[0] == match[1]]:
                self._served[key] = self._loading.pop(key)
        elif match := _LOAD_FAILED.match(line):
            self._loading.pop((match[1], match[2]), None)


def loads_index(log: Path) -> Path:
    """The index of a log's loads, beside it."""
    return log.with_name(log.name + LOADS_SUFFIX)


def indexed_up_to(log: Path) -> int | None:
    """How far into the log its index has read (None: no index of this log)."""
    index = _read_index(log)
    return index[0] if index is not None else None


def _read_index(log: Path) -> tuple[int, dict[LoadKey, float], dict[LoadKey, float]] | None:
    """The offset read to and the loads begun and served there, from the index of this very log (None: no
    index, an unreadable one, or one of an earlier log: another file, or longer than this one)."""
    try:
        data = json.loads(loads_index(log).read_text(encoding="utf-8"))
        info = log.stat()
        offset = int(data["offset"])
        if data["inode"] != info.st_ino or not 0 <= offset <= info.st_size:
            return None
        loading, served = ({(str(model), str(version)): float(began) for model, version, began in data[part]}
                           for part in ("loading", "served"))
        return offset, loading, served
    except (OSError, ValueError, TypeError, KeyError):
        return None


def keep_load_index(log: Path, interval_s: float = 0.5) -> None:
    """Read a session's log as it grows and keep the index of its loads (a supervisor's thread, for life)."""
    loads = LoadTimes(log, resume=False)
    while True:
        loads.served_since()
        loads.save()
        time.sleep(interval_s)


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
