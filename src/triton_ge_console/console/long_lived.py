"""Start-up objects left out of the garbage collector's full collections while the console runs.

A full collection walks every object the collector tracks, and the UI thread waits that long. Most of
them (modules, classes, Textual's and the console's own objects) are made at start-up and live until the
console exits, so walking them every few minutes finds nothing. Freezing them once the app is mounted
(after a collection, so no garbage is frozen) leaves them out. benchmarks/dashboard_ab.py --b-freeze
measures the pause both ways: at 100 models on a busy 2-core host the longest full collection took
277–416 ms walking everything against 63–68 ms frozen, about once a minute at one refresh a second.
An object made at start-up that later dies in a reference cycle (a start screen) stays until
the console exits, when everything frozen is handed back to the collector.

Freezing is process-wide: with several apps in one process (tests, a notebook) the first to mount
freezes and the last to exit hands back, and a process that froze objects itself is left as it was.
"""

from __future__ import annotations

import gc


class _Holders:
    """How many running apps want start-up objects left out, and whether this module froze them."""

    count = 0
    froze = False


def leave_out_start_up_objects() -> None:
    """Collect, then move every object still alive out of reach of later collections (first app only)."""
    if _Holders.count == 0 and gc.get_freeze_count() == 0:
        gc.collect()
        gc.freeze()
        _Holders.froze = True
    _Holders.count += 1


def hand_back_start_up_objects() -> None:
    """Let the collector walk them again once the last app that wanted them left out has exited."""
    _Holders.count = max(0, _Holders.count - 1)
    if _Holders.count == 0 and _Holders.froze:
        gc.unfreeze()
        _Holders.froze = False
