"""A chat's messages → one prompt, through the tokenizer's chat template rendered as transformers renders
it (`PreTrainedTokenizerBase.apply_chat_template`): Jinja2's immutable sandbox with trim_blocks and
lstrip_blocks, the loop-controls extension, `raise_exception` and `strftime_now` as globals, a `tojson`
that keeps non-ASCII, and the tokenizer's special tokens (`bos_token`, `eos_token`, ...) as variables."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from triton_ge_console.errors import GeConsoleError, InputError

# Used when the tokenizer has no chat_template (the demo's has none) and none is given: each message on
# its own line as "role: content", then "assistant:" for the reply to follow.
DEFAULT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)
SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token")
CONFIG_FILENAME = "tokenizer_config.json"  # beside tokenizer.json, as transformers saves a tokenizer


class ChatTemplateError(GeConsoleError, ValueError):
    """A template that does not compile or raises while rendering (raise_exception included)."""


@dataclass(frozen=True)
class ChatTemplate:
    """One model's template and the special tokens it may use."""

    source: str = DEFAULT_TEMPLATE
    specials: Mapping[str, str] = field(default_factory=dict)
    origin: str = "the default"  # where it came from, for messages

    @cached_property
    def _compiled(self) -> Any:
        """The template compiled once in transformers' environment."""
        from jinja2 import TemplateError, TemplateSyntaxError
        from jinja2.ext import loopcontrols
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(message: str) -> None:
            raise ChatTemplateError(message)

        def tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None,
                   separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
            return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                              sort_keys=sort_keys)

        environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                    extensions=[loopcontrols])
        environment.filters["tojson"] = tojson
        environment.globals["raise_exception"] = raise_exception
        environment.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
        try:
            return environment.from_string(self.source)
        except TemplateSyntaxError as exc:  # Jinja knows the line: say it
            raise ChatTemplateError(
                f"chat template {self.origin}, line {exc.lineno}: {exc.message}") from None
        except TemplateError as exc:
            raise ChatTemplateError(f"chat template {self.origin}: {exc}") from None

    def compile(self) -> ChatTemplate:
        """This template, compiled now (ChatTemplateError names the file and line of a syntax error), so a
        broken one is refused where it is given rather than at the first chat."""
        _ = self._compiled
        return self

    def render(self, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = True) -> str:
        """The prompt for these messages (ChatTemplateError: the template refused or is broken)."""
        from jinja2 import TemplateError

        try:
            return str(self._compiled.render(messages=list(messages),
                                             add_generation_prompt=add_generation_prompt, **self.specials))
        except TemplateError as exc:
            raise ChatTemplateError(f"chat template {self.origin}: {exc}") from None


def _token_text(value: Any) -> str | None:
    """A special token as tokenizer_config.json holds it: a string, or {"content": ...} (AddedToken)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None


def _template_text(value: Any) -> str | None:
    """chat_template as a string, or the one named "default" in a list of {name, template}."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        named = {item.get("name"): item.get("template") for item in value if isinstance(item, dict)}
        found = named.get("default")
        return found if isinstance(found, str) else None
    return None


def template_for(tokenizer_json: Path | None, override: Path | None = None) -> ChatTemplate:
    """The template a model's chats use: `override` (a Jinja file) if given, else tokenizer_config.json's
    chat_template beside its tokenizer.json, else DEFAULT_TEMPLATE; ValueError names an unreadable file."""
    config: dict[str, Any] = {}
    config_path = None if tokenizer_json is None else tokenizer_json.parent / CONFIG_FILENAME
    if config_path is not None and config_path.is_file():
        try:
            loaded = json.loads(config_path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise InputError(f"{config_path}: not a readable tokenizer config ({exc})") from None
        config = loaded if isinstance(loaded, dict) else {}
    specials = {key: text for key in SPECIAL_TOKENS if (text := _token_text(config.get(key))) is not None}
    if override is not None:
        try:
            return ChatTemplate(override.read_text(encoding="utf-8"), specials, str(override))
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"--chat-template {override}: cannot read it ({exc})") from None
    source = _template_text(config.get("chat_template"))
    if source is not None:
        return ChatTemplate(source, specials, f"{config_path}")
    return ChatTemplate(DEFAULT_TEMPLATE, specials)
