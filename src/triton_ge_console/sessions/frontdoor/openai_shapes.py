"""The OpenAI API's shapes as the front door reads and writes them: a completion or chat request's fields
(only those it honours: model, prompt or messages, max_tokens, temperature, top_p, seed, stop, stream,
stream_options; others are ignored as OpenAI ignores unknown ones, and n > 1, echo, best_of and logprobs are
refused), the responses and chunks, and errors in OpenAI's {"error": {...}} shape."""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from triton_ge_console.errors import GeConsoleError
from triton_ge_console.triton_terms import INT64_MAX

OWNER = "triton-ge-console"
COMPLETION_DEFAULT_TOKENS = 16  # OpenAI's default max_tokens for /v1/completions
MAX_STOPS = 4  # OpenAI's bound on stop sequences


class OpenAIError(GeConsoleError):
    """A request the front door answers with an error, in OpenAI's shape."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.kind, self.param, self.code = status, message, kind, param, code

    def body(self) -> dict[str, Any]:
        """{"error": {message, type, param, code}}, as OpenAI answers."""
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


def bad(message: str, param: str | None = None) -> OpenAIError:
    """A 400 naming the field."""
    return OpenAIError(400, message, param=param)


@dataclass(frozen=True)
class DoorRequest:
    """What a completion or chat request asks, checked."""

    model: str
    prompt: str | tuple[int, ...] | None  # completions: text or token ids
    messages: tuple[Mapping[str, Any], ...] | None  # chat
    max_tokens: int | None
    temperature: float | None
    top_p: float | None
    seed: int | None
    stop: tuple[str, ...]
    stream: bool
    include_usage: bool

    @property
    def chat(self) -> bool:
        """A chat completion (messages) rather than a completion (prompt)."""
        return self.messages is not None


def _number(body: Mapping[str, Any], key: str, low: float, high: float) -> float | None:
    """An optional number within [low, high]."""
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise bad(f"{key}: expected a number, got {value!r}", key)
    if not low <= value <= high:
        raise bad(f"{key} {value}: expected {low:g} to {high:g}", key)
    return float(value)


def _integer(body: Mapping[str, Any], key: str, low: int) -> int | None:
    """An optional integer of at least low that the model's INT64 input holds as sent."""
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= INT64_MAX:
        raise bad(f"{key}: expected an integer from {low} to {INT64_MAX}, got {value!r}", key)
    return value


def _stop(body: Mapping[str, Any]) -> tuple[str, ...]:
    """stop: a string or up to four."""
    value = body.get("stop")
    if value is None:
        return ()
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
        raise bad("stop: expected a string or a list of non-empty strings", "stop")
    if len(stops) > MAX_STOPS:
        raise bad(f"stop: at most {MAX_STOPS} sequences", "stop")
    return tuple(stops)


def _prompt(body: Mapping[str, Any]) -> str | tuple[int, ...]:
    """prompt: a string, a list of one string, or a list of token ids (one prompt per request)."""
    value = body.get("prompt")
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str | list):
        value = value[0]
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(type(t) is int for t in value):
        return tuple(value)
    raise bad("prompt: expected a string or a list of token ids (one prompt per request)", "prompt")


def _messages(body: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...]:
    """messages: role and content each; content as a string or text parts (joined)."""
    value = body.get("messages")
    if not isinstance(value, list) or not value:
        raise bad("messages: expected a non-empty list of {role, content}", "messages")
    found = []
    for index, message in enumerate(value):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise bad(f"messages[{index}]: expected an object with a role", "messages")
        content = message.get("content")
        if isinstance(content, list):  # [{"type": "text", "text": ...}, ...]
            texts = [part.get("text") for part in content if isinstance(part, dict)]
            if not all(isinstance(text, str) for text in texts) or len(texts) != len(content):
                raise bad(f"messages[{index}].content: only text parts are supported", "messages")
            content = "".join(texts)  # type: ignore[arg-type]
        if content is not None and not isinstance(content, str):
            raise bad(f"messages[{index}].content: expected a string", "messages")
        found.append({**message, "content": content or ""})
    return tuple(found)


def _refuse_unsupported(body: Mapping[str, Any]) -> None:
    """Fields asking for what the front door does not do."""
    if body.get("n") not in (None, 1):
        raise bad("n: only 1 choice per request is supported", "n")
    if body.get("best_of") not in (None, 1):
        raise bad("best_of: not supported", "best_of")
    if body.get("echo"):
        raise bad("echo: not supported", "echo")
    if body.get("logprobs") not in (None, False, 0):
        raise bad("logprobs: not supported", "logprobs")


def read_request(body: Any, chat: bool) -> DoorRequest:
    """A request's JSON body as a DoorRequest; OpenAIError names the first bad field."""
    if not isinstance(body, dict):
        raise bad("the body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise bad("model: required", "model")
    _refuse_unsupported(body)
    stream = body.get("stream") or False
    if not isinstance(stream, bool):
        raise bad("stream: expected true or false", "stream")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise bad("stream_options: expected an object", "stream_options")
    max_tokens = _integer(body, "max_completion_tokens", 1) if chat else None
    return DoorRequest(
        model=model, prompt=None if chat else _prompt(body), messages=_messages(body) if chat else None,
        max_tokens=max_tokens if max_tokens is not None else _integer(body, "max_tokens", 1),
        temperature=_number(body, "temperature", 0.0, 2.0), top_p=_number(body, "top_p", 0.0, 1.0),
        seed=_integer(body, "seed", 0), stop=_stop(body), stream=stream,
        include_usage=bool(options.get("include_usage")))


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    """OpenAI's usage object."""
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


class Reply:
    """One request's response bodies and stream chunks, sharing its id and creation time."""

    def __init__(self, request: DoorRequest) -> None:
        self.request = request
        self.id = ("chatcmpl-" if request.chat else "cmpl-") + uuid.uuid4().hex
        self.created = int(time.time())

    def _frame(self, chunk: bool) -> dict[str, Any]:
        """The fields every body carries."""
        kind = ("chat.completion.chunk" if chunk else "chat.completion") if self.request.chat \
            else "text_completion"
        return {"id": self.id, "object": kind, "created": self.created, "model": self.request.model}

    def whole(self, text: str, finish: str, used: dict[str, int]) -> dict[str, Any]:
        """The non-streamed response."""
        if self.request.chat:
            choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text},
                                      "logprobs": None, "finish_reason": finish}
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
        return {**self._frame(False), "choices": [choice], "usage": used}

    def chunk(self, text: str | None, finish: str | None = None, first: bool = False) -> dict[str, Any]:
        """One streamed chunk: a piece of text, or the end (finish set, no text)."""
        if self.request.chat:
            delta: dict[str, Any] = {"role": "assistant", "content": ""} if first else {}
            if text is not None:
                delta["content"] = text
            choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        else:
            choice = {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish}
        body = {**self._frame(True), "choices": [choice]}
        if self.request.include_usage:
            body["usage"] = None
        return body

    def usage_chunk(self, used: dict[str, int]) -> dict[str, Any]:
        """The last chunk with stream_options.include_usage: no choices, the usage."""
        return {**self._frame(True), "choices": [], "usage": used}


def model_list(names: list[str], created: int) -> dict[str, Any]:
    """/v1/models."""
    data = [{"id": name, "object": "model", "created": created, "owned_by": OWNER} for name in names]
    return {"object": "list", "data": data}
