"""What Triton's model repository manager checks between ensembles before validating one (its dependency
graph: circular dependencies, required versions) and, once the composing models are loaded, the decoupled
data flow of an ensemble (ensemble_utils.cc ValidateEnsembleConfig). Triton's wording throughout."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from tritonclient.grpc import model_config_pb2 as mc

from triton_ge_console.repository.rules.findings import ENSEMBLE_PLATFORM

LATEST = -1  # a step's model_version asking for whatever is loaded


def ensemble_upstreams(config: mc.ModelConfig) -> dict[str, set[int]]:
    """The models an ensemble's steps name, with the versions the steps ask for (ConnectDependencyGraph)."""
    upstreams: dict[str, set[int]] = {}
    for step in config.ensemble_scheduling.step:
        upstreams.setdefault(step.model_name, set()).add(step.model_version)
    return upstreams


def is_ensemble(entry: object) -> bool:
    """A valid config that schedules an ensemble."""
    return (
        isinstance(entry, mc.ModelConfig)
        and entry.platform == ENSEMBLE_PLATFORM
        and entry.HasField("ensemble_scheduling")
    )


def circular_dependencies(graph: Mapping[str, Iterable[str]]) -> dict[str, str]:
    """CircularDependencyCheck over ensembles in name order: ensemble → Triton's message, for the ensembles
    the check marks (a start that reaches itself, and the ensembles on the way back to it)."""
    status: dict[str, str] = {}
    for start in sorted(graph):
        if start not in status:
            found = _cycle_from(start, start, graph, status, {start})
            if found is not None:
                status[start] = found
    return status


def _cycle_from(
    current: str, start: str, graph: Mapping[str, Iterable[str]], status: dict[str, str], seen: set[str]
) -> str | None:
    """Walk upstream from current; Triton marks every ensemble between start and the cycle's last step.
    (Triton recurses without end through a cycle that does not pass start; here such a walk stops.)"""
    for upstream in graph.get(current, ()):
        if upstream == start:
            return f"circular dependency between ensembles: {start} -> ... -> {current} -> {start}"
        if upstream in seen or upstream not in graph:
            continue
        found = _cycle_from(upstream, start, graph, status, seen | {upstream})
        if found is not None:
            status[current] = found
            return found
    return None


def missing_version(
    name: str, upstreams: Mapping[str, set[int]], loaded: Mapping[str, set[int]]
) -> tuple[str, str] | None:
    """An ensemble step asking for a version its model does not load (CheckNode): (model, message)."""
    for model, versions in upstreams.items():
        for version in sorted(versions):
            if version != LATEST and model in loaded and version not in loaded[model]:
                message = f"ensemble '{name}' depends on '{model}' whose required version {version}"
                return model, f"{message} is not loaded."
    return None


@dataclass(eq=False)
class _Node:
    """One ensemble tensor (or the ensemble's sink), as ValidateEnsembleConfig walks them."""

    model: str  # the model that first declared the tensor
    decoupled: bool = False
    label: int = 0
    visited: bool = False
    prev: list[_Node] = field(default_factory=list)
    next: list[_Node] = field(default_factory=list)
    sibling: _Node | None = None  # shared by the outputs of one step


def decoupled_branching(config: mc.ModelConfig, models: Mapping[str, object]) -> str | None:
    """A step fed by tensors that came through different decoupled models (or one and not another)."""
    name = config.name
    inputs = _flow_graph(config, models)
    label = 0
    queue = deque(inputs)
    for node in inputs:
        node.visited = True
    while queue:
        for following in queue.popleft().next:
            if following.visited or not all(p.visited for p in following.prev):
                continue
            first = following.prev[0].label
            if any(p.label != first for p in following.prev):
                return (
                    f"in ensemble {name}, step of model '{following.model}' receives inputs originated "
                    "from different decoupled models"
                )
            if following.sibling is not None and following.sibling.visited:
                following.label = following.sibling.label
            else:
                label = label + 1 if following.decoupled else label
                following.label = label if following.decoupled else first
                if following.sibling is not None:
                    following.sibling.label, following.sibling.visited = following.label, True
            following.visited = True
            queue.append(following)
    return None


def _flow_graph(config: mc.ModelConfig, models: Mapping[str, object]) -> list[_Node]:
    """Ensemble tensors linked from each step's inputs to its outputs, the outputs to a sink."""
    name = config.name
    nodes: dict[str, _Node] = {}
    for io in [*config.input, *config.output]:
        nodes.setdefault(io.name, _Node(name))
    sink = _Node(name)
    for io in config.output:
        sink.prev.append(nodes[io.name])
        nodes[io.name].next.append(sink)
    for step in config.ensemble_scheduling.step:
        composing = models.get(step.model_name)
        decoupled = isinstance(composing, mc.ModelConfig) and composing.model_transaction_policy.decoupled
        sibling = _Node(step.model_name)
        for tensor in [*step.input_map.values(), *step.output_map.values()]:
            nodes.setdefault(tensor, _Node(step.model_name))
        for tensor in step.output_map.values():
            node = nodes[tensor]
            node.decoupled, node.sibling = decoupled, sibling
            for source in step.input_map.values():
                node.prev.append(nodes[source])
                nodes[source].next.append(node)
    return [nodes[io.name] for io in config.input]
