"""Serving options of one spec model: dynamic batching, instances, GE parameters, console thresholds."""

from __future__ import annotations

from collections.abc import Sequence

import yaml

from triton_ge_console.backend_glue.settings import leaves_model_folder
from triton_ge_console.ge_backends import (
    EXECUTION_MODES,
    NPU_GE_PARAMETERS,
    NPU_GE_SWITCH_VALUES,
    ge_option_reason,
    is_ge_option,
    is_npu_ge_parameter_option,
    npu_ge_blocks_problem,
    npu_ge_repeated_id_problem,
    npu_ge_scheduling_problem,
    npu_ge_switch_problem,
    stoi,
)
from triton_ge_console.repository.spec.nodes import (
    INT32_MAX,
    Problems,
    Reader,
    join,
    short,
    suggest,
    unknown_key_message,
)
from triton_ge_console.repository.spec.queue_policy import QUEUE_KEYS, with_queue
from triton_ge_console.repository.spec.types import (
    DynamicBatchingSpec,
    InstanceGroupSpec,
    ModelSpec,
    ServerSpec,
)

BATCHING_KEYS = ("preferred_batch_size", "max_queue_delay_microseconds", *QUEUE_KEYS)
INSTANCE_KEYS = ("count", "device_ids", "tensor_parallel")
MODEL_PATH_KEYS = ("om_model_path", "onnx_model_path")
MAX_INSTANCES = 64  # per group; each instance of a GE model is its own backend process and device context
THRESHOLD_KEYS = ("queue_depth", "p99_ms", "timed_out", "ttft_p99_ms", "itl_p99_ms", "kv_cache_share")
# Parameters the GE backends read; others pass through (Triton ignores what a backend does not read), but a
# near-miss of one of these is almost surely a typo and is reported.
KNOWN_PARAMETERS = (
    "om_model_path",
    "onnx_model_path",
    *(key for key in NPU_GE_PARAMETERS if key != "device_ids"),
    "execution_mode",
    "intra_op_thread_count",
    "inter_op_thread_count",
    "npu_memory_gib",
)


def read_batching(
    reader: Reader, node: yaml.Node | None, path: str, max_batch: int | None
) -> DynamicBatchingSpec | None:
    """Dynamic batching: `{}`/true for defaults, or preferred sizes, a queue delay and queue policies."""
    if node is None or (isinstance(node, yaml.ScalarNode) and reader.value(node) is False):
        return None
    if max_batch == 0:
        reader.problems.add(node, path, "needs max_batch_size > 0 (Triton batches along the first dim)")
    if isinstance(node, yaml.ScalarNode) and reader.value(node) in (True, None):
        return DynamicBatchingSpec()
    entries = reader.mapping(node, path, BATCHING_KEYS)
    if entries is None:
        return None
    preferred = _preferred(reader, entries, path, max_batch)
    delay = 0
    if "max_queue_delay_microseconds" in entries:
        delay = (
            reader.integer(
                entries["max_queue_delay_microseconds"][1], join(path, "max_queue_delay_microseconds"), 0
            )
            or 0
        )
    return with_queue(reader, DynamicBatchingSpec(preferred, delay), entries, path)


def _preferred(
    reader: Reader, entries: dict[str, tuple[yaml.Node, yaml.Node]], path: str, max_batch: int | None
) -> tuple[int, ...]:
    """Preferred batch sizes, each at most max_batch_size."""
    if "preferred_batch_size" not in entries:
        return ()
    pref_node = entries["preferred_batch_size"][1]
    preferred = reader.int_list(pref_node, join(path, "preferred_batch_size"), 1, INT32_MAX) or ()
    too_big = [size for size in preferred if max_batch and size > max_batch]
    if too_big:
        reader.problems.add(
            pref_node,
            join(path, "preferred_batch_size"),
            f"{too_big[0]} is larger than max_batch_size {max_batch}",
        )
    return preferred


def read_instance_group(reader: Reader, node: yaml.Node | None, path: str,
                        backend: str | None = None) -> InstanceGroupSpec | None:
    """Instance count and NPU device ids (npu_ge's each named once: npu_ge_repeated_id_problem)."""
    if node is None:
        return InstanceGroupSpec()
    entries = reader.mapping(node, path, INSTANCE_KEYS)
    if entries is None:
        return None
    count: int | None = 1
    device_ids: tuple[int, ...] | None = (0,)
    if "count" in entries:
        count = reader.integer(entries["count"][1], join(path, "count"), 1)
        if count is not None and count > MAX_INSTANCES:
            reader.problems.add(entries["count"][1], join(path, "count"),
                                f"must be <= {MAX_INSTANCES} (each instance is a backend process)")
            count = None
    if "device_ids" in entries:
        device_ids = reader.int_list(entries["device_ids"][1], join(path, "device_ids"), 0, INT32_MAX)
        if device_ids is not None and not device_ids:
            reader.problems.add(
                entries["device_ids"][1], join(path, "device_ids"), "must list at least one id"
            )
            device_ids = None
        problem = npu_ge_repeated_id_problem(device_ids) if backend == "npu_ge" and device_ids else None
        if problem is not None:
            reader.problems.add(entries["device_ids"][1], join(path, "device_ids"), problem)
            device_ids = None
    parallel = _tensor_parallel(reader, entries, path, device_ids)
    if count is None or device_ids is None or parallel is None:
        return None
    return InstanceGroupSpec(count, device_ids, parallel, named_devices="device_ids" in entries)


def _tensor_parallel(
    reader: Reader,
    entries: dict[str, tuple[yaml.Node, yaml.Node]],
    path: str,
    device_ids: tuple[int, ...] | None,
) -> int | None:
    """NPUs per instance: device_ids must cut into whole groups of that many."""
    if "tensor_parallel" not in entries:
        return 1
    node = entries["tensor_parallel"][1]
    parallel = reader.integer(node, join(path, "tensor_parallel"), 1)
    if parallel is not None and device_ids is not None and len(device_ids) % parallel:
        reader.problems.add(node, join(path, "tensor_parallel"),
                            f"{parallel} NPUs per instance, but device_ids lists {len(device_ids)}: "
                            f"list a multiple of {parallel}")
        return None
    if parallel and parallel > 1 and device_ids is not None and len(set(device_ids)) != len(device_ids):
        reader.problems.add(entries["device_ids"][1], join(path, "device_ids"),
                            "lists an NPU twice: one instance cannot span the same NPU twice")
        return None
    return parallel


def read_parameters(reader: Reader, node: yaml.Node | None, path: str, backend: str | None) -> dict[str, str]:
    """GE parameters as strings, in spec order; a near-miss of a known key is a problem, a GE option one
    the backend does not read as a parameter too (npu_ge reads session.* and graph.*)."""
    if node is None:
        return {}
    entries = reader.mapping(node, path)
    params: dict[str, str] = {}
    for key, (key_node, value_node) in (entries or {}).items():
        key_path = join(path, key)
        if key in ("device_ids", "DEVICEIDS"):
            reader.problems.add(key_node, key_path, "set NPUs with instance_group.device_ids")
            continue
        npu_ge_option = backend == "npu_ge" and is_npu_ge_parameter_option(key)
        if is_ge_option(key) and not npu_ge_option:
            reader.problems.add(key_node, key_path, ge_option_reason(key))
            continue
        near_miss = suggest(key, KNOWN_PARAMETERS).startswith("; did you mean")
        if near_miss and not npu_ge_option and key not in KNOWN_PARAMETERS:
            reader.problems.add(key_node, key_path, unknown_key_message(key, KNOWN_PARAMETERS))
            continue
        value = reader.scalar_text(value_node, key_path)
        if key == "execution_mode" and value is not None and value not in EXECUTION_MODES:
            reader.problems.add(
                value_node, key_path, f"unknown mode '{value}'{suggest(value, EXECUTION_MODES)}"
            )
        elif key in MODEL_PATH_KEYS and value is not None and leaves_model_folder(value):
            reader.problems.add(value_node, key_path, f"'{short(value)}' leaves the model folder "
                                "(relative paths are read from the version folder; absolute ones are kept)")
        elif backend == "npu_ge" and value is not None and npu_ge_switch_problem(key, value):
            reader.problems.add(value_node, key_path, _switch_message(key, value, reader.value(value_node)))
        elif value is not None:
            params[key] = value
    return params


def _switch_message(key: str, value: str, written: object) -> str:
    """A switch npu_ge would ignore in silence, and what to write (an unquoted true reaches it as '1')."""
    on = NPU_GE_SWITCH_VALUES[key][-1]
    quote = " (an unquoted true is written as '1': quote it)" if written is True and on != "1" else ""
    return (f"{npu_ge_switch_problem(key, value)}, in silence (model_state.cpp ParseModelParametersConfig "
            f"compares it as written); write '{on}'{quote} or leave the key out")


def read_thresholds(reader: Reader, node: yaml.Node | None, path: str) -> tuple[tuple[str, float], ...]:
    """Console colouring thresholds."""
    if node is None:
        return ()
    entries = reader.mapping(node, path, THRESHOLD_KEYS) or {}
    found = [
        (key, reader.number(value, join(path, key), positive=True)) for key, (_, value) in entries.items()
    ]
    return tuple((key, value) for key, value in found if value is not None)


def check_static(reader: Reader, parameters: dict[str, str], values: dict[str, yaml.Node], path: str,
                 backend: str | None = "npu_ge") -> None:
    """npu_ge reads static_model as an integer (std::stoi: "true" fails its load); its static graph (1)
    and Triton's dynamic batching exclude each other (the ge glue has no static graph: it runs an OM)."""
    text = parameters.get("static_model")
    if text is not None and stoi(text) is None:
        node = _parameter_value(values.get("parameters"), "static_model")
        reader.problems.add(node, join(path, "parameters.static_model"),
                            f"'{text}': npu_ge reads static_model as an integer (std::stoi), so this fails "
                            "the model's load; use 1 (static graph) or 0")
        return
    batching = values.get("dynamic_batching")
    if (
        backend == "npu_ge"
        and text is not None and stoi(text) == 1
        and batching is not None
        and not (isinstance(batching, yaml.ScalarNode) and reader.value(batching) is False)
    ):
        reader.problems.add(
            batching,
            join(path, "dynamic_batching"),
            "cannot be used with parameters.static_model (GE's static graph needs fixed shapes)",
        )


def check_blocks(reader: Reader, parameters: dict[str, str], values: dict[str, yaml.Node], path: str,
                 backend: str | None) -> None:
    """npu_ge's block counts that open no GE session (ge_backends.npu_ge_blocks_problem)."""
    if backend != "npu_ge":
        return
    for key in ("device_exec_blocks", "instance_exec_blocks"):
        value = stoi(parameters[key]) if key in parameters else None
        problem = npu_ge_blocks_problem(key, value) if value is not None else None
        if problem is not None:
            node = _parameter_value(values.get("parameters"), key)
            reader.problems.add(node, join(path, f"parameters.{key}"), problem)


def check_scheduling(problems: Problems, items: Sequence[yaml.Node], models: Sequence[ModelSpec],
                     server: ServerSpec) -> None:
    """npu_ge_scheduling_problem of each npu_ge model, its block counts over server.backend_config.npu_ge's
    (ParseModelParametersConfig runs after DisposeConfig), at its instance_exec_blocks where it gives one."""
    cmdline = {k: v for b, k, v in server.backend_config if b == "npu_ge"}
    for i, (item, model) in enumerate(zip(items, models, strict=True)):
        if model.backend != "npu_ge":
            continue
        given = {**cmdline, **dict(model.parameters)}
        device, instance = (stoi(given[key]) if key in given else None
                            for key in ("device_exec_blocks", "instance_exec_blocks"))
        problem = npu_ge_scheduling_problem(device, instance, model.instance_group.count,
                                            len(model.instance_group.device_ids))
        if problem is None:
            continue
        path = join(f"models[{i}]", "parameters.instance_exec_blocks")
        node = _parameter_value(_parameter_value(item, "parameters"), "instance_exec_blocks")
        if node is None:
            problem = f"given in server.backend_config.npu_ge: {problem}"
        problems.add(node or item, path, problem)


def check_npu_ge_group(reader: Reader, values: dict[str, yaml.Node], path: str, backend: str | None) -> None:
    """tensor_parallel is a CPU-emulation what-if of the ge glue; npu_ge never reads it (it replicates)."""
    node = _parameter_value(values.get("instance_group"), "tensor_parallel")
    if backend != "npu_ge" or node is None or reader.value(node) in (1, "1"):
        return
    reader.problems.add(node, join(path, "instance_group.tensor_parallel"),
                        "npu_ge does not read it: it runs a full copy of the model on every NPU of "
                        "device_ids (no part of CANN splits one model over NPUs); remove it, or use backend "
                        "ge for the CPU-emulation what-if")


def _parameter_value(node: yaml.Node | None, key: str) -> yaml.Node | None:
    """The value node of key in a mapping node (None when absent)."""
    if isinstance(node, yaml.MappingNode):
        return next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key), None)
    return None
