"""The validator agrees with a real tritonserver: every config it rejects, Triton rejects with the same words.

One server (module scope) loads a repository of broken Python-backend models; each case compares the
validator's error with the reason Triton gives for that model. Warm-up and implicit-state cases fail at
load (instance creation, sequence batcher creation); cases Triton loads are warnings here, never errors.
"""

from __future__ import annotations

import json
import re
import urllib.request
import warnings
from pathlib import Path

import pytest

from tests.conftest import RunningServer, python_backend_dir, run_triton
from tests.models import write_model
from tests.waiting import wait_until
from triton_ge_console.backend_glue.distribution import TritonDistribution
from triton_ge_console.repository.validate import validate_path
from triton_ge_console.sessions.server.process import ServerStartError

# Answers every request (warm-up samples run through it): OUT is IN, or zeros without it.
MODEL_PY = """import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        pass

    def execute(self, requests):
        responses = []
        for request in requests:
            tensor = pb_utils.get_input_tensor_by_name(request, "IN")
            data = tensor.as_numpy() if tensor is not None else np.zeros((1, 4), np.float32)
            out = pb_utils.Tensor("OUT", data.astype(np.float32))
            responses.append(pb_utils.InferenceResponse([out]))
        return responses
"""
IO = (
    'input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
    'output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
)


def _warmup(value: str, key: str = "IN", sample: str = 'name: "w" batch_size: 1', mbs: int = 4) -> str:
    """IN/OUT and one warm-up sample with one input."""
    return (
        f"{IO}max_batch_size: {mbs}\n"
        f'model_warmup [ {{ {sample} inputs {{ key: "{key}" value {{ {value} }} }} }} ]\n'
    )


def _state(*states: str) -> str:
    """IN/OUT and a sequence batcher with the given states."""
    return f"{IO}max_batch_size: 4\nsequence_batching {{ state [ {', '.join(states)} ] }}\n"


FP32_4 = "data_type: TYPE_FP32 dims: [ 4 ]"
STATE = 'input_name: "S_IN" output_name: "S_OUT" ' + FP32_4
INITIAL = f'initial_state {{ name: "i" {FP32_4} zero_data: true }}'


def _with_initial(initial: str, dims: str = "[ 4 ]") -> str:
    """One state S_IN/S_OUT (FP32, the given dims) with the given initial_state fields."""
    return f"{{ {STATE.replace('[ 4 ]', dims)} initial_state {{ {initial} }} }}"


# model folder → config body after name/backend (or the whole config when it starts with 'name:')
BROKEN = {
    "bad_dims": 'input [ { name: "IN" data_type: TYPE_FP32 dims: [ 0 ] } ]\n',
    "no_type": 'input [ { name: "IN" dims: [ 4 ] } ]\n',
    "bad_reshape": 'input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ 3 ] } } ]\n',
    "negative_batch": "max_batch_size: -1\n",
    "preferred_too_big": "max_batch_size: 4\ndynamic_batching { preferred_batch_size: [ 8 ] }\n",
    "priority_default": "max_batch_size: 4\n"
    "dynamic_batching { priority_levels: 2 default_priority_level: 5 }\n",
    "sequence_control": IO + 'max_batch_size: 2\nsequence_batching { control_input [ { name: "S" control [ '
    "{ kind: CONTROL_SEQUENCE_START } ] } ] }\n",
    "cpu_with_gpus": IO + "instance_group [ { kind: KIND_CPU gpus: [ 0 ] } ]\n",
    "scheduling_not_ensemble": IO + 'ensemble_scheduling { step [ { model_name: "x" } ] }\n',
    "wrong_dir": 'name: "other_name"\nbackend: "python"\n',
    "warmup_wildcard": _warmup("data_type: TYPE_FP32 dims: [ -1 ] zero_data: true"),
    "warmup_no_data": _warmup(FP32_4),
    "warmup_missing_input": _warmup(f"{FP32_4} zero_data: true", key="NOPE"),
    "warmup_type": _warmup("data_type: TYPE_INT32 dims: [ 4 ] zero_data: true"),
    "warmup_shape": _warmup("data_type: TYPE_FP32 dims: [ 1, 4 ] zero_data: true"),
    "warmup_shape_unbatched": _warmup("data_type: TYPE_FP32 dims: [ 3 ] zero_data: true", mbs=0),
    "warmup_file_missing": _warmup(f'{FP32_4} input_data_file: "nope.bin"'),
    "warmup_file_short": _warmup(f'{FP32_4} input_data_file: "in.bin"'),
}
# Models whose initial_state Triton refuses when it creates the sequence batcher. Triton 2.51 (Python backend)
# sometimes crashes (SIGSEGV) while refusing one, far more often when several fail at once: a second server
# loads them one by one, and is started again if it crashed.
STATE_ATTEMPTS = 5  # a crash comes in about 1 run in 5: five tries make a red CI from it very rare
# A server killed by a signal (SIGSEGV -11, SIGABRT -6, any other): a crash, worth another start.
KILLED_BY_SIGNAL = re.compile(r"exited with code -\d+\b")
STATE_BROKEN = {
    "state_two_initial": _state(f"{{ {STATE} {INITIAL} {INITIAL} }}"),
    "state_initial_type": _state(
        _with_initial('name: "i" data_type: TYPE_INT32 dims: [ 4 ] zero_data: true')
    ),
    "state_initial_name": _state(_with_initial(f"{FP32_4} zero_data: true")),
    "state_initial_rank": _state(
        _with_initial('name: "i" data_type: TYPE_FP32 dims: [ 2, 2 ] zero_data: true')
    ),
    "state_initial_wildcard": _state(
        _with_initial('name: "i" data_type: TYPE_FP32 dims: [ -1 ] zero_data: true', dims="[ -1 ]")
    ),
    "state_initial_dim": _state(_with_initial('name: "i" data_type: TYPE_FP32 dims: [ 3 ] zero_data: true')),
    "state_initial_no_data": _state(_with_initial(f'name: "i" {FP32_4}')),
    "state_input_twice": _state(
        f"{{ {STATE} {INITIAL} }}", f"{{ {STATE.replace('S_OUT', 'S2')} {INITIAL} }}"
    ),
    "state_file_missing": _state(_with_initial(f'name: "i" {FP32_4} data_file: "nope.bin"')),
    "state_file_short": _state(_with_initial(f'name: "i" {FP32_4} data_file: "s.bin"')),
}
# Data files in model folders (warmup/ for warm-up inputs, initial_state/ for initial states).
DATA_FILES = {
    "two_versions": {"2/model.py": MODEL_PY.encode()},
    "warmup_file_short": {"warmup/in.bin": b"1234"},
    "warm_good": {"warmup/in.bin": bytes(16), "initial_state/s.bin": bytes(16)},
}
# Models Triton 2.51 loads whose warm-up or state cannot work as written: warnings here, no error.
LOADS_WITH_WARNINGS = {
    "warmup_skipped": _warmup(f"{FP32_4} zero_data: true", sample="batch_size: 0"),
    "warmup_extra_input": _warmup(f"{FP32_4} zero_data: true").replace(
        "} } } ]", f'}} }} inputs {{ key: "EXTRA" value {{ {FP32_4} zero_data: true }} }} }} ]'
    ),
    "state_unnamed": _state(f"{{ {FP32_4} }}", '{ input_name: "S2" output_name: "S2_OUT" dims: [ 0 ] }'),
    "state_shared_names": _state(
        f"{{ {STATE.replace('S_IN', 'IN')} }}", f"{{ {STATE.replace('S_IN', 'S3')} }}"
    ),
}
# model → the field of each warning the validator gives it, and words of the rule that warns there.
WARNED = {
    "warmup_skipped": {
        "model_warmup[0]": "warm-up sample has no 'name'",
        "model_warmup[0].batch_size": "warm-up sample has batch_size 0",
    },
    "warmup_extra_input": {'model_warmup[0].inputs["EXTRA"]': "warm-up input 'EXTRA' is not a model input"},
    "state_unnamed": {
        "sequence_batching.state[0].input_name": "state must specify 'input_name'",
        "sequence_batching.state[0].output_name": "state must specify 'output_name'",
        "sequence_batching.state[1].data_type": "state 'S2' must specify 'data_type'",
        "sequence_batching.state[1].dims[0]": "state 'S2' dimension must be integer >= 1",
    },
    "state_shared_names": {
        "sequence_batching.state[0].input_name": "state input_name 'IN' is also a model input",
        "sequence_batching.state[1].output_name": "state output_name 'S_OUT' is used by more than one state",
    },
}
# Valid warm-up (zeros, random, a data file; a state input fed) and states (zeros, a data file).
WARM_GOOD = (
    _state(
        _with_initial(f'name: "i" {FP32_4} data_file: "s.bin"'),
        f"{{ {STATE.replace('S_', 'T_')} {INITIAL} }}",
    )
    + 'model_warmup [ { name: "zeros" batch_size: 2 inputs { key: "IN" value { data_type: TYPE_FP32 '
    'dims: [ 4 ] zero_data: true } } },\n  { name: "file" batch_size: 1 inputs [ { key: "IN" value { '
    'data_type: TYPE_FP32 dims: [ 4 ] input_data_file: "in.bin" } }, { key: "S_IN" value { '
    "data_type: TYPE_FP32 dims: [ 4 ] random_data: true } } ] } ]\n"
)
TRITON_PREFIX = re.compile(r"^(Invalid argument|Internal): ")


def _ensemble(step_model: str, in_key: str = "IN", out_key: str = "OUT", in_type: str = "TYPE_FP32",
              in_dims: str = "4", max_batch_size: int = 4, version: int = -1) -> str:  # fmt: skip
    """An ensemble of one step feeding its input A to step_model and its output B back."""
    return (
        f'platform: "ensemble"\nmax_batch_size: {max_batch_size}\n'
        f'input [ {{ name: "A" data_type: {in_type} dims: [ {in_dims} ] }} ]\n'
        'output [ { name: "B" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        f'ensemble_scheduling {{ step [ {{ model_name: "{step_model}" model_version: {version}\n'
        f'  input_map {{ key: "{in_key}" value: "A" }}\n'
        f'  output_map {{ key: "{out_key}" value: "B" }} }} ] }}\n'
    )


# Ensembles over the "good" model (max_batch_size 4, IN/OUT FP32 [4]); judged with the whole repository.
ENSEMBLES = {
    "e_missing": _ensemble("not_in_repo"),
    "e_invalid_step": _ensemble("negative_batch"),
    "e_failed_step": _ensemble("bad_dims"),
    "e_failed_warmup": _ensemble("warmup_type"),
    "e_batch": _ensemble("good", max_batch_size=8),
    "e_nested": _ensemble("e_batch", in_key="A", out_key="B"),  # over an ensemble Triton refuses
    "e_no_input": _ensemble("good", in_key="NOPE"),
    "e_no_output": _ensemble("good", out_key="NOPE"),
    "e_type": _ensemble("good", in_type="TYPE_INT32"),
    "e_shape": _ensemble("good", in_dims="3"),
    "e_auto_shape": _ensemble("ac_good", in_dims="3"),  # IN [4] only in ac_good's auto-completed config
    "e_self": _ensemble("e_self"),
    "e_cycle_a": _ensemble("e_cycle_b"),
    "e_cycle_b": _ensemble("e_cycle_a"),
    # Triton walks a ring from each member in name order and marks the members on the way back
    "e_ring_a": _ensemble("e_ring_b"),
    "e_ring_b": _ensemble("e_ring_c"),
    "e_ring_c": _ensemble("e_ring_a"),
    "e_version": _ensemble("two_versions", version=1),
    # a decoupled step's output X and the ensemble's own input A both feed the step writing B
    "e_decoupled": _ensemble("decoupled", out_key="OUT").replace('value: "B" }', 'value: "X" }')
    .replace("} ] }", '},\n  { model_name: "two_in" model_version: -1\n'
             '  input_map [ { key: "IN" value: "X" }, { key: "IN2" value: "A" } ]\n'
             '  output_map { key: "OUT" value: "B" } } ] }'),
}
# Composing models the ensembles above need besides "good".
COMPOSING = {
    "two_versions": IO + "max_batch_size: 4\n",  # folders 1 and 2; the default policy loads only 2
    "decoupled": IO + "max_batch_size: 4\nmodel_transaction_policy { decoupled: true }\n",
    "gpu_id": IO + "instance_group [ { kind: KIND_GPU gpus: [ 0 ] } ]\n",  # refused where no GPU 0 is
    "no_backend": 'name: "no_backend"\nbackend: "no_such_backend"\n' + IO,
    "two_in": IO.replace("] } ]", '] }, { name: "IN2" data_type: TYPE_FP32 dims: [ 4 ] } ]', 1)
    + "max_batch_size: 4\n",
}


def _auto_completing(body: str) -> str:
    """MODEL_PY whose TritonPythonModel also has auto_complete_config(config) running body."""
    method = "    @staticmethod\n    def auto_complete_config(config):\n" + "".join(
        f"        {line}\n" for line in body.splitlines()
    )
    return MODEL_PY.replace("    def initialize", method + "\n    def initialize")


# model → (config body, auto_complete_config body): what Triton refuses once auto-complete ran (the stub's
# exception, or the merge in backend_model.cc), and models whose completion loads.
RETURN = "return config"
AUTO_COMPLETE = {
    "ac_batch": ("max_batch_size: 4\n", "config.set_max_batch_size(2)\nreturn config"),
    "ac_none": ("max_batch_size: 4\n", "config.set_max_batch_size(8)"),
    "ac_scheduler": (
        "max_batch_size: 4\nsequence_batching { }\n", "config.set_dynamic_batching()\nreturn config"
    ),
    "ac_no_dims": ("", 'config.add_input({"name": "IN", "data_type": "TYPE_FP32"})\nreturn config'),
    "ac_no_name": ("", 'config.add_output({"data_type": "TYPE_FP32", "dims": [4]})\nreturn config'),
    "ac_property": (
        "", 'config.add_input({"name": "IN", "data_type": "TYPE_FP32", "dims": [4], "x": 1})\nreturn config'
    ),
    "ac_type": (IO, 'config.add_input({"name": "IN", "data_type": "TYPE_INT32", "dims": [4]})\n' + RETURN),
    "ac_dims": (IO, 'config.add_output({"name": "OUT", "data_type": "TYPE_FP32", "dims": [3]})\n' + RETURN),
    # the other side of each: an output's datatype, an input's dims (and an input marked optional)
    "ac_out_type": (IO, 'config.add_output({"name": "OUT", "data_type": "TYPE_FP16", "dims": [4]})\n'
                    + RETURN),
    "ac_in_dims": (IO, 'config.add_input({"name": "IN", "data_type": "TYPE_FP32", "dims": [2, 2]})\n'
                   + RETURN),
    "ac_optional": (IO.replace("dims: [ 4 ] }", "dims: [ 4 ] optional: false }", 1),
                    'config.add_input({"name": "IN", "data_type": "TYPE_FP32", "dims": [4], '
                    '"optional": True})\n' + RETURN),
    "ac_decoupled": (
        "model_transaction_policy { decoupled: false }\n",
        'config.set_model_transaction_policy({"decoupled": True})\nreturn config',
    ),
    "ac_bad_dims": (
        "",
        'config.add_input({"name": "IN", "data_type": "TYPE_FP32", "dims": [0]})\n'
        'config.add_output({"name": "OUT", "data_type": "TYPE_FP32", "dims": [4]})\n' + RETURN,
    ),
}
AUTO_COMPLETE_LOADS = {
    "ac_good": (
        "",
        'config.set_max_batch_size(4)\nconfig.set_dynamic_batching()\n'
        'config.add_input({"name": "IN", "data_type": "TYPE_FP32", "dims": [4]})\n'
        'config.add_output({"name": "OUT", "data_type": "TYPE_FP32", "dims": [4]})\nreturn config',
    ),
}
CODE = {name: _auto_completing(code) for name, (_, code) in {**AUTO_COMPLETE, **AUTO_COMPLETE_LOADS}.items()}


def _write_model(repository: Path, name: str, body: str) -> None:
    """A Python-backend model folder with version 1, the given config and its data files."""
    code = None if "ensemble" in body else CODE.get(name, MODEL_PY)
    backend = "" if body.startswith("platform:") else 'backend: "python"\n'
    head = "" if body.startswith("name:") else f'name: "{name}"\n{backend}'
    write_model(repository, name, head + body, code, "model.py", files=DATA_FILES.get(name))


def _repository_index(server: RunningServer) -> list[dict[str, str]]:
    """Triton's model repository index: state and reason per model."""
    request = urllib.request.Request(f"{server.http_url}/v2/repository/index", data=b"{}", method="POST")
    with urllib.request.urlopen(request, timeout=5) as response:
        return list(json.load(response))


def _settled_index(server: RunningServer, timeout: float = 90.0) -> list[dict[str, str]]:
    """The index once every model that loads has finished loading (succeeded or failed)."""

    def settled() -> list[dict[str, str]] | None:
        index = _repository_index(server)
        loaded = [m for m in index if m.get("state")]
        return index if loaded and all(m["state"] in ("READY", "UNAVAILABLE") for m in loaded) else None

    return wait_until(settled, timeout, interval=0.1, what="models to finish loading")


def _load_reasons(
    dist: TritonDistribution, root: Path, models: dict[str, str], extra: tuple[str, ...] = ()
) -> tuple[Path, dict[str, str]]:
    """Load the models in one server (stopped on return): (repository, model → Triton's refusal reason, or
    its state if none)."""
    repository = root / "repo"
    for name, body in models.items():
        _write_model(repository, name, body)
    backends = python_backend_dir(dist, root / "backends")
    with run_triton(dist, repository, backends, models=tuple(models), extra=extra) as server:
        index = _settled_index(server)
        reasons = {m["name"]: TRITON_PREFIX.sub("", m.get("reason", "")) for m in index}
        for name, message in re.findall(
            r"Poll failed for model directory '([^']+)': (.*)\"$", server.log(), re.M
        ):
            reasons[name] = message
        for name, message in re.findall(
            r"load failed for model '([^']+)': (.*?)(?:\\n|\"$)", server.log(), re.M
        ):
            reasons.setdefault(name, message)
            reasons[name] = reasons[name] or message
        for model in index:
            reasons[model["name"]] = reasons[model["name"]] or model.get("state", "")
    return repository, reasons


@pytest.fixture(scope="module")
def triton_reasons(
    triton_dist: TritonDistribution, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, str]]:
    """(repository, model → Triton's reason for refusing it, or READY), from one server run."""
    models = {
        **BROKEN,
        **ENSEMBLES,
        **COMPOSING,
        **{name: body for name, (body, _) in {**AUTO_COMPLETE, **AUTO_COMPLETE_LOADS}.items()},
        "good": IO + "max_batch_size: 4\ndynamic_batching { }\n",
        "e_good": _ensemble("good"),
        "e_auto_completed": _ensemble("ac_good"),
        "dup_input": IO + 'input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]\n',
        **LOADS_WITH_WARNINGS,
        "warm_good": WARM_GOOD,
    }
    return _load_reasons(triton_dist, tmp_path_factory.mktemp("triton_rules"), models)


@pytest.fixture(scope="module")
def state_reasons(
    triton_dist: TritonDistribution, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, str]]:
    """(repository, model → Triton's reason) for STATE_BROKEN, loaded one at a time; a server that crashed
    while refusing them (Triton 2.51's bug, not a verdict) is started again."""
    extra = ("--model-load-thread-count=1",)
    for n in range(1, STATE_ATTEMPTS):
        try:
            return _load_reasons(triton_dist, tmp_path_factory.mktemp("state_rules"), STATE_BROKEN, extra)
        except ServerStartError as exc:
            if not KILLED_BY_SIGNAL.search(str(exc)):
                raise
            warnings.warn(
                f"tritonserver crashed refusing initial_state cases ({exc}); attempt {n}/{STATE_ATTEMPTS}",
                stacklevel=1,
            )
    return _load_reasons(triton_dist, tmp_path_factory.mktemp("state_rules"), STATE_BROKEN, extra)


@pytest.mark.parametrize("model", sorted(BROKEN))
def test_validator_error_is_tritons_reason(triton_reasons: tuple[Path, dict[str, str]], model: str) -> None:
    """The validator rejects the model folder with exactly the reason the server gives."""
    repository, reasons = triton_reasons
    report = validate_path(repository / model)
    assert not report.ok
    assert reasons[model], f"Triton gave no reason for {model}"
    assert report.errors[0].message == reasons[model]


@pytest.mark.parametrize("model", sorted(STATE_BROKEN))
def test_state_error_is_tritons_reason(state_reasons: tuple[Path, dict[str, str]], model: str) -> None:
    """Implicit-state cases: the validator's first error is the reason the server gives."""
    repository, reasons = state_reasons
    report = validate_path(repository / model)
    assert reasons[model] not in ("", "READY"), f"Triton gave no reason for {model}"
    assert report.errors[0].message == reasons[model]


@pytest.mark.parametrize("ensemble", sorted(ENSEMBLES))
def test_ensemble_error_is_tritons_reason(triton_reasons: tuple[Path, dict[str, str]], ensemble: str) -> None:
    """Judging the repository, an ensemble's first error is what Triton says when it refuses the ensemble."""
    repository, reasons = triton_reasons
    config_path = str(repository / ensemble / "config.pbtxt")
    errors = [p for p in validate_path(repository).errors if p.file == config_path]
    assert reasons[ensemble], f"Triton gave no reason for {ensemble}"
    assert errors[0].message == reasons[ensemble]
    assert errors[0].line is not None


def test_model_triton_loads_is_valid(triton_reasons: tuple[Path, dict[str, str]]) -> None:
    """The control model loads in Triton, and the validator finds nothing wrong with it."""
    repository, reasons = triton_reasons
    assert (reasons["good"], reasons["e_good"], reasons["warm_good"]) == ("READY", "READY", "READY")
    assert [reasons[name] for name in ("two_versions", "decoupled", "two_in")] == ["READY"] * 3
    assert validate_path(repository / "good").problems == ()
    assert validate_path(repository / "warm_good").problems == ()
    assert [p for p in validate_path(repository).problems if "e_good" in p.file] == []


def test_duplicate_tensor_names_load_in_triton_but_are_errors_here(
    triton_reasons: tuple[Path, dict[str, str]],
) -> None:
    """The one deliberate difference: Triton loads a model declaring input IN twice; the validator refuses it,
    as no request can feed both."""
    repository, reasons = triton_reasons
    assert reasons["dup_input"] == "READY"
    (problem,) = validate_path(repository / "dup_input").errors
    assert problem.message.startswith("model input 'IN' is specified more than once")


@pytest.mark.parametrize("model", sorted(LOADS_WITH_WARNINGS))
def test_what_triton_loads_is_only_warned_about(
    triton_reasons: tuple[Path, dict[str, str]], model: str
) -> None:
    """Triton loads (and warms up) these models; the validator finds no error, and warns, at a line."""
    repository, reasons = triton_reasons
    assert reasons[model] == "READY"
    report = validate_path(repository / model)
    assert report.ok and report.warnings
    assert all(p.line is not None and "Triton" in p.message for p in report.warnings)
    found = {p.field: p.message for p in report.warnings}
    assert sorted(found) == sorted(WARNED[model])
    for field, words in WARNED[model].items():
        assert words in found[field], (field, found[field])


def test_missing_backend_is_tritons_refusal(triton_reasons: tuple[Path, dict[str, str]]) -> None:
    """With the server's backend directory known, a backend found nowhere is refused in Triton's words;
    without a known backend directory it is a warning saying the check depends on the machine."""
    repository, reasons = triton_reasons
    model = repository / "no_backend"
    report = validate_path(model, [repository.parent / "backends"])
    assert report.errors[0].message == reasons["no_backend"]
    (unknown,) = validate_path(model).warnings
    assert unknown.message.startswith(reasons["no_backend"]) and "depends on the machine" in unknown.message
    assert validate_path(repository / "good", [repository.parent / "backends"]).problems == ()


def test_gpu_id_refusal_is_a_warning_in_tritons_words(triton_reasons: tuple[Path, dict[str, str]]) -> None:
    """Triton refuses GPU 0 on this machine (no CUDA GPU); the validator quotes it, as a warning about the
    machine, never an error."""
    repository, reasons = triton_reasons
    report = validate_path(repository / "gpu_id")
    assert report.ok
    (problem,) = report.warnings
    quoted = "instance group gpu_id_0 of model gpu_id specifies invalid or unsupported gpu id 0"
    assert reasons["gpu_id"].startswith(quoted) and problem.message.startswith(quoted)
    assert "depends on the machine" in problem.message and problem.field == "instance_group[0].gpus"


@pytest.mark.parametrize("model", sorted(AUTO_COMPLETE))
def test_auto_complete_refusal_is_tritons(triton_reasons: tuple[Path, dict[str, str]], model: str) -> None:
    """The model's auto_complete_config, run offline in a subprocess with the distribution's
    triton_python_backend_utils, is refused in Triton's words (Triton adds the Python traceback to them)."""
    repository, reasons = triton_reasons
    report = validate_path(repository / model)
    assert reasons[model] not in ("", "READY"), f"Triton gave no reason for {model}"
    assert report.errors[0].message == reasons[model].split("\n\nAt:\n")[0]


def test_auto_completed_config_is_judged_completed(triton_reasons: tuple[Path, dict[str, str]]) -> None:
    """A config with no inputs, outputs or batching that auto_complete_config fills loads in Triton, and the
    validator judges the completed config (an ensemble over it sees IN and OUT)."""
    repository, reasons = triton_reasons
    assert (reasons["ac_good"], reasons["e_auto_completed"]) == ("READY", "READY")
    assert validate_path(repository / "ac_good").problems == ()
    assert [p for p in validate_path(repository).problems if "e_auto_completed" in p.file] == []
