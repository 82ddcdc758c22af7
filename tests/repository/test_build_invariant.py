"""The invariant: build never writes what validate (or Triton) refuses. Over every ONNX the suite has or
makes, and over generated graphs (hypothesis): a spec is refused with one line per problem, or the built
repository validates without an error. (tests/backend_glue/test_build_invariant_triton.py loads a sample in
a real tritonserver.)"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.repository.invariant import (
    ELEM_TYPES,
    MADE,
    NAMES,
    SHIPPED,
    SHIPPED_DATA,
    Port,
    check_build_invariant,
    passthrough_model,
)


def test_the_onnx_wheel_ships_models_to_judge() -> None:
    """The corpus is there (the property below would hold vacuously without it)."""
    assert len(SHIPPED) >= 100, SHIPPED_DATA


@pytest.mark.parametrize("max_batch_size", (0, 4))
def test_every_shipped_onnx_builds_clean_or_is_refused(max_batch_size: int) -> None:
    """Each of the onnx wheel's models: refused in one line (opset 6, fixed batch dims) or built clean."""
    verdicts = [check_build_invariant(path, max_batch_size) for path in SHIPPED]
    # not held vacuously: most build without batching; their fixed batch dims refuse nearly all with it
    verdict, least = ("built", 30) if max_batch_size == 0 else ("refused", 100)
    assert verdicts.count(verdict) >= least


@pytest.mark.parametrize("max_batch_size", (0, 4))
@pytest.mark.parametrize("name", sorted(MADE))
def test_every_model_the_suite_makes_builds_clean_or_is_refused(name: str, max_batch_size: int) -> None:
    """The suite's own models (glue test models, demos), with and without batching."""
    check_build_invariant(MADE[name](), max_batch_size)


@st.composite
def _ports(draw: st.DrawFn) -> tuple[Port, ...]:
    """One to three inputs of any element type and shape: scalars, unknown rank, symbolic and fixed dims."""
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True))
    dims = st.one_of(st.sampled_from(("N", "S")), st.integers(1, 4))
    return tuple(Port(name, draw(st.sampled_from(ELEM_TYPES)),
                      draw(st.one_of(st.none(), st.lists(dims, max_size=4).map(tuple))), draw(st.booleans()))
                 for name in names)


@settings(max_examples=150, deadline=None, derandomize=True,  # the same graphs every run, as the fuzz tests
          suppress_health_check=[HealthCheck.too_slow])
@given(ports=_ports(), max_batch_size=st.sampled_from((0, 2)))
def test_generated_graphs_build_clean_or_are_refused(ports: tuple[Port, ...], max_batch_size: int) -> None:
    """Whatever the inputs' types and shapes, build refuses in one line per problem or writes a
    repository validate finds no error in."""
    check_build_invariant(passthrough_model(ports), max_batch_size)


def _identity_graph(in_shape: list[int | str], out_names: tuple[str, ...]) -> bytes:
    """x through Identity to each named output (a repeated name repeats the output), shapes as given."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], [name]) for name in dict.fromkeys(out_names)], "odd",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, in_shape) for name in out_names])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


@pytest.mark.parametrize("max_batch_size", (0, 4))
@pytest.mark.parametrize(("shape", "outputs"), [
    (["N", 0], ("y",)),  # a zero-size dim: Triton's dims are >= 1 or -1
    ([0, 3], ("y",)),
    (["N", -5], ("y",)),  # a negative dim_value (not valid ONNX, but written by hand-edited graphs)
    (["N", 3], ("",)),  # an output without a name
    (["N", 3], ("y", "y")),  # one output listed twice
], ids=["zero", "zero-first", "negative", "unnamed", "duplicate"])
def test_odd_dims_and_names_are_refused_not_built(shape: list[int | str], outputs: tuple[str, ...],
                                                  max_batch_size: int) -> None:
    """Review mends: each of these built a config.pbtxt validate (and Triton) refuses."""
    assert check_build_invariant(_identity_graph(shape, outputs), max_batch_size) == "refused"
