"""A model's `generate:` section → GenerateSpec: bounds for token generation, checked against the model."""

from __future__ import annotations

from pathlib import Path

import yaml

from triton_ge_console.backend_glue.executor import TensorInfo
from triton_ge_console.backend_glue.generate_batch import LayoutError, kv_layout
from triton_ge_console.backend_glue.generate_text import TextCodec
from triton_ge_console.files import not_a_file
from triton_ge_console.model_files.tensors import TensorSpec
from triton_ge_console.repository.demo_tokenizer import DEMO_TOKENIZER
from triton_ge_console.repository.spec.nodes import INT32_MAX, Reader, join
from triton_ge_console.repository.spec.types import GenerateSpec

GENERATE_KEYS = ("max_tokens", "eos_token_id", "max_running", "max_waiting", "kv_cache_mib", "tokenizer",
                 "max_model_len", "max_num_batched_tokens")
# Keys of a model entry a generate model decides itself: its config declares the request's tensors,
# and the glue batches sequences step by step instead of Triton's batcher.
EXCLUDED_KEYS = {
    "inputs": "a generate model's inputs are the request's (input_ids, max_tokens, sampling): leave them out",
    "outputs": "a generate model's output is one token_id per response: leave them out",
    "dynamic_batching": "a generate model batches its sequences step by step itself: leave it out",
}


def read_generate(reader: Reader, values: dict[str, yaml.Node], path: str,
                  graph: tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]] | None,
                  base_dir: Path | None = None) -> GenerateSpec | None:
    """The `generate:` section of a model entry (None when absent or wrong; problems recorded)."""
    node = values.get("generate")
    if node is None:
        return None
    here = join(path, "generate")
    for key, why in EXCLUDED_KEYS.items():
        if key in values:
            reader.problems.add(values[key], join(path, key), why)
    batch_node = values.get("max_batch_size")
    if batch_node is not None and reader.value(batch_node) != 0:
        reader.problems.add(batch_node, join(path, "max_batch_size"),
                            "must be 0 for a generate model (its sequences are batched by the glue)")
    if graph is not None:
        _check_decoder(reader, values.get("source"), join(path, "source"), graph)
    if isinstance(node, yaml.ScalarNode) and reader.value(node) in (True, None):
        return GenerateSpec()
    entries = reader.mapping(node, here, GENERATE_KEYS)
    if entries is None:
        return None
    fields: dict[str, object] = {}
    for key in ("max_tokens", "max_running", "max_waiting", "max_model_len", "max_num_batched_tokens"):
        if key in entries:
            fields[key] = reader.integer(entries[key][1], join(here, key), 1, INT32_MAX)
    if "eos_token_id" in entries:
        fields["eos_token_id"] = reader.integer(entries["eos_token_id"][1], join(here, "eos_token_id"), 0)
    if "kv_cache_mib" in entries:
        fields["kv_cache_mib"] = reader.number(entries["kv_cache_mib"][1], join(here, "kv_cache_mib"), True)
    if "tokenizer" in entries:
        fields["tokenizer"] = _tokenizer(reader, entries["tokenizer"][1], join(here, "tokenizer"), base_dir)
    if any(value is None for value in fields.values()):
        return None
    spec = GenerateSpec(**fields)  # type: ignore[arg-type]
    if spec.max_num_batched_tokens < spec.max_running:  # as vLLM: every running sequence decodes each step
        given = entries.get("max_num_batched_tokens") or entries["max_running"]  # one was set: defaults fit
        reader.problems.add(given[1], join(here, "max_num_batched_tokens"),
                            f"{spec.max_num_batched_tokens} is less than max_running {spec.max_running}: "
                            "each step decodes one token of every running sequence within this budget")
        return None
    return spec


def _tokenizer(reader: Reader, node: yaml.Node, path: str, base_dir: Path | None) -> str | None:
    """The built-in demo tokenizer's name, or a tokenizer.json the `tokenizers` library reads (absolute)."""
    raw = reader.text(node, path)
    if raw is None or raw == DEMO_TOKENIZER:
        return raw
    target = Path(raw).expanduser()
    if not target.is_absolute() and base_dir is not None:
        target = base_dir / target
    problem = not_a_file(target)
    if problem is not None:
        reader.problems.add(node, path, f"{problem}: {target} (a tokenizer.json, or {DEMO_TOKENIZER})")
        return None
    try:
        TextCodec.from_file(target)
    except ValueError as exc:
        reader.problems.add(node, path, f"not a tokenizer the tokenizers library reads: {exc}")
        return None
    return str(target.resolve())


def _check_decoder(reader: Reader, node: yaml.Node | None, path: str,
                   graph: tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]]) -> None:
    """The model must be a decoder exported with its KV cache (past/present tensors)."""
    inputs, outputs = ([TensorInfo(t.name, t.data_type, t.dims) for t in side] for side in graph)
    try:
        kv_layout(inputs, outputs)
    except LayoutError as exc:
        reader.problems.add(node, path, f"cannot generate with this model: {exc} (demo:llama_kv is one)")
