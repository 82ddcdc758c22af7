"""Triton's checks of sequence_batching.state (implicit state), applied at model load, with its wording.

Triton 2.51 checks a state's initial_state when it creates the sequence batcher (core
sequence_batch_scheduler.cc: SequenceBatchScheduler::Create and GenerateInitialStateData); any error
there fails the load. The state itself (names, type, dims) is not checked at load: a backend meets it
only when a sequence runs, so those problems are warnings here, worded as ours.
"""

from __future__ import annotations

from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from triton_ge_console.repository.rules.findings import WILDCARD_DIM, Finding, error, warning
from triton_ge_console.repository.rules.triton_warmup import data_file_findings

STATE = "sequence_batching.state"
INITIAL_STATE_FOLDER = "initial_state"
LOADS_BUT = "Triton 2.51 loads the model, but"


def check_states(config: mc.ModelConfig) -> list[Finding]:
    """Every implicit state: its own fields (warnings), its initial_state (Triton's errors), name reuse."""
    if not config.HasField("sequence_batching"):
        return []
    findings: list[Finding] = []
    with_initial: set[str] = set()
    for i, state in enumerate(config.sequence_batching.state):
        where = f"{STATE}[{i}]"
        findings += _state_field_warnings(where, state)
        if len(state.initial_state) > 1:
            findings.append(
                error(
                    f"{where}.initial_state[1]",
                    f"initial_state field for state input '{state.input_name}' must contain exactly one or "
                    f"zero element. Found '{len(state.initial_state)}' elements.",
                )
            )
        elif state.initial_state:
            findings += _initial_state_findings(where, state, with_initial)
            with_initial.add(state.input_name)
    reported = {f.field for f in findings}
    return findings + [f for f in _reuse_warnings(config) if f.field not in reported]


def _state_field_warnings(where: str, state: mc.ModelSequenceBatching.State) -> list[Finding]:
    """Names, type and dims a backend needs to read and write the state."""
    findings = [
        warning(f"{where}.{field}", f"state must specify '{field}': {LOADS_BUT} no backend can {use}")
        for field, value, use in (
            ("input_name", state.input_name, "feed the state to the model"),
            ("output_name", state.output_name, "read the state back from the model"),
        )
        if not value
    ]
    named = f"state '{state.input_name}'"
    if state.data_type == mc.TYPE_INVALID:
        findings.append(
            warning(
                f"{where}.data_type", f"{named} must specify 'data_type': {LOADS_BUT} a sequence cannot start"
            )
        )
    if not state.dims:
        findings.append(
            warning(f"{where}.dims", f"{named} must specify 'dims': {LOADS_BUT} the state is an empty tensor")
        )
    for j, dim in enumerate(state.dims):
        if dim < 1 and dim != WILDCARD_DIM:
            findings.append(
                warning(
                    f"{where}.dims[{j}]",
                    f"{named} dimension must be integer >= 1, or {WILDCARD_DIM} to indicate a variable-size "
                    f"dimension: {LOADS_BUT} the state tensor has no valid shape",
                )
            )
            break
    return findings


def _initial_state_findings(
    where: str, state: mc.ModelSequenceBatching.State, with_initial: set[str]
) -> list[Finding]:
    """GenerateInitialStateData: type, name, one initial state per input, dims, a data source."""
    initial = state.initial_state[0]
    at, name = f"{where}.initial_state[0]", state.input_name
    findings = []
    if initial.data_type != state.data_type:
        findings.append(
            error(
                f"{at}.data_type",
                f"The data type used for 'initial_state' field of state '{name}' does "
                "not match the state data type.",
            )
        )
    if not initial.name:
        findings.append(
            error(at, f"Field 'name' must be set when using initial_state for state input '{name}'.")
        )
    if name in with_initial:
        findings.append(error(f"{where}.input_name", f"State input name '{name}' specified more than once."))
    findings += _initial_dims_findings(at, state)
    if initial.WhichOneof("state_data") is None:
        findings.append(error(at, f"initial_state setting expects state'{name}' to have state_data set"))
    return findings


def _initial_dims_findings(at: str, state: mc.ModelSequenceBatching.State) -> list[Finding]:
    """initial_state dims: as many as the state's, fixed, equal to the state's fixed dims."""
    initial, name = state.initial_state[0], state.input_name
    if len(initial.dims) != len(state.dims):
        return [
            error(
                f"{at}.dims",
                "Number of dimensions in 'initial_state' doesn't match the size of 'state' dimensions for "
                f"state input '{name}'. {len(initial.dims)} != {len(state.dims)}",
            )
        ]
    for j, (dim, state_dim) in enumerate(zip(initial.dims, state.dims, strict=True)):
        if dim == WILDCARD_DIM:
            message = f"'initial_state' field for state input name '{name}' contains variable dimensions."
            return [error(f"{at}.dims[{j}]", message)]
        if state_dim not in (WILDCARD_DIM, dim):
            message = (
                f"'initial_state' dim for input name '{name}' doesn't match 'state' dim description. "
                f"{dim} != {state_dim}"
            )
            return [error(f"{at}.dims[{j}]", message)]
    return []


def _reuse_warnings(config: mc.ModelConfig) -> list[Finding]:
    """State names used twice, or shared with the model's own inputs and outputs (Triton 2.51 loads them)."""
    findings: list[Finding] = []
    seen: dict[str, set[str]] = {"input_name": set(), "output_name": set()}
    model_names = {
        "input_name": {io.name for io in config.input},
        "output_name": {io.name for io in config.output},
    }
    for i, state in enumerate(config.sequence_batching.state):
        for field, name in (("input_name", state.input_name), ("output_name", state.output_name)):
            where = f"{STATE}[{i}].{field}"
            if name and name in seen[field]:
                findings.append(
                    warning(
                        where,
                        f"state {field} '{name}' is used by more than one state: "
                        f"{LOADS_BUT} those states overwrite each other",
                    )
                )
            if name and name in model_names[field]:
                kind = "input" if field == "input_name" else "output"
                findings.append(
                    warning(
                        where,
                        f"state {field} '{name}' is also a model {kind}: {LOADS_BUT} "
                        "the state and the request tensor share one name",
                    )
                )
            seen[field].add(name)
    return findings


def check_state_files(config: mc.ModelConfig, model_dir: Path) -> list[Finding]:
    """Each initial_state data_file exists in the model's initial_state/ folder and holds enough bytes."""
    if not config.HasField("sequence_batching"):
        return []
    findings: list[Finding] = []
    for i, state in enumerate(config.sequence_batching.state):
        if len(state.initial_state) == 1 and state.initial_state[0].WhichOneof("state_data") == "data_file":
            where = f"{STATE}[{i}].initial_state[0].data_file"
            findings += data_file_findings(
                where, model_dir, INITIAL_STATE_FOLDER, state.initial_state[0], "initial_state setting"
            )
    return findings
