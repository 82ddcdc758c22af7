"""The one server-log reader and its one list of markers."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from triton_ge_console.sessions.server.server_log import (
    LoadTimes,
    LogTail,
    indexed_up_to,
    is_failure,
    last_lines,
    log_cause,
    log_size,
)


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


def test_load_times_follow_the_load_triton_serves(tmp_path: Path) -> None:
    """Lines as Triton 2.51 wrote them in this suite's runs (times are UTC): a served load's start counts,
    a failed one's does not, and a later success moves it."""
    log = tmp_path / "server.log"
    log.write_text(
        'I1207 16:31:13.501880 11046 model_lifecycle.cc:472] "loading: echo:1"\n'
        "I1207 16:31:17.448945 11046 model_lifecycle.cc:839] \"successfully loaded 'echo'\"\n"
        'I1207 16:31:19.853932 11046 model_lifecycle.cc:472] "loading: echo:1"\n'
        "E1207 16:31:20.000001 11046 model_lifecycle.cc:641] \"failed to load 'echo' version 1: x\"\n",
        encoding="utf-8")
    loads = LoadTimes(log)
    first = loads.served_since()[("echo", "1")]
    moment = datetime.datetime.fromtimestamp(first, datetime.timezone.utc)
    assert (moment.month, moment.day, moment.hour, moment.minute, moment.second, moment.microsecond) == (
        12, 7, 16, 31, 13, 501880)
    with log.open("a", encoding="utf-8") as out:
        out.write('I1207 16:31:25.000000 11046 model_lifecycle.cc:472] "loading: echo:1"\n'
                  "I1207 16:31:27.000000 11046 model_lifecycle.cc:839] \"successfully loaded 'echo'\"\n")
    assert loads.served_since()[("echo", "1")] - first == pytest.approx(11.498120)


def test_a_reader_resumes_from_the_index_of_this_log_only(tmp_path: Path) -> None:
    """A load begun before the index and served after it counts; an index of an earlier log is not used."""
    log = tmp_path / "server.log"
    log.write_text('I1207 16:31:13.000000 1 model_lifecycle.cc:472] "loading: echo:1"\n'
                   "I1207 16:31:14.000000 1 model_lifecycle.cc:839] \"successfully loaded 'echo'\"\n"
                   'I1207 16:31:20.000000 1 model_lifecycle.cc:472] "loading: echo:1"\n', encoding="utf-8")
    writer = LoadTimes(log, resume=False)
    first = writer.served_since()[("echo", "1")]
    writer.save()
    assert indexed_up_to(log) == log.stat().st_size
    with log.open("a", encoding="utf-8") as out:
        out.write("I1207 16:31:22.000000 1 model_lifecycle.cc:839] \"successfully loaded 'echo'\"\n")
    assert LoadTimes(log).served_since()[("echo", "1")] - first == pytest.approx(7.0)
    log.rename(tmp_path / "server.log.1")  # a new run's log: the index speaks of another file
    log.write_text('I1207 16:40:00.000000 1 model_lifecycle.cc:472] "loading: echo:1"\n', encoding="utf-8")
    assert indexed_up_to(log) is None and LoadTimes(log).served_since() == {}
