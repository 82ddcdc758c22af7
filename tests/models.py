"""The suite's test models: small ONNX graphs built in code (one saved with external data), the one writer of
model folders around them, and a Python-backend model (an echo) for tests that need a server with cheap,
controllable models."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

VOCAB = 64
HIDDEN = 8


def dense_model(features: int = 4, outputs: int = 3, seed: int = 0) -> bytes:
    """x FP32 [N, features] → y = x·W + b [N, outputs] and z = relu(y)."""
    rng = np.random.default_rng(seed)
    weight = numpy_helper.from_array(rng.standard_normal((features, outputs)).astype(np.float32), "W")
    bias = numpy_helper.from_array(rng.standard_normal(outputs).astype(np.float32), "B")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["xw"]), helper.make_node("Add", ["xw", "B"], ["y"]),
         helper.make_node("Relu", ["y"], ["z"])],
        "dense",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", features])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", outputs]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", outputs])],
        [weight, bias],
    )
    return _serialize(graph)


def mixed_model(seed: int = 0) -> bytes:
    """x FP32 [N, 4] → y [N, 3], t = yᵀ [3, N] (batch not leading) and w = W [4, 3] (no batch at all)."""
    rng = np.random.default_rng(seed)
    weight = numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"], name="Gemm_0"),
         helper.make_node("Transpose", ["y"], ["t"], perm=[1, 0], name="Transpose_1"),
         helper.make_node("Identity", ["W"], ["w"], name="Identity_2")],
        "mixed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3]),
         helper.make_tensor_value_info("t", TensorProto.FLOAT, [3, "N"]),
         helper.make_tensor_value_info("w", TensorProto.FLOAT, [4, 3])],
        [weight],
    )
    return _serialize(graph)


def token_model(seed: int = 1, doubled: bool = False) -> bytes:
    """input_ids INT64 [N, S] → logits FP32 [N, S, VOCAB]: embedding then a projection, like a tiny LM;
    doubled, logits [N, 2S, VOCAB]: an output axis (2S) no input axis gives."""
    rng = np.random.default_rng(seed)
    embed = numpy_helper.from_array(rng.standard_normal((VOCAB, HIDDEN)).astype(np.float32), "E")
    head = numpy_helper.from_array(rng.standard_normal((HIDDEN, VOCAB)).astype(np.float32), "H")
    nodes = [helper.make_node("Gather", ["E", "input_ids"], ["h"])]
    if doubled:
        nodes.append(helper.make_node("Concat", ["h", "h"], ["hh"], axis=1))
    nodes.append(helper.make_node("MatMul", ["hh" if doubled else "h", "H"], ["logits"]))
    graph = helper.make_graph(
        nodes, "doubled" if doubled else "tokens",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["N", "S"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", "S2" if doubled else "S", VOCAB])],
        [embed, head],
    )
    return _serialize(graph)


def nonzero_model() -> bytes:
    """x FP32 [N] → where INT64 [1, K]: the indices of x's non-zero values (an output shaped by the data)."""
    graph = helper.make_graph(
        [helper.make_node("NonZero", ["x"], ["where"])], "nonzero",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"])],
        [helper.make_tensor_value_info("where", TensorProto.INT64, [1, "K"])],
    )
    return _serialize(graph)


def scalar_model() -> bytes:
    """x FP32 [S] and sr INT64 [] (a scalar, like a sample rate) → y = x·sr [S] and total = Σy [] (scalar)."""
    graph = helper.make_graph(
        [helper.make_node("Cast", ["sr"], ["srf"], to=TensorProto.FLOAT),
         helper.make_node("Mul", ["x", "srf"], ["y"]),
         helper.make_node("ReduceSum", ["y"], ["total"], keepdims=0)],
        "scalar",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["S"]),
         helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["S"]),
         helper.make_tensor_value_info("total", TensorProto.FLOAT, [])],
    )
    return _serialize(graph)


def batch_only_model() -> bytes:
    """score FP32 [N] (one number per request, the batch alone) → doubled [N] and over INT64 [N, 2]."""
    two = numpy_helper.from_array(np.array(2.0, np.float32), "two")
    graph = helper.make_graph(
        [helper.make_node("Mul", ["score", "two"], ["doubled"]),
         helper.make_node("Cast", ["doubled"], ["as_int"], to=TensorProto.INT64),
         helper.make_node("Unsqueeze", ["as_int", "axes"], ["col"]),
         helper.make_node("Concat", ["col", "col"], ["over"], axis=1)],
        "batch_only",
        [helper.make_tensor_value_info("score", TensorProto.FLOAT, ["N"])],
        [helper.make_tensor_value_info("doubled", TensorProto.FLOAT, ["N"]),
         helper.make_tensor_value_info("over", TensorProto.INT64, ["N", 2])],
        [two, numpy_helper.from_array(np.array([1], np.int64), "axes")],
    )
    return _serialize(graph)


def types_model() -> bytes:
    """One input and output per type Triton carries through the glue, batched along dim 0 (five outputs):
    half FP16 → half·2; flag BOOL → not flag; byte UINT8 → byte+1; text STRING → text; and the count of
    true flags per row INT64."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["half", "half"], ["half_twice"]),
         helper.make_node("Not", ["flag"], ["flag_not"]),
         helper.make_node("Add", ["byte", "one"], ["byte_next"]),
         helper.make_node("Identity", ["text"], ["text_same"]),
         helper.make_node("Cast", ["flag"], ["flag_int"], to=TensorProto.INT64),
         helper.make_node("ReduceSum", ["flag_int", "axis1"], ["flags_set"], keepdims=0)],
        "types",
        [helper.make_tensor_value_info("half", TensorProto.FLOAT16, ["N", 3]),
         helper.make_tensor_value_info("flag", TensorProto.BOOL, ["N", 4]),
         helper.make_tensor_value_info("byte", TensorProto.UINT8, ["N", 2]),
         helper.make_tensor_value_info("text", TensorProto.STRING, ["N", 2])],
        [helper.make_tensor_value_info("half_twice", TensorProto.FLOAT16, ["N", 3]),
         helper.make_tensor_value_info("flag_not", TensorProto.BOOL, ["N", 4]),
         helper.make_tensor_value_info("byte_next", TensorProto.UINT8, ["N", 2]),
         helper.make_tensor_value_info("text_same", TensorProto.STRING, ["N", 2]),
         helper.make_tensor_value_info("flags_set", TensorProto.INT64, ["N"])],
        [numpy_helper.from_array(np.array(1, np.uint8), "one"),
         numpy_helper.from_array(np.array([1], np.int64), "axis1")],
    )
    return _serialize(graph)


def bf16_model() -> bytes:
    """half BF16 [N, 3] → tripled BF16 (half·3, rounded back to BF16) and wide FP32 (half widened): ONNX
    Runtime's CPU kernels take BF16 in Cast only, so the arithmetic is in FP32."""
    graph = helper.make_graph(
        [helper.make_node("Cast", ["half"], ["wide"], to=TensorProto.FLOAT),
         helper.make_node("Mul", ["wide", "three"], ["wide_tripled"]),
         helper.make_node("Cast", ["wide_tripled"], ["tripled"], to=TensorProto.BFLOAT16)],
        "bf16",
        [helper.make_tensor_value_info("half", TensorProto.BFLOAT16, ["N", 3])],
        [helper.make_tensor_value_info("tripled", TensorProto.BFLOAT16, ["N", 3]),
         helper.make_tensor_value_info("wide", TensorProto.FLOAT, ["N", 3])],
        [numpy_helper.from_array(np.array(3.0, np.float32), "three")],
    )
    return _serialize(graph)


def string_to_bf16_model() -> bytes:
    """s STRING [N] → n BF16 [1] (how many strings): a graph ONNX Runtime's Python API cannot run."""
    graph = helper.make_graph(
        [helper.make_node("Shape", ["s"], ["count"]),
         helper.make_node("Cast", ["count"], ["n"], to=TensorProto.BFLOAT16)],
        "string_to_bf16", [helper.make_tensor_value_info("s", TensorProto.STRING, ["N"])],
        [helper.make_tensor_value_info("n", TensorProto.BFLOAT16, [1])])
    return _serialize(graph)


def unranked_model() -> bytes:
    """x FP32 [2, K] → grid, whose rank the ONNX does not say (it is [2, K, 1]), and scale FP32 [] with
    a default (an ONNX input with an initializer: optional) that multiplies it."""
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "scale"], ["scaled"]),
         helper.make_node("Unsqueeze", ["scaled", "axes"], ["grid"])],
        "unranked",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, "K"]),
         helper.make_tensor_value_info("scale", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("grid", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array(3.0, np.float32), "scale"),
         numpy_helper.from_array(np.array([2], np.int64), "axes")],
    )
    return _serialize(graph, check=False)  # the checker wants every output shaped; exporters do not


def image_model() -> bytes:
    """x FP32 [N, 3, H, W] → y = Relu(x), same shape: every output axis follows an input axis."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "image",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, "H", "W"])],
    )
    return _serialize(graph)


def reference(model: bytes | Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The outputs ONNX Runtime gives in-process: what a served or emulated model must answer."""
    import onnxruntime as ort

    source = str(model) if isinstance(model, Path) else model
    return list(ort.InferenceSession(source, providers=["CPUExecutionProvider"]).run(None, feeds))


def infer(client_module: Any, address: str, model: str,
          feeds: Mapping[str, np.ndarray | tuple[np.ndarray, str]], timeout_s: float = 60.0
          ) -> dict[str, np.ndarray]:
    """One request through tritonclient's http or grpc module to host:port; every output the server
    answered, by name. A feed's Triton type is its dtype's (tritonclient's mapping) unless given beside it."""
    from tritonclient.utils import np_to_triton_dtype

    grpc = client_module.__name__.endswith("grpc")
    options = {} if grpc else {"network_timeout": timeout_s, "connection_timeout": timeout_s}
    with client_module.InferenceServerClient(address, **options) as client:
        inputs = []
        for name, feed in feeds.items():
            array, data_type = feed if isinstance(feed, tuple) else (feed, np_to_triton_dtype(feed.dtype))
            tensor = client_module.InferInput(name, list(array.shape), data_type)
            tensor.set_data_from_numpy(array)
            inputs.append(tensor)
        result = client.infer(model, inputs)
        response = result.get_response()
        names = [o.name for o in response.outputs] if grpc else [o["name"] for o in response["outputs"]]
        return {name: result.as_numpy(name) for name in names}


def _counts(client_module: Any, address: str, model: str) -> tuple[int, int]:
    """Triton's inference_count and execution_count for a model."""
    with client_module.InferenceServerClient(address) as client:
        if client_module.__name__.endswith("grpc"):
            stats = client.get_inference_statistics(model, as_json=True)["model_stats"][0]
        else:
            stats = client.get_inference_statistics(model)["model_stats"][0]
    return int(stats.get("inference_count", 0)), int(stats.get("execution_count", 0))


def infer_joined(client_module: Any, address: str, model: str,
                 requests: Sequence[Mapping[str, np.ndarray]]) -> list[dict[str, np.ndarray]]:
    """The requests sent at once (each its own connection) to a model whose batcher waits for them all;
    their answers. Triton's statistics must show them joined (fewer executions than requests), else this
    fails saying the test tested nothing."""
    import concurrent.futures

    before = _counts(client_module, address, model)
    with concurrent.futures.ThreadPoolExecutor(len(requests)) as pool:
        answers = list(pool.map(lambda feeds: infer(client_module, address, model, feeds, 120.0), requests))
    after = _counts(client_module, address, model)
    inferences, executions = after[0] - before[0], after[1] - before[1]
    assert inferences == len(requests), (inferences, len(requests))
    assert executions < inferences, (f"{model}: Triton ran the {inferences} requests in {executions} "
                                     "executions: they were not joined, so this tested nothing")
    return answers


def _serialize(graph: onnx.GraphProto, check: bool = True) -> bytes:
    """A checked model at an opset ONNX Runtime runs, as bytes."""
    return _model(graph, check).SerializeToString()


def _model(graph: onnx.GraphProto, check: bool = True) -> onnx.ModelProto:
    """A checked model at an opset ONNX Runtime runs."""
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    if check:
        onnx.checker.check_model(model)
    return model


EXT_WIDTH = 256  # an external-data model's weights are EXT_WIDTH² FP32: 256 KiB a tensor
OLD_NS = 1_000_000_000_000_000_000  # an mtime (2001) far enough back for the digest cache to trust


def save_external(path: Path, one_file: bool = True, location: str | None = None, layers: int = 4,
                  seed: int = 0) -> Path:
    """y = x·W0·W1… (x FP32 [N, EXT_WIDTH], every W an initializer) saved at path with its weights as
    external data, as models too big for one protobuf come: in `location` (default <name>.data, relative to
    path) or one file per tensor. Returns path."""
    rng = np.random.default_rng(seed)
    weights = [numpy_helper.from_array((rng.standard_normal((EXT_WIDTH, EXT_WIDTH)) / 16).astype(np.float32),
                                       f"w{i}") for i in range(layers)]
    names = ["x", *[f"h{i}" for i in range(layers - 1)], "y"]
    graph = helper.make_graph(
        [helper.make_node("MatMul", [names[i], f"w{i}"], [names[i + 1]]) for i in range(layers)], "ext",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, EXT_WIDTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, EXT_WIDTH])], weights,
    )
    where = location or f"{path.name}.data"
    (path.parent / where).parent.mkdir(parents=True, exist_ok=True)
    onnx.save_model(_model(graph), str(path), save_as_external_data=True, all_tensors_to_one_file=one_file,
                    location=where if one_file else None, size_threshold=0)
    return path


def set_external_location(onnx_path: Path, location: str | None, keep_lengths: bool = True) -> None:
    """Point every external tensor of a saved ONNX at another location (the weights stay where they were;
    None: each keeps its own); without keep_lengths each names its location only (no offset, no length),
    as some exporters write a file per tensor: ONNX Runtime then reads the bytes its dims and type need."""
    model = onnx.load(str(onnx_path), load_external_data=False)
    for tensor in model.graph.initializer:
        kept = [(e.key, location if e.key == "location" and location is not None else e.value)
                for e in tensor.external_data
                if keep_lengths or e.key == "location"]
        del tensor.external_data[:]
        for key, value in kept:
            tensor.external_data.add(key=key, value=value)
    onnx.save_model(model, str(onnx_path))


def age(*paths: Path) -> None:
    """Give files an old mtime, as model files a user copied in long ago have."""
    for path in paths:
        os.utime(path, ns=(OLD_NS, OLD_NS))


DENSE_CONFIG = """
    backend: "{backend}"
    max_batch_size: 8
    input [{{ name: "x" data_type: TYPE_FP32 dims: [4] }}]
    output [{{ name: "y" data_type: TYPE_FP32 dims: [3] }}, {{ name: "z" data_type: TYPE_FP32 dims: [3] }}]
    {extra}
"""

TOKEN_CONFIG = """
    backend: "ge"
    max_batch_size: 8
    input [{{ name: "input_ids" data_type: TYPE_INT64 dims: [-1] }}]
    output [{{ name: "logits" data_type: TYPE_FP32 dims: [-1, {vocab}] }}]
    dynamic_batching {{ max_queue_delay_microseconds: 20000 }}
    {extra}
"""


def write_model(repo: Path, name: str, config: str | None, onnx_bytes: bytes | str | None = None,
                onnx_name: str = "model.onnx", versions: tuple[str, ...] = ("1",),
                files: Mapping[str, bytes | str] | None = None) -> Path:
    """REPO/name/config.pbtxt (unless config is None) and, in each version folder, <onnx_name> (bytes, or a
    Python backend's source as text); `files` are more, by path in the model folder. Returns the folder."""
    folder = repo / name
    folder.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (folder / "config.pbtxt").write_text(textwrap.dedent(config).strip() + "\n", encoding="utf-8")
    placed = {f"{version}/{onnx_name}": onnx_bytes for version in versions}
    for relative, content in {**placed, **(files or {})}.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            (folder / relative).write_text(content, encoding="utf-8")
        elif content is not None:
            (folder / relative).write_bytes(content)
    return folder


ECHO_MODEL = '''
import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils

LOAD_S, UNLOAD_S, DELAY_S, FAIL = {load_s}, {unload_s}, {delay_s}, {fail}


class TritonPythonModel:
    def initialize(self, args):
        time.sleep(LOAD_S)
        config = json.loads(args["model_config"])
        self.scale = float(config["parameters"]["scale"]["string_value"])

    def execute(self, requests):
        time.sleep(DELAY_S)
        if FAIL:
            raise pb_utils.TritonModelException("refused on purpose")
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            out = pb_utils.Tensor("OUTPUT0", (data * self.scale).astype(np.float32))
            responses.append(pb_utils.InferenceResponse([out]))
        return responses

    def finalize(self):
        time.sleep(UNLOAD_S)
'''


def echo_config(name: str = "echo", max_batch_size: int = 8, scale: str = "2", instances: int | None = None,
                batching_delay_us: int | None = None) -> str:
    """The echo model's config.pbtxt: INPUT0 FP32 [4] → OUTPUT0 = INPUT0 × the `scale` parameter."""
    lines = [f'name: "{name}"', 'backend: "python"', f"max_batch_size: {max_batch_size}",
             'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]',
             'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]',
             f'parameters {{ key: "scale" value {{ string_value: "{scale}" }} }}']
    if instances is not None:
        lines.append(f"instance_group [ {{ kind: KIND_CPU count: {instances} }} ]")
    if batching_delay_us is not None:
        lines.append(f"dynamic_batching {{ max_queue_delay_microseconds: {batching_delay_us} }}")
    return "\n".join(lines)


def write_echo_model(repository: Path, name: str = "echo", max_batch_size: int = 8, scale: str = "2",
                     unload_s: float = 0.0, load_s: float = 0.0, delay_s: float = 0.0, fail: bool = False,
                     instances: int | None = None, batching_delay_us: int | None = None) -> Path:
    """A Python-backend model that multiplies its input by the `scale` parameter: with load_s each instance
    takes that long to load (a reload that can be cut short), with unload_s that long to unload (a server
    slow to stop), with delay_s each execution that long; `fail` refuses every request."""
    source = ECHO_MODEL.format(load_s=load_s, unload_s=unload_s, delay_s=delay_s, fail=fail)
    config = echo_config(name, max_batch_size, scale, instances, batching_delay_us)
    return write_model(repository, name, config, source, "model.py")


def param(key: str, value: str) -> str:
    """One config.pbtxt parameters entry."""
    return f'parameters {{ key: "{key}" value: {{ string_value: "{value}" }} }}'


def write_fake_om(folder: Path, onnx_bytes: bytes, gears: tuple[int, ...] = (),
                  static_batch: int = 1, input_shape: dict[str, list[int]] | None = None,
                  name: str = "model.om", **extra: object) -> Path:
    """A fake OM (JSON read by tests/fakes/acl) beside its ONNX: batch gears, or a static batch; extra
    keys: output_names, soc_version, damaged."""
    import json

    folder.mkdir(parents=True, exist_ok=True)
    onnx_name = f"{Path(name).stem}.source.onnx"
    (folder / onnx_name).write_bytes(onnx_bytes)
    spec: dict[str, object] = {"fake_om": 1, "onnx": onnx_name}
    spec.update({"dynamic_batch": list(gears)} if gears else {"static_batch": static_batch})
    if input_shape:
        spec["input_shape"] = input_shape
    spec.update(extra)
    (folder / name).write_text(json.dumps(spec), encoding="utf-8")
    return folder / name


def failing_decoder_model(rows: int = 8, vocab: int = 128, favourite: int = 100) -> bytes:
    """A KV decoder (Optimum's names, one layer of one head of one dim) whose every logits row peaks at
    `favourite`, while its embedding holds only `rows` tokens: a prompt of small ids prefills and streams
    `favourite` first, then the decode step feeding it back fails in ONNX Runtime (Gather out of bounds).
    An executor failing mid-stream, as a device fault would."""
    table = np.zeros((rows, vocab), np.float32)
    table[:, favourite] = 1.0
    cache = ["batch", 1, "past", 1]
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "input_ids"], ["logits"], axis=0),
         helper.make_node("Cast", ["input_ids"], ["ids_f"], to=TensorProto.FLOAT),
         helper.make_node("Unsqueeze", ["ids_f", "axes"], ["new"]),
         helper.make_node("Concat", ["past_key_values.0.key", "new"], ["present.0.key"], axis=2),
         helper.make_node("Concat", ["past_key_values.0.value", "new"], ["present.0.value"], axis=2)],
        "failing_decoder",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
         helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["batch", "sequence"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "total"]),
         helper.make_tensor_value_info("past_key_values.0.key", TensorProto.FLOAT, cache),
         helper.make_tensor_value_info("past_key_values.0.value", TensorProto.FLOAT, cache)],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "sequence", vocab]),
         helper.make_tensor_value_info("present.0.key", TensorProto.FLOAT, ["batch", 1, "total", 1]),
         helper.make_tensor_value_info("present.0.value", TensorProto.FLOAT, ["batch", 1, "total", 1])],
        [numpy_helper.from_array(table, "table"),
         numpy_helper.from_array(np.array([1, 3], np.int64), "axes")],
    )
    return _serialize(graph)


def no_input_model() -> bytes:
    """No inputs at all: a Constant graph answering table FP32 [3] = [1, 2, 3] (a lookup table, a version
    stamp)."""
    graph = helper.make_graph(
        [helper.make_node("Constant", [], ["table"],
                          value=numpy_helper.from_array(np.array([1, 2, 3], np.float32), "c"))],
        "no_input", [], [helper.make_tensor_value_info("table", TensorProto.FLOAT, [3])])
    return _serialize(graph)


LLAMA_GENERATE = """
  - name: llama_generate
    backend: ge
    source: demo:llama_kv
    generate: {max_tokens: 48, max_running: 8, kv_cache_mib: 1}
"""  # a spec's models entry: the demo KV-cache llama as a generate model


def llama_text(name: str = "llama_text", max_tokens: int = 32, kv_cache_mib: int = 1) -> str:
    """A spec's models entry: the demo KV-cache llama as a generate model with its tokenizer."""
    return f"""
  - name: {name}
    backend: ge
    source: demo:llama_kv
    generate: {{max_tokens: {max_tokens}, kv_cache_mib: {kv_cache_mib}, tokenizer: demo:llama_kv}}
"""


TEXT_PROMPT = "The console watches the cache of keys and values"  # a prompt for llama_text


def build_spec(root: Path, spec: str, repository: str = "repo") -> Path:
    """ROOT/deploy.yaml holding `spec`, built by the real builder into ROOT/<repository>; returns that."""
    from triton_ge_console.repository.build import build_repository
    from triton_ge_console.repository.spec.load import load_spec

    (root / "deploy.yaml").write_text(textwrap.dedent(spec), encoding="utf-8")
    build_repository(load_spec(root / "deploy.yaml"), root / repository)
    return root / repository


def direct_decoder() -> Callable[[Sequence[int], int], list[int]]:
    """The reference a generate model must equal token for token: the direct greedy loop over
    demo:llama_kv in-process."""
    import onnxruntime as ort

    from triton_ge_console.repository.demo_decoder import DEMO_LAYOUT, direct_greedy
    from triton_ge_console.repository.demo_models import demo_bytes

    session = ort.InferenceSession(demo_bytes("demo:llama_kv"), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]

    def decode(prompt: Sequence[int], max_tokens: int) -> list[int]:
        return direct_greedy(lambda feeds: dict(zip(names, session.run(None, feeds), strict=True)),
                             DEMO_LAYOUT, list(prompt), max_tokens)

    return decode


def bf16_kv_decoder(logits: bool = True) -> bytes:
    """demo:llama_kv with its cache in BF16 (each past Cast to FP32 inside, each present Cast to BF16) and,
    with `logits`, its logits too: a decoder exported in half precision, computed in FP32 (so its greedy
    tokens follow from the BF16 cache alone)."""
    from triton_ge_console.repository.demo_decoder import llama_kv_model

    model = llama_kv_model()
    graph = model.graph
    for value in graph.input:
        if value.name.startswith("past_key_values."):
            for node in graph.node:
                node.input[:] = [f"{n}.fp32" if n == value.name else n for n in node.input]
            graph.node.insert(0, helper.make_node("Cast", [value.name], [f"{value.name}.fp32"],
                                                  to=TensorProto.FLOAT))
            value.type.tensor_type.elem_type = TensorProto.BFLOAT16
    for value in graph.output:
        if value.name.startswith("present.") or (logits and value.name == "logits"):
            for node in graph.node:
                node.output[:] = [f"{n}.fp32" if n == value.name else n for n in node.output]
            graph.node.append(helper.make_node("Cast", [f"{value.name}.fp32"], [value.name],
                                               to=TensorProto.BFLOAT16))
            value.type.tensor_type.elem_type = TensorProto.BFLOAT16
    onnx.checker.check_model(model)
    return model.SerializeToString()


def batch_at_model(position: int) -> bytes:
    """x FP32 [N, S, 3] → y = 2x with the batch moved to dim `position` (Transpose), as exporters write
    time-major or channel-last outputs: y [N, S, 3], [S, N, 3] or [S, 3, N] (a variable leading dim each)."""
    perm = [1, 2]
    perm.insert(position, 0)
    dims: list[str | int] = ["S", 3]
    dims.insert(position, "N")
    two = numpy_helper.from_array(np.array(2.0, np.float32), "two")
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["x2"]),
         helper.make_node("Transpose", ["x2"], ["y"], perm=perm)],
        f"batch_at_{position}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "S", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)], [two],
    )
    return _serialize(graph)


def time_major_model(hidden: int = 5, seed: int = 0) -> bytes:
    """A recurrent model whose outputs are time-major, as the issue's: x FP32 [batch, 100, time] →
    logits and probs FP32 [time, batch, 4] (an LSTM over x's last dim, a projection, a softmax)."""
    rng = np.random.default_rng(seed)
    arrays = {"W": rng.standard_normal((1, 4 * hidden, 100)) / 10,
              "R": rng.standard_normal((1, 4 * hidden, hidden)), "P": rng.standard_normal((hidden, 4))}
    weights = [numpy_helper.from_array(a.astype(np.float32), name) for name, a in arrays.items()]
    weights.append(numpy_helper.from_array(np.array([1], np.int64), "dirs"))
    graph = helper.make_graph(
        [helper.make_node("Transpose", ["x"], ["xt"], perm=[2, 0, 1]),
         helper.make_node("LSTM", ["xt", "W", "R"], ["Y"], hidden_size=hidden),
         helper.make_node("Squeeze", ["Y", "dirs"], ["h"]),
         helper.make_node("MatMul", ["h", "P"], ["logits"]),
         helper.make_node("Softmax", ["logits"], ["probs"], axis=-1)],
        "time_major",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 100, "time"])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["time", "batch", 4])
         for n in ("logits", "probs")],
        weights,
    )
    return _serialize(graph)


def _across_batch_nodes(op: str) -> list[onnx.NodeProto]:
    """Nodes computing y [N, 4] from x [N, 4] with one op working across the batch (CROSS_BATCH_OPS)."""
    made = {
        "batch_mean": [helper.make_node("ReduceMean", ["x"], ["m"], axes=[0], keepdims=1),
                       helper.make_node("Sub", ["x", "m"], ["y"])],
        "softmax_over_batch": [helper.make_node("Softmax", ["x"], ["y"], axis=0)],
        "gram": [helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0]),
                 helper.make_node("MatMul", ["x", "xt"], ["g"]),
                 helper.make_node("MatMul", ["g", "x"], ["y"])],
        "concat_batch": [helper.make_node("Slice", ["x", "one", "big", "zero"], ["rest"]),
                         helper.make_node("Slice", ["x", "zero", "one", "zero"], ["head"]),
                         helper.make_node("Concat", ["rest", "head"], ["y"], axis=0)],
        "gather_batch": [helper.make_node("Gather", ["x", "zero_scalar"], ["row"], axis=0),
                         helper.make_node("Add", ["x", "row"], ["y"])],
        "cumsum_batch": [helper.make_node("CumSum", ["x", "zero_scalar"], ["y"])],
        "batchnorm_training": [helper.make_node("BatchNormalization",
                                                ["x", "ones4", "zeros4", "zeros4", "ones4"],
                                                ["y", "mean_out", "var_out"], training_mode=1)],
        "einsum_batch": [helper.make_node("Einsum", ["x", "x"], ["y"], equation="ni,mi->ni")],
        "reshape_interleave": [helper.make_node("Reshape", ["x", "four_neg"], ["r"]),
                               helper.make_node("Transpose", ["r"], ["y"], perm=[1, 0])],
        "split_batch": [helper.make_node("Split", ["x", "one_one"], ["head", "rest"], axis=0),
                        helper.make_node("Concat", ["rest", "head"], ["y"], axis=0)],
        "gemm_over_batch": [helper.make_node("Gemm", ["x", "x"], ["g"], transA=1),
                            helper.make_node("MatMul", ["x", "g"], ["y"])],
        "layernorm_over_batch": [helper.make_node("LayerNormalization", ["x", "ones14", "zeros14"], ["y"],
                                                  axis=0)],
        "merged_softmax": [helper.make_node("Flatten", ["x"], ["flat"], axis=0),
                           helper.make_node("Softmax", ["flat"], ["soft"], axis=1),
                           helper.make_node("Reshape", ["soft", "neg_four"], ["y"])],
        "batch_position": [helper.make_node("Shape", ["x"], ["shape"]),
                           helper.make_node("ConstantOfShape", ["shape"], ["ones"],
                                            value=numpy_helper.from_array(np.ones(1, np.float32))),
                           helper.make_node("CumSum", ["ones", "zero_scalar"], ["position"]),
                           helper.make_node("Mul", ["x", "position"], ["y"])],
        "table_rows": [helper.make_node("Shape", ["x"], ["shape"]),
                       helper.make_node("Slice", ["shape", "zero", "one"], ["n"]),
                       helper.make_node("Slice", ["table", "zero", "n", "zero"], ["rows"]),
                       helper.make_node("Reshape", ["rows", "shape"], ["rows_n"]),
                       helper.make_node("Add", ["x", "rows_n"], ["y"])],
        "row_expanded": [helper.make_node("Shape", ["x"], ["shape"]),
                         helper.make_node("Expand", ["ones14", "shape"], ["rows"]),
                         helper.make_node("Add", ["x", "rows"], ["y"])],
        "zeros_like": [helper.make_node("Shape", ["x"], ["shape"]),
                       helper.make_node("ConstantOfShape", ["shape"], ["zeros"]),
                       helper.make_node("Add", ["x", "zeros"], ["y"])],
        "times_batch_size": [helper.make_node("Shape", ["x"], ["shape"], end=1),
                             helper.make_node("Cast", ["shape"], ["n"], to=TensorProto.FLOAT),
                             helper.make_node("Mul", ["x", "n"], ["y"])],
    }
    return made[op]


CROSS_BATCH_OPS = ("batch_mean", "softmax_over_batch", "gram", "concat_batch", "gather_batch",
                   "cumsum_batch", "batchnorm_training", "einsum_batch", "reshape_interleave", "split_batch",
                   "gemm_over_batch", "layernorm_over_batch", "merged_softmax", "batch_position",
                   "table_rows")


def across_batch_model(op: str) -> bytes:
    """x FP32 [N, 4] → y [N, 4] through an op that mixes samples along the batch (CROSS_BATCH_OPS): the
    batch mean subtracted, a softmax over the batch, a Gram matrix of the samples, rows rotated by
    Slice+Concat, row 0 added to each, a running sum over the batch, BatchNorm in training mode, each
    sample times the batch's sum (an Einsum), a Reshape to [4, N] transposed back to [N, 4] (samples
    interleaved), rows rotated by Split+Concat, a Gemm contracting the batch, LayerNorm from dim 0, a
    softmax over every sample's values (Flatten at 0), each sample times its place in the batch (a CumSum
    over ones shaped like x) and a constant table's row at its place added to it (the table sliced to the
    batch's size); or, outside CROSS_BATCH_OPS, each sample times the batch's size (no partner changes
    it, only how many are joined), and a constant row expanded to x's shape or zeros shaped like x added
    to it (the same in every row: the samples stay apart)."""
    consts = {"zero": np.array([0], np.int64), "one": np.array([1], np.int64),
              "big": np.array([2**62], np.int64), "zero_scalar": np.array(0, np.int64),
              "ones4": np.ones(4, np.float32), "zeros4": np.zeros(4, np.float32),
              "four_neg": np.array([4, -1], np.int64), "neg_four": np.array([-1, 4], np.int64),
              "one_one": np.array([1, 1], np.int64), "ones14": np.ones((1, 4), np.float32),
              "zeros14": np.zeros((1, 4), np.float32),
              "table": np.arange(64, dtype=np.float32).reshape(16, 4)}
    nodes = _across_batch_nodes(op)
    used = {name for node in nodes for name in node.input}
    graph = helper.make_graph(
        nodes, op, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
        [numpy_helper.from_array(a, name) for name, a in consts.items() if name in used],
    )
    return _serialize(graph)


def one_node_model(node: onnx.NodeProto, opset: int = 17, domain: str = "") -> onnx.ModelProto:
    """x FP32 [N, 4] → y [N, 4] through one node, at `opset` (and `domain`'s opset 1 for its own ops):
    for the batching check's judgement of a single op."""
    tensors = [helper.make_tensor_value_info(name, TensorProto.FLOAT, ["N", 4]) for name in ("x", "y")]
    graph = helper.make_graph([node], "one", tensors[:1], tensors[1:])
    more = [helper.make_opsetid(domain, 1)] if domain else []
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), *more])


def write_one_node(path: Path, op: str = "Relu", domain: str = "") -> Path:
    """An ONNX file x FP32 [N, 4] → y [N, 4] through one `op` node (named e.g. relu0; a non-standard domain
    makes an op no NPU kernel knows), for the validator's, build's and ATC's tests of a model's files."""
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(one_node_model(helper.make_node(op, ["x"], ["y"], name=f"{op.lower()}0", domain=domain),
                             domain=domain), path)
    return path


def six_wide_model() -> bytes:
    """x FP32 [N, S] → y = x reshaped to [-1, 6]: it runs only when S is a multiple of 6 (random sizes
    fail), and only a run could tell whether the reshape keeps samples apart."""
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], name="six_wide")], "six_wide",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "S"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 6])],
        [numpy_helper.from_array(np.array([-1, 6], np.int64), "shape")],
    )
    return _serialize(graph)


PACED_TOKEN_MODEL = '''
import time

import numpy as np
import triton_python_backend_utils as pb_utils

DELAY_S, LOG = {delay_s}, {log!r}


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            prompt = pb_utils.get_input_tensor_by_name(request, "input_ids").as_numpy().reshape(-1)
            asked = pb_utils.get_input_tensor_by_name(request, "max_tokens")
            count = int(asked.as_numpy().reshape(-1)[0]) if asked is not None else len(prompt)
            sender = request.get_response_sender()
            sent = []
            for index in range(count):
                time.sleep(DELAY_S)
                token = pb_utils.Tensor("token_id", np.array([prompt[index % len(prompt)]], np.int64))
                final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL if index == count - 1 else 0
                sent.append(time.monotonic())
                if final:  # logged before the last send: a client that saw the end finds its line
                    with open(LOG, "a", encoding="utf-8") as log:
                        log.write(" ".join(repr(t) for t in sent) + "\\n")
                sender.send(pb_utils.InferenceResponse([token]), flags=final)
        return None
'''


def byte_tokenizer_json() -> str:
    """A byte-level tokenizer with one token a byte (no merges): a character of several bytes takes as many
    tokens, and all but its last decode to no text yet."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    vocabulary = {char: index for index, char in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    tokenizer = Tokenizer(models.BPE(vocab=vocabulary, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer.to_str()


def write_paced_token_model(repository: Path, log: Path, name: str = "paced", delay_s: float = 0.1,
                            max_tokens: int = 16, tokenizer_json: str | None = None) -> Path:
    """A generate model (decoupled, the glue's inputs and token_id output) that streams the prompt's ids
    back one every delay_s, a known pace to time a client against: each request's send times
    (time.monotonic, the host's clock every process shares) are one line of `log`, written before its last
    token is sent. With tokenizer_json the config names it (generate_tokenizer), so the front door serves
    the model as text."""
    source = PACED_TOKEN_MODEL.format(delay_s=delay_s, log=str(log))
    optional = "".join(f', {{ name: "{n}" data_type: TYPE_{t} dims: [1] optional: true }}'
                       for n, t in (("max_tokens", "INT64"), ("temperature", "FP32"), ("top_k", "INT64"),
                                    ("top_p", "FP32"), ("seed", "INT64")))
    parameters = [param("generate_max_tokens", str(max_tokens))]
    if tokenizer_json is not None:
        parameters.append(param("generate_tokenizer", "tokenizer.json"))
    config = "\n".join([f'name: "{name}"', 'backend: "python"', "max_batch_size: 0",
                        "model_transaction_policy { decoupled: true }",
                        f'input [ {{ name: "input_ids" data_type: TYPE_INT64 dims: [ -1 ] }}{optional} ]',
                        'output [ { name: "token_id" data_type: TYPE_INT64 dims: [ 1 ] } ]', *parameters])
    files = {} if tokenizer_json is None else {"1/tokenizer.json": tokenizer_json}
    return write_model(repository, name, config, source, "model.py", files=files)
