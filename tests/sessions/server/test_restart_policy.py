"""The restart policy's backoff: doubling waits up to a cap, a limit in a row, afresh after a steady run."""

from __future__ import annotations

from triton_ge_console.sessions.server.restart_policy import Backoff, crashed, exit_in_words


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
