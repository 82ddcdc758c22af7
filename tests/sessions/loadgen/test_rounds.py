"""An added cost over interleaved rounds is a result only when every round saw it: benchmarks/
generate_overhead.py printed TTFT -12.7 ms and ITL -0.516 ms as if measured."""

from __future__ import annotations

from triton_ge_console.sessions.loadgen.rounds import Spread


def test_a_negative_overhead_is_unresolved_with_the_noise_seen() -> None:
    """The issue's TTFT: rounds from -31 to +9 ms, median -12.7: unresolved, its range and median shown."""
    ttft = Spread.of([-31.0, -12.7, 9.0])
    assert not ttft.resolved
    assert ttft.cost_text("{:.1f}") == "unresolved (rounds -31.0–9.0, median -12.7)"


def test_a_range_reaching_zero_is_unresolved_and_one_above_it_is_a_result() -> None:
    """A positive median whose rounds reach zero is noise too; every round above zero is a cost."""
    assert Spread.of([0.0, 0.4, 0.9]).cost_text() == "unresolved (rounds 0.00–0.90, median 0.40)"
    assert Spread.of([0.2, 0.4, 0.9]).cost_text("{:+.2f}", "…") == "+0.40 (+0.20…+0.90)"
