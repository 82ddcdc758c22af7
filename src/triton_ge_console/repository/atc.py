"""ONNX → OM through CANN's ATC: its argument rules checked first (with ATC's error codes), the command
line, and a run that streams ATC's output and picks out its error lines."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

FRAMEWORK_ONNX = "5"
ONNX_INPUT_FORMATS = ("NCHW", "ND", "NCDHW")  # what ATC accepts as --input_format for ONNX models
MIN_PROFILES, MAX_PROFILES = 2, 100  # --dynamic_batch_size gear count
MIN_BATCH, MAX_BATCH = 1, 2048  # each gear's batch size
DYNAMIC_DIM = -1
SHAPE_SAMPLE = '"input_name1:n1,c1,h1,w1"'
SET_ENV = "/usr/local/Ascend/ascend-toolkit/set_env.sh"
ATC_MISSING = (
    "atc not found on PATH: install the CANN toolkit (Ascend-cann-toolkit) and run "
    f"`source {SET_ENV}`, then retry; without an OM the model still deploys on backend 'ge' "
    "in CPU emulation from its ONNX"
)
# ATC's error lines: error codes (E10001, EZ3003, EE1001, ...), its failure banner, GE's [ERROR] log lines.
ERROR_LINE = re.compile(r"^\s*(E[A-Z0-9]\d{4}\b|ATC run failed|\[ERROR\])")
_DIM = re.compile(r"^-?\d+$|^\d+~\d+$")


class AtcArgumentError(ValueError):
    """Arguments ATC would reject; the message is ATC's, with its error code."""


@dataclass(frozen=True)
class AtcRequest:
    """One ONNX → OM conversion."""

    model: Path
    soc_version: str
    output: Path  # with or without the .om ATC appends
    input_shape: str | None = None  # "name:d,d;name2:d,d"
    dynamic_batch_size: str | None = None  # "1,2,4,8"
    input_format: str | None = None

    @property
    def output_prefix(self) -> Path:
        """What ATC's --output takes: the OM path without its .om."""
        return self.output.with_suffix("") if self.output.suffix == ".om" else self.output

    @property
    def om_path(self) -> Path:
        """The file ATC writes."""
        return self.output_prefix.with_name(self.output_prefix.name + ".om")


@dataclass(frozen=True)
class AtcResult:
    """What one ATC run did."""

    returncode: int
    om_path: Path
    output: tuple[str, ...]  # every line ATC printed
    error_lines: tuple[str, ...]  # the lines that say what went wrong

    @property
    def ok(self) -> bool:
        """ATC succeeded and the OM is there."""
        return self.returncode == 0 and self.om_path.is_file()


def parse_input_shape(text: str) -> list[tuple[str, list[int]]]:
    """ATC's --input_shape `name:d,d;name2:d,d` as (name, dims); -1 for a dynamic axis, ranges as -1."""
    shapes = []
    for shape in (part for part in text.split(";") if part.strip()):
        name, sep, dims_text = shape.rpartition(":")
        if not sep or not name.strip():
            raise AtcArgumentError(_e10002(shape, 'size not equal to 2 split by ":"', SHAPE_SAMPLE))
        if not dims_text.strip():
            raise AtcArgumentError(_e10002(shape, "can not be empty", SHAPE_SAMPLE))
        dims = []
        for dim in (d.strip() for d in dims_text.split(",")):
            if "." in dim:
                raise AtcArgumentError(_e10002(shape, "exist float number", '"input_name1:1,3,224,224"'))
            if not _DIM.match(dim):
                raise AtcArgumentError(_e10002(shape, "is not digit", '"input_name1:1,3,224,224"'))
            value = DYNAMIC_DIM if "~" in dim else int(dim)
            if value == 0 or value < DYNAMIC_DIM:
                raise AtcArgumentError(
                    f"E10011: Value {shape} for parameter --input_shape is invalid. Shape "
                    f"values must be positive integers. The error value in the shape is {value}."
                )
            dims.append(value)
        shapes.append((name.strip(), dims))
    return shapes


def _e10002(shape: str, reason: str, sample: str) -> str:
    """ATC's E10002 message for a malformed --input_shape entry."""
    return (
        f"E10002: Value {shape} for parameter --input_shape is invalid. Reason: {reason}. "
        f"The value must be formatted as {sample}."
    )


def parse_dynamic_batch_size(text: str) -> list[int]:
    """ATC's --dynamic_batch_size gears: 2–100 distinct batch sizes, each within [1, 2048]."""
    if not re.fullmatch(r"[\d, ]*", text):
        raise AtcArgumentError(
            f"E10001: Value {text} for parameter --dynamic_batch_size is invalid. Reason: it can "
            'only contain digits, "," and " "'
        )
    gears = [int(part) for part in text.replace(" ", "").split(",") if part]
    if len(gears) < MIN_PROFILES:
        raise AtcArgumentError(
            f"E10035: --dynamic_batch_size, --dynamic_image_size, or --dynamic_dims has "
            f"{len(gears)} profiles, which is less than the minimum {MIN_PROFILES}."
        )
    if len(gears) > MAX_PROFILES:
        raise AtcArgumentError(
            f"E10036: --dynamic_batch_size, --dynamic_image_size, or --dynamic_dims has "
            f"{len(gears)} profiles, which is greater than the maximum {MAX_PROFILES}."
        )
    for gear in gears:
        if not MIN_BATCH <= gear <= MAX_BATCH:
            raise AtcArgumentError(
                f"E10001: Value {gear} for parameter --dynamic_batch_size is invalid. Reason: "
                f"each batch size must be within [{MIN_BATCH}, {MAX_BATCH}]"
            )
    if len(set(gears)) != len(gears):
        raise AtcArgumentError(
            "E10039: The --dynamic_batch_size, --dynamic_image_size, or --dynamic_dims "
            "argument have duplicate profiles."
        )
    return gears


def check_dynamic_batch_shapes(shapes: list[tuple[str, list[int]]]) -> None:
    """With --dynamic_batch_size, some input's N axis is -1, and no other axis is."""
    if not any(dims and dims[0] == DYNAMIC_DIM for _, dims in shapes):
        raise AtcArgumentError(
            "E10031: --dynamic_batch_size is included, but none of the nodes specified in "
            "--input_shape has a batch size equaling -1."
        )
    for name, dims in shapes:
        for index, dim in enumerate(dims[1:], start=1):
            if dim == DYNAMIC_DIM:
                raise AtcArgumentError(
                    f"E10018: Value {name}:{','.join(map(str, dims))} for shape {index} is "
                    "invalid. When --dynamic_batch_size is included, only batch size N can be -1 "
                    "in --input_shape."
                )


def check_request(request: AtcRequest) -> list[str]:
    """Every argument problem ATC would report for this request (empty: ATC's own checks pass)."""
    problems = []
    if not request.soc_version.strip():
        problems.append("E10004: Value for --soc_version is empty.")
    if request.input_format is not None and request.input_format not in ONNX_INPUT_FORMATS:
        problems.append(
            f"E10001: Value {request.input_format} for parameter --input_format is invalid. Reason: "
            f"ONNX models support {', '.join(ONNX_INPUT_FORMATS)}"
        )
    problems += _shape_problems(request)
    return problems


def _shape_problems(request: AtcRequest) -> list[str]:
    """--input_shape well formed; --dynamic_batch_size gears and their -1 batch axis."""
    problems = []
    shapes: list[tuple[str, list[int]]] = []
    try:
        shapes = parse_input_shape(request.input_shape) if request.input_shape else []
    except AtcArgumentError as exc:
        problems.append(str(exc))
    if request.dynamic_batch_size is None:
        return problems
    try:
        parse_dynamic_batch_size(request.dynamic_batch_size)
    except AtcArgumentError as exc:
        problems.append(str(exc))
    if not request.input_shape:
        problems.append("E10004: Value for --input_shape is empty.")
    elif shapes:
        try:
            check_dynamic_batch_shapes(shapes)
        except AtcArgumentError as exc:
            problems.append(str(exc))
    return problems


def check_model(request: AtcRequest) -> list[str]:
    """What ATC says about the model itself: loadable (E10041), --input_shape naming its inputs (E10016)."""
    from triton_ge_console.repository.onnx_io import OnnxReadError, read_onnx_io

    try:
        graph_inputs, _ = read_onnx_io(request.model)
    except OnnxReadError:
        return [f"E10041: Failed to load the model from {request.model}."]
    names = {tensor.name for tensor in graph_inputs}
    shapes = parse_input_shape(request.input_shape) if request.input_shape else []
    return [
        f"E10016: Opname {name} specified in --input_shape is not found in the model. Confirm whether this "
        f"node name exists, or the node is not split with the specified delimiter ';'. (The model's inputs: "
        f"{', '.join(sorted(names)) or 'none'})"
        for name, _ in shapes
        if name not in names
    ]


def atc_command(request: AtcRequest, atc: str = "atc") -> list[str]:
    """ATC's command line for an ONNX model."""
    command = [
        atc,
        f"--model={request.model}",
        f"--framework={FRAMEWORK_ONNX}",
        f"--output={request.output_prefix}",
        f"--soc_version={request.soc_version}",
    ]
    if request.input_shape:
        command.append(f"--input_shape={request.input_shape}")
    if request.dynamic_batch_size:
        command.append(f"--dynamic_batch_size={request.dynamic_batch_size.replace(' ', '')}")
    if request.input_format:
        command.append(f"--input_format={request.input_format}")
    return command


def find_atc() -> str | None:
    """The atc executable on PATH, if the CANN toolkit's environment is set up."""
    return shutil.which("atc")


def run_atc(request: AtcRequest, atc: str, on_line: Callable[[str], None] | None = None) -> AtcResult:
    """Run ATC, passing each output line to on_line as it comes; success means the OM was written."""
    request.om_path.parent.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    with subprocess.Popen(
        atc_command(request, atc),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        env=dict(os.environ),
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
    return AtcResult(process.returncode, request.om_path, tuple(lines), error_lines(lines))


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
