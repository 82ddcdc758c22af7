"""A spec's `generate:` section in config.pbtxt: decoupled, the request's tensors, bounds as parameters."""

from __future__ import annotations

from tritonclient.grpc import model_config_pb2

from triton_ge_console.backend_glue import generate_protocol
from triton_ge_console.backend_glue.generate_scheduler import Limits
from triton_ge_console.repository.spec.types import GenerateSpec


def limits(spec: GenerateSpec) -> Limits:
    """The glue's bounds for one instance, from the spec."""
    return Limits(max_tokens=spec.max_tokens, eos_token_id=spec.eos_token_id, max_running=spec.max_running,
                  max_waiting=spec.max_waiting, kv_cache_bytes=spec.kv_cache_bytes,
                  max_batched_tokens=spec.max_num_batched_tokens, max_model_len=spec.max_model_len)


def apply_generate(config: model_config_pb2.ModelConfig, spec: GenerateSpec) -> None:
    """Turn a model's config into its generate form (the ONNX's own tensors are the glue's business)."""
    config.model_transaction_policy.decoupled = True
    del config.input[:]
    del config.output[:]
    text = spec.tokenizer is not None
    for tensor in generate_protocol.inputs(text):
        message = config.input.add(name=tensor.name, dims=list(tensor.dims), optional=tensor.optional)
        message.data_type = model_config_pb2.DataType.Value(f"TYPE_{tensor.data_type}")
    for tensor in generate_protocol.outputs(text):
        message = config.output.add(name=tensor.name, dims=list(tensor.dims))
        message.data_type = model_config_pb2.DataType.Value(f"TYPE_{tensor.data_type}")
    for key, value in generate_protocol.limits_parameters(limits(spec)).items():
        config.parameters[key].string_value = value
    if text:
        tokenizer = config.parameters[generate_protocol.TOKENIZER_PARAMETER]
        tokenizer.string_value = generate_protocol.TOKENIZER_FILENAME
