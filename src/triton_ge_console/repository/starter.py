"""The commented starter spec `ge-console init` writes; also the seed deployment (examples/seed.yaml)."""

from __future__ import annotations

from pathlib import Path

STARTER_SPEC = """\
# Triton GE Console deployment spec: one server and its models.
# Build a Triton model repository from it:   ge-console build THIS_FILE -o repo
# Every key is optional unless marked "required". Unknown keys are errors (with a did-you-mean).
name: seed

server:
  http_port: 0            # 0: pick a free port when the server starts
  grpc_port: 0
  metrics_port: 0
  listen: 127.0.0.1       # address Triton binds its HTTP, gRPC and metrics endpoints to
  metrics:
    interval_ms: 1000     # how often Triton refreshes /metrics
    summary_latencies: false  # true: +4-42 % server CPU per request; the console takes p50/p99 from traces
  log_verbose: 0
  npu_memory_gib: 64      # capacity of an emulated NPU when no Ascend device is present
  # backend_config:       # --backend-config=<backend>,<key>=<value>
  #   python:
  #     shm-default-byte-size: 1048576
  #   npu_ge:             # CANN's npu_ge: ge.* (GEInitialize) only here; session.* (each GE
  #     ge.aicoreNum: "12|10"   # session) and graph.* (each graph) here or as its models' parameters

models:
  # The seed article's model: a LLaMA-style decoder served by the `ge` backend (AscendCL over an .om;
  # without an NPU it runs the model's ONNX on CPU through ONNX Runtime, labelled cpu-emulated).
  - name: llama_model     # required: the repository folder name (letters, digits, _ - .)
    backend: ge           # required: ge (runs .om through AscendCL) or npu_ge (CANN's native backend)
    source: demo:llama    # required: demo:llama, demo:bert, or an .onnx / .om path (relative to this file)
    # onnx: llama.onnx    # with an .om source: the ONNX used for CPU emulation
    versions: [1]
    max_batch_size: 8     # > 0: Triton batches along dim 0, so dims below exclude the batch dim
    inputs:               # optional: read from the ONNX graph when left out; a contradiction is an error
      - {name: input_ids, data_type: INT64, dims: [-1]}
    outputs:
      - {name: logits, data_type: FP32, dims: [-1, 32000]}
    dynamic_batching:     # a request waits up to the delay for others to reach a preferred size:
      preferred_batch_size: [4, 8]       # more throughput under load, but a lone request pays
      max_queue_delay_microseconds: 500  # about the delay (0 = batch only what is already queued)
      # priority_levels: 2               # requests may name a level, 1 served first (0: one queue)
      # default_priority_level: 2        # a request's level when it names none (required with levels)
      # default_queue_policy:            # Triton's queue policy, for every level without its own:
      #   max_queue_size: 16             # more waiting requests are refused at once (0: no limit)
      #   default_timeout_microseconds: 100000   # a request waiting longer times out (0: never)
      #   timeout_action: REJECT         # REJECT it (the console's T/O column), or DELAY it behind the rest
      #   allow_timeout_override: true   # a request's own shorter timeout applies (bench --timeout-us)
      # priority_queue_policy:           # per level, the same four keys
      #   1: {max_queue_size: 0, default_timeout_microseconds: 0}
    # instance_group:
    #   count: 1          # model instances
    #   device_ids: [0]   # NPUs the instances are spread over, one each, round-robin
    #   tensor_parallel: 1  # a what-if of CPU emulation, not something CANN does: with N, each instance
    #                       # takes N NPUs of device_ids and is charged 1/N of the model on each. No part
    #                       # of CANN (ATC, AscendCL, npu_ge) splits one model over NPUs (real tensor
    #                       # parallel on Ascend is a serving framework's: one process per rank, HCCL);
    #                       # ge refuses it on an Ascend host, npu_ge refuses it (it replicates the model)
    # parameters:         # passed to the backend as config parameters (strings)
    #   om_model_path: /models/llama.om   # default for ge: model.om in each version folder
    #   execution_mode: auto              # auto (NPU if present), npu, or cpu
    #   # backend npu_ge reads only these, GE's session.* / graph.* options and device_ids (from
    #   # instance_group): it runs a full copy of the model on every NPU of device_ids
    #   static_model: 1                   # an integer ("true" fails npu_ge's load); excludes dynamic_batching
    #   profiling: dynamic                # or "true"
    #   dump_graph: "1"                   # dump_data: "1" likewise
    #   device_exec_blocks: 2             # GE sessions per NPU, each a full copy (instance_exec_blocks: 1)
    #   graph.ge.inputShape: "x:-1,3"     # npu_ge gives session.* / graph.* to each GE session / graph;
    #   # ge.* (GEInitialize) only from server.backend_config.npu_ge; the ge glue reads none of them
    thresholds:           # the console colours a model when it crosses these
      queue_depth: 8
      p99_ms: 50
      # timed_out: 1      # requests rejected at their queue timeout (a full queue refuses uncounted)

  # A small BERT-style encoder beside it, in the same server, on the second NPU.
  - name: bert_model
    backend: ge
    source: demo:bert     # inputs (input_ids, attention_mask) and output (pooled) come from the ONNX
    max_batch_size: 16
    dynamic_batching:
      preferred_batch_size: [8, 16]
      max_queue_delay_microseconds: 200
    instance_group:
      count: 1
      device_ids: [1]
    thresholds:
      queue_depth: 16
      p99_ms: 20
"""


def write_starter(path: Path, force: bool = False) -> None:
    """Write the starter spec; refuses to overwrite an existing file unless forced."""
    if path.exists() and not force:
        raise FileExistsError(f"{path} already exists (use --force to overwrite)")
    path.write_text(STARTER_SPEC, encoding="utf-8")
