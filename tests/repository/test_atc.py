"""ONNX → OM: ATC's argument rules (checked before ATC runs), the command line, and real runs of the
`atc` executable — here the fake in tests/fakes, which mirrors the real CLI (no CANN toolkit on this box)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from triton_ge_console.repository import atc
from triton_ge_console.repository.atc import AtcArgumentError, AtcRequest

FAKES = Path(__file__).resolve().parent.parent / "fakes"


@pytest.fixture
def fake_atc_on_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """PATH with the fake atc first; returns the file it logs its argument lists to."""
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    log = tmp_path / "atc-calls.jsonl"
    monkeypatch.setenv("FAKE_ATC_LOG", str(log))
    return log


def _onnx(path: Path, op: str = "Relu", domain: str = "") -> Path:
    """A one-node ONNX model x[N,4] → y[N,4]; a non-standard domain makes an op no NPU kernel knows."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
    node = helper.make_node(op, ["x"], ["y"], name=f"{op.lower()}0", domain=domain)
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    onnx.save(helper.make_model(helper.make_graph([node], "g", [x], [y]), opset_imports=opsets), path)
    return path


def test_input_shape_parses_names_dims_and_dynamic_axes() -> None:
    """name:d,d;name2:d,d — names may contain ':', ranges count as dynamic."""
    assert atc.parse_input_shape("input_ids:-1,128;ns:mask:1, 128;") == [
        ("input_ids", [-1, 128]),
        ("ns:mask", [1, 128]),
    ]
    assert atc.parse_input_shape("x:1~8,3") == [("x", [-1, 3])]


@pytest.mark.parametrize(
    ("shape", "code", "reason"),
    [
        ("x", "E10002", 'size not equal to 2 split by ":"'),
        ("x:", "E10002", "can not be empty"),
        ("x:1.5,2", "E10002", "exist float number"),
        ("x:a,2", "E10002", "is not digit"),
        ("x:0,2", "E10011", "The error value in the shape is 0"),
    ],
)
def test_bad_input_shapes(shape: str, code: str, reason: str) -> None:
    """Each malformed --input_shape gets ATC's code and reason."""
    with pytest.raises(AtcArgumentError, match=rf"^{code}: .*{reason}") as caught:
        atc.parse_input_shape(shape)
    assert f"Value {shape} for parameter --input_shape is invalid" in str(caught.value)


def test_dynamic_batch_size_gears() -> None:
    """2 to 100 distinct gears, each within [1, 2048]."""
    assert atc.parse_dynamic_batch_size("1, 2,4,8") == [1, 2, 4, 8]
    assert atc.parse_dynamic_batch_size(",".join(str(i) for i in range(1, 101)))[-1] == 100
    cases = {
        "8": "E10035: .* has 1 profiles, which is less than the minimum 2",
        ",".join(
            str(i) for i in range(1, 102)
        ): "E10036: .* has 101 profiles, which is greater than the maximum 100",
        "1,4096": r"E10001: Value 4096 for parameter --dynamic_batch_size is invalid. .*\[1, 2048\]",
        "0,2": r"E10001: Value 0 for parameter --dynamic_batch_size",
        "1,2,2": "E10039: .* duplicate profiles",
        "1;2": r"E10001: Value 1;2 for parameter --dynamic_batch_size is invalid",
    }
    for text, message in cases.items():
        with pytest.raises(AtcArgumentError, match=message):
            atc.parse_dynamic_batch_size(text)


def test_dynamic_batch_needs_minus_one_on_the_batch_axis_only() -> None:
    """At least one input's N is -1 (E10031), and no other axis is -1 (E10018)."""
    base = AtcRequest(Path("m.onnx"), "Ascend310P3", Path("out"), dynamic_batch_size="1,2,4,8")
    assert atc.check_request(AtcRequest(**{**base.__dict__, "input_shape": "x:-1,4"})) == []
    (problem,) = atc.check_request(AtcRequest(**{**base.__dict__, "input_shape": "x:4,4"}))
    assert problem.startswith("E10031: --dynamic_batch_size is included, but none of the nodes")
    (problem,) = atc.check_request(AtcRequest(**{**base.__dict__, "input_shape": "x:-1,-1"}))
    assert problem.startswith("E10018: Value x:-1,-1 for shape 1 is invalid.")
    (problem,) = atc.check_request(base)
    assert problem == "E10004: Value for --input_shape is empty."


def test_request_checks_collect_every_problem() -> None:
    """Empty SoC, an input format ONNX does not take, bad gears: all reported at once."""
    request = AtcRequest(Path("m.onnx"), " ", Path("o"), "x:-1,4", "9999,1", "NHWC")
    problems = atc.check_request(request)
    assert [p.split(":")[0] for p in problems] == ["E10004", "E10001", "E10001"]


def test_command_line_and_output_names() -> None:
    """--framework=5 for ONNX; --output is the OM path without .om, which ATC appends."""
    request = AtcRequest(Path("m.onnx"), "Ascend910B1", Path("out/llama.om"), "x:-1,4", "1, 2", "ND")
    assert request.om_path == Path("out/llama.om")
    assert atc.atc_command(request, "atc") == [
        "atc", "--model=m.onnx", "--framework=5", "--output=out/llama", "--soc_version=Ascend910B1",
        "--input_shape=x:-1,4", "--dynamic_batch_size=1,2", "--input_format=ND",
    ]  # fmt: skip
    assert AtcRequest(Path("m.onnx"), "S", Path("out/llama")).om_path == Path("out/llama.om")


def test_run_writes_the_om_and_streams_atc_output(fake_atc_on_path: Path, tmp_path: Path) -> None:
    """A successful run: ATC's banners streamed line by line, the OM written where asked."""
    request = AtcRequest(
        _onnx(tmp_path / "m.onnx"), "Ascend310P3", tmp_path / "out" / "m", "x:-1,4", "1,2,4,8"
    )
    seen: list[str] = []
    executable = atc.find_atc()
    assert executable == str(FAKES / "atc")
    result = atc.run_atc(request, executable, on_line=seen.append)
    assert result.ok and result.error_lines == ()
    assert seen == [
        "ATC start working now, please wait for a moment.",
        "ATC run success, welcome to the next use.",
    ]
    assert (tmp_path / "out" / "m.om").read_bytes().startswith(b"IMOD")
    (call,) = [json.loads(line) for line in fake_atc_on_path.read_text().splitlines()]
    assert call == atc.atc_command(request, executable)[1:]


def test_run_surfaces_atc_error_lines(fake_atc_on_path: Path, tmp_path: Path) -> None:
    """An operator without an NPU kernel: ATC fails with EZ3003, whose cause and solution lines are kept."""
    request = AtcRequest(_onnx(tmp_path / "m.onnx", "Magic", "custom.ops"), "Ascend310P3", tmp_path / "m")
    result = atc.run_atc(request, str(FAKES / "atc"))
    assert not result.ok and result.returncode == 255
    assert result.error_lines[0].startswith("ATC run failed")
    assert (
        result.error_lines[1]
        == "EZ3003: No supported Ops kernel and engine are found for [magic0], optype [Magic]."
    )
    assert any("Possible Cause" in line for line in result.error_lines[2:])
    assert not request.om_path.exists()


def test_atc_is_not_found_without_the_toolkit(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No CANN environment: no atc, and the help says how to get it and what still works."""
    monkeypatch.setenv("PATH", str(tmp_path))
    assert atc.find_atc() is None
    assert "source /usr/local/Ascend/ascend-toolkit/set_env.sh" in atc.ATC_MISSING
    assert "CPU emulation" in atc.ATC_MISSING


def test_model_checks_before_atc(tmp_path: Path) -> None:
    """The ONNX must load (E10041) and --input_shape must name its inputs (E10016), as ATC itself checks."""
    model = _onnx(tmp_path / "m.onnx")
    assert atc.check_model(AtcRequest(model, "Ascend310P3", tmp_path / "o", "x:-1,4")) == []
    (problem,) = atc.check_model(AtcRequest(model, "Ascend310P3", tmp_path / "o", "pixels:-1,4"))
    assert problem.startswith("E10016: Opname pixels specified in --input_shape is not found in the model.")
    assert problem.endswith("(The model's inputs: x)")
    (tmp_path / "bad.onnx").write_bytes(b"not onnx")
    assert atc.check_model(AtcRequest(tmp_path / "bad.onnx", "S", tmp_path / "o")) == [
        f"E10041: Failed to load the model from {tmp_path / 'bad.onnx'}."
    ]


def test_fake_atc_rejects_unknown_input_names_like_atc(fake_atc_on_path: Path, tmp_path: Path) -> None:
    """Run directly (our pre-check bypassed), ATC names the unknown input with E10016."""
    request = AtcRequest(_onnx(tmp_path / "m.onnx"), "Ascend310P3", tmp_path / "m", "pixels:1,4")
    result = atc.run_atc(request, str(FAKES / "atc"))
    assert result.returncode == 255
    assert result.error_lines[1].startswith("E10016: Opname pixels specified in --input_shape")
