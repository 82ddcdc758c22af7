"""The context a decoder's export declares: the longest sequence (prompt + generated tokens) it was made
for, read as vLLM derives `max_model_len` (the smallest of these keys in the Hugging Face config the
export carries: the ONNX's metadata, or a `config.json` beside it, as Optimum writes one)."""

from __future__ import annotations

import json
from pathlib import Path

CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                "max_sequence_length", "max_seq_length", "seq_len")
DEFAULT_CONTEXT = 2048  # vLLM's when a model declares none


def declared_context(metadata: dict[str, str], onnx_path: Path) -> tuple[int, str] | None:
    """(tokens, where it was read), or None when the export declares no context."""
    found = [(int(value), f"{onnx_path.name} metadata {key}") for key, value in metadata.items()
             if key in CONTEXT_KEYS and value.strip().isdigit() and int(value) > 0]
    found += _from_config(onnx_path.parent / "config.json")
    return min(found) if found else None


def _from_config(path: Path) -> list[tuple[int, str]]:
    """What a config.json beside the model declares (nothing when absent or unreadable)."""
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(config, dict):
        return []
    return [(value, f"{path} {key}") for key in CONTEXT_KEYS
            if isinstance(value := config.get(key), int) and not isinstance(value, bool) and value > 0]
