"""A gentle background load for the demo: a few requests per second to each model, open loop."""

from __future__ import annotations

import contextlib


class GentleLoad:
    """A few requests per second to each model, so the demo's figures move (the load generator, open loop)."""

    def __init__(self, grpc_hostport: str, models: tuple[str, ...], rate_per_s: float = 4.0) -> None:
        from triton_ge_console.sessions.loadgen.run import LoadRun
        from triton_ge_console.sessions.loadgen.types import LoadSpec

        self.runs = [
            LoadRun(LoadSpec(model=model, url=grpc_hostport, protocol="grpc", rate=(rate_per_s,), warmup_ms=0,
                             window_ms=1000, max_windows=1_000_000, stable_windows=1_000_000))
            for model in models
        ]

    def start(self) -> GentleLoad:
        """Begin every run in the background."""
        for run in self.runs:
            run.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """End every run and wait for it."""
        for run in self.runs:
            run.stop()
        for run in self.runs:
            with contextlib.suppress(Exception):
                run.wait(timeout)

    def errors(self) -> list[str]:
        """Why runs ended early, if any did."""
        return [f"{run.spec.model}: {run.error}" for run in self.runs if run.error is not None]
