"""Each of Triton's config rules rejects a bad config with Triton's own wording, at the right line."""

from __future__ import annotations

import pytest

from triton_ge_console.repository.validate import Problem, validate_config_text

HEAD = 'name: "m"\nbackend: "python"\n'
IO = (
    'input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
    'output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
)
SEQ = "max_batch_size: 4\nsequence_batching {\n  control_input [\n"
ENSEMBLE_IO = (
    'input [ { name: "A" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
    'output [ { name: "B" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
)


def _step(model: str, inputs: dict[str, str], outputs: dict[str, str]) -> str:
    """One ensemble step in text form."""
    maps = "".join(f' input_map {{ key: "{k}" value: "{v}" }}' for k, v in inputs.items())
    maps += "".join(f' output_map {{ key: "{k}" value: "{v}" }}' for k, v in outputs.items())
    return f'{{ model_name: "{model}" model_version: -1{maps} }}'


def _ensemble(*steps: str, extra: str = "") -> str:
    """An ensemble config named m with the given steps, one per line from line 5."""
    body = ",\n".join(steps)
    return (
        f'name: "m"\nplatform: "ensemble"\n{ENSEMBLE_IO}ensemble_scheduling {{ step [\n{body}\n] }}\n{extra}'
    )


# (id, config text, line, field, Triton's message)
CASES = [
    (
        "max_batch_size",
        HEAD + "max_batch_size: -1\n",
        3,
        "max_batch_size",
        "'max_batch_size' must be non-negative value for m",
    ),
    (
        "input_name",
        HEAD + "input [ { data_type: TYPE_FP32 dims: [ 1 ] } ]\n",
        3,
        "input[0].name",
        "model input must specify 'name' for m",
    ),
    (
        "input_data_type",
        HEAD + 'input [\n  { name: "IN" dims: [ 1 ] }\n]\n',
        4,
        "input[0].data_type",
        "model input 'IN' must specify 'data_type' for m",
    ),
    (
        "output_dims_missing",
        HEAD + 'output [ { name: "OUT" data_type: TYPE_FP32 } ]\n',
        3,
        "output[0].dims",
        "model output 'OUT' must specify 'dims' for m",
    ),
    (
        "dims_zero",
        HEAD + 'input [ { name: "IN" data_type: TYPE_FP32\n  dims: [ 3, 0 ] } ]\n',
        4,
        "input[0].dims[1]",
        "model input 'IN' dimension must be integer >= 1, or -1 to indicate a variable-size dimension for m",
    ),
    (
        "reshape_size",
        HEAD + 'input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ]\n  reshape { shape: [ 3 ] } } ]\n',
        4,
        "input[0].reshape",
        "model input 'IN' has different size for dims and reshape for m",
    ),
    (
        "reshape_variable",
        HEAD + 'input [ { name: "IN" data_type: TYPE_FP32 dims: [ -1, 4 ]\n'
        "  reshape { shape: [ -1, 2, -1 ] } } ]\n",
        4,
        "input[0].reshape",
        "model input 'IN' has different number of variable-size dimensions for dims and reshape for m",
    ),
    (
        "reshape_trunks",
        HEAD + 'input [ { name: "IN" data_type: TYPE_FP32 dims: [ 2, 4, -1, 6 ]\n'
        "  reshape { shape: [ 8, -1, 2, 3, 2 ] } } ]\n",
        4,
        "input[0].reshape",
        "model input 'IN' has different size for dims and reshape for m",
    ),
    (
        "reshape_empty",
        HEAD + 'output [ { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ]\n  reshape { } } ]\n',
        4,
        "output[0].reshape",
        "model output 'OUT' cannot have empty reshape for non-batching model as scalar tensors "
        "are not supported for m",
    ),
    (
        "reshape_dim",
        HEAD + 'input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ]\n  reshape { shape: [ 0 ] } } ]\n',
        4,
        "input[0].reshape.shape[0]",
        "model input 'IN' reshape dimensions must be integer >= 1, or -1 to indicate "
        "a variable-size dimension for m",
    ),
    (
        "nchw_dims",
        HEAD + 'input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4, 4 ]\n  format: FORMAT_NCHW } ]\n',
        4,
        "input[0].format",
        "model input NHWC/NCHW require 3 dims for m",
    ),
    (
        "shape_tensor",
        HEAD + 'input [ { name: "IN" data_type: TYPE_INT32 dims: [ 2 ]\n  is_shape_tensor: true } ]\n',
        4,
        "input[0].is_shape_tensor",
        "shape tensors are only supported for TensorRT platform for m",
    ),
    (
        "duplicate_input",
        HEAD + IO + 'input [ { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] } ]\n',
        5,
        "input[1].name",
        "model input 'IN' is specified more than once (requests carry one tensor per name)",
    ),
    (
        "preferred_over_max",
        HEAD + "max_batch_size: 4\ndynamic_batching {\n  preferred_batch_size: [ 2, 8 ]\n}\n",
        5,
        "dynamic_batching.preferred_batch_size[1]",
        "dynamic batching preferred size must be <= max batch size for m",
    ),
    (
        "preferred_zero",
        HEAD + "max_batch_size: 4\ndynamic_batching { preferred_batch_size: 0 }\n",
        4,
        "dynamic_batching.preferred_batch_size[0]",
        "dynamic batching preferred size must be positive for m",
    ),
    (
        "default_priority",
        HEAD + "max_batch_size: 4\ndynamic_batching {\n  priority_levels: 2\n"
        "  default_priority_level: 3\n}\n",
        6,
        "dynamic_batching.default_priority_level",
        "default priority level must be in range [1, 2] for m",
    ),
    (
        "queue_policy_level",
        HEAD + "max_batch_size: 4\ndynamic_batching {\n  priority_levels: 2\n"
        "  default_priority_level: 1\n  priority_queue_policy { key: 5 value { max_queue_size: 3 } }\n}\n",
        7,
        'dynamic_batching.priority_queue_policy["5"]',
        "priority queue policy must have priority level in range [1, 2] for m",
    ),
    (
        "preserve_ordering_levels",
        HEAD + "max_batch_size: 4\ndynamic_batching {\n  preserve_ordering: true\n"
        "  priority_levels: 2\n  default_priority_level: 1\n}\n",
        6,
        "dynamic_batching.priority_levels",
        "Only one priority level is allowed when 'preserve_ordering' is true for m",
    ),
    (
        "preserve_ordering_delay",
        HEAD + "max_batch_size: 4\ndynamic_batching {\n  preserve_ordering: true\n"
        "  default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 100 }\n}\n",
        6,
        "dynamic_batching.default_queue_policy.timeout_action",
        "Queue policy can not have DELAY as timeout action when 'preserve_ordering' is true for m",
    ),
    (
        "control_values",
        HEAD + SEQ + '    { name: "START"\n      control [ { kind: CONTROL_SEQUENCE_START } ] }\n  ]\n}\n',
        7,
        "sequence_batching.control_input[0].control[0]",
        "sequence batching must specify either "
        "'int32_false_true', 'fp32_false_true' or 'bool_false_true' for CONTROL_SEQUENCE_START for m",
    ),
    (
        "control_two_kinds_of_values",
        HEAD + SEQ + '    { name: "END" control [ { kind: CONTROL_SEQUENCE_END\n'
        "      int32_false_true: [ 0, 1 ] fp32_false_true: [ 0, 1 ] } ] }\n  ]\n}\n",
        6,
        "sequence_batching.control_input[0].control[0]",
        "sequence batching specifies more than one from "
        "'int32_false_true', 'fp32_false_true' and 'bool_false_true' for CONTROL_SEQUENCE_END for m",
    ),
    (
        "control_entries",
        HEAD + SEQ + '    { name: "READY" control [ { kind: CONTROL_SEQUENCE_READY\n'
        "      bool_false_true: [ false, true, true ] } ] }\n  ]\n}\n",
        7,
        "sequence_batching.control_input[0].control[0].bool_false_true",
        "sequence batching control "
        "'bool_false_true' must have exactly 2 entries for CONTROL_SEQUENCE_READY for m",
    ),
    (
        "control_twice",
        HEAD + SEQ + '    { name: "S1" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: '
        '[ 0, 1 ] } ] },\n    { name: "S2" control [ { kind: CONTROL_SEQUENCE_START '
        "int32_false_true: [ 0, 1 ] } ] }\n"
        "  ]\n}\n",
        7,
        "sequence_batching.control_input[1].control[0]",
        "sequence batching specifies multiple CONTROL_SEQUENCE_START tensors for m",
    ),
    (
        "control_no_name",
        HEAD + SEQ + "    { control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] }"
        "\n  ]\n}\n",
        6,
        "sequence_batching.control_input[0]",
        "sequence batching control tensor must have a name for m",
    ),
    (
        "control_name_reused",
        HEAD + SEQ + '    { name: "C" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: '
        '[ 0, 1 ] } ] },\n    { name: "C" control [ { kind: CONTROL_SEQUENCE_END '
        "int32_false_true: [ 0, 1 ] } ] }\n"
        "  ]\n}\n",
        7,
        "sequence_batching.control_input[1].name",
        "sequence batching control tensor 'C' is specified for multiple control kinds for m",
    ),
    (
        "corrid_type",
        HEAD + SEQ + '    { name: "CORRID"\n      control [ { kind: CONTROL_SEQUENCE_CORRID '
        "data_type: TYPE_FP32 } ] }\n  ]\n}\n",
        7,
        "sequence_batching.control_input[0].control[0].data_type",
        "unexpected data type for control CONTROL_SEQUENCE_CORRID for m. Allowed data types are TYPE_UINT64, "
        "TYPE_INT64, TYPE_UINT32, TYPE_INT32 and TYPE_STRING",
    ),
    (
        "corrid_values",
        HEAD + SEQ + '    { name: "CORRID"\n      control [ { kind: CONTROL_SEQUENCE_CORRID '
        "data_type: TYPE_UINT64 int32_false_true: [ 0, 1 ] } ] }\n  ]\n}\n",
        7,
        "sequence_batching.control_input[0].control[0]",
        "sequence batching must not specify either "
        "'int32_false_true', 'fp32_false_true' or 'bool_false_true' for CONTROL_SEQUENCE_CORRID for m",
    ),
    (
        "oldest_preferred",
        HEAD + "max_batch_size: 2\nsequence_batching {\n  oldest { preferred_batch_size: [ 4 ] }\n}\n",
        5,
        "sequence_batching.oldest.preferred_batch_size[0]",
        "sequence batching preferred batch size must be <= max batch size for m",
    ),
    (
        "direct_utilization",
        HEAD + "sequence_batching {\n  direct { minimum_slot_utilization: 1.5 }\n}\n",
        4,
        "sequence_batching.direct.minimum_slot_utilization",
        "sequence batching minimum slot utilization must be in range (0.0, 1.0] for m",
    ),
    (
        "sequence_cache",
        HEAD + "sequence_batching { }\nresponse_cache { enable: true }\n",
        4,
        "response_cache.enable",
        "Response Cache does not currently support model m with sequence batching scheduler. "
        "Please disable the "
        "response cache.",
    ),
    (
        "decoupled_cache",
        HEAD + "model_transaction_policy { decoupled: true }\nresponse_cache {\n  enable: true\n}\n",
        5,
        "response_cache.enable",
        "Response Cache does not currently support model m with 'decoupled' transaction "
        "policy. Please disable the response cache.",
    ),
    (
        "platform_backend_pair",
        'name: "m"\nbackend: "onnxruntime"\nplatform: "tensorrt_plan"\n',
        3,
        "platform",
        "unexpected 'platform' and 'backend' pair, got:tensorrt_plan, onnxruntime",
    ),
    (
        "unknown_platform",
        'name: "m"\nplatform: "caffe2_netdef"\n',
        2,
        "platform",
        "unexpected platform type 'caffe2_netdef' for m",
    ),
    (
        "ensemble_with_backend",
        _ensemble(_step("x", {"i": "A"}, {"o": "B"}), extra='backend: "python"\n'),
        8,
        "backend",
        "Ensemble model 'm' must have platform type 'ensemble' and empty backend type",
    ),
    (
        "scheduling_not_ensemble",
        HEAD + IO + "ensemble_scheduling {\n  step [ ]\n}\n",
        5,
        "ensemble_scheduling",
        "ensemble scheduling cannot be set for model 'm' whose platform is not ensemble",
    ),
    (
        "ensemble_without_scheduling",
        'name: "m"\nplatform: "ensemble"\n' + ENSEMBLE_IO,
        2,
        "platform",
        "ensemble scheduling must be set for ensemble m whose platform is ensemble",
    ),
    (
        "ensemble_instance_group",
        _ensemble(_step("x", {"i": "A"}, {"o": "B"}), extra="instance_group [ { count: 1 } ]\n"),
        8,
        "instance_group",
        "instance group should not be specified for ensemble 'm'",
    ),
    (
        "ensemble_step_model",
        _ensemble(_step("x", {"i": "A"}, {"o": "B"}), _step("", {"i": "A"}, {"o": "C"})),
        7,
        "ensemble_scheduling.step[1]",
        "must specify 'model_name' in step 1 of ensemble 'm'",
    ),
    (
        "ensemble_output_twice",
        _ensemble(_step("x", {"i": "A"}, {"o": "B"}), _step("y", {"i": "A"}, {"o": "B"})),
        7,
        'ensemble_scheduling.step[1].output_map["o"]',
        "ensemble tensor 'B' can appear in an output map only once for ensemble 'm' step 1",
    ),
    (
        "ensemble_not_written",
        _ensemble(_step("x", {"i": "A", "j": "Z"}, {"o": "B"})),
        4,
        "output[0]",
        "output 'B' for ensemble 'm' is not written: at least one of its depending tensors, 'Z', "
        "is not connected",
    ),
    (
        "ensemble_input_unused",
        _ensemble(_step("x", {"i": "Q"}, {"o": "B"})),
        3,
        "input[0]",
        "ensemble input 'A' for ensemble m' is not used",
    ),
    (
        "ensemble_tensor_unused",
        _ensemble(_step("x", {"i": "A"}, {"o": "B", "p": "SPARE"})),
        5,
        "ensemble_scheduling",
        "ensemble tensor 'SPARE' is unused in ensemble 'm'",
    ),
    (
        "batch_input_sources",
        HEAD + IO + 'batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "N"\n'
        "  data_type: TYPE_INT32 } ]\n",
        5,
        "batch_input[0].source_input",
        "batch input kind 'BATCH_ELEMENT_COUNT' expects 1 source input, got 0 for m",
    ),
    (
        "batch_input_type",
        HEAD + IO + 'batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "N"\n'
        '  data_type: TYPE_INT64 source_input: "IN" } ]\n',
        6,
        "batch_input[0].data_type",
        "batch input data type must be TYPE_INT32 or TYPE_FP32 for m",
    ),
    (
        "batch_input_unknown_source",
        HEAD + IO + 'batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "N"\n'
        '  data_type: TYPE_FP32 source_input: "NOPE" } ]\n',
        6,
        "batch_input[0].source_input[0]",
        "unknown source input name 'NOPE' for m",
    ),
    (
        "batch_output_target",
        HEAD + IO + "batch_output [ { kind: BATCH_SCATTER_WITH_INPUT_SHAPE\n"
        '  source_input: "IN" target_name: [ "OUT", "GONE" ] } ]\n',
        6,
        "batch_output[0].target_name[1]",
        "unknown target output name 'GONE' for m",
    ),
    (
        "batch_output_target_twice",
        HEAD + IO + "batch_output [ { kind: BATCH_SCATTER_WITH_INPUT_SHAPE\n"
        '  source_input: "IN" target_name: [ "OUT", "OUT" ] } ]\n',
        6,
        "batch_output[0].target_name[1]",
        "target output name 'OUT' can only be specified once for m",
    ),
    (
        "kind_model_gpus",
        HEAD + "instance_group [\n  { kind: KIND_MODEL\n    gpus: [ 0 ] }\n]\n",
        5,
        "instance_group[0].gpus",
        "instance group m_0 of model m has kind KIND_MODEL but specifies one or more GPUs",
    ),
    (
        "kind_cpu_gpus",
        HEAD + 'instance_group [ { name: "g" kind: KIND_CPU gpus: [ 1 ] } ]\n',
        3,
        "instance_group[0].gpus",
        "instance group g of model m has kind KIND_CPU but specifies one or more GPUs",
    ),
    (
        "profile",
        HEAD + 'instance_group [ { kind: KIND_CPU\n  profile: "0" } ]\n',
        4,
        "instance_group[0].profile",
        "instance group m_0 of model m and platform specifies profile field which is only supported "
        "for TensorRT "
        "models",
    ),
    (
        "metrics",
        HEAD + 'model_metrics {\n  metric_control [ { metric_identifier { family: "f" } } ]\n}\n',
        4,
        "model_metrics.metric_control[0]",
        "metric control must specify 'histogram_options'",
    ),
]


def _errors(text: str, path: str = "repo/m/config.pbtxt") -> list[Problem]:
    """The errors validating text as a config alone."""
    return list(validate_config_text(text, path).errors)


@pytest.mark.parametrize(
    ("text", "line", "field", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_rule_rejects_with_tritons_wording(text: str, line: int, field: str, message: str) -> None:
    """Triton's message (its first error), the line and field path where the mistake is written."""
    errors = _errors(text)
    assert [(p.message, p.field, p.line) for p in errors[:1]] == [(message, field, line)]
    assert str(errors[0]).startswith(f"repo/m/config.pbtxt:{line}:")


def test_all_errors_are_reported_at_once() -> None:
    """Triton stops at its first error; the validator reports them all."""
    text = (
        HEAD
        + 'max_batch_size: -1\ninput [ { name: "IN" dims: [ 0 ] } ]\n'
        + "instance_group [ { kind: KIND_CPU gpus: 0 } ]\n"
    )
    fields = [p.field for p in _errors(text)]
    assert fields == ["max_batch_size", "instance_group[0].gpus", "input[0].data_type"]


def test_problem_string_names_file_line_column_and_field() -> None:
    """The one-line form operators read: file:line:column field: message."""
    (problem,) = _errors(HEAD + "max_batch_size: -1\n")
    assert str(problem) == (
        "repo/m/config.pbtxt:3:1 max_batch_size: 'max_batch_size' must be non-negative value for m"
    )


def test_unnamed_config_takes_its_folder_name() -> None:
    """Like Triton, a config without name is named after its folder; with no folder it is an error."""
    text = 'backend: "python"\nmax_batch_size: -1\n'
    assert _errors(text)[0].message == "'max_batch_size' must be non-negative value for m"
    assert _errors(text, path="config.pbtxt")[0].message == "model configuration must specify 'name'"


def test_valid_configs_pass() -> None:
    """Wildcards, matching reshapes, a good sequence batcher and ensemble are all accepted."""
    good = [
        HEAD + 'max_batch_size: 8\ninput [ { name: "IN" data_type: TYPE_FP32 dims: [ 2, 4, -1, 6 ]\n'
        "  reshape { shape: [ 8, -1, 1, 6 ] } } ]\ndynamic_batching { preferred_batch_size: [ 4, 8 ] }\n",
        HEAD + 'max_batch_size: 1\ninput [ { name: "IN" data_type: TYPE_FP32 dims: [ 1 ] reshape { } } ]\n',
        HEAD
        + SEQ
        + '    { name: "S" control [ { kind: CONTROL_SEQUENCE_START fp32_false_true: [ 0, 1 ] } ] },\n'
        '    { name: "ID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_STRING } ] }\n  ]\n}\n',
        _ensemble(_step("x", {"i": "A"}, {"o": "T"}), _step("y", {"i": "T"}, {"o": "B"})),
    ]
    for text in good:
        assert _errors(text) == [], text
