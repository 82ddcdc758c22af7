"""The one server-log reader and its one list of markers."""

from __future__ import annotations

from pathlib import Path

from triton_ge_console.sessions.server.server_log import LogTail, is_failure, last_lines, log_cause, log_size


def test_a_large_backlog_is_read_from_its_end_without_a_cut_line(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("".join(f"line {n:04d}\n" for n in range(1000)))
    tail = LogTail(log, backlog=100, start=0)
    lines = tail.read_lines()
    assert lines[-1] == "line 0999" and all(line.startswith("line ") and len(line) == 9 for line in lines)
    assert len(lines) < 11  # ~100 bytes, not the whole file


def test_truncation_starts_over_and_says_so(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("one\ntwo\n")
    tail = LogTail(log, start=0)
    assert tail.read_lines() == ["one", "two"] and not tail.truncated
    log.write_text("three\n")
    assert tail.read_lines() == ["three"] and tail.truncated


def test_lines_since_an_offset_wait_for_their_newline(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("before\n")
    tail = LogTail(log, start=log_size(log))
    with log.open("a") as out:
        out.write("after\npart")
    assert tail.read_lines() == ["after"]
    with log.open("a") as out:
        out.write("ial\n")
    assert tail.read_lines() == ["partial"]


def test_cause_prefers_the_most_telling_line(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("I1201 ok\nE1201 Internal: something\nE1201 failed to load 'm' version 1: bad\n\n")
    assert log_cause(log) == "E1201 failed to load 'm' version 1: bad"
    assert log_cause(tmp_path / "none.log").startswith("(no log at")
    assert last_lines(log, 2) == ["E1201 Internal: something", "E1201 failed to load 'm' version 1: bad"]


def test_failures_are_error_lines_or_known_markers() -> None:
    assert is_failure("E1201 10:00:00.000 1 server.cc:1] anything")
    assert is_failure("[ge] CompileGraph failed for graph 1")
    assert is_failure("aclmdlLoadFromFile ACL error code 500002")
    assert not is_failure("I1201 10:00:00.000 1 model_lifecycle.cc:1] loading: m:1")
    assert not is_failure("Everything fine")
