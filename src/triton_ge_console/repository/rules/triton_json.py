"""Where Triton's HTTP/REST JSON would change a number a client sends: each JSON number is read as a 64-bit
integer (unsigned for unsigned types) and cast to the input's declared type with no range check, so a wider
value arrives wrapped. Triton's src/http_server.cc, ReadDataFromJsonHelper (v2.51.0 and on): e.g.
`data_vec[*counter] = (int32_t)si;` after `tensor_data.AsInt(&si)` into an int64_t; the generate endpoint
(ExactMappingInput) reads its JSON fields through the same function. gRPC and binary data carry the
declared type's bytes, so only JSON numbers are at risk.
"""

from __future__ import annotations

from tritonclient.grpc import model_config_pb2 as mc

from triton_ge_console.repository.rules.findings import Finding, warning

# declared type → (bits, signed): the integer types narrower than the 64 bits Triton reads a JSON number as
NARROW_INTEGERS = {
    mc.TYPE_INT8: (8, True), mc.TYPE_INT16: (16, True), mc.TYPE_INT32: (32, True),
    mc.TYPE_UINT8: (8, False), mc.TYPE_UINT16: (16, False), mc.TYPE_UINT32: (32, False),
}


def check_json_numbers(config: mc.ModelConfig) -> list[Finding]:
    """A warning at each input whose JSON numbers Triton would wrap, saying the range that arrives intact."""
    findings = []
    for i, model_input in enumerate(config.input):
        if model_input.data_type in NARROW_INTEGERS:
            findings.append(warning(f"input[{i}].data_type", _wrapped(model_input.data_type)))
    return findings


def _wrapped(data_type: int) -> str:
    """What happens to a JSON number sent to an input of this type."""
    bits, signed = NARROW_INTEGERS[data_type]
    kind = mc.DataType.Name(data_type)
    low, high = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
    read = "a 64-bit integer" if signed else "an unsigned 64-bit integer (a negative one is refused)"
    outside = f"outside {low}..{high}" if signed else f"above {high}"
    return (f"over HTTP/REST JSON Triton reads each number as {read} and casts it to {kind} unchecked "
            f"(its src/http_server.cc, ReadDataFromJsonHelper): a number {outside} arrives wrapped "
            f"({2**bits + 5} as 5). Send it as binary data or over gRPC, or export the model with an INT64 "
            "input (the declared type must be the model's)")
