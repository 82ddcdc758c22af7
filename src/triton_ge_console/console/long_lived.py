"""Start-up objects left out of the garbage collector's full collections while the console runs.

A full collection walks every object the collector tracks, and the UI thread waits that long. Most of
them (modules, classes, Textual's and the console's own objects) are made at start-up and live until the
console exits, so walking them every few minutes finds nothing. Freezing them once the app is mounted
(after a collection, so no garbage is frozen) leaves them out; benchmarks/gc_pause.py measures the pause
both ways. An object made at start-up that later dies in a reference cycle (a start screen) stays until
the console exits, when everything frozen is handed back to the collector.
"""

from __future__ import annotations

import gc


def leave_out_start_up_objects() -> None:
    """Collect, then move every object still alive out of reach of later collections."""
    gc.collect()
    gc.freeze()


def hand_back_start_up_objects() -> None:
    """Let the collector walk them again (the console is exiting; its objects can now be freed)."""
    gc.unfreeze()
