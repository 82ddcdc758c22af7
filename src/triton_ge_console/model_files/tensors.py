"""A model input or output as config.pbtxt declares it: what the spec and the ONNX graph both describe."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TensorSpec:
    """One model input or output as the operator declares it (or as read from the ONNX graph)."""

    name: str
    data_type: str  # Triton's name without the TYPE_ prefix: FP32, INT64, ...
    dims: tuple[int, ...]
    # config.pbtxt's `reshape`: the shape the model sees without the batch dim (None: as dims). A batching
    # model's batch-only tensor (ONNX [N]) is served as dims [1] reshaped to [] by Triton itself.
    reshape: tuple[int, ...] | None = None
    ranked: bool = True  # False: the ONNX gives no shape at all (any rank), served as dims [-1]
    optional: bool = False  # an ONNX input with an initializer (a default): requests may leave it out
