"""The benchmarks' round order: the load generator's own (`bench --vs-direct` interleaves the same way)."""

from triton_ge_console.sessions.loadgen.rounds import round_order

__all__ = ["round_order"]
