"""When a crashed server is started again: Kubernetes' CrashLoopBackOff, scaled to one operator's server.

Kubernetes waits 10 s, 20 s, 40 s ... up to 5 minutes between restarts and never stops trying; a pod that
ran 10 minutes counts afresh. One server on one host is watched by a person, so ge-console waits 1 s, 2 s,
4 s, 8 s, 16 s (at most 30 s), gives up after 5 restarts in a row (the crash is then no passing one: the
session stays dead, with the crashes in its events), and counts afresh once a server ran 10 minutes.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass

from triton_ge_console.repository.spec.types import RESTART_POLICIES

NEVER, ON_CRASH = RESTART_POLICIES
FIRST_DELAY_S = 1.0
MAX_DELAY_S = 30.0
RESTART_LIMIT = 5
STEADY_S = 600.0  # a server that ran this long without crashing starts the count afresh


@dataclass
class Backoff:
    """How long to wait before the next restart, and when to stop restarting."""

    first_s: float = FIRST_DELAY_S
    max_s: float = MAX_DELAY_S
    limit: int = RESTART_LIMIT
    steady_s: float = STEADY_S
    restarts: int = 0  # in a row, since the count last started afresh

    def next_delay(self, ran_s: float) -> float | None:
        """The wait before restarting a server that crashed after running ran_s seconds; None: give up."""
        if ran_s >= self.steady_s:
            self.restarts = 0
        if self.restarts >= self.limit:
            return None
        delay = min(self.first_s * 2**self.restarts, self.max_s)
        self.restarts += 1
        return delay


def crashed(code: int) -> bool:
    """Whether an exit code (negative: the signal that killed it) is a crash rather than a clean exit."""
    return code != 0


def exit_in_words(code: int) -> str:
    """How a server ended: 'was killed by SIGSEGV', 'exited with code 1'."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"
