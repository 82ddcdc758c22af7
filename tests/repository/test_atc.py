"""ONNX → OM: ATC's argument rules (checked before ATC runs), the command line, and real runs of the
`atc` executable — here the fake in tests/fakes, which mirrors the real CLI (no CANN toolkit on this box)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from pathlib import Path

import pytest

from tests.fakes import om_layout
from tests.models import write_one_node
from triton_ge_console.model_files import om_file
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


def test_input_shape_parses_names_dims_scalars_and_dynamic_axes() -> None:
    """name:d,d;name2:d,d — names may contain ':', ranges count as dynamic, `name:` is a scalar."""
    assert atc.parse_input_shape("input_ids:-1,128;ns:mask:1, 128;temperature:") == [
        ("input_ids", [-1, 128]),
        ("ns:mask", [1, 128]),
        ("temperature", []),
    ]
    assert atc.parse_input_shape("x:1~8,3") == [("x", [-1, 3])]


@pytest.mark.parametrize(
    ("shape", "code", "reason"),
    [
        ("x", "E10002", "The shape must contain two parts: name and value"),
        ("x:1,4;", "E10002", "The shape must contain two parts: name and value"),  # a trailing ;
        ("x:1.5,2", "E10002", "The float number is unsupported"),
        ("x:a,2", "E10002", "It is not a digit"),
        ("x:0,2", "E10011", "The error value in the shape is 0"),
    ],
)
def test_bad_input_shapes(shape: str, code: str, reason: str) -> None:
    """Each malformed --input_shape gets ATC's code and reason (option_utils.cc ParseInputShape)."""
    with pytest.raises(AtcArgumentError, match=rf"^{code}: .*{reason}") as caught:
        atc.parse_input_shape(shape)
    assert "for parameter --input_shape is invalid" in str(caught.value)


def test_dynamic_batch_size_gears() -> None:
    """Digits and commas only, at least 2 distinct gears, none below 0: ATC's CheckDynamicParams
    (hicann/ge multi_batch_options.cc) sets no maximum on their number or size, and E10038 is for a dim
    below 0 only (0 passes it)."""
    assert atc.parse_dynamic_batch_size("1,2,4,8,") == [1, 2, 4, 8]
    assert atc.parse_dynamic_batch_size("1,4096") == [1, 4096]
    assert atc.parse_dynamic_batch_size(",".join(str(i) for i in range(1, 201)))[-1] == 200
    assert atc.parse_dynamic_batch_size("0,2") == [0, 2]
    cases = {
        "8": "E10035: .* has 1 profiles, which is less than the minimum 2",
        "1,2,2": "E10039: .* has duplicate profiles",
        "1;2": 'E10003: Value 1;2 for parameter --dynamic_batch_size is invalid. Reason: It can only contain '
               'digits and ","',
        "1, 2": "E10003: Value 1, 2 for parameter --dynamic_batch_size",
        "-1,2": "E10003: Value -1,2 for parameter --dynamic_batch_size",
    }
    for text, message in cases.items():
        with pytest.raises(AtcArgumentError, match=message):
            atc.parse_dynamic_batch_size(text)


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("op_select_implmode", "enable_float_32_execution", None),
        ("op_select_implmode", "enable_hi_float_32_execution", None),
        ("op_select_implmode", "fast", "E10001: Value fast for parameter --op_select_implmode is invalid. "
                                       "Reason: The value must be high_performance, high_precision, "
                                       "high_precision_for_all, high_performance_for_all."),
        ("log", "default", None),
        ("output_type", "HIF4", None),
        ("output_type", "BF16", "E10001: Value BF16 for parameter --output_type is invalid. Reason: The "
                                "value must be FP32, FP16, UINT8, INT8. A node can only have one type."),
        ("output_type", "logits:0:FP16", "E10001: Value logits:0 for parameter --output_type is invalid. "
                                         "Reason: In the mode of specified node"),
        ("output_type", "logits:FP16", "E10001: Value logits:FP16 for parameter --output_type is invalid. "
                                       'Reason: The parameter is invalid. Valid format "opname:index:'
                                       'dtype".'),
    ],
)
def test_option_values_as_atc_checks_them(field: str, value: str, problem: str | None) -> None:
    """op_select_implmode (CheckImplmodeParamValid), log (CheckLogParamValidAndSetLogLevel), output_type
    (omg.cc ParseOutputType: per output node:index:type, each node:index also in --out_nodes)."""
    request = AtcRequest(Path("m.onnx"), "Ascend910B3", Path("m"), **{field: value})
    problems = atc.check_request(request)
    assert problems == [] if problem is None else problems[0].startswith(problem), problems
    named = AtcRequest(Path("m.onnx"), "Ascend910B3", Path("m"), output_type="logits:0:FP16;h:1:FP32",
                       out_nodes="logits:0;h:1")
    assert atc.check_request(named) == []


def test_dynamic_batch_needs_minus_one_on_the_batch_axis_only() -> None:
    """At least one input's N is -1 (E10031), and no other axis is -1 (E10018)."""
    base = AtcRequest(Path("m.onnx"), "Ascend310P3", Path("out"), dynamic_batch_size="1,2,4,8")
    assert atc.check_request(AtcRequest(**{**base.__dict__, "input_shape": "x:-1,4"})) == []
    assert atc.check_request(AtcRequest(**{**base.__dict__, "input_shape": "x:-1,4;scale:"})) == []
    (problem,) = atc.check_request(AtcRequest(**{**base.__dict__, "input_shape": "x:4,4"}))
    assert problem.startswith("E10031: --dynamic_batch_size is included, but none of the nodes")
    (problem,) = atc.check_request(AtcRequest(**{**base.__dict__, "input_shape": "x:-1,-1"}))
    assert problem.startswith("E10018: Value x:-1,-1 for shape 1 is invalid.")
    (problem,) = atc.check_request(base)
    assert problem == "E10004: Value for --input_shape is empty."
    (problem,) = atc.check_request(AtcRequest(**{**base.__dict__, "input_shape": "x:1~8,4"}))
    assert problem.startswith("E10040: As the --dynamic_batch_size, --dynamic_image_size, or --dynamic_dims")


def test_gear_options_exclude_each_other_and_dims_follow_the_minus_ones() -> None:
    """E10009 for two gear options; --dynamic_dims has one value per -1, --dynamic_image_size H,W pairs."""
    base = AtcRequest(Path("m.onnx"), "Ascend310P3", Path("out"), "ids:-1,-1")
    (problem,) = atc.check_request(AtcRequest(**{**base.__dict__, "dynamic_batch_size": "1,2",
                                                 "dynamic_dims": "1,8;2,8"}))
    assert problem.startswith("E10009: --dynamic_batch_size, --dynamic_image_size, --input_shape_range, and "
                              "--dynamic_dims are mutually exclusive.")
    assert atc.check_request(AtcRequest(**{**base.__dict__, "dynamic_dims": "1,8;2,16;"})) == []
    (problem,) = atc.check_request(AtcRequest(**{**base.__dict__, "dynamic_dims": "1,8;2"}))
    assert problem.startswith("E10003: Value 1,8;2 for parameter --dynamic_dims is invalid. Reason: Each "
                              "setting needs to be consistent with the number of -1 in the input shape.")
    image = AtcRequest(Path("m.onnx"), "S", Path("o"), "img:1,3,-1,-1", dynamic_image_size="224,224;448,448")
    assert atc.check_request(image) == []


def test_gears_ascendcl_cannot_describe_are_refused_in_its_words() -> None:
    """ATC builds any number of gears, but AscendCL describes at most 128 (acl_mdl.h ACL_MAX_BATCH_NUM,
    ACL_MAX_HW_NUM, ACL_MAX_DIM_CNT; hicann/ge model_om2.cpp) and a --dynamic_dims gear of at most 128 dims
    over all inputs: refused before ATC runs, in the plog's words (passed before)."""
    base = AtcRequest(Path("m.onnx"), "Ascend910B3", Path("out"), "ids:-1,-1")
    gears = ",".join(str(g) for g in range(1, 130))
    (problem,) = atc.check_request(AtcRequest(Path("m.onnx"), "Ascend910B3", Path("o"), "x:-1,4", gears))
    assert problem == ("--dynamic_batch_size: ATC builds it, but AscendCL refuses the OM at load: "
                       "aclmdlGetDynamicBatch: batch count[129] is larger than max batch num[128] "
                       "(ACL_ERROR_STORAGE_OVER_LIMIT, 300000)")
    most = gears.rsplit(",", 1)[0]
    assert atc.check_request(AtcRequest(Path("m.onnx"), "S", Path("o"), "x:-1,4", most)) == []
    dims = ";".join(f"{g},8" for g in range(1, 130))
    (problem,) = atc.check_request(AtcRequest(**{**base.__dict__, "dynamic_dims": dims}))
    assert "aclmdlGetInputDynamicGearCount: dimCnt[129] is larger than max[128]" in problem
    wide = ";".join(f"x{i}:1,-1" for i in range(65))  # 65 inputs of 2 dims: a gear of 130 dims
    (problem,) = atc.check_request(AtcRequest(Path("m.onnx"), "S", Path("o"), wide,
                                              dynamic_dims="1" + ",1" * 64 + ";" + "2" + ",2" * 64))
    assert problem.startswith("--input_shape: ATC builds it, but AscendCL refuses the OM at load: "
                              "aclmdlGetInputDynamicDims: current dynamic dims size 130 can not be larger "
                              "than 128")
    sizes = ";".join(f"{h},{h}" for h in range(1, 130))
    (problem,) = atc.check_request(AtcRequest(Path("m.onnx"), "S", Path("o"), "img:1,3,-1,-1",
                                              dynamic_image_size=sizes))
    assert "aclmdlGetDynamicHW: hw count[129] is larger than max[128]" in problem


def test_request_checks_collect_every_problem() -> None:
    """Empty SoC (E10054), options outside ATC's lists (E10001), bad gears: all reported at once."""
    request = AtcRequest(Path("m.onnx"), " ", Path("o"), "x:-1,4", "9999,1,1", "NHWC",
                         precision_mode="fp16", output_type="y:0:FP64", op_select_implmode="fast", log="all")
    problems = atc.check_request(request)
    assert [p.split(":")[0] for p in problems] == ["E10054", *["E10001"] * 5, "E10039"]
    assert problems[0].startswith("E10054: The required parameter --soc_version for ATC is empty.")
    assert "Valid values are: force_fp16, force_fp32," in problems[2]
    assert atc.DEFAULT_PRECISION_MODE == "force_fp16"


def test_command_line_and_output_names() -> None:
    """--framework=5 for ONNX; --output is the OM path without .om, which ATC appends; paths absolute."""
    request = AtcRequest(Path("m.onnx"), "Ascend910B1", Path("out/llama.om"), "x:-1,4", "1,2", "ND",
                         precision_mode="allow_fp32_to_fp16", output_type="FP16", out_nodes="head:0",
                         op_select_implmode="high_precision", log="error")
    assert request.om_path == Path("out/llama.om") and request.work_dir == Path("out/llama.atc")
    here = Path.cwd()
    assert atc.atc_command(request, "atc") == [
        "atc", f"--model={here / 'm.onnx'}", "--framework=5", f"--output={here / 'out/llama'}",
        "--soc_version=Ascend910B1", "--input_shape=x:-1,4", "--dynamic_batch_size=1,2", "--input_format=ND",
        "--precision_mode=allow_fp32_to_fp16", "--output_type=FP16", "--out_nodes=head:0",
        "--op_select_implmode=high_precision", "--log=error",
    ]  # fmt: skip
    assert AtcRequest(Path("m.onnx"), "S", Path("out/llama")).om_path == Path("out/llama.om")


def test_run_writes_the_om_and_streams_atc_output(fake_atc_on_path: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A successful run: ATC's banners streamed line by line, the OM written where asked, ATC's reports in
    its work folder and not in the caller's directory."""
    caller = tmp_path / "caller"
    caller.mkdir()
    monkeypatch.chdir(caller)
    request = AtcRequest(
        write_one_node(tmp_path / "m.onnx"), "Ascend310P3", tmp_path / "out" / "m", "x:-1,4", "1,2,4,8"
    )
    seen: list[str] = []
    executable = atc.find_atc()
    assert executable == str(FAKES / "atc")
    result = atc.run_atc(request, executable, on_line=seen.append)
    assert result.ok and result.error_lines == () and result.om_path == tmp_path / "out" / "m.om"
    assert seen == [
        "ATC start working now, please wait for a moment.",
        "ATC run success, welcome to the next use.",
    ]
    laid_out = om_layout.read_om(tmp_path / "out" / "m.om")  # GE's layout, the fake acl's JSON inside
    assert laid_out is not None
    attrs, description = laid_out
    om = json.loads(description)
    assert (om["fake_om"], om["dynamic_batch"], attrs["soc_version"]) == (1, [1, 2, 4, 8], "Ascend310P3")
    assert om_file.soc_version(tmp_path / "out" / "m.om").value == "Ascend310P3"  # as ge-console reads it
    assert sorted(p.name for p in request.work_dir.iterdir()) == ["check_result.json", "fusion_result.json"]
    assert list(caller.iterdir()) == []
    (call,) = [json.loads(line) for line in fake_atc_on_path.read_text().splitlines()]
    assert call == atc.atc_command(request, executable)[1:]


def test_a_dynamic_shape_om_is_found_where_atc_wrote_it(fake_atc_on_path: Path, tmp_path: Path) -> None:
    """-1 without gears: ATC writes OUT_<os>_<arch>.om (model_helper.cc), and that is the result."""
    request = AtcRequest(write_one_node(tmp_path / "m.onnx"), "Ascend910B3", tmp_path / "m", "x:-1,4")
    assert atc.is_dynamic_shape(request)
    result = atc.run_atc(request, str(FAKES / "atc"))
    assert result.ok and result.om_path == tmp_path / f"m_linux_{platform.machine()}.om"
    assert not request.om_path.exists()


def test_run_surfaces_atc_error_lines(fake_atc_on_path: Path, tmp_path: Path) -> None:
    """An operator without an NPU kernel: ATC fails with EZ3003, whose cause and solution lines are kept."""
    model = write_one_node(tmp_path / "m.onnx", "Magic", "custom.ops")
    request = AtcRequest(model, "Ascend310P3", tmp_path / "m")
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
    """No CANN environment: no atc, and the help says which set_env.sh to source and what still works."""
    monkeypatch.setenv("PATH", str(tmp_path))
    assert atc.find_atc() is None
    nothing = atc.atc_missing(tmp_path)
    later = f"(CANN 8.5 and later: source {tmp_path}/cann/set_env.sh)"
    assert f"source {tmp_path}/ascend-toolkit/set_env.sh {later}" in nothing and "CPU emulation" in nothing
    (tmp_path / "ascend-toolkit").mkdir()
    (tmp_path / "ascend-toolkit" / "set_env.sh").write_text("")
    assert f"`source {tmp_path}/ascend-toolkit/set_env.sh`" in atc.atc_missing(tmp_path)
    (tmp_path / "cann").mkdir()
    (tmp_path / "cann" / "set_env.sh").write_text("")  # CANN 8.5 moved it
    assert f"`source {tmp_path}/cann/set_env.sh`" in atc.atc_missing(tmp_path)


def test_model_checks_before_atc(tmp_path: Path) -> None:
    """The ONNX must load (E10041) and --input_shape must name its inputs (E10016), as ATC itself checks."""
    model = write_one_node(tmp_path / "m.onnx")
    assert atc.check_model(AtcRequest(model, "Ascend310P3", tmp_path / "o", "x:-1,4")) == []
    (problem,) = atc.check_model(AtcRequest(model, "Ascend310P3", tmp_path / "o", "pixels:-1,4"))
    assert problem.startswith("E10016: Op name pixels specified in --input_shape is not found in the model.")
    assert problem.endswith("(The model's inputs: x)")
    (tmp_path / "bad.onnx").write_bytes(b"not onnx")
    assert atc.check_model(AtcRequest(tmp_path / "bad.onnx", "S", tmp_path / "o")) == [
        f"E10041: Failed to load the model from {tmp_path / 'bad.onnx'}."
    ]


def test_fake_atc_rejects_unknown_input_names_like_atc(fake_atc_on_path: Path, tmp_path: Path) -> None:
    """Run directly (our pre-check bypassed), ATC names the unknown input with E10016."""
    request = AtcRequest(write_one_node(tmp_path / "m.onnx"), "Ascend310P3", tmp_path / "m", "pixels:1,4")
    result = atc.run_atc(request, str(FAKES / "atc"))
    assert result.returncode == 255
    assert result.error_lines[1].startswith("E10016: Op name pixels specified in --input_shape")


@pytest.mark.parametrize(
    ("extra", "code"),
    [
        (["--soc_version="], "E10054: The required parameter --soc_version for ATC is empty."),
        (["--input_shape=x:-1,4", "--dynamic_batch_size=1, 2"], "E10003: Value 1, 2 for parameter"),
        (["--output_type=y:0:FP16"], "E10001: Value y:0 for parameter --output_type is invalid."),
        (["--input_shape=x:1~8,4", "--dynamic_batch_size=1,2"], "E10040: As the --dynamic_batch_size"),
        (["--input_shape=x:-1,4", "--dynamic_batch_size=1,2", "--dynamic_dims=1;2"], "E10009: "),
        (["--input_shape=x:-1,4;"], "E10002: Value  for parameter --input_shape is invalid."),
        (["--precision_mode=fp16"], "E10001: Value fp16 for parameter --precision_mode is invalid."),
    ],
)
def test_fake_atc_refuses_like_atc(fake_atc_on_path: Path, tmp_path: Path, extra: list[str],
                                   code: str) -> None:
    """Run directly, each refusal with ATC's failure banner, code and words, exit 255, no OM."""
    model = write_one_node(tmp_path / "m.onnx")
    args = [f"--model={model}", "--framework=5", f"--output={tmp_path / 'm'}", "--soc_version=Ascend310P3"]
    done = subprocess.run([str(FAKES / "atc"), *args, *extra], capture_output=True, text=True, check=False,
                          cwd=tmp_path)
    lines = done.stdout.splitlines()
    assert done.returncode == 255 and lines[1].startswith("ATC run failed, Please check the detail log")
    assert lines[2].startswith(code) and not list(tmp_path.glob("m*.om"))


def test_fake_atc_accepts_what_atc_accepts(fake_atc_on_path: Path, tmp_path: Path) -> None:
    """Gears above 2048 and a trailing comma, options with ATC's values: the success banner and an OM."""
    model = write_one_node(tmp_path / "m.onnx")
    args = [f"--model={model}", "--framework=5", f"--output={tmp_path / 'm'}", "--soc_version=Ascend910B3",
            "--input_shape=x:-1,4", "--dynamic_batch_size=1,4096,", "--precision_mode=force_fp32",
            "--output_type=FP16", "--op_select_implmode=high_precision", "--log=error"]
    done = subprocess.run([str(FAKES / "atc"), *args], capture_output=True, text=True, check=False,
                          cwd=tmp_path)
    assert done.returncode == 0
    assert done.stdout.splitlines()[-1] == "ATC run success, welcome to the next use."
    assert (tmp_path / "m.om").is_file()


def test_the_readme_convert_example_passes_its_own_pre_check() -> None:
    """The docs' `convert` line (docs/commands.md): a current SoC, and an --input-shape its gears need."""
    import argparse
    import shlex

    from triton_ge_console.repository import check_cli as check_commands

    readme = Path(__file__).resolve().parents[2] / "docs" / "commands.md"
    line = next(text for text in readme.read_text(encoding="utf-8").splitlines()
                if text.startswith("ge-console convert "))
    parser = argparse.ArgumentParser()
    check_commands.register(parser.add_subparsers())
    args = parser.parse_args(shlex.split(line.split("#")[0])[1:])
    assert args.soc_version != "Ascend910B"
    assert atc.check_request(check_commands._request(args, args.soc_version)) == []
