"""The deployment spec as typed, immutable values: what `load_spec` returns and the builder consumes."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from triton_ge_console.ge_backends import DEFAULT_DEVICE_MEMORY_GIB
from triton_ge_console.model_files.tensors import TensorSpec

RESTART_POLICIES = ("never", "on-crash")  # server.restart / up --restart: restart a server that crashed?


@dataclass(frozen=True)
class QueuePolicySpec:
    """Triton's ModelQueuePolicy: how long a request may wait in the queue and how many may wait."""

    timeout_action: str = "REJECT"  # REJECT | DELAY, what happens to a request whose timeout expired
    default_timeout_microseconds: int = 0  # 0: no timeout
    allow_timeout_override: bool = False  # a request's own (shorter) timeout applies
    max_queue_size: int = 0  # 0: unbounded; beyond it Triton refuses a request at once


@dataclass(frozen=True)
class DynamicBatchingSpec:
    """Triton's dynamic batcher settings for one model."""

    preferred_batch_size: tuple[int, ...] = ()
    max_queue_delay_microseconds: int = 0
    default_queue_policy: QueuePolicySpec | None = None
    priority_levels: int = 0  # 0: one queue; N: levels 1 (first served) .. N
    default_priority_level: int = 0  # the level of a request that names none
    priority_queue_policy: tuple[tuple[int, QueuePolicySpec], ...] = ()  # per level, in level order


@dataclass(frozen=True)
class InstanceGroupSpec:
    """How many model instances run, and on which NPUs: each instance spans `tensor_parallel` NPUs of
    device_ids (1: instances spread one per NPU, round-robin; N: device_ids cut into groups of N, a
    what-if of CPU emulation: no part of CANN splits one model over NPUs)."""

    count: int = 1
    device_ids: tuple[int, ...] = (0,)
    tensor_parallel: int = 1
    named_devices: bool = field(default=False, compare=False)  # device_ids written in the spec (not default)

    def instance_devices(self) -> tuple[tuple[int, ...], ...]:
        """The NPUs of each instance, in instance order (what the glue picks for instance i)."""
        groups = [self.device_ids[i:i + self.tensor_parallel]
                  for i in range(0, len(self.device_ids), self.tensor_parallel)]
        return tuple(tuple(groups[i % len(groups)]) for i in range(self.count))


@dataclass(frozen=True)
class GenerateSpec:
    """A model that generates tokens (spec `generate:`): decoupled, one token per response, its
    sequences batched step by step by the glue within these bounds."""

    max_tokens: int = 128  # per request: the default and the most one may ask for
    eos_token_id: int | None = None  # the token that ends a sequence
    max_running: int = 8  # sequences one instance decodes together
    max_waiting: int = 256  # requests one instance queues beyond those; more are refused
    kv_cache_mib: float = 256.0  # KV-cache capacity of one instance
    tokenizer: str | None = None  # a tokenizer.json (absolute path) or demo:llama_kv (the built-in one)
    max_model_len: int | None = None  # prompt + max_tokens of one request (None: what the export declares)
    max_num_batched_tokens: int = 256  # tokens one step runs (decodes, then prefill chunks), vLLM's name

    @property
    def kv_cache_bytes(self) -> int:
        """The capacity in bytes."""
        return int(self.kv_cache_mib * (1 << 20))


@dataclass(frozen=True)
class ModelSpec:
    """One model of a deployment."""

    name: str
    backend: str  # "ge" | "npu_ge"
    source: str  # "demo:llama", "demo:bert", or a path to .onnx / .om (resolved against the spec's folder)
    onnx_path: Path | None  # resolved ONNX (demo models: None until built)
    om_path: Path | None  # resolved OM file, if any
    versions: tuple[int, ...] = (1,)
    max_batch_size: int = 0
    inputs: tuple[TensorSpec, ...] = ()
    outputs: tuple[TensorSpec, ...] = ()
    dynamic_batching: DynamicBatchingSpec | None = None
    instance_group: InstanceGroupSpec = field(default_factory=InstanceGroupSpec)
    parameters: tuple[tuple[str, str], ...] = ()  # GE parameters, in spec order, values as strings
    thresholds: tuple[tuple[str, float], ...] = ()  # console colouring: ("queue_depth", 8), ("p99_ms", 50)
    generate: GenerateSpec | None = None  # a token-generating (decoupled) model, spec `generate:`
    notes: tuple[str, ...] = ()  # what build says beside the config: a check it could not make, and why


@dataclass(frozen=True)
class ServerSpec:
    """How the Triton server for a deployment is started."""

    http_port: int = 0  # 0: pick a free port at launch
    grpc_port: int = 0
    metrics_port: int = 0
    listen: str = "127.0.0.1"
    backend_config: tuple[tuple[str, str, str], ...] = ()  # (backend, key, value) → --backend-config=b,k=v
    metrics_interval_ms: int = 1000
    summary_latencies: bool = False
    log_verbose: int = 0
    npu_memory_gib: float = DEFAULT_DEVICE_MEMORY_GIB  # capacity of an emulated NPU
    extra_args: tuple[str, ...] = ()
    restart: str = "never"  # "on-crash": the session's supervisor restarts a server that crashed


@dataclass(frozen=True)
class KubernetesSpec:
    """How `ge-console k8s render` runs the deployment in a cluster (names, image, storage, resources)."""

    namespace: str = "default"
    name: str | None = None  # the Deployment/Service name; None: the spec's name
    image: str = "triton-ge-console:0.1.0"  # tritonserver with the GE glue installed
    replicas: int = 1
    repository_pvc: str | None = None  # the model repository on this PersistentVolumeClaim...
    repository_image: str | None = None  # ...or copied out of this image at start
    repository_path: str | None = None  # where it sits in the claim (default: its root) or image (/models)
    token_secret: str | None = None  # Secret with the token under `token_secret_key`; None: NAME-token
    token_secret_key: str = "token"
    npu_resource: str = "huawei.com/Ascend910"  # the Ascend device plugin's extended resource
    cpu: str = "2"
    memory: str = "8Gi"
    service_monitor: bool = False  # also a Prometheus Operator ServiceMonitor


@dataclass(frozen=True)
class DeploymentSpec:
    """A whole deployment: one server and its models, with the file it came from."""

    name: str
    path: Path | None
    server: ServerSpec
    models: tuple[ModelSpec, ...]
    kubernetes: KubernetesSpec = field(default_factory=KubernetesSpec)

    def model(self, name: str) -> ModelSpec | None:
        """The model named so, if the deployment has it."""
        return next((m for m in self.models if m.name == name), None)

    def only(self, names: tuple[str, ...]) -> DeploymentSpec:
        """The deployment narrowed to the models named (`up SPEC --model`); all of them when none is."""
        return replace(self, models=tuple(m for m in self.models if m.name in names)) if names else self
