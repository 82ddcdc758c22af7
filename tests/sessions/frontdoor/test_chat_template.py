"""Chat templates rendered as transformers renders them, and stop sequences cut from streamed text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from triton_ge_console.sessions.frontdoor.chat_template import (
    DEFAULT_TEMPLATE,
    ChatTemplateError,
    template_for,
)
from triton_ge_console.sessions.frontdoor.engine import StopCut

# A Llama-2-style template as tokenizer_config.json files carry it: bos_token, raise_exception, loop
# variables, and trim_blocks/lstrip_blocks shaping the whitespace.
LLAMA2 = (
    "{% if messages[0]['role'] == 'system' %}{% set system = messages[0]['content'] %}"
    "{% set messages = messages[1:] %}{% else %}{% set system = false %}{% endif %}"
    "{% for message in messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}"
    "{% if loop.index0 == 0 and system %}{% set content = '<<SYS>>\\n' + system + '\\n<</SYS>>\\n\\n'"
    " + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' ' + content.strip() + ' ' + eos_token }}{% endif %}"
    "{% endfor %}"
)


def _tokenizer_dir(tmp_path: Path, config: dict[str, object]) -> Path:
    """A tokenizer.json (its contents unread here) with a tokenizer_config.json beside it."""
    (tmp_path / "tokenizer.json").write_text("{}", encoding="utf-8")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return tmp_path / "tokenizer.json"


def test_a_tokenizer_config_s_template_renders_with_its_special_tokens(tmp_path: Path) -> None:
    """The template and bos/eos come from tokenizer_config.json (an AddedToken dict too)."""
    path = _tokenizer_dir(tmp_path, {"chat_template": LLAMA2, "bos_token": "<s>",
                                     "eos_token": {"content": "</s>", "lstrip": False}})
    template = template_for(path)
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Bye"}]
    assert template.render(messages) == (
        "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello </s><s>[INST] Bye [/INST]")


def test_raise_exception_in_a_template_is_a_template_error(tmp_path: Path) -> None:
    """A template refusing the messages says why."""
    template = template_for(_tokenizer_dir(tmp_path, {"chat_template": LLAMA2, "bos_token": "<s>"}))
    with pytest.raises(ChatTemplateError, match="roles must alternate"):
        template.render([{"role": "assistant", "content": "first"}])


def test_named_templates_take_the_default_and_an_override_wins(tmp_path: Path) -> None:
    """A list of named templates: "default"; --chat-template FILE over everything; none: the default."""
    named = [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D{{ messages|length }}"}]
    path = _tokenizer_dir(tmp_path, {"chat_template": named})
    assert template_for(path).render([{"role": "user", "content": "x"}]) == "D1"
    override = tmp_path / "mine.jinja"
    override.write_text("{{ messages[0]['content'] | tojson }}", encoding="utf-8")
    assert template_for(path, override).render([{"role": "user", "content": "é"}]) == '"é"'
    assert template_for(None).source == DEFAULT_TEMPLATE
    assert template_for(None).render([{"role": "user", "content": "hi"}]) == "user: hi\nassistant:"


def test_a_stop_sequence_is_held_back_until_told_apart_then_cut() -> None:
    """The last len(stop) - 1 characters wait (they may begin a stop); a stop met across pieces ends the
    text before it."""
    cut = StopCut(("END",))
    assert cut.add("abc E") == "abc"
    assert cut.add("x ") == " E"
    assert cut.add("EN") == "x "
    assert cut.add("D tail") == ""
    assert cut.met and cut.text == "abc Ex "
    free = StopCut(())
    assert free.add("anything") == "anything" and free.flush() == ""


def test_a_template_syntax_error_names_its_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken.jinja"
    broken.write_text("{% for message in messages %}\n{{ message['content'] }}\n{% endfro %}\n",
                      encoding="utf-8")
    with pytest.raises(ChatTemplateError) as caught:
        template_for(None, broken).render([{"role": "user", "content": "hi"}])
    assert str(caught.value).startswith(f"chat template {broken}, line 3: ")


def test_openai_refuses_a_broken_chat_template_when_it_starts(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Found when `ge-console openai` starts, in one line naming file and line, not at the first chat."""
    from triton_ge_console.cli import main

    broken = tmp_path / "broken.jinja"
    broken.write_text("{{ messages[0]['content'] }}\n{% if add_generation_prompt %}assistant:\n",
                      encoding="utf-8")
    assert main(["openai", "--chat-template", str(broken)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{broken}, line " in err, err
