"""The build invariant's parts: every ONNX the suite has or makes, graphs generated from a description, and
the one check (refused in one line per problem, or built and validated without an error)."""

from __future__ import annotations

import functools
import tempfile
from dataclasses import dataclass
from pathlib import Path

import onnx
from onnx import TensorProto, helper

from tests import models as glue_models
from triton_ge_console.repository import demo_models
from triton_ge_console.repository.build import build_repository
from triton_ge_console.repository.spec.load import SpecError, parse_spec
from triton_ge_console.repository.validate import validate_path

# ONNX files made by others that the `onnx` wheel (a dependency) ships: real architectures and converted
# operator tests (149 in onnx 1.17+), read where they are installed
SHIPPED_DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"
SHIPPED = tuple(sorted(SHIPPED_DATA.rglob("*.onnx")))
MADE = {  # the models the suite makes itself
    "dense": glue_models.dense_model, "mixed": glue_models.mixed_model, "token": glue_models.token_model,
    "nonzero": glue_models.nonzero_model, "scalar": glue_models.scalar_model,
    "batch_only": glue_models.batch_only_model, "types": glue_models.types_model,
    "unranked": glue_models.unranked_model, "bf16": glue_models.bf16_model,
    **{name.removeprefix("demo:"): functools.partial(demo_models.demo_bytes, name)
       for name in demo_models.demo_names()},
}


@dataclass(frozen=True)
class Port:
    """One graph input, passed through to an output of the same type (its shape kept, or left out)."""

    name: str
    elem_type: int
    shape: tuple[int | str, ...] | None  # None: no shape at all (unknown rank)
    output_shaped: bool


def passthrough_model(ports: tuple[Port, ...]) -> bytes:
    """A graph whose outputs are Identity copies of its inputs, shapes as described (not checked: the
    checker wants shapes exporters leave out)."""
    graph = helper.make_graph(
        [helper.make_node("Identity", [p.name], [f"{p.name}_out"]) for p in ports], "generated",
        [helper.make_tensor_value_info(p.name, p.elem_type, p.shape) for p in ports],
        [helper.make_tensor_value_info(f"{p.name}_out", p.elem_type, p.shape if p.output_shaped else None)
         for p in ports])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def check_build_invariant(source: Path | bytes, max_batch_size: int) -> str:
    """Build one model from source with max_batch_size: 'refused' (every problem one line, naming a field)
    or 'built' (and validate finds no error); anything else fails."""
    with tempfile.TemporaryDirectory(prefix="ge-invariant-") as folder:
        root = Path(folder)
        if isinstance(source, bytes):
            (root / "model.onnx").write_bytes(source)
            source = root / "model.onnx"
        text = (f"name: t\nmodels:\n  - {{name: m, backend: ge, source: '{source}', "
                f"max_batch_size: {max_batch_size}}}\n")
        try:
            spec = parse_spec(text, base_dir=root)
        except SpecError as exc:
            for problem in exc.problems:
                assert "\n" not in str(problem) and problem.message, str(problem)
            return "refused"
        build_repository(spec, root / "repo")
        errors = validate_path(root / "repo").errors
        assert errors == (), (source, max_batch_size, [str(e) for e in errors])
        return "built"


ELEM_TYPES = (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.INT8, TensorProto.INT32,
              TensorProto.INT64, TensorProto.UINT8, TensorProto.UINT16, TensorProto.BOOL, TensorProto.STRING,
              TensorProto.BFLOAT16, TensorProto.COMPLEX64, TensorProto.FLOAT8E4M3FN)
NAMES = ("x", "input.1", "encoder/ids", "ids:0", "sr", "state")  # dots, slashes, colons: as exporters write
