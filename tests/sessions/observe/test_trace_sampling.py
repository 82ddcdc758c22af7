"""The sampling policy: about TARGET_TRACES_PER_S traced requests a second whatever the load, a bounded
lease, and no setting re-sent for a wobbling req/s."""

from __future__ import annotations

from triton_ge_console.sessions.observe.trace_sampling import (
    LEASE_S,
    MIN_COUNT,
    RETRY_S,
    TARGET_TRACES_PER_S,
    Sampling,
    TraceSampler,
    sampling_for,
)


def test_rate_keeps_traced_requests_near_the_target() -> None:
    """A busy model traces every N-th request so N × target ≈ its load; a quiet or unknown one all."""
    for load in (50.0, 700.0, 5000.0, 123_456.0):
        sampling = sampling_for(load)
        assert TARGET_TRACES_PER_S <= load / sampling.rate < 2 * TARGET_TRACES_PER_S
    assert sampling_for(3.0).rate == sampling_for(None).rate == sampling_for(0.0).rate == 1
    assert sampling_for(5000.0).count == round(TARGET_TRACES_PER_S * LEASE_S)


def test_a_lease_bounds_the_traces_a_load_jump_can_take() -> None:
    """Triton 2.51 crashes when it traces at a high rate (server#7795): a model whose load jumps before
    the next poll re-fits its rate traces at most one short lease, the fewest for an idle model."""
    assert sampling_for(None).count == MIN_COUNT
    assert sampling_for(5000.0).count <= TARGET_TRACES_PER_S * 2 * LEASE_S
    for load in (None, 3.0, 50.0, 5000.0):
        sampling = sampling_for(load)
        assert sampling.count >= sampling.log_frequency  # a lease fills at least one trace file


def test_files_are_flushed_every_few_seconds_at_any_load() -> None:
    """log_frequency follows the traced requests per second, so traces reach the console in seconds."""
    assert sampling_for(0.2).log_frequency == 1
    assert sampling_for(3.0).log_frequency == 6
    assert sampling_for(5000.0).log_frequency == 20


def test_first_poll_arms_every_model_then_only_changes() -> None:
    """New models get a setting at once; an unchanged or slightly different load sends nothing."""
    sampler = TraceSampler()
    due = sampler.due({"a": None, "b": 900.0}, now=0.0)
    assert due == {"a": sampling_for(None), "b": sampling_for(900.0)}
    for name, sampling in due.items():
        sampler.armed(name, sampling)
    # polls 0.1 s apart: too soon for any lease to be half used
    assert sampler.due({"a": None, "b": 1200.0}, now=0.1) == {}
    assert sampler.due({"a": 0.0, "b": 5000.0}, now=0.2) == {"b": sampling_for(5000.0)}
    assert sampler.due({"b": 900.0}, now=0.3) == {}  # "a" unloaded: forgotten
    assert sampler.due({"a": None, "b": 900.0}, now=0.4) == {"a": sampling_for(None)}  # back: armed again


def test_a_half_used_lease_is_renewed() -> None:
    """Traces used are estimated from req/s ÷ rate; at half the count the setting is sent again."""
    sampler = TraceSampler()
    sampler.due({"m": 1000.0}, now=0.0)
    sampler.armed("m", sampling_for(1000.0))
    half = LEASE_S / 2
    assert sampler.due({"m": 1000.0}, now=half - 5) == {}
    assert sampler.due({"m": 1000.0}, now=half + 1) == {"m": sampling_for(1000.0)}


def test_a_refused_setting_is_retried_later_not_every_poll() -> None:
    """Triton refusing (e.g. a restricted trace API) costs one attempt per RETRY_S."""
    sampler = TraceSampler()
    assert "m" in sampler.due({"m": 10.0}, now=0.0)
    sampler.refused("m", now=0.0)
    assert sampler.due({"m": 10.0}, now=RETRY_S - 1) == {}
    assert "m" in sampler.due({"m": 10.0}, now=RETRY_S + 1)
    sampler.armed("m", Sampling(1, 20, 1200))
    assert sampler.setting("m") == Sampling(1, 20, 1200)
