"""Pure console helpers: figure formatting, log tailing and GE failure hints, pbtxt highlighting, diffs."""

from __future__ import annotations

import json
import os
from pathlib import Path

from triton_ge_console.console import format as fmt
from triton_ge_console.console.highlight import highlight_pbtxt
from triton_ge_console.console.widgets.header import HeaderFacts, header_line
from triton_ge_console.display import age, duration, gib, number
from triton_ge_console.repository import inventory
from triton_ge_console.sessions.server.server_log import LogTail, classify, matches

from .conftest import LOG, REPO


def test_missing_figures_render_as_dash() -> None:
    assert number(None) == fmt.percent_cell(None) == gib(None) == duration(None) == "—"
    assert duration(90061) == "1d 01:01:01"
    ages = [age(seconds) for seconds in (None, 42.9, 61, 3599, 3600 + 5 * 60, 90061)]
    assert ages == ["—", "42s", "1m", "59m", "1h05m", "1d1h"]  # the header's uptime: changes once a minute
    assert number(float("nan")) == "—"  # the console and the notebooks share one rule (display.py)
    assert fmt.sparkline([0.0, None, 1.0], 3, top=1.0) == "▁ █"
    assert fmt.bar(None, 10, 4) == "····" and fmt.bar(5, 10, 4) == "██░░"


def test_log_tail_reads_only_appended_complete_lines(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("I1130 first\nI1130 sec", encoding="utf-8")
    tail = LogTail(log)
    assert [line.text for line in tail.read_new()] == ["I1130 first"]
    with open(log, "a", encoding="utf-8") as out:
        out.write("ond\nE1130 CompileGraph failed: x\n")
    fresh = tail.read_new()
    assert [line.text for line in fresh] == ["I1130 second", "E1130 CompileGraph failed: x"]
    assert fresh[1].level == "E" and fresh[1].failure is not None
    assert tail.read_new() == []
    log.write_text("I1130 after truncation\n", encoding="utf-8")
    assert [line.text for line in tail.read_new()] == ["I1130 after truncation"]


def test_ge_failures_carry_next_steps() -> None:
    lines = [classify(text) for text in LOG.read_text(encoding="utf-8").splitlines()]
    failures = [line.failure for line in lines if line.failure is not None]
    titles = {f.title for f in failures}
    assert "GE could not compile the graph" in titles and "GE could not parse the ONNX model" in titles
    assert all("ASCEND_SLOG_PRINT_TO_STDOUT=1" in f.advice for f in failures)
    assert classify("E1130 aclrtMalloc failed, acl error code: 207001").failure is not None
    errors = [line for line in lines if matches(line, "E", "bert")]
    assert errors and all(line.level == "E" for line in errors)


def test_highlight_marks_error_lines() -> None:
    text = highlight_pbtxt('name: "m"\nmax_batch_size: 8\n', error_lines=[2])
    assert "1 │ name" in text.plain and "2 │ max_batch_size: 8" in text.plain
    assert any("red" in str(span.style) for span in text.spans)


def test_config_checks_and_diff(tmp_path: Path) -> None:
    config = REPO / "llama_model" / "config.pbtxt"
    text = config.read_text(encoding="utf-8")
    findings = inventory.check_config_text(text, config)  # the test repository's version folder has no ONNX
    assert [(f.severity, f.field) for f in findings] == [("error", "backend")]
    assert "ONNX" in findings[0].message
    broken = inventory.check_config_text(text.replace("max_batch_size: 8", "max_batch_size: eight"), config)
    assert broken[0].severity == "error" and broken[0].line == 3
    loaded = {"name": "llama_model", "backend": "ge", "max_batch_size": 4, "version_policy": {"latest": {}}}
    diff = inventory.config_diff(text, json.loads(json.dumps(loaded)))
    assert "-max_batch_size: 4" in diff and "+max_batch_size: 8" in diff
    assert "version_policy" not in "\n".join(diff)
    assert "max_batch 8" in inventory.config_summary(config)


def test_a_narrow_header_leaves_out_the_title_then_grpc_then_the_refresh_interval() -> None:
    facts = HeaderFacts("demo", "Triton 2.51.0", "ready", "13m", "127.0.0.1:8000", "127.0.0.1:8001", 1.0,
                        False)
    wide = header_line(facts).plain
    assert wide.split(" ─ ")[0] == " GE Console" and wide.endswith("grpc 127.0.0.1:8001")
    for width in (len(wide), 100, 80, 60):
        line = header_line(facts._replace(width=width)).plain
        assert len(line) <= width or width == 60  # 60 columns: only the parts that always stay
        assert all(part in line for part in ("session demo", "● ready", "up 13m", "http 127.0.0.1:8000"))
    assert header_line(facts._replace(width=100)).plain.endswith("refresh 1s")
    assert header_line(facts._replace(width=80)).plain.endswith("http 127.0.0.1:8000")


def test_config_summaries_read_a_config_again_only_once_it_changed(tmp_path: Path) -> None:
    """The dashboard's reader of config.pbtxt: a line per model, "—" without a repository or a config."""
    repository: Path | None = None
    summaries = inventory.ConfigSummaries(lambda: repository)
    assert summaries.summary("llama_model") == "—"  # no repository known (yet)
    repository = tmp_path
    config = tmp_path / "llama_model" / "config.pbtxt"
    config.parent.mkdir()
    assert summaries.summary("llama_model") == "—"  # no config.pbtxt
    config.write_text((REPO / "llama_model" / "config.pbtxt").read_text(encoding="utf-8"), encoding="utf-8")
    first = summaries.summary("llama_model")
    assert "max_batch 8" in first
    stamp = config.stat().st_mtime_ns
    config.write_text(config.read_text(encoding="utf-8").replace("max_batch_size: 8", "max_batch_size: 2"),
                      encoding="utf-8")
    os.utime(config, ns=(stamp, stamp))  # changed, its mtime not: the summary read before is kept
    assert summaries.summary("llama_model") == first
    os.utime(config, ns=(stamp + 10**9, stamp + 10**9))
    assert "max_batch 2" in summaries.summary("llama_model")
