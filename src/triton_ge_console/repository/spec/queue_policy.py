"""The queue policy keys of a spec's `dynamic_batching`: priority levels and ModelQueuePolicy, positioned.

Triton's load-time rules (model_config_utils.cc) are checked here at the spec's lines; what Triton loads but
ignores (a policy or default level without `priority_levels`, a timeout override with no default timeout,
which scheduler_utils.cc's PolicyQueue::Enqueue never applies) is refused in a spec too, since it cannot
be what the operator meant.
"""

from __future__ import annotations

import dataclasses

import yaml

from triton_ge_console.repository.spec.nodes import Reader, join, suggest
from triton_ge_console.repository.spec.types import DynamicBatchingSpec, QueuePolicySpec

QUEUE_KEYS = ("priority_levels", "default_priority_level", "default_queue_policy", "priority_queue_policy")
POLICY_KEYS = ("timeout_action", "default_timeout_microseconds", "allow_timeout_override", "max_queue_size")
TIMEOUT_ACTIONS = ("REJECT", "DELAY")
UINT32_MAX = 2**32 - 1  # max_queue_size is a uint32 in model_config.proto
Entries = dict[str, tuple[yaml.Node, yaml.Node]]


def with_queue(reader: Reader, base: DynamicBatchingSpec, entries: Entries, path: str) -> DynamicBatchingSpec:
    """base with the queue keys of a batching mapping's entries (problems recorded)."""
    levels = _integer(reader, entries, "priority_levels", path) or 0
    default_level = _integer(reader, entries, "default_priority_level", path) or 0
    if levels and "default_priority_level" in entries and not 1 <= default_level <= levels:
        reader.problems.add(entries["default_priority_level"][1], join(path, "default_priority_level"),
                            f"must be in range [1, {levels}] (Triton: default priority level must be in "
                            f"range [1, priority_levels])")
    elif levels and "default_priority_level" not in entries:
        reader.problems.add(entries["priority_levels"][1], join(path, "priority_levels"),
                            f"needs default_priority_level in [1, {levels}] (Triton refuses 0)")
    default_policy = None
    if "default_queue_policy" in entries:
        where = join(path, "default_queue_policy")
        default_policy = read_policy(reader, entries["default_queue_policy"][1], where)
    return dataclasses.replace(
        base,
        priority_levels=levels,
        default_priority_level=default_level,
        default_queue_policy=default_policy,
        priority_queue_policy=_level_policies(reader, entries, path, levels),
    )


def _integer(reader: Reader, entries: Entries, key: str, path: str) -> int | None:
    """A non-negative integer entry, or None when absent or bad."""
    if key not in entries:
        return None
    return reader.integer(entries[key][1], join(path, key), 0)


def _level_policies(reader: Reader, entries: Entries, path: str,
                    levels: int) -> tuple[tuple[int, QueuePolicySpec], ...]:
    """priority_queue_policy: level → policy, each level within [1, priority_levels]."""
    for key in ("priority_queue_policy", "default_priority_level"):
        if key in entries and not levels and "priority_levels" not in entries:
            reader.problems.add(entries[key][0], join(path, key),
                                "needs priority_levels (Triton ignores it with a single queue)")
    if "priority_queue_policy" not in entries:
        return ()
    node, where = entries["priority_queue_policy"][1], join(path, "priority_queue_policy")
    found: dict[int, QueuePolicySpec] = {}
    for key, (key_node, value_node) in (reader.mapping(node, where) or {}).items():
        level = int(key) if key.isdigit() else None
        if level is None or (levels and not 1 <= level <= levels):
            top = levels or "priority_levels"
            message = f"priority level must be an integer in range [1, {top}]"
            reader.problems.add(key_node, join(where, key), message)
            continue
        policy = read_policy(reader, value_node, join(where, key))
        if policy is not None:
            found[level] = policy
    return tuple(sorted(found.items()))


def read_policy(reader: Reader, node: yaml.Node, path: str) -> QueuePolicySpec | None:
    """One ModelQueuePolicy mapping."""
    entries = reader.mapping(node, path, POLICY_KEYS)
    if entries is None:
        return None
    before = len(reader.problems.items)
    action = "REJECT"
    if "timeout_action" in entries:
        raw = reader.text(entries["timeout_action"][1], join(path, "timeout_action"))
        action = (raw or "").upper()
        if raw is not None and action not in TIMEOUT_ACTIONS:
            reader.problems.add(entries["timeout_action"][1], join(path, "timeout_action"),
                                f"unknown action '{raw}'{suggest(action, TIMEOUT_ACTIONS)}")
    timeout = _integer(reader, entries, "default_timeout_microseconds", path) or 0
    size_node = entries.get("max_queue_size")
    size = reader.integer(size_node[1], join(path, "max_queue_size"), 0, UINT32_MAX) if size_node else 0
    override = False
    if "allow_timeout_override" in entries:
        where = join(path, "allow_timeout_override")
        override = bool(reader.boolean(entries["allow_timeout_override"][1], where))
        if override and not timeout:
            reader.problems.add(entries["allow_timeout_override"][1], where,
                                "has no effect without default_timeout_microseconds: Triton applies a "
                                "request's timeout only when it is shorter than the default")
    if len(reader.problems.items) > before:
        return None
    return QueuePolicySpec(action, timeout, override, size or 0)
