"""Start-up objects frozen while consoles run: the first app freezes, the last hands back, others' kept."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from triton_ge_console.console import long_lived


@pytest.fixture
def nothing_frozen() -> Iterator[None]:
    """Start and end with nothing frozen, whatever the test did."""
    gc.unfreeze()
    yield
    gc.unfreeze()
    long_lived._Holders.count, long_lived._Holders.froze = 0, False


def test_the_first_app_freezes_and_the_last_to_exit_hands_back(nothing_frozen: None) -> None:
    long_lived.leave_out_start_up_objects()
    frozen = gc.get_freeze_count()
    long_lived.leave_out_start_up_objects()  # a second app in the same process: no second freeze
    # frozen objects that die meanwhile (another test's threads ending) leave the count: never more, though
    assert 0 < gc.get_freeze_count() <= frozen
    long_lived.hand_back_start_up_objects()
    assert frozen // 2 < gc.get_freeze_count() <= frozen  # the other app still runs: still frozen
    long_lived.hand_back_start_up_objects()
    assert gc.get_freeze_count() == 0


def test_objects_the_process_froze_itself_stay_frozen(nothing_frozen: None) -> None:
    gc.freeze()
    theirs = gc.get_freeze_count()
    long_lived.leave_out_start_up_objects()
    long_lived.hand_back_start_up_objects()
    long_lived.hand_back_start_up_objects()  # one more than asked: still nothing of theirs handed back
    assert gc.get_freeze_count() == theirs
