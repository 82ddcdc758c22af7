"""Whether Triton may batch a model: the batch dim followed through the graph (batch_axis), and where the
graph cannot tell, the model run on the CPU with two samples joined against each alone."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest

from tests.models import (
    CROSS_BATCH_OPS,
    across_batch_model,
    batch_at_model,
    dense_model,
    image_model,
    one_node_model,
    save_external,
    set_external_location,
    time_major_model,
    token_model,
    types_model,
)
from triton_ge_console.model_files import batch_axis, batch_probe
from triton_ge_console.repository import demo_models


def _check(model: bytes) -> batch_axis.Batching:
    """The verdict for a model served with max_batch_size 4."""
    return batch_axis.check_batching(onnx.load_from_string(model), model, 4)


@pytest.mark.parametrize("source", ("demo:llama", "demo:bert", "demo:llama_kv"))
def test_the_demo_models_batch_along_dim_0_by_their_graph_alone(source: str) -> None:
    """The demos keep their samples apart, and the graph says so without running them (build stays fast)."""
    assert batch_axis.graph_verdict(demo_models.demo_proto(source)) == batch_axis.Verdict()


@pytest.mark.parametrize("make", (dense_model, token_model, types_model, image_model,
                                  lambda: batch_at_model(0)))
def test_models_that_batch_along_dim_0_pass(make: object) -> None:
    """The suite's batching test models pass by the graph alone."""
    model = make()  # type: ignore[operator]
    assert batch_axis.graph_verdict(onnx.load_from_string(model)) == batch_axis.Verdict()
    assert batch_probe.probe(model) == batch_probe.Probe()  # and running them agrees


@pytest.mark.parametrize("position", (1, 2))
def test_an_output_with_the_batch_elsewhere_than_dim_0_is_refused(position: int) -> None:
    """y [S, N, 3] or [S, 3, N]: named, with the dim, and what to do."""
    (problem,) = _check(batch_at_model(position)).problems
    dims = ["S", "3"]
    dims.insert(position, "batch")
    assert f"output 'y' [{', '.join(dims)}]" in problem
    assert f"carries the batch in dim {position}, not dim 0" in problem
    assert "max_batch_size: 0" in problem and "re-export" in problem


def test_time_major_outputs_of_a_recurrent_model_are_refused() -> None:
    """The issue's recurrent model: logits and probs [time, batch, 4] are each refused."""
    problems = _check(time_major_model()).problems
    assert [p.split("model: ")[1].split(" carries")[0] for p in problems] == [
        "output 'logits' [time, batch, 4]", "output 'probs' [time, batch, 4]"]


@pytest.mark.parametrize("op", CROSS_BATCH_OPS)
def test_an_op_across_the_batch_is_refused(op: str) -> None:
    """Each op mixing samples along the batch is refused, by the graph or by running the model."""
    (problem,) = _check(across_batch_model(op)).problems
    assert problem.startswith("is 4 but Triton cannot batch this model: output 'y'")
    assert "max_batch_size: 0" in problem


def test_the_graph_names_the_node_and_why() -> None:
    """The batch mean: the ReduceMean is named, over dim 0."""
    (problem,) = _check(across_batch_model("batch_mean")).problems
    assert "output 'y' mixes the requests Triton joins: node 'm' (ReduceMean) works across dim 0" in problem


def test_values_sized_by_the_batch_are_followed_along_it() -> None:
    """A tensor without any sample's values but sized by the batch: where its rows may differ (ones shaped
    like x summed along the batch: each sample times its place) the graph names the op across the batch;
    where every row is alike (ConstantOfShape, Expand) the samples stay apart, by the graph alone."""
    (problem,) = _check(across_batch_model("batch_position")).problems
    assert "node 'position' (CumSum) works across dim 0, the batch" in problem
    for alike in ("row_expanded", "zeros_like"):
        model = across_batch_model(alike)
        assert batch_axis.graph_verdict(onnx.load_from_string(model)) == batch_axis.Verdict()
        assert batch_probe.probe(model) == batch_probe.Probe()


def test_a_reshape_moving_the_batch_is_named() -> None:
    """[N, 4] to [4, -1]: the -1 is the batch, now behind 4 values of other samples."""
    (problem,) = _check(across_batch_model("reshape_interleave")).problems
    assert "node 'r' (Reshape) reshapes dim 0, the batch, into dim 1, interleaving the samples" in problem


def test_where_the_graph_cannot_tell_the_model_is_run() -> None:
    """An Einsum (an op the graph check does not follow): the model is run, and the mixing found so."""
    (problem,) = _check(across_batch_model("einsum_batch")).problems
    assert "a request joined with another answers differently than alone" in problem
    assert "its answer changes with the request beside it" in problem
    assert "run on the CPU, a random sample alone and joined with others, as node 'y' (Einsum)" in problem


def test_a_run_names_an_answer_that_follows_the_number_joined_without_calling_it_mixed() -> None:
    """Each sample times the batch's size: no partner changes its answer, how many are joined does; the
    run says that, and not that samples are mixed (they are not)."""
    (problem,) = _check(across_batch_model("times_batch_size")).problems
    assert "its answer changes with the number of requests joined" in problem
    assert "mixed" not in problem and "beside it" not in problem


def test_a_run_names_an_answer_that_follows_its_place_in_the_batch() -> None:
    """A constant table's row at the sample's place (the table sliced to the batch's size): whoever the
    partner, the answer changes with where the request sits among those joined; the run says that, and
    not that samples are mixed (they are not)."""
    (problem,) = _check(across_batch_model("table_rows")).problems
    assert "its answer changes with its place among the requests joined" in problem
    assert "mixed" not in problem and "beside it" not in problem


def test_a_run_names_an_output_whose_dim_0_is_not_the_batch() -> None:
    """Run directly (the graph would say it first): [S, N, 3] joined is [S, 2, 3], shapes named."""
    (problem,) = batch_probe.probe(batch_at_model(1)).problems
    assert problem == ("output 'y': two requests joined answer shape [32, 2, 3], one alone [32, 1, 3]: "
                       "dim 0 is not the batch")


def test_a_model_over_the_size_limit_is_not_run_and_says_so(tmp_path: Path) -> None:
    """The probe is bounded by the model's size (external data included) and says why it was skipped."""
    path = save_external(tmp_path / "ext.onnx")  # 4 × 256 KiB of weights
    skipped = batch_probe.probe(path, limit=512 << 10)
    assert skipped.skipped is not None and "1.0 MiB, over the 0.5 MiB this check runs" in skipped.skipped
    assert batch_probe.probe(path) == batch_probe.Probe()  # under the limit it runs: samples stay apart


def test_a_model_that_does_not_run_on_random_inputs_is_not_checked_and_says_so() -> None:
    """The check cannot be made: said, never taken as passed."""
    found = batch_probe.probe(b"not an onnx")
    assert found.skipped is not None and found.skipped.startswith("the model did not run on random inputs")


def test_an_op_of_another_domain_is_not_taken_for_the_standard_one() -> None:
    """Another domain's 'Add' may do anything: the graph cannot tell, so the model must be run."""
    node = onnx.helper.make_node("Add", ["x", "x"], ["y"], domain="com.example")
    model = one_node_model(node, domain="com.example")
    verdict = batch_axis.graph_verdict(model)
    assert verdict.problems == () and "an op of domain com.example" in (verdict.unsure or "")


@pytest.mark.parametrize(("opset", "axis", "mixes"), ((11, None, False), (11, 0, True), (13, 0, True),
                                                      (13, None, False)))
def test_softmax_follows_its_opset(opset: int, axis: int | None, mixes: bool) -> None:
    """Softmax's default axis is 1 (and every dim after it) before opset 13, -1 from 13: never the batch."""
    attrs = {} if axis is None else {"axis": axis}
    node = onnx.helper.make_node("Softmax", ["x"], ["y"], **attrs)
    verdict = batch_axis.graph_verdict(one_node_model(node, opset))
    assert bool(verdict.problems) is mixes


@pytest.mark.parametrize(("noop", "mixes"), ((1, False), (0, True)))
def test_a_reduction_without_axes_follows_noop_with_empty_axes(noop: int, mixes: bool) -> None:
    """ReduceSum (opset 18) given no axes reduces every dim, the batch among them, unless
    noop_with_empty_axes makes it the identity (ONNX's operator spec), which keeps the samples apart."""
    node = onnx.helper.make_node("ReduceSum", ["x"], ["y"], noop_with_empty_axes=noop)
    verdict = batch_axis.graph_verdict(one_node_model(node, 18))
    assert bool(verdict.problems) is mixes


def test_a_model_whose_external_data_has_problems_is_not_run(tmp_path: Path) -> None:
    """Its data file is not loaded by the check: the problem is said where external data is checked."""
    path = save_external(tmp_path / "ext.onnx")
    set_external_location(path, "missing.data")
    found = batch_probe.probe(path)
    assert found.skipped is not None and found.skipped.startswith("its external data has problems")
