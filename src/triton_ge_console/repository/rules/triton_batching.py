"""Triton's checks of the dynamic and sequence batchers (model_config_utils.cc), with its wording."""

from __future__ import annotations

from collections.abc import Sequence

from tritonclient.grpc import model_config_pb2 as mc

from triton_ge_console.repository.rules.findings import Finding, error, warning

Control = mc.ModelSequenceBatching.Control
BOOLEAN_CONTROLS = (
    Control.CONTROL_SEQUENCE_START,
    Control.CONTROL_SEQUENCE_END,
    Control.CONTROL_SEQUENCE_READY,
)
CORRID_TYPES = (mc.TYPE_UINT64, mc.TYPE_INT64, mc.TYPE_UINT32, mc.TYPE_INT32, mc.TYPE_STRING)


def check_dynamic_batching(config: mc.ModelConfig) -> list[Finding]:
    """Preferred sizes, priority levels, queue policies and preserve_ordering."""
    if not config.HasField("dynamic_batching"):
        return []
    batching = config.dynamic_batching
    findings = _preferred_sizes(
        "dynamic_batching.preferred_batch_size",
        batching.preferred_batch_size,
        config,
        "dynamic batching preferred size",
    )
    findings += _priorities(batching, config.name)
    findings += _ignored_queue_settings(batching)
    if batching.preserve_ordering:
        findings += _preserve_ordering(batching, config.name)
    return findings


def _preferred_sizes(where: str, sizes: Sequence[int], config: mc.ModelConfig, what: str) -> list[Finding]:
    """Each preferred batch size positive and at most max_batch_size."""
    findings = []
    for i, size in enumerate(sizes):
        if size <= 0:
            findings.append(error(f"{where}[{i}]", f"{what} must be positive for {config.name}"))
        elif size > config.max_batch_size:
            findings.append(error(f"{where}[{i}]", f"{what} must be <= max batch size for {config.name}"))
    return findings


def _priorities(batching: mc.ModelDynamicBatching, name: str) -> list[Finding]:
    """default_priority_level and every priority_queue_policy key within [1, priority_levels]."""
    levels = batching.priority_levels
    if levels == 0:
        return []
    findings = []
    if batching.default_priority_level == 0 or batching.default_priority_level > levels:
        findings.append(
            error(
                "dynamic_batching.default_priority_level",
                f"default priority level must be in range [1, {levels}] for {name}",
            )
        )
    for level in batching.priority_queue_policy:
        if level == 0 or level > levels:
            findings.append(
                error(
                    f'dynamic_batching.priority_queue_policy["{level}"]',
                    f"priority queue policy must have priority level in range [1, {levels}] for {name}",
                )
            )
    return findings


def _ignored_queue_settings(batching: mc.ModelDynamicBatching) -> list[Finding]:
    """What Triton loads but never applies: per-level settings with one queue, an override with no timeout.

    scheduler_utils.cc builds only the default queue when priority_levels is 0, and PolicyQueue::Enqueue
    takes a request's timeout only when it is shorter than the policy's default (never when that is 0).
    """
    findings = []
    if batching.priority_levels == 0:
        findings += [
            warning(f"dynamic_batching.{field}", f"{field} is ignored while priority_levels is 0")
            for field, given in (("priority_queue_policy", bool(batching.priority_queue_policy)),
                                 ("default_priority_level", batching.default_priority_level != 0))
            if given
        ]
    policies = [("dynamic_batching.default_queue_policy", batching.default_queue_policy)]
    policies += [(f'dynamic_batching.priority_queue_policy["{level}"]', policy)
                 for level, policy in sorted(batching.priority_queue_policy.items())]
    findings += [
        warning(f"{where}.allow_timeout_override",
                "allow_timeout_override has no effect while default_timeout_microseconds is 0: "
                "Triton applies a request's timeout only when it is shorter than the default")
        for where, policy in policies
        if policy.allow_timeout_override and policy.default_timeout_microseconds == 0
    ]
    return findings


def _preserve_ordering(batching: mc.ModelDynamicBatching, name: str) -> list[Finding]:
    """preserve_ordering allows one priority level and no DELAY timeout action."""
    findings = []
    if batching.priority_levels > 1:
        findings.append(
            error(
                "dynamic_batching.priority_levels",
                f"Only one priority level is allowed when 'preserve_ordering' is true for {name}",
            )
        )
    policies = [("dynamic_batching.default_queue_policy", batching.default_queue_policy)]
    policies += [
        (f'dynamic_batching.priority_queue_policy["{level}"]', policy)
        for level, policy in batching.priority_queue_policy.items()
    ]
    for where, policy in policies:
        if policy.default_timeout_microseconds != 0 and policy.timeout_action == mc.ModelQueuePolicy.DELAY:
            findings.append(
                error(
                    f"{where}.timeout_action",
                    "Queue policy can not have DELAY as timeout action "
                    f"when 'preserve_ordering' is true for {name}",
                )
            )
    return findings


def check_sequence_batching(config: mc.ModelConfig) -> list[Finding]:
    """Response cache, control tensors, oldest-first preferred sizes, direct slot utilization."""
    if not config.HasField("sequence_batching"):
        return []
    batcher = config.sequence_batching
    findings: list[Finding] = []
    if config.response_cache.enable:
        findings.append(
            error(
                "response_cache.enable",
                f"Response Cache does not currently support model "
                f"{config.name} with sequence batching scheduler. Please disable the response cache.",
            )
        )
    findings += _control_names(batcher, config.name)
    for kind in BOOLEAN_CONTROLS:
        findings += _boolean_control(batcher, kind, config.name)
    findings += _corrid_control(batcher, config.name)
    if batcher.HasField("oldest"):
        findings += _preferred_sizes(
            "sequence_batching.oldest.preferred_batch_size",
            batcher.oldest.preferred_batch_size,
            config,
            "sequence batching preferred batch size",
        )
    if batcher.HasField("direct"):
        utilization = batcher.direct.minimum_slot_utilization
        if utilization < 0.0 or utilization > 1.0:
            findings.append(
                error(
                    "sequence_batching.direct.minimum_slot_utilization",
                    "sequence batching minimum slot utilization must be in range (0.0, 1.0] for "
                    f"{config.name}",
                )
            )
    return findings


def _control_names(batcher: mc.ModelSequenceBatching, name: str) -> list[Finding]:
    """Every control tensor named, and each name used once."""
    findings, seen = [], set()
    for i, control_input in enumerate(batcher.control_input):
        where = f"sequence_batching.control_input[{i}]"
        if not control_input.name:
            findings.append(error(where, f"sequence batching control tensor must have a name for {name}"))
        elif control_input.name in seen:
            findings.append(
                error(
                    f"{where}.name",
                    f"sequence batching control tensor '{control_input.name}' is "
                    f"specified for multiple control kinds for {name}",
                )
            )
        seen.add(control_input.name)
    return findings


def _controls_of(
    batcher: mc.ModelSequenceBatching, kind: int
) -> list[tuple[str, mc.ModelSequenceBatching.Control]]:
    """(field path, control) for each control of one kind."""
    return [
        (f"sequence_batching.control_input[{i}].control[{j}]", control)
        for i, control_input in enumerate(batcher.control_input)
        for j, control in enumerate(control_input.control)
        if control.kind == kind
    ]


def _boolean_control(batcher: mc.ModelSequenceBatching, kind: int, name: str) -> list[Finding]:
    """START/END/READY: one tensor each, with exactly one of int32/fp32/bool false-true pairs."""
    kind_name = Control.Kind.Name(kind)
    controls = _controls_of(batcher, kind)
    findings = []
    if len(controls) > 1:
        message = f"sequence batching specifies multiple {kind_name} tensors for {name}"
        findings.append(error(controls[1][0], message))
    for where, control in controls:
        finding = _false_true_finding(where, control, f"{kind_name} for {name}")
        if finding is not None:
            findings.append(finding)
    return findings


def _false_true_finding(where: str, control: mc.ModelSequenceBatching.Control, suffix: str) -> Finding | None:
    """Exactly one of int32/fp32/bool_false_true, with exactly two entries."""
    given = [
        (field, len(values))
        for field, values in (
            ("int32_false_true", control.int32_false_true),
            ("fp32_false_true", control.fp32_false_true),
            ("bool_false_true", control.bool_false_true),
        )
        if values
    ]
    if not given:
        return error(where, "sequence batching must specify either 'int32_false_true', "
                            f"'fp32_false_true' or 'bool_false_true' for {suffix}")  # fmt: skip
    if len(given) > 1:
        return error(where, "sequence batching specifies more than one from 'int32_false_true', "
                            f"'fp32_false_true' and 'bool_false_true' for {suffix}")  # fmt: skip
    field, count = given[0]
    if count != 2:
        return error(
            f"{where}.{field}",
            f"sequence batching control '{field}' must have exactly 2 entries for {suffix}",
        )
    return None


def _corrid_control(batcher: mc.ModelSequenceBatching, name: str) -> list[Finding]:
    """CORRID: one tensor, no false-true values, an allowed data type."""
    kind_name = Control.Kind.Name(Control.CONTROL_SEQUENCE_CORRID)
    controls = _controls_of(batcher, Control.CONTROL_SEQUENCE_CORRID)
    findings = []
    if len(controls) > 1:
        findings.append(
            error(controls[1][0], f"sequence batching specifies multiple {kind_name} tensors for {name}")
        )
    for where, control in controls:
        if control.int32_false_true or control.fp32_false_true or control.bool_false_true:
            findings.append(
                error(
                    where,
                    "sequence batching must not specify either 'int32_false_true', "
                    f"'fp32_false_true' or 'bool_false_true' for {kind_name} for {name}",
                )
            )
        elif control.data_type not in CORRID_TYPES:
            findings.append(
                error(
                    f"{where}.data_type",
                    f"unexpected data type for control {kind_name} for "
                    f"{name}. Allowed data types are TYPE_UINT64, TYPE_INT64, TYPE_UINT32, "
                    "TYPE_INT32 and TYPE_STRING",
                )
            )
    return findings
