"""The restart policy's backoff: doubling waits up to a cap, a limit in a row, afresh after a steady run."""

from __future__ import annotations

from pathlib import Path

from tests.sessions.server.test_registry import make_record
from triton_ge_console.sessions.pending import RecordLifecycle
from triton_ge_console.sessions.server.events import CRASHED, record_event
from triton_ge_console.sessions.server.registry import Registry
from triton_ge_console.sessions.server.restart_policy import Backoff, crashed, exit_in_words
from triton_ge_console.sessions.server.supervise import EXIT_FILE


def test_waits_double_up_to_the_cap_and_give_up_after_the_limit() -> None:
    backoff = Backoff(first_s=1.0, max_s=5.0, limit=5, steady_s=600.0)
    assert [backoff.next_delay(ran_s=2.0) for _ in range(6)] == [1.0, 2.0, 4.0, 5.0, 5.0, None]


def test_a_server_that_ran_steadily_counts_afresh() -> None:
    backoff = Backoff(first_s=1.0, max_s=30.0, limit=2, steady_s=600.0)
    assert [backoff.next_delay(2.0), backoff.next_delay(2.0), backoff.next_delay(2.0)] == [1.0, 2.0, None]
    assert backoff.next_delay(ran_s=600.0) == 1.0 and backoff.restarts == 1


def test_only_a_clean_exit_is_no_crash() -> None:
    assert [crashed(code) for code in (0, 1, -11, -9)] == [False, True, True, True]
    assert exit_in_words(-11) == "was killed by SIGSEGV" and exit_in_words(3) == "exited with code 3"


def test_the_consoles_diagnosis_of_a_crashed_server_says_when_it_restarts(tmp_path: Path) -> None:
    """What the console's banner shows while a watched server is down between a crash and its restart."""
    (tmp_path / EXIT_FILE).write_text("-11\n", encoding="ascii")
    record_event(tmp_path, CRASHED, "server was killed by SIGSEGV; restarting in 2s (restart 2 of 5)")
    record = make_record("watched", pid=None, session_dir=tmp_path)
    said = RecordLifecycle(Registry(tmp_path / "sessions"), record).diagnose()
    assert said is not None and said.startswith("tritonserver exited (killed by signal 11)"), said
    assert said.endswith("; server was killed by SIGSEGV; restarting in 2s (restart 2 of 5)"), said
