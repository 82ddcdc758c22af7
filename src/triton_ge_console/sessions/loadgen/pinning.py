"""CPU affinity for `bench --vs-direct` on a CPU-only host: the model's executor on CPUs of its own.

On an NPU host the model computes beside the client and Triton; in CPU emulation all three share the
cores. Pinning the executor (the in-process one and the served model's stub process) to some CPUs and
the client and tritonserver to the others makes the through-Triton ÷ direct ratio mean what it does on
an NPU host. Linux only (`os.sched_setaffinity` per thread); every change is undone at the end.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import psutil

from triton_ge_console.errors import GeConsoleError

STUB_NAME = "triton_python_backend_stub"


class PinningError(GeConsoleError, RuntimeError):
    """The CPUs asked for cannot be used here; the message says why."""


def parse_cpus(text: str) -> tuple[int, ...]:
    """'1' / '2,3' / '2-3' to sorted CPU ids, refusing what this host does not have (or leaves none free)."""
    cpus: set[int] = set()
    try:
        for part in filter(None, text.replace(" ", "").split(",")):
            low, _, high = part.partition("-")
            cpus.update(range(int(low), int(high or low) + 1))
    except ValueError:
        raise PinningError(f"--pin-executor {text!r}: expected CPU ids such as 1 or 2,3 or 2-3") from None
    available = available_cpus()
    if not cpus or not cpus <= available:
        raise PinningError(f"--pin-executor {text!r}: this host offers CPUs {_text(available)}")
    if cpus == available:
        raise PinningError(f"--pin-executor {text!r}: leaves no CPU for the client and tritonserver "
                           f"(this host offers {_text(available)})")
    return tuple(sorted(cpus))


def available_cpus() -> set[int]:
    """The CPUs this process may run on."""
    if not hasattr(os, "sched_getaffinity"):
        raise PinningError("--pin-executor needs Linux CPU affinity (os.sched_setaffinity)")
    return set(os.sched_getaffinity(0))


def _text(cpus: Iterable[int]) -> str:
    """CPU ids as a list an operator reads."""
    return ",".join(str(c) for c in sorted(cpus))


def pin_this_thread(cpus: Iterable[int]) -> None:
    """Run the calling thread (and threads it starts later, ONNX Runtime's pool) on `cpus` only."""
    os.sched_setaffinity(0, set(cpus))


def stub_pids(model: str, server_pid: int | None = None) -> list[int]:
    """The Python backend stubs serving `model` (their command line names the model's folder), children of
    `server_pid` when it is known."""
    found = []
    candidates = (psutil.Process(server_pid).children(recursive=True) if server_pid
                  else psutil.process_iter())
    for process in candidates:
        with contextlib.suppress(psutil.Error):
            cmdline = process.cmdline()
            if cmdline and Path(cmdline[0]).name == STUB_NAME and any(
                    f"/{model}/" in arg for arg in cmdline[1:]):
                found.append(process.pid)
    return found


class Affinities:
    """Changes threads' affinities and puts every one back on exit."""

    def __init__(self) -> None:
        self._saved: dict[int, set[int]] = {}

    def pin_process(self, pid: int, cpus: Iterable[int]) -> None:
        """Every thread of `pid` (our own too) on `cpus`; threads it starts later inherit their creator's."""
        wanted = set(cpus)
        for tid in _threads(pid):
            with contextlib.suppress(OSError):  # a thread that ended meanwhile
                self._saved.setdefault(tid, set(os.sched_getaffinity(tid)))
                os.sched_setaffinity(tid, wanted)

    def restore(self) -> None:
        """Every changed thread back to what it had (threads gone since are skipped)."""
        for tid, cpus in self._saved.items():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, cpus)
        self._saved.clear()

    def __enter__(self) -> Affinities:
        return self

    def __exit__(self, *exc: object) -> None:
        self.restore()


def _threads(pid: int) -> Iterator[int]:
    """The thread ids of a process (Linux /proc)."""
    with contextlib.suppress(OSError):
        for entry in Path(f"/proc/{pid}/task").iterdir():
            if entry.name.isdigit():
                yield int(entry.name)
