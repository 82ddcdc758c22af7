"""ONNX → OM through CANN's ATC: its argument rules checked first (with ATC's error codes), the command
line, and a run that streams ATC's output and picks out its error lines."""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from triton_ge_console.errors import GeConsoleError

FRAMEWORK_ONNX = "5"
ONNX_INPUT_FORMATS = ("NCHW", "ND", "NCDHW")  # what ATC accepts as --input_format for ONNX models
MIN_PROFILES = 2  # gears of --dynamic_batch_size / _image_size / _dims (CheckDynamicParams sets no maximum)
# ...but AscendCL reads at most these from an OM (acl_mdl.h; hicann/ge api/acl/acl_model/model/model_om2.cpp):
# aclmdlGetDynamicBatch / GetDynamicHW / GetInputDynamicGearCount answer ACL_ERROR_STORAGE_OVER_LIMIT
# (300000) past 128 gears, and aclmdlGetInputDynamicDims ACL_ERROR_FAILURE (500001) when every input's dims
# together (one --dynamic_dims gear, as aclmdlIODims carries it) are more than 128.
ACL_MAX_BATCH_NUM = ACL_MAX_HW_NUM = ACL_MAX_DIM_CNT = 128
DYNAMIC_DIM = -1
SHAPE_SAMPLE = '"input_name1:n1,c1,h1,w1"'
DIGITS_SAMPLE = '"input_name1:1,3,224,224"'
# option values as ATC's own checks list them (hicann/ge compiler/api/aclgrph/option_utils.cc, atc --help)
PRECISION_MODES = ("force_fp16", "force_fp32", "cube_fp16in_fp32out", "allow_mix_precision",
                   "allow_fp32_to_fp16", "must_keep_origin_dtype", "allow_mix_precision_fp16",
                   "allow_mix_precision_bf16", "allow_fp32_to_bf16")
DEFAULT_PRECISION_MODE = "force_fp16"
# --output_type: omg.cc output_type_str_to_datatype; its refusals' reasons as omg.cc words them
OUTPUT_TYPES = ("FP32", "FP16", "UINT8", "INT8", "HIF8", "HIF4", "FP8E5M2", "FP8E4M3FN")
OUTPUT_TYPE_SUPPORT = ("The value must be FP32, FP16, UINT8, INT8. A node can only have one type. The "
                       "correct example is: --output_type=FP32.")
OUTPUT_TYPE_SAMPLE = 'The parameter is invalid. Valid format "opname:index:dtype".'
OUTPUT_TYPE_NODES = ("In the mode of specified node, the correct example is: node1:0:FP16;node2:0:FP32.The "
                     "nodes set in --output_type must be found in --out_nodes.")
# --op_select_implmode: CheckImplmodeParamValid (the reason it gives lists only the first four)
IMPL_MODES = ("high_performance", "high_precision", "high_precision_for_all", "high_performance_for_all",
              "enable_float_32_execution", "enable_hi_float_32_execution")
IMPL_MODE_REASON = ("The value must be high_performance, high_precision, high_precision_for_all, "
                    "high_performance_for_all.")
LOG_LEVELS = ("default", "debug", "info", "warning", "error", "null")  # CheckLogParamValidAndSetLogLevel
ASCEND_ROOT = Path("/usr/local/Ascend")
# CANN up to 8.3 installs the toolkit's environment script here; 8.5 moved it under cann/
SET_ENV_TOOLKIT = "ascend-toolkit/set_env.sh"
SET_ENV_CANN = "cann/set_env.sh"
# ATC's error lines: error codes (E10001, EZ3003, EE1001, ...), its failure banner, GE's [ERROR] log lines.
ERROR_LINE = re.compile(r"^\s*(E[A-Z0-9]\d{4}\b|ATC run failed|\[ERROR\])")
_DIM = re.compile(r"^-?\d+$|^\d+~\d+$")
# what ATC writes instead of OUT.om for a dynamic-shape model: OUT_<host os>_<host cpu>.om (model_helper.cc)
_OS_ARCH_SUFFIX = re.compile(r"^_[a-z]+_[A-Za-z0-9_]+\.om$")


def set_env_hint(root: Path = ASCEND_ROOT) -> str:
    """Which set_env.sh to source: the one installed, else both layouts by CANN version."""
    for relative in (SET_ENV_CANN, SET_ENV_TOOLKIT):
        if (root / relative).is_file():
            return f"source {root / relative}"
    return f"source {root / SET_ENV_TOOLKIT} (CANN 8.5 and later: source {root / SET_ENV_CANN})"


def atc_missing(root: Path = ASCEND_ROOT) -> str:
    """What to do when atc is not on PATH."""
    return ("atc not found on PATH: install the CANN toolkit (Ascend-cann-toolkit) and run "
            f"`{set_env_hint(root)}`, then retry; without an OM the model still deploys on backend 'ge' "
            "in CPU emulation from its ONNX")


class AtcArgumentError(GeConsoleError, ValueError):
    """Arguments ATC would reject; the message is ATC's, with its error code."""


@dataclass(frozen=True)
class AtcRequest:
    """One ONNX → OM conversion; None leaves an option to ATC's default."""

    model: Path
    soc_version: str
    output: Path  # with or without the .om ATC appends
    input_shape: str | None = None  # "name:d,d;name2:d,d" ("name:" for a scalar)
    dynamic_batch_size: str | None = None  # "1,2,4,8"
    input_format: str | None = None
    precision_mode: str | None = None  # ATC's default: force_fp16
    output_type: str | None = None  # FP16, or per output "node:0:FP16;node2:1:FP32"
    out_nodes: str | None = None  # "node:0;node2:1"
    op_select_implmode: str | None = None
    log: str | None = None
    dynamic_dims: str | None = None  # "1,128;4,128" for the -1 axes of --input_shape, in order
    dynamic_image_size: str | None = None  # "224,224;448,448" (H,W)

    @property
    def output_prefix(self) -> Path:
        """What ATC's --output takes: the OM path without its .om."""
        return self.output.with_suffix("") if self.output.suffix == ".om" else self.output

    @property
    def om_path(self) -> Path:
        """The file ATC writes for a static or gear model (a dynamic-shape one adds _<os>_<arch>)."""
        return self.output_prefix.with_name(self.output_prefix.name + ".om")

    @property
    def work_dir(self) -> Path:
        """Where ATC runs, so its check_result.json and fusion_result.json stay out of the caller's way."""
        return self.output_prefix.with_name(self.output_prefix.name + ".atc")

    @property
    def gear_options(self) -> dict[str, str]:
        """The gear options given (ATC allows at most one)."""
        given = {"--dynamic_batch_size": self.dynamic_batch_size,
                 "--dynamic_image_size": self.dynamic_image_size, "--dynamic_dims": self.dynamic_dims}
        return {key: value for key, value in given.items() if value is not None}


@dataclass(frozen=True)
class AtcResult:
    """What one ATC run did."""

    returncode: int
    om_path: Path  # the OM ATC wrote (OUT.om, or OUT_<os>_<arch>.om), else where it was expected
    output: tuple[str, ...]  # every line ATC printed
    error_lines: tuple[str, ...]  # the lines that say what went wrong

    @property
    def ok(self) -> bool:
        """ATC succeeded and the OM is there."""
        return self.returncode == 0 and self.om_path.is_file()


def _e10002(shape: str, reason: str, sample: str) -> str:
    """ATC's E10002 message for a malformed --input_shape entry."""
    return f"E10002: Value {shape} for parameter --input_shape is invalid. Reason: {reason}. " \
           f"The value must be formatted as {sample}."


def _e10003(option: str, value: str, reason: str) -> str:
    """ATC's E10003: an option's value with characters or groups it does not take."""
    return f"E10003: Value {value} for parameter --{option} is invalid. Reason: {reason}"


def _dims_of(shape: str, dims_text: str) -> list[int]:
    """One entry's dims; -1 for a dynamic axis or a ~ range."""
    dims = []
    for dim in (d.strip() for d in dims_text.split(",")):
        if "." in dim:
            raise AtcArgumentError(_e10002(shape, "The float number is unsupported", DIGITS_SAMPLE))
        if not _DIM.match(dim):
            raise AtcArgumentError(_e10002(shape, "It is not a digit", DIGITS_SAMPLE))
        value = DYNAMIC_DIM if "~" in dim else int(dim)
        if value == 0 or value < DYNAMIC_DIM:
            raise AtcArgumentError(
                f"E10011: Value {shape} for parameter --input_shape is invalid. Shape values must be "
                f"positive integers. The error value in the shape is {value}.")
        dims.append(value)
    return dims


def parse_input_shape(text: str) -> list[tuple[str, list[int]]]:
    """ATC's --input_shape `name:d,d;name2:d,d` as (name, dims): `name:` is a scalar (no dims), -1 (or a
    ~ range) a dynamic axis; every ;-separated part must be an entry (a trailing ; is not)."""
    shapes = []
    for shape in text.split(";"):
        name, sep, dims_text = shape.rpartition(":")
        if not sep or not name.strip():
            raise AtcArgumentError(_e10002(shape, "The shape must contain two parts: name and value",
                                           SHAPE_SAMPLE))
        shapes.append((name.strip(), _dims_of(shape, dims_text) if dims_text.strip() else []))
    return shapes


def _profiles(option: str, text: str, allowed: str, reason: str, group_size: int | None,
              separator: str = ";") -> list[list[int]]:
    """Gears of a --dynamic_* option: ATC's character check (E10003), then its profile rules."""
    if not text or any(c not in allowed for c in text):
        raise AtcArgumentError(_e10003(option, text, reason))
    groups = [[int(d) for d in g.split(",") if d.strip()] for g in text.rstrip(";,").split(separator)]
    if any(not g for g in groups) or (group_size is not None and any(len(g) != group_size for g in groups)):
        raise AtcArgumentError(_e10003(option, text, "Each setting needs to be consistent with the number "
                                                     "of -1 in the input shape."))
    if len(groups) < MIN_PROFILES:
        raise AtcArgumentError(f"E10035: --dynamic_batch_size, --dynamic_image_size, or --dynamic_dims has "
                               f"{len(groups)} profiles, which is less than the minimum {MIN_PROFILES}.")
    for dim in (d for g in groups for d in g):
        if dim < 0:  # CheckDynamicParams: "all dims must not be less than 0"
            raise AtcArgumentError(f"E10038: Dimension size {dim} is invalid. The value must be greater "
                                   "than 0.")
    if len({tuple(g) for g in groups}) != len(groups):
        raise AtcArgumentError("E10039: The --dynamic_batch_size, --dynamic_image_size, or --dynamic_dims "
                               "argument has duplicate profiles.")
    return groups


def parse_dynamic_batch_size(text: str) -> list[int]:
    """ATC's --dynamic_batch_size: digits and commas only (E10003), at least 2 distinct gears, none below 0
    (multi_batch_options.cc CheckDynamicParams: no upper bound on their number or size)."""
    groups = _profiles("dynamic_batch_size", text, "0123456789,", 'It can only contain digits and ",".', None,
                       separator=",")
    return [gear for group in groups for gear in group]


def parse_dynamic_dims(text: str, dynamic_axes: int) -> list[list[int]]:
    """ATC's --dynamic_dims: one value per -1 of --input_shape in each ;-separated profile."""
    return _profiles("dynamic_dims", text, "0123456789,;", 'It can only contain digits, "," and ";".',
                     dynamic_axes)


def parse_dynamic_image_size(text: str) -> list[list[int]]:
    """ATC's --dynamic_image_size: H,W pairs separated by ;."""
    return _profiles("dynamic_image_size", text, "0123456789,; ",
                     'It can only contain digits, ",", " " and ";".', 2)


def check_dynamic_batch_shapes(shapes: list[tuple[str, list[int]]]) -> None:
    """With --dynamic_batch_size, some input's N axis is -1, and no other axis is."""
    if not any(dims and dims[0] == DYNAMIC_DIM for _, dims in shapes):
        raise AtcArgumentError(
            "E10031: --dynamic_batch_size is included, but none of the nodes specified in "
            "--input_shape has a batch size equaling -1."
        )
    for name, dims in shapes:
        for index, dim in enumerate(dims[1:], start=1):
            if dim == DYNAMIC_DIM and dims[0] == DYNAMIC_DIM:
                raise AtcArgumentError(
                    f"E10018: Value {name}:{','.join(map(str, dims))} for shape {index} is "
                    "invalid. When --dynamic_batch_size is included, only batch size N can be -1 "
                    "in --input_shape."
                )


def _option_problems(request: AtcRequest) -> list[str]:
    """Values ATC's option checks refuse (E10001 with ATC's reasons)."""
    problems = []
    choices = {"--input_format": (request.input_format, ONNX_INPUT_FORMATS),
               "--precision_mode": (request.precision_mode, PRECISION_MODES),
               "--op_select_implmode": (request.op_select_implmode, IMPL_MODES),
               "--log": (request.log, LOG_LEVELS)}
    for option, (value, allowed) in choices.items():
        if value is not None and value not in allowed:
            listed = ("The current value is not within the valid range. Valid values are: "
                      f"{', '.join(allowed)}.")
            reason = IMPL_MODE_REASON if option == "--op_select_implmode" else listed
            problems.append(_e10001(option, value, reason))
    if request.output_type is not None:
        problems += output_type_problems(request.output_type, request.out_nodes)
    return problems


def _e10001(option: str, value: str, reason: str) -> str:
    """ATC's E10001 for one option's value."""
    return f"E10001: Value {value} for parameter {option} is invalid. Reason: {reason}"


def output_type_problems(text: str, out_nodes: str | None) -> list[str]:
    """ATC's --output_type (omg.cc ParseOutputType): one type for every output, or `node:index:type` per
    ;-separated output, each `node:index` also named in --out_nodes (VerifyOutputTypeAndOutNodes)."""
    if ":" not in text:
        return [] if text in OUTPUT_TYPES else [_e10001("--output_type", text, OUTPUT_TYPE_SUPPORT)]
    named = {part.strip() for part in (out_nodes or "").split(";") if part.strip()}
    for part in text.split(";"):
        fields = part.split(":")
        if len(fields) != 3:
            return [_e10001("--output_type", part, OUTPUT_TYPE_SAMPLE)]
        node, index, data_type = (field.strip() for field in fields)
        if not index.isdigit():
            return [_e10001("--output_type", index, "The value is not a positive integer.")]
        if data_type not in OUTPUT_TYPES:
            return [_e10001("--output_type", data_type, OUTPUT_TYPE_SUPPORT)]
        if f"{node}:{int(index)}" not in named:
            return [_e10001("--output_type", f"{node}:{index}", OUTPUT_TYPE_NODES)]
    return []


def check_request(request: AtcRequest) -> list[str]:
    """Every argument problem ATC would report for this request (empty: ATC's own checks pass)."""
    problems = []
    if not request.soc_version.strip():
        problems.append("E10054: The required parameter --soc_version for ATC is empty. Another possible "
                        "reason is that the values of some parameters are not enclosed by quotation marks "
                        '("").')
    problems += _option_problems(request)
    problems += _shape_problems(request)
    return problems


def _shape_problems(request: AtcRequest) -> list[str]:
    """--input_shape well formed; at most one gear option, with the -1 axes it needs and no ~ range."""
    problems = []
    shapes: list[tuple[str, list[int]]] = []
    try:
        shapes = parse_input_shape(request.input_shape) if request.input_shape else []
    except AtcArgumentError as exc:
        problems.append(str(exc))
    gears = request.gear_options
    if len(gears) > 1:
        return [*problems, "E10009: --dynamic_batch_size, --dynamic_image_size, --input_shape_range, and "
                           "--dynamic_dims are mutually exclusive."]
    if not gears:
        return problems
    if not request.input_shape:
        return [*problems, "E10004: Value for --input_shape is empty."]
    if "~" in request.input_shape:
        return [*problems, "E10040: As the --dynamic_batch_size, --dynamic_image_size, or --dynamic_dims "
                           "argument is included, the corresponding nodes specified in --input_shape must "
                           "have -1 axes and cannot have '~'."]
    return problems + _gear_problems(request, shapes)


def _gear_problems(request: AtcRequest, shapes: list[tuple[str, list[int]]]) -> list[str]:
    """The one gear option's own rules, and the -1 axes of --input_shape it needs."""
    checks: list[Callable[[], object]] = []
    if request.dynamic_batch_size is not None:
        checks = [lambda: parse_dynamic_batch_size(request.dynamic_batch_size or ""),
                  lambda: check_dynamic_batch_shapes(shapes) if shapes else None]
    elif request.dynamic_dims is not None:
        checks = [lambda: _check_dynamic_dims(request.dynamic_dims or "", shapes)]
    elif request.dynamic_image_size is not None:
        checks = [lambda: parse_dynamic_image_size(request.dynamic_image_size or "")]
    problems = []
    for check in checks:
        try:
            check()
        except AtcArgumentError as exc:
            problems.append(str(exc))
    return problems or acl_limit_problems(request, shapes)


def acl_limit_problems(request: AtcRequest, shapes: list[tuple[str, list[int]]]) -> list[str]:
    """What ATC builds but AscendCL refuses to describe at load, in AscendCL's words (its plog lines)."""
    loaded = "ATC builds it, but AscendCL refuses the OM at load"
    if request.dynamic_batch_size is not None:
        count = len(parse_dynamic_batch_size(request.dynamic_batch_size))
        if count > ACL_MAX_BATCH_NUM:
            return [f"--dynamic_batch_size: {loaded}: aclmdlGetDynamicBatch: batch count[{count}] is larger "
                    f"than max batch num[{ACL_MAX_BATCH_NUM}] (ACL_ERROR_STORAGE_OVER_LIMIT, 300000)"]
    if request.dynamic_image_size is not None:
        count = len(parse_dynamic_image_size(request.dynamic_image_size))
        if count > ACL_MAX_HW_NUM:
            return [f"--dynamic_image_size: {loaded}: aclmdlGetDynamicHW: hw count[{count}] is larger than "
                    f"max[{ACL_MAX_HW_NUM}] (ACL_ERROR_STORAGE_OVER_LIMIT, 300000)"]
    if request.dynamic_dims is not None:
        return _dims_limit_problems(request.dynamic_dims, shapes, loaded)
    return []


def _dims_limit_problems(text: str, shapes: list[tuple[str, list[int]]], loaded: str) -> list[str]:
    """--dynamic_dims: at most 128 gears, each at most 128 dims over all inputs."""
    problems = []
    count = len(parse_dynamic_dims(text, sum(dims.count(DYNAMIC_DIM) for _, dims in shapes)))
    if count > ACL_MAX_DIM_CNT:
        problems.append(f"--dynamic_dims: {loaded}: aclmdlGetInputDynamicGearCount: dimCnt[{count}] is "
                        f"larger than max[{ACL_MAX_DIM_CNT}] (ACL_ERROR_STORAGE_OVER_LIMIT, 300000)")
    size = sum(len(dims) for _, dims in shapes)
    if size > ACL_MAX_DIM_CNT:
        problems.append(f"--input_shape: {loaded}: aclmdlGetInputDynamicDims: current dynamic dims size "
                        f"{size} can not be larger than {ACL_MAX_DIM_CNT} (a gear is every input's dims "
                        "together; ACL_ERROR_FAILURE, 500001)")
    return problems


def command_request(command: list[str], model: Path, soc_version: str) -> AtcRequest:
    """The gear options of a recorded ATC command line (`--key=value` words) as a request."""
    options = dict(word[2:].split("=", 1) for word in command if word.startswith("--") and "=" in word)
    return AtcRequest(model, soc_version, model.with_suffix(""), options.get("input_shape"),
                      options.get("dynamic_batch_size"), dynamic_dims=options.get("dynamic_dims"),
                      dynamic_image_size=options.get("dynamic_image_size"))


def _check_dynamic_dims(text: str, shapes: list[tuple[str, list[int]]]) -> None:
    """--dynamic_dims needs -1 axes in --input_shape, one value for each in every profile."""
    axes = sum(dims.count(DYNAMIC_DIM) for _, dims in shapes)
    if shapes and axes == 0:
        raise AtcArgumentError("E10001: Value 0 for parameter --input_shape's dynamic dim num is "
                               "invalid. Reason: At least one dim should be -1 when dynamic_dims is set.")
    parse_dynamic_dims(text, axes)


def is_dynamic_shape(request: AtcRequest) -> bool:
    """A -1 or ~ range in --input_shape without gears: ATC builds a dynamic-shape OM."""
    shape = request.input_shape or ""
    dynamic = "~" in shape or any(DYNAMIC_DIM in dims for _, dims in _safe_shapes(shape))
    return dynamic and not request.gear_options


def _safe_shapes(text: str) -> list[tuple[str, list[int]]]:
    """parse_input_shape, or nothing for a shape ATC would refuse anyway."""
    try:
        return parse_input_shape(text) if text else []
    except AtcArgumentError:
        return []


def check_model(request: AtcRequest) -> list[str]:
    """What ATC says about the model itself: loadable (E10041), --input_shape naming its inputs (E10016)."""
    from triton_ge_console.model_files.onnx_io import OnnxReadError, read_onnx_io

    try:
        graph_inputs, _ = read_onnx_io(request.model)
    except OnnxReadError:
        return [f"E10041: Failed to load the model from {request.model}."]
    names = {tensor.name for tensor in graph_inputs}
    shapes = parse_input_shape(request.input_shape) if request.input_shape else []
    return [
        f"E10016: Op name {name} specified in --input_shape is not found in the model. Confirm whether this "
        f"node name exists, or whether the node is not split with the specified delimiter ';'. (The model's "
        f"inputs: {', '.join(sorted(names)) or 'none'})"
        for name, _ in shapes
        if name not in names
    ]


def atc_command(request: AtcRequest, atc: str = "atc") -> list[str]:
    """ATC's command line for an ONNX model (paths absolute: ATC runs in its work folder)."""
    command = [
        atc,
        f"--model={request.model.absolute()}",
        f"--framework={FRAMEWORK_ONNX}",
        f"--output={request.output_prefix.absolute()}",
        f"--soc_version={request.soc_version}",
    ]
    options = {"input_shape": request.input_shape, "dynamic_batch_size": request.dynamic_batch_size,
               "dynamic_image_size": request.dynamic_image_size, "dynamic_dims": request.dynamic_dims,
               "input_format": request.input_format, "precision_mode": request.precision_mode,
               "output_type": request.output_type, "out_nodes": request.out_nodes,
               "op_select_implmode": request.op_select_implmode, "log": request.log}
    command += [f"--{key}={value}" for key, value in options.items() if value]
    return command


def find_atc() -> str | None:
    """The atc executable on PATH, if the CANN toolkit's environment is set up."""
    return shutil.which("atc")


def written_om(request: AtcRequest, since: float) -> Path:
    """The OM ATC wrote: OUT.om, or for a dynamic-shape model OUT_<os>_<arch>.om (e.g. m_linux_aarch64.om)."""
    if request.om_path.is_file():
        return request.om_path
    prefix = request.output_prefix
    found = [path for path in prefix.parent.glob(f"{glob.escape(prefix.name)}_*.om")
             if _OS_ARCH_SUFFIX.match(path.name[len(prefix.name):]) and path.stat().st_mtime >= since]
    return max(found, key=lambda path: path.stat().st_mtime) if found else request.om_path


def run_atc(request: AtcRequest, atc: str, on_line: Callable[[str], None] | None = None) -> AtcResult:
    """Run ATC in its work folder, passing each output line to on_line as it comes; success means an OM
    was written (wherever ATC put it)."""
    request.om_path.parent.mkdir(parents=True, exist_ok=True)
    request.work_dir.mkdir(parents=True, exist_ok=True)
    since = time.time() - 1.0  # file times can trail the clock slightly
    lines: list[str] = []
    with subprocess.Popen(
        atc_command(request, atc),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        env=dict(os.environ),
        cwd=request.work_dir,
    ) as process:
        try:
            assert process.stdout is not None
            for raw in process.stdout:
                line = raw.rstrip("\n")
                lines.append(line)
                if on_line is not None:
                    on_line(line)
        except BaseException:
            process.kill()
            raise
    return AtcResult(process.returncode, written_om(request, since), tuple(lines), error_lines(lines))


def error_lines(lines: list[str]) -> tuple[str, ...]:
    """ATC's error lines, each with the indented detail lines (cause, solution) that follow it."""
    picked: list[str] = []
    in_error = False
    for line in lines:
        if ERROR_LINE.match(line):
            picked.append(line)
            in_error = True
        elif in_error and line[:1] in (" ", "\t") and line.strip():
            picked.append(line)
        else:
            in_error = False
    return tuple(picked)
