"""What a generate model's config says, shared by the builder (configgen), the validator and the glue.

A generate model is a decoupled `ge` model: its request carries prompt token ids and sampling parameters,
each response one token id (the last one flagged final). Its config's parameters carry the spec's bounds.
With a tokenizer (parameter generate_tokenizer) the prompt may be text instead (`text_input`, as Triton's
generate extension names it) and each response carries its text piece (`text_output`) beside the id.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from triton_ge_console.backend_glue.generate_batch import TokenSampling
from triton_ge_console.backend_glue.generate_scheduler import GenerateRequest, Limits
from triton_ge_console.model_files.context import DEFAULT_CONTEXT


@dataclass(frozen=True)
class GenerateTensor:
    """One input or output of a generate model, as its config declares it."""

    name: str
    data_type: str  # Triton name without TYPE_
    dims: tuple[int, ...]
    optional: bool = False


# Integers are INT64: over HTTP JSON Triton casts a number to the declared type unchecked (its
# src/http_server.cc, ReadDataFromJsonHelper: `(int32_t)si` of an int64), so INT32 would turn 4294967301
# into 5; an INT64 number arrives as sent (one past int64 Triton refuses) and request_from range-checks it.
INPUTS = (
    GenerateTensor("input_ids", "INT64", (-1,)),
    GenerateTensor("max_tokens", "INT64", (1,), optional=True),
    GenerateTensor("temperature", "FP32", (1,), optional=True),  # 0 (the default): greedy
    GenerateTensor("top_k", "INT64", (1,), optional=True),  # 0 (the default): every token
    GenerateTensor("top_p", "FP32", (1,), optional=True),  # 1 (the default): every token
    GenerateTensor("seed", "INT64", (1,), optional=True),
)
OUTPUTS = (GenerateTensor("token_id", "INT64", (1,)),)
DATA_TYPES = {tensor.name: tensor.data_type for tensor in INPUTS}  # what a client sends each input as
TEXT_INPUT = GenerateTensor("text_input", "STRING", (1,), optional=True)  # UTF-8: the prompt as text
TEXT_OUTPUT = GenerateTensor("text_output", "STRING", (1,))  # UTF-8: what this token adds to the text
TOKENIZER_PARAMETER = "generate_tokenizer"  # the tokenizer.json, relative to the version folder
TOKENIZER_FILENAME = "tokenizer.json"


def inputs(text: bool) -> tuple[GenerateTensor, ...]:
    """The request's tensors: with a tokenizer, the prompt is input_ids or text_input (one of them)."""
    if not text:
        return INPUTS
    ids = GenerateTensor("input_ids", "INT64", (-1,), optional=True)
    return (ids, TEXT_INPUT, *INPUTS[1:])


def outputs(text: bool) -> tuple[GenerateTensor, ...]:
    """Each response's tensors: with a tokenizer, the text piece beside the id."""
    return (*OUTPUTS, TEXT_OUTPUT) if text else OUTPUTS

# config parameter → Limits field; values are decimal strings.
PARAMETERS = {
    "generate_max_tokens": "max_tokens",
    "generate_eos_token_id": "eos_token_id",
    "generate_max_running": "max_running",
    "generate_max_waiting": "max_waiting",
    "generate_kv_cache_bytes": "kv_cache_bytes",
    "generate_max_num_batched_tokens": "max_batched_tokens",
    "generate_max_model_len": "max_model_len",
}


def is_generate(config: dict[str, Any]) -> bool:
    """Whether a (JSON) model config is a generate model: decoupled, which a plain `ge` model never is."""
    return bool((config.get("model_transaction_policy") or {}).get("decoupled"))


def limits_parameters(limits: Limits) -> dict[str, str]:
    """The config parameters that carry these bounds (an absent stop token is left out)."""
    values = {key: getattr(limits, field) for key, field in PARAMETERS.items()}
    return {key: str(value) for key, value in values.items() if value is not None}


def limits_from(parameters: dict[str, str], where: str) -> Limits:
    """The bounds a config's parameters give (defaults where absent); a bad value names its key."""
    fields: dict[str, int] = {}
    for key, field in PARAMETERS.items():
        text = parameters.get(key)
        if text is None or not text.strip():
            continue
        try:
            fields[field] = int(text)
        except ValueError:
            raise ValueError(f"{where}: parameter {key} {text!r}: expected an integer") from None
        if fields[field] < (0 if field == "eos_token_id" else 1):
            raise ValueError(f"{where}: parameter {key} {text!r}: expected a positive integer")
    return Limits(**fields)  # type: ignore[arg-type]


def with_context(limits: Limits, declared: tuple[int, str] | None, where: str) -> tuple[Limits, str]:
    """The limits with the model's context settled as vLLM settles max_model_len (the spec's, at most what
    the export declares; else the export's; else 2048), and where it came from; a spec's beyond the
    export's is refused."""
    given = limits.max_model_len
    if declared is not None and given is not None and given > declared[0]:
        raise ValueError(f"{where}: generate.max_model_len {given} is more than the model's context: "
                         f"{declared[0]} ({declared[1]})")
    if given is not None:
        return limits, "generate.max_model_len"
    if declared is not None:
        return dataclasses.replace(limits, max_model_len=declared[0]), declared[1]
    return dataclasses.replace(limits, max_model_len=DEFAULT_CONTEXT), "the default: the model declares none"


# Bytes of text one token may stand for, at least: a text longer than the context times this (or the
# tokenizer's longest token) is refused before it is tokenized (a 10 MB text took 11-14 s to tokenize).
TEXT_BYTES_PER_TOKEN = 32
TRITON_PARAMETER_PREFIX = "triton_"  # Triton's own request parameters (triton_enable_empty_final_response)


@dataclass(frozen=True)
class Tokenizer:
    """What request_from needs of a model's tokenizer: its encoding, and the most bytes one token spans."""

    encode: Callable[[str], tuple[int, ...]]
    longest_token_bytes: int = 1


def unknown_fields(parameters: dict[str, Any], text: bool) -> str | None:
    """Why a request's parameters are wrong, or None. Triton's generate endpoint passes a JSON field that
    names no input as a request parameter, so a misspelt field (max_new_tokens) would be ignored."""
    names = [t.name for t in inputs(text)]
    for name in parameters:
        if name.startswith(TRITON_PARAMETER_PREFIX):
            continue
        if name == TEXT_INPUT.name:
            return ("text_input: this model has no tokenizer (spec generate.tokenizer), so it takes the "
                    "prompt as input_ids only")
        close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]}?)" if close else ""
        return f"unknown field {name}{hint}: this model takes {', '.join(names)}"
    return None


def request_from(get: Callable[[str], np.ndarray | None], limits: Limits,
                 tokenizer: Tokenizer | None = None,
                 parameters: dict[str, Any] | None = None) -> GenerateRequest:
    """A request's tensors (by name, None where absent) and parameters as what to generate; bad values name
    the tensor or field. With a tokenizer the prompt may come as text_input instead of input_ids."""
    problem = unknown_fields(parameters or {}, tokenizer is not None)
    if problem is not None:
        raise ValueError(problem)
    prompt = _prompt(get, tokenizer, limits.max_model_len)
    max_tokens = _scalar(get, "max_tokens", limits.max_tokens, int)
    sampling = TokenSampling(temperature=_scalar(get, "temperature", 0.0, float),
                        top_k=_scalar(get, "top_k", 0, int),
                        top_p=_scalar(get, "top_p", 1.0, float),
                        seed=_scalar(get, "seed", None, int))
    if not (sampling.temperature >= 0.0 and math.isfinite(sampling.temperature)):
        raise ValueError(f"temperature {sampling.temperature}: expected 0 (greedy) or more")
    if sampling.top_k < 0:
        raise ValueError(f"top_k {sampling.top_k}: expected 0 (every token) or more")
    if not 0.0 < sampling.top_p <= 1.0:
        raise ValueError(f"top_p {sampling.top_p}: expected more than 0 and at most 1")
    if sampling.seed is not None and sampling.seed < 0:  # numpy's generators take no negative seed
        raise ValueError(f"seed {sampling.seed}: expected 0 or more")
    return GenerateRequest(prompt, max_tokens, sampling)


def _prompt(get: Callable[[str], np.ndarray | None], tokenizer: Tokenizer | None,
            context: int | None) -> tuple[int, ...]:
    """The prompt's ids: input_ids as given, or text_input through the tokenizer (a text too long for the
    context refused before it is tokenized)."""
    ids, text = get("input_ids"), get("text_input")
    if ids is not None and text is not None:
        raise ValueError("give input_ids or text_input, not both")
    if ids is not None:
        return tuple(int(t) for t in np.asarray(ids).reshape(-1))
    if text is None:
        raise ValueError("input_ids is required: the prompt's token ids"
                         + (" (or text_input: the prompt as text)" if tokenizer is not None else ""))
    if tokenizer is None:
        raise ValueError("text_input needs a tokenizer: give the model one (spec generate: {tokenizer: …})")
    values = np.asarray(text, dtype=object).reshape(-1)
    if values.size != 1:
        raise ValueError(f"text_input: expected one text, got {values.size}")
    value = values[0]
    _check_text_length(len(value) if isinstance(value, bytes) else len(str(value).encode("utf-8")),
                       tokenizer, context)
    try:
        prompt = value.decode("utf-8") if isinstance(value, bytes) else str(value)
    except UnicodeDecodeError as exc:
        raise ValueError(f"text_input: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    ids_of_text = tokenizer.encode(prompt)
    if not ids_of_text:
        raise ValueError("text_input: the text holds no token")
    return ids_of_text


def _check_text_length(size: int, tokenizer: Tokenizer, context: int | None) -> None:
    """Refuse a text that cannot fit the context whatever its tokens (before it is tokenized)."""
    if context is None:
        return
    most = context * max(TEXT_BYTES_PER_TOKEN, tokenizer.longest_token_bytes)
    if size > most:
        raise ValueError(f"text_input: {size} bytes cannot fit the model's context of {context} tokens "
                         f"(at most {most} bytes are tokenized: "
                         f"{max(TEXT_BYTES_PER_TOKEN, tokenizer.longest_token_bytes)} a token)")


def _scalar(get: Callable[[str], np.ndarray | None], name: str, default: Any, kind: type) -> Any:
    """One optional scalar input, or its default."""
    array = get(name)
    if array is None:
        return default
    values = np.asarray(array).reshape(-1)
    if values.size != 1:
        raise ValueError(f"{name}: expected one value, got {values.size}")
    return kind(values[0])
