"""Scalars and batch-only tensors: how build writes them, what the spec and `validate` accept, and the
reasons they give for any other mapping; types and values Triton cannot carry are refused at build."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from onnx import TensorProto, helper

from tests.models import batch_only_model, scalar_model, string_to_bf16_model, unranked_model
from tests.repository.spec_helpers import refused
from triton_ge_console.repository.build import build_repository
from triton_ge_console.repository.spec.load import load_spec
from triton_ge_console.repository.validate import validate_path


def _spec(folder: Path, models: str, **sources: bytes) -> Path:
    """A spec file beside its ONNX sources."""
    for name, data in sources.items():
        (folder / f"{name}.onnx").write_bytes(data)
    path = folder / "deploy.yaml"
    path.write_text("name: t\nmodels:\n" + textwrap.indent(textwrap.dedent(models), "  "), encoding="utf-8")
    return path


def _errors(repo: Path) -> list[str]:
    """validate's errors for a repository, the folder shortened to repo."""
    return [str(p).replace(str(repo), "repo") for p in validate_path(repo).errors]


def test_scalar_is_built_as_dims_1_without_reshape_and_validates(tmp_path: Path) -> None:
    """A scalar input and output (ONNX []) of a non-batching model: dims [1], nothing else, no error."""
    spec = _spec(tmp_path, "- {name: m, backend: ge, source: s.onnx}\n", s=scalar_model())
    build_repository(load_spec(spec), tmp_path / "repo")
    config = (tmp_path / "repo" / "m" / "config.pbtxt").read_text(encoding="utf-8")
    assert 'name: "sr"\n  data_type: TYPE_INT64\n  dims: [1]\n}' in config
    assert 'name: "total"\n  data_type: TYPE_FP32\n  dims: [1]\n}' in config
    assert "reshape" not in config
    assert _errors(tmp_path / "repo") == []


def test_batch_only_tensor_is_built_as_dims_1_reshaped_to_none(tmp_path: Path) -> None:
    """A batching model's [N] tensor: dims [1] with an empty reshape, which Triton applies; no error."""
    spec = _spec(tmp_path, "- {name: m, backend: ge, source: b.onnx, max_batch_size: 4}\n",
                 b=batch_only_model())
    build_repository(load_spec(spec), tmp_path / "repo")
    config = (tmp_path / "repo" / "m" / "config.pbtxt").read_text(encoding="utf-8")
    assert 'name: "score"\n  data_type: TYPE_FP32\n  dims: [1]\n  reshape {\n  }\n}' in config
    assert _errors(tmp_path / "repo") == []


def test_spec_accepts_dims_1_for_a_scalar_and_explains_any_other(tmp_path: Path) -> None:
    """Declaring the scalar as [1] builds; declaring it [] is refused with how scalars are served."""
    good = _spec(tmp_path, """\
        - name: m
          backend: ge
          source: s.onnx
          inputs: [{name: x, data_type: FP32, dims: [-1]}, {name: sr, data_type: INT64, dims: [1]}]
        """, s=scalar_model())
    assert load_spec(good).models[0].inputs[1].dims == (1,)
    bad = _spec(tmp_path, """\
        - name: m
          backend: ge
          source: s.onnx
          inputs: [{name: x, data_type: FP32, dims: [-1]}, {name: sr, data_type: INT64, dims: []}]
        """)
    assert refused(bad) == [
        "deploy.yaml:6:89 models[0].inputs[1].dims: has 0 dims [] but the ONNX graph has 1: [1] (batch dim "
        "excluded when max_batch_size > 0); 'sr' is a scalar in the ONNX (shape []): Triton has no scalar "
        "tensors, so it is served as dims [1] (no reshape) and the ge glue hands the model a scalar"]


def test_batching_a_model_with_a_scalar_is_refused_with_the_reason(tmp_path: Path) -> None:
    """A scalar has no batch dim to batch along: max_batch_size > 0 is refused, naming the tensor."""
    spec = _spec(tmp_path, "- {name: m, backend: ge, source: s.onnx, max_batch_size: 8}\n", s=scalar_model())
    assert refused(spec) == [
        "deploy.yaml:3:60 models[0].max_batch_size: is 8 but ONNX input 'sr' is a scalar (shape []), with no "
        "variable batch dim for Triton to batch along; use max_batch_size: 0"]


CONFIG = """\
name: "{name}"
backend: "ge"
max_batch_size: {batch}
input [{{ name: "{input}" data_type: {type} dims: [1] {reshape} }}]
"""


@pytest.mark.parametrize(("source", "batch", "reshape", "expected"), [
    (scalar_model, 0, "reshape { shape: [] }",
     "repo/m/config.pbtxt:4:50 input[0].dims: input 'sr' dims [1] reshaped to []: not how "
     "repo/m/1/model.onnx is served: 'sr' is a scalar in the ONNX (shape []): Triton has no scalar tensors, "
     "so it is served as dims [1] (no reshape) and the ge glue hands the model a scalar"),
    (batch_only_model, 4, "reshape { shape: [1] }",
     "repo/m/config.pbtxt:4:52 input[0].dims: input 'score' dims [1] reshaped to [1]: not how "
     "repo/m/1/model.onnx is served: 'score' is the batch alone in the ONNX (shape [N]): it is served as "
     "dims [1] with reshape { shape: [] }, which Triton applies itself (or dims [1] alone: the ge glue "
     "squeezes it)"),
], ids=("scalar-reshaped", "batch-only-reshaped-to-1"))
def test_validate_explains_the_one_mapping_it_accepts(
    tmp_path: Path, source: object, batch: int, reshape: str, expected: str
) -> None:
    """A hand-written config mapping a scalar or batch-only tensor another way: the error says how it is
    served (besides Triton's own refusal of an empty reshape without batching)."""
    folder = tmp_path / "repo" / "m"
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.onnx").write_bytes(source())  # type: ignore[operator]
    name = "sr" if source is scalar_model else "score"
    data_type = "TYPE_INT64" if source is scalar_model else "TYPE_FP32"
    (folder / "config.pbtxt").write_text(CONFIG.format(name="m", batch=batch, input=name, type=data_type,
                                                       reshape=reshape), encoding="utf-8")
    assert expected in _errors(tmp_path / "repo")


def test_an_input_with_a_default_is_optional_when_declared_and_hidden_otherwise(tmp_path: Path) -> None:
    """unranked's scale has an initializer: left out of the spec it is not served (the default applies);
    declared, it is an optional input; with batching, declaring it is refused with the reason."""
    hidden = _spec(tmp_path, "- {name: m, backend: ge, source: u.onnx}\n", u=unranked_model())
    assert [t.name for t in load_spec(hidden).models[0].inputs] == ["x"]
    declared = _spec(tmp_path, """\
        - name: m
          backend: ge
          source: u.onnx
          inputs: [{name: x, data_type: FP32, dims: [2, -1]}, {name: scale, data_type: FP32, dims: [1]}]
        """)
    build_repository(load_spec(declared), tmp_path / "repo")
    config = (tmp_path / "repo" / "m" / "config.pbtxt").read_text(encoding="utf-8")
    assert 'name: "scale"\n  data_type: TYPE_FP32\n  dims: [1]\n  optional: true\n}' in config
    assert _errors(tmp_path / "repo") == []
    graph = helper.make_graph(  # x [N, 3] · scale, scale an input with an initializer
        [helper.make_node("Mul", ["x", "scale"], ["y"])], "scaled",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3]),
         helper.make_tensor_value_info("scale", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor("scale", TensorProto.FLOAT, [], [2.0])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    batched = _spec(tmp_path, """\
        - name: m
          backend: ge
          source: s.onnx
          max_batch_size: 4
          inputs: [{name: x, data_type: FP32, dims: [3]}, {name: scale, data_type: FP32, dims: [1]}]
        """, s=model)
    assert refused(batched) == [
        "deploy.yaml:7:60 models[0].inputs[1].name: 'scale' has a default in the ONNX (an initializer): "
        "requests may override it only without batching (max_batch_size: 0); leave it out to serve the "
        "default"]
    folder = tmp_path / "hand" / "m"  # a hand-written config doing so: validate says what the glue says
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.onnx").write_bytes(model)
    (folder / "config.pbtxt").write_text(
        'name: "m"\nbackend: "ge"\nmax_batch_size: 4\ninput [{ name: "x" data_type: TYPE_FP32 dims: [3] }, '
        '{ name: "scale" data_type: TYPE_FP32 dims: [1] }]\n'
        'output [{ name: "y" data_type: TYPE_FP32 dims: [3] }]\n', encoding="utf-8")
    assert _errors(tmp_path / "hand") == [
        "repo/m/config.pbtxt:4:56 input[1].name: input scale: a default of repo/m/1/model.onnx (an "
        "initializer) can be overridden only without batching (max_batch_size: 0)"]


def _typed_model(elem_type: int) -> bytes:
    """x of one element type, passed through."""
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "typed",
                              [helper.make_tensor_value_info("x", elem_type, ["N"])],
                              [helper.make_tensor_value_info("y", elem_type, ["N"])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _opset_model(opset: int, domain: str = "") -> bytes:
    """x FLOAT [N] through Relu, stamped with an old opset; or with the training domain imported (unused)."""
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "old",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N"])])
    imports = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    return helper.make_model(graph, opset_imports=imports).SerializeToString()


def _training_model() -> bytes:
    """A Gradient node (ai.onnx.preview.training): a training graph."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["c"]),
         helper.make_node("Gradient", ["a", "b"], ["da", "db"], domain="ai.onnx.preview.training",
                          xs=["a", "b"], y="c")], "training",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ("a", "b")],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ("da", "db")])
    imports = [helper.make_opsetid("", 12), helper.make_opsetid("ai.onnx.preview.training", 1)]
    return helper.make_model(graph, opset_imports=imports).SerializeToString()


def test_an_unused_training_import_and_a_current_opset_build(tmp_path: Path) -> None:
    """Exporters import domains they never use (ddddocr's model imports the training one): only a node
    from it makes a training graph."""
    spec = _spec(tmp_path, "- {name: m, backend: ge, source: m.onnx}\n",
                 m=_opset_model(13, "ai.onnx.preview.training"))
    assert load_spec(spec).models[0].inputs[0].name == "x"


def _sequence_model() -> bytes:
    """x FP32 [N] → a sequence of tensors (not a tensor at all)."""
    graph = helper.make_graph(
        [helper.make_node("SequenceConstruct", ["x"], ["seq"])], "seq",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"])],
        [helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, ["N"])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


@pytest.mark.parametrize(("model", "reason"), [
    (_typed_model(TensorProto.COMPLEX64),
     "'x': ONNX element type COMPLEX64 has no Triton data type; cast it in the graph to one Triton carries "
     "(e.g. FLOAT, INT64)"),
    (_sequence_model(),
     "'seq' is a sequence, not a tensor: Triton carries only tensors; return tensors from the graph"),
    (_opset_model(6),
     "ONNX opset 6: ONNX Runtime, which runs the model without an NPU, guarantees opset 7 and later only; "
     "convert it first (onnx.version_converter.convert_version(model, 17))"),
    (_training_model(),
     "uses ai.onnx.preview.training operators (a training graph): inference runtimes do not run them; "
     "export the inference graph"),
    (string_to_bf16_model(),
     "input 's' is STRING and output 'n' BF16: ONNX Runtime, which runs the model without an NPU, hands a "
     "BF16 output back only from a run whose inputs are all OrtValues, and an OrtValue holds no strings; "
     "cast 'n' to FLOAT in the graph"),
], ids=("complex64", "sequence", "opset6", "training", "string-and-bf16"))
def test_what_triton_cannot_carry_is_refused_at_build_in_one_line(
    tmp_path: Path, model: bytes, reason: str
) -> None:
    """build never writes a config the glue or Triton would refuse: the spec is refused, saying why."""
    spec = _spec(tmp_path, "- {name: m, backend: ge, source: m.onnx}\n", m=model)
    assert refused(spec) == [f"deploy.yaml:3:36 models[0].source: {reason}"]
