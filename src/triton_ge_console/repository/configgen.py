"""ModelSpec → Triton's ModelConfig message, the one place that decides what a built config.pbtxt says."""

from __future__ import annotations

from tritonclient.grpc import model_config_pb2

from triton_ge_console.model_files.tensors import TensorSpec
from triton_ge_console.repository import pbtxt
from triton_ge_console.repository.generate_config import apply_generate
from triton_ge_console.repository.spec.types import (
    DynamicBatchingSpec,
    ModelSpec,
    QueuePolicySpec,
)

ONNX_FILENAME = "model.onnx"
OM_FILENAME = "model.om"


def default_om_model_path() -> str:
    """The OM path a `ge` config carries: relative, so each version resolves it in its own version folder.

    The glue (backend_glue.settings) and the validator (rules.ge) resolve a relative path against the version
    folder first, then the model folder; Triton's python backend passes both in initialize()'s args.
    """
    return OM_FILENAME


def config_parameters(model: ModelSpec) -> dict[str, str]:
    """The parameters a model's config carries: the spec's, the OM path for `ge`, and the NPU ids."""
    params = dict(model.parameters)
    if model.backend == "ge":
        params.setdefault("om_model_path", default_om_model_path())
    device_ids = model.instance_group.device_ids
    if model.backend == "npu_ge" or device_ids != (0,):
        params["device_ids"] = ",".join(str(d) for d in device_ids)
    if model.instance_group.tensor_parallel > 1:
        params["tensor_parallel"] = str(model.instance_group.tensor_parallel)
    return params


def _tensor(message: model_config_pb2.ModelInput | model_config_pb2.ModelOutput, tensor: TensorSpec) -> None:
    """Fill one input/output message."""
    message.name = tensor.name
    message.data_type = model_config_pb2.DataType.Value(f"TYPE_{tensor.data_type}")
    message.dims.extend(tensor.dims)
    if tensor.optional and isinstance(message, model_config_pb2.ModelInput):
        message.optional = True
    if tensor.reshape is not None:
        message.reshape.SetInParent()
        message.reshape.shape.extend(tensor.reshape)


def _batching(batching: model_config_pb2.ModelDynamicBatching, spec: DynamicBatchingSpec) -> None:
    """Fill the dynamic batcher: sizes, delay, priority levels and queue policies."""
    batching.SetInParent()
    batching.preferred_batch_size.extend(spec.preferred_batch_size)
    batching.max_queue_delay_microseconds = spec.max_queue_delay_microseconds
    batching.priority_levels = spec.priority_levels
    batching.default_priority_level = spec.default_priority_level
    if spec.default_queue_policy is not None:
        _queue_policy(batching.default_queue_policy, spec.default_queue_policy)
    for level, policy in spec.priority_queue_policy:
        _queue_policy(batching.priority_queue_policy[level], policy)


def _queue_policy(message: model_config_pb2.ModelQueuePolicy, policy: QueuePolicySpec) -> None:
    """Fill one ModelQueuePolicy."""
    message.SetInParent()
    message.timeout_action = model_config_pb2.ModelQueuePolicy.TimeoutAction.Value(policy.timeout_action)
    message.default_timeout_microseconds = policy.default_timeout_microseconds
    message.allow_timeout_override = policy.allow_timeout_override
    message.max_queue_size = policy.max_queue_size


def model_config(model: ModelSpec) -> model_config_pb2.ModelConfig:
    """The config Triton loads for this model."""
    config = model_config_pb2.ModelConfig(
        name=model.name, backend=model.backend, max_batch_size=model.max_batch_size
    )
    if len(model.versions) > 1:
        config.version_policy.specific.versions.extend(sorted(model.versions))
    for tensor in model.inputs:
        _tensor(config.input.add(), tensor)
    for tensor in model.outputs:
        _tensor(config.output.add(), tensor)
    if model.instance_group.count != 1:
        config.instance_group.add(
            count=model.instance_group.count, kind=model_config_pb2.ModelInstanceGroup.KIND_CPU
        )
    if model.dynamic_batching is not None:
        _batching(config.dynamic_batching, model.dynamic_batching)
    for key, value in config_parameters(model).items():
        config.parameters[key].string_value = value
    if model.generate is not None:
        apply_generate(config, model.generate)
    return config


def config_text(model: ModelSpec) -> str:
    """config.pbtxt text for this model (stable: the same spec always gives the same bytes)."""
    return pbtxt.dumps(model_config(model))
