"""A front door request made ready to send: how many tokens it asks of the model."""

from __future__ import annotations

from tokenizers import Tokenizer

from triton_ge_console.backend_glue.generate_text import TextCodec
from triton_ge_console.repository.demo_tokenizer import demo_tokenizer_json
from triton_ge_console.sessions.frontdoor.catalog import DoorModel
from triton_ge_console.sessions.frontdoor.chat_template import template_for
from triton_ge_console.sessions.frontdoor.engine import prepare
from triton_ge_console.sessions.frontdoor.openai_shapes import COMPLETION_DEFAULT_TOKENS, DoorRequest


def _request(prompt: tuple[int, ...] | None = None, chat: bool = False) -> DoorRequest:
    """A request without max_tokens: a completion of these ids, or a chat of one message."""
    messages = ({"role": "user", "content": "the cache"},) if chat else None
    return DoorRequest("llama", prompt, messages, None, None, None, None, (), True, False)


def test_a_request_without_max_tokens_asks_what_its_prompt_leaves_of_the_context() -> None:
    """Issue 39 (fa81a5d): the glue refuses prompt + max_tokens beyond the model's context, so a chat or a
    completion that names no max_tokens asks what its prompt leaves of the context (at least one token,
    at most the model's bound) when the config says the context; without it, as before."""
    codec = TextCodec(Tokenizer.from_str(demo_tokenizer_json()))
    bounded = DoorModel("llama", 64, codec, template_for(None), context=20)
    unbounded = DoorModel("llama", 64, codec, template_for(None))
    ids = tuple(range(1, 11))
    assert prepare(bounded, _request(ids)).generation.max_tokens == 10  # 20 - 10, below OpenAI's 16
    assert prepare(unbounded, _request(ids)).generation.max_tokens == COMPLETION_DEFAULT_TOKENS
    chat = prepare(bounded, _request(chat=True))
    assert chat.generation.max_tokens == 20 - chat.prompt_tokens
    assert prepare(unbounded, _request(chat=True)).generation.max_tokens == 64
    assert prepare(bounded, _request(tuple(range(1, 31)))).generation.max_tokens == 1  # the glue refuses it
