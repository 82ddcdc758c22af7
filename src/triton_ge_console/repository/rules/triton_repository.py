"""What Triton checks across a repository when it loads an ensemble (ensemble_utils.cc and the repository
manager):
composing models present and valid, batch sizes compatible, tensors mapped to real inputs and outputs with
consistent types and shapes. Its wording, first error per ensemble, as Triton reports it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

from tritonclient.grpc import model_config_pb2 as mc

from triton_ge_console.repository.rules.findings import WILDCARD_DIM, Finding, error
from triton_ge_console.repository.rules.triton_dependencies import (
    circular_dependencies,
    decoupled_branching,
    ensemble_upstreams,
    is_ensemble,
    missing_version,
)


@dataclass(frozen=True)
class _ModelTensor:
    """What one model says an ensemble tensor is."""

    model: str
    data_type: int
    dims: tuple[int, ...]
    full_dims: tuple[int, ...]  # with the batch axis of a batching model


class _Stop(Exception):
    """The first error of an ensemble, as Triton stops at it."""

    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.message)
        self.finding = finding


@dataclass(frozen=True)
class Unavailable:
    """A repository model Triton would not load: its first error, and whether that error comes at load time
    (IO, instance groups, backend) rather than when the repository is polled (everything else)."""

    message: str
    at_load: bool
    version: str = "1"


ModelEntry: TypeAlias = "mc.ModelConfig | Unavailable"


def check_ensembles(
    models: Mapping[str, ModelEntry], loaded: Mapping[str, set[int]] | None = None
) -> dict[str, Finding]:
    """Each ensemble's first error; models maps model name → its config, or why it is unavailable; loaded
    maps a model to the versions its version policy and folders make available (unknown: not checked)."""
    ensembles = {name: config for name, config in models.items() if is_ensemble(config)}
    graph = {name: list(ensemble_upstreams(config)) for name, config in ensembles.items()}
    findings = {
        name: error("ensemble_scheduling", message) for name, message in circular_dependencies(graph).items()
    }
    repository = _Repository(ensembles, models, loaded or {}, findings)
    for name in sorted(ensembles):
        repository.judge(name)
    return findings


@dataclass
class _Repository:
    """The ensembles of a repository judged in dependency order, as Triton checks a node only once its
    upstreams are checked."""

    ensembles: Mapping[str, mc.ModelConfig]
    models: Mapping[str, ModelEntry]
    loaded: Mapping[str, set[int]]
    findings: dict[str, Finding]
    judged: set[str] = field(default_factory=set)

    def judge(self, name: str) -> None:
        """Record one ensemble's first error, judging the ensembles it composes first."""
        if name in self.judged or name in self.findings:  # a cycle member has its finding already
            return
        self.judged.add(name)
        for upstream in ensemble_upstreams(self.ensembles[name]):
            if upstream in self.ensembles:
                self.judge(upstream)
        try:
            _check_ensemble(name, self.ensembles[name], self.models, self.loaded, self.findings)
        except _Stop as stop:
            self.findings[name] = stop.finding


def _check_ensemble(
    name: str,
    config: mc.ModelConfig,
    models: Mapping[str, ModelEntry],
    loaded: Mapping[str, set[int]],
    judged: Mapping[str, Finding],
) -> None:
    """Raise _Stop with the first problem of one ensemble."""
    steps = list(config.ensemble_scheduling.step)
    _check_upstreams(name, steps, models)
    _check_upstream_status(name, steps, judged)
    missing = missing_version(name, ensemble_upstreams(config), loaded)
    if missing is not None:
        raise _Stop(error(_step_field(steps, missing[0], "model_version"), missing[1]))
    tensors = _ensemble_tensors(name, config)
    for i, step in enumerate(steps):
        composing = models[step.model_name]
        assert isinstance(composing, mc.ModelConfig)
        _check_batch_size(name, config, step.model_name, composing)
        if composing.input or composing.output:  # else the backend reads them from the model file
            _check_mapping(name, step, composing, tensors, f"ensemble_scheduling.step[{i}]")
    branching = decoupled_branching(config, models)
    if branching is not None:
        raise _Stop(error("ensemble_scheduling", branching))


def _step_field(steps: list[mc.ModelEnsembling.Step], model: str, field_name: str) -> str:
    """The field of the first step naming a model."""
    index = next((i for i, s in enumerate(steps) if s.model_name == model), 0)
    return f"ensemble_scheduling.step[{index}].{field_name}"


def _check_upstream_status(
    name: str, steps: list[mc.ModelEnsembling.Step], judged: Mapping[str, Finding]
) -> None:
    """A composing ensemble that failed its own checks makes this one 'not valid' (CheckNode)."""
    for step in steps:
        finding = judged.get(step.model_name)
        if finding is not None and step.model_name != name:
            raise _Stop(
                error(
                    _step_field(steps, step.model_name, "model_name"),
                    f"ensemble '{name}' depends on '{step.model_name}' which is not valid. "
                    f"Model '{step.model_name}' failed with error: {finding.message}",
                )
            )


def _check_upstreams(
    name: str, steps: list[mc.ModelEnsembling.Step], models: Mapping[str, ModelEntry]
) -> None:
    """Composing models exist and load: a missing or poll-failing one is 'not available', one failing at
    load has 'no loaded version'."""

    def polled(model: str) -> bool:
        entry = models.get(model)
        return entry is not None and not (isinstance(entry, Unavailable) and not entry.at_load)

    missing = list(dict.fromkeys(s.model_name for s in steps if not polled(s.model_name)))
    if missing:
        index = next(i for i, s in enumerate(steps) if s.model_name == missing[0])
        raise _Stop(
            error(
                f"ensemble_scheduling.step[{index}].model_name",
                f"ensemble {name} contains models that are not available or ambiguous: {', '.join(missing)}",
            )
        )
    for i, step in enumerate(steps):
        entry = models[step.model_name]
        if isinstance(entry, Unavailable):
            raise _Stop(
                error(
                    f"ensemble_scheduling.step[{i}].model_name",
                    f"ensemble '{name}' depends on "
                    f"'{step.model_name}' which has no loaded version. Model '{step.model_name}' loading "
                    f"failed with error: version {entry.version} is at UNAVAILABLE state: Invalid "
                    f"argument: {entry.message};",
                )
            )


def _node(model: str, batching: bool, data_type: int, dims: Sequence[int]) -> _ModelTensor:
    """A tensor as one model declares it."""
    full = (WILDCARD_DIM, *dims) if batching else tuple(dims)
    return _ModelTensor(model, data_type, tuple(dims), full)


def _ensemble_tensors(name: str, config: mc.ModelConfig) -> dict[str, _ModelTensor]:
    """The ensemble's own inputs and outputs (reshaped where they say so)."""
    batching = config.max_batch_size > 0
    tensors: dict[str, _ModelTensor] = {}
    for io in [*config.input, *config.output]:
        dims = io.reshape.shape if io.HasField("reshape") else io.dims
        tensors.setdefault(io.name, _node(name, batching, io.data_type, dims))
    return tensors


def _check_batch_size(name: str, config: mc.ModelConfig, model: str, composing: mc.ModelConfig) -> None:
    """A batching ensemble cannot batch beyond a composing model's max_batch_size."""
    if composing.max_batch_size != 0 and composing.max_batch_size < config.max_batch_size:
        raise _Stop(
            error(
                "max_batch_size",
                f"ensemble {name} allows maximum batch size {config.max_batch_size}, "
                f"but it contains model {model} which only allows maximum batch size to be "
                f"{composing.max_batch_size}",
            )
        )


def _check_mapping(
    name: str,
    step: mc.ModelEnsembling.Step,
    composing: mc.ModelConfig,
    tensors: dict[str, _ModelTensor],
    where: str,
) -> None:
    """ValidateTensorMapping: the step's inputs and outputs exist, all inputs fed, types and shapes agree."""
    _check_inputs(name, step, composing, tensors, where)
    _check_outputs(name, step, composing, tensors, where)


def _check_inputs(
    name: str,
    step: mc.ModelEnsembling.Step,
    composing: mc.ModelConfig,
    tensors: dict[str, _ModelTensor],
    where: str,
) -> None:
    """Every mapped input exists in the composing model, and every one of its inputs is fed."""
    batching = composing.max_batch_size > 0
    input_names = {io.name for io in composing.input}
    for key, tensor in step.input_map.items():
        if key not in input_names:
            message = f"in ensemble {name}, ensemble tensor {tensor} is mapping to non-existing input {key}"
            raise _Stop(error(f'{where}.input_map["{key}"]', f"{message} in model {step.model_name}"))
    for model_input in composing.input:
        if model_input.name not in step.input_map:
            message = (
                f"in ensemble {name}, input {model_input.name} in model {composing.name} is not mapped to "
            )
            raise _Stop(error(f"{where}.input_map", message + "any ensemble tensors"))
        tensor = step.input_map[model_input.name]
        node = _node(step.model_name, batching, model_input.data_type, model_input.dims)
        prefix = f"in ensemble {name}, ensemble tensor {tensor}: "
        _merge(tensors, tensor, node, prefix, f'{where}.input_map["{model_input.name}"]')


def _check_outputs(
    name: str,
    step: mc.ModelEnsembling.Step,
    composing: mc.ModelConfig,
    tensors: dict[str, _ModelTensor],
    where: str,
) -> None:
    """Every mapped output exists in the composing model and agrees with other uses of its tensor."""
    batching = composing.max_batch_size > 0
    outputs = {io.name: io for io in composing.output}
    for key, tensor in step.output_map.items():
        if key not in outputs:
            message = f"in ensemble {name}, ensemble tensor {tensor} is mapped from non-existing output {key}"
            raise _Stop(error(f'{where}.output_map["{key}"]', f"{message} in model {step.model_name}"))
        node = _node(step.model_name, batching, outputs[key].data_type, outputs[key].dims)
        prefix = f"in ensemble {name}, ensemble tensor {tensor}: "
        _merge(tensors, tensor, node, prefix, f'{where}.output_map["{key}"]')


def _merge(tensors: dict[str, _ModelTensor], name: str, node: _ModelTensor, prefix: str, where: str) -> None:
    """Record a tensor, or check it against what another model already said about it."""
    known = tensors.setdefault(name, node)
    if known is node:
        return
    if known.data_type != node.data_type:
        raise _Stop(
            error(
                where,
                f"{prefix}inconsistent data type: {mc.DataType.Name(known.data_type)} is inferred "
                f"from model {known.model} while {mc.DataType.Name(node.data_type)} is inferred "
                f"from model {node.model}",
            )
        )
    if not _same_dims(known.dims, node.dims) and not _same_dims(known.full_dims, node.full_dims):
        raise _Stop(
            error(
                where,
                f"{prefix}inconsistent shape: {_dims_text(known.full_dims)} is inferred from model "
                f"{known.model} while {_dims_text(node.full_dims)} is inferred from model "
                f"{node.model}",
            )
        )


def _same_dims(left: Sequence[int], right: Sequence[int]) -> bool:
    """Equal rank and equal dims, a variable-size dim matching anything."""
    return len(left) == len(right) and all(
        a == b or WILDCARD_DIM in (a, b) for a, b in zip(left, right, strict=True)
    )


def _dims_text(dims: Sequence[int]) -> str:
    """Triton's DimsListToString: [-1,3]."""
    return "[" + ",".join(str(d) for d in dims) + "]"
