"""Triton's static checks of ensemble scheduling (ValidateEnsembleSchedulingConfig), with its wording."""

from __future__ import annotations

from dataclasses import dataclass, field

from tritonclient.grpc import model_config_pb2 as mc

from triton_ge_console.repository.rules.findings import ENSEMBLE_PLATFORM, Finding, error

SCHEDULING = "ensemble_scheduling"


@dataclass
class _FlowTensor:
    """One ensemble tensor in the data-flow graph."""

    name: str
    is_output: bool
    ready: bool = False
    prev: list[_FlowTensor] = field(default_factory=list)
    next: list[_FlowTensor] = field(default_factory=list)


def check_ensemble(config: mc.ModelConfig) -> list[Finding]:
    """Ensemble scheduling only, and always, for ensembles; steps complete; every tensor flows."""
    name = config.name
    if not config.HasField(SCHEDULING):
        if config.platform == ENSEMBLE_PLATFORM:
            return [
                error(
                    "platform",
                    f"ensemble scheduling must be set for ensemble {name} whose platform is "
                    f"{ENSEMBLE_PLATFORM}",
                )
            ]
        return []
    if config.platform != ENSEMBLE_PLATFORM:
        return [
            error(
                SCHEDULING,
                f"ensemble scheduling cannot be set for model '{name}' whose platform is not "
                f"{ENSEMBLE_PLATFORM}",
            )
        ]
    findings = _forbidden_fields(config)
    if not config.ensemble_scheduling.step:
        return [*findings, error(SCHEDULING, f"must specify 'step' for ensemble '{name}'")]
    step_findings, tensors = _build_graph(config)
    if step_findings:
        return findings + step_findings
    return findings + _flow_findings(config, tensors)


def _forbidden_fields(config: mc.ModelConfig) -> list[Finding]:
    """Instance groups, optimization and warmup do not apply to ensembles."""
    name = config.name
    findings = []
    if config.instance_group:
        findings.append(
            error("instance_group", f"instance group should not be specified for ensemble '{name}'")
        )
    if config.HasField("optimization"):
        findings.append(error("optimization", f"optimization should not be specified for ensemble '{name}'"))
    if config.model_warmup:
        findings.append(error("model_warmup", f"model_warmup can not be specified for ensemble '{name}'"))
    return findings


def _build_graph(config: mc.ModelConfig) -> tuple[list[Finding], dict[str, _FlowTensor]]:
    """BuildEnsembleGraph: each step names a model and maps inputs and outputs; outputs written once."""
    tensors: dict[str, _FlowTensor] = {}
    name = config.name
    for idx, step in enumerate(config.ensemble_scheduling.step):
        where = f"{SCHEDULING}.step[{idx}]"
        for missing, present in (
            ("model_name", step.model_name),
            ("input_map", step.input_map),
            ("output_map", step.output_map),
        ):
            if not present:
                return [error(where, f"must specify '{missing}' in step {idx} of ensemble '{name}'")], tensors
        produced = []
        for model_output, tensor_name in step.output_map.items():
            tensor = tensors.setdefault(tensor_name, _FlowTensor(tensor_name, is_output=False))
            if tensor.is_output:
                return [
                    error(
                        f'{where}.output_map["{model_output}"]',
                        f"ensemble tensor '{tensor_name}' can "
                        f"appear in an output map only once for ensemble '{name}' step {idx}",
                    )
                ], tensors
            tensor.is_output = True
            produced.append(tensor)
        for tensor_name in step.input_map.values():
            source = tensors.setdefault(tensor_name, _FlowTensor(tensor_name, is_output=False))
            for output in produced:
                output.prev.append(source)
                source.next.append(output)
    return [], tensors


def _flow_findings(config: mc.ModelConfig, tensors: dict[str, _FlowTensor]) -> list[Finding]:
    """Inputs used, outputs written from the inputs, no dangling tensors."""
    name = config.name
    findings = []
    ready_queue = []
    for i, model_input in enumerate(config.input):
        tensor = tensors.get(model_input.name)
        if tensor is None:
            findings.append(
                error(f"input[{i}]", f"ensemble input '{model_input.name}' for ensemble {name}' is not used")
            )
            continue
        tensor.ready = True
        ready_queue.append(tensor)
    _propagate(ready_queue)
    outputs = set()
    for i, model_output in enumerate(config.output):
        tensor = tensors.get(model_output.name)
        if tensor is None:
            findings.append(
                error(
                    f"output[{i}]", f"ensemble output '{model_output.name}' for ensemble {name}' is not used"
                )
            )
        elif not tensor.ready:
            findings.append(error(f"output[{i}]", _not_written(tensor, name)))
        outputs.add(model_output.name)
    if findings:
        return findings
    return [
        error(SCHEDULING, f"ensemble tensor '{t.name}' is unused in ensemble '{name}'")
        for t in tensors.values()
        if t.name not in outputs and (not t.ready or not t.next)
    ]


def _propagate(ready_queue: list[_FlowTensor]) -> None:
    """Mark every tensor whose producers' inputs are all ready."""
    while ready_queue:
        node = ready_queue.pop(0)
        for following in node.next:
            if following.ready:
                continue
            following.ready = all(prev.ready for prev in following.prev)
            if following.ready:
                ready_queue.append(following)


def _not_written(tensor: _FlowTensor, name: str) -> str:
    """Triton's message for an output that no ready step writes, naming the first unconnected source."""
    message = f"output '{tensor.name}' for ensemble '{name}' is not written"
    last, prev, seen = tensor, tensor.prev, set()
    while prev:
        candidates = [node for node in prev if not node.ready and node.name not in seen]
        if not candidates:
            break
        last = candidates[0]
        seen.add(last.name)
        prev = last.prev
    if last.name != tensor.name:
        message += f": at least one of its depending tensors, '{last.name}', is not connected"
    return message
