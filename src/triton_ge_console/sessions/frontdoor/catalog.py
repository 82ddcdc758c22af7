"""Which of a session's models the front door serves: its ready generate models (decoupled), each with its
tokenizer (the config's generate_tokenizer, read from the session's repository), its chat template and
its bound on max_tokens. Read from Triton's repository index and each model's config as loaded."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triton_ge_console.backend_glue.generate_protocol import TOKENIZER_PARAMETER, is_generate, limits_from
from triton_ge_console.backend_glue.generate_text import TextCodec
from triton_ge_console.backend_glue.settings import GlueConfigError, parameter, resolve_path
from triton_ge_console.sessions.frontdoor.chat_template import ChatTemplate, template_for
from triton_ge_console.sessions.observe.stats import (
    EndpointError,
    HttpEndpoint,
    IndexReader,
    fetch_model_config,
)
from triton_ge_console.triton_terms import MODEL_READY


@dataclass(frozen=True)
class DoorModel:
    """One generate model as the front door serves it; codec None: it has no tokenizer here."""

    name: str
    max_tokens: int  # the most a request may ask (the spec's generate.max_tokens)
    codec: TextCodec | None
    template: ChatTemplate
    why_no_text: str | None = None  # when codec is None: why, for the error a text request gets
    context: int | None = None  # prompt + max_tokens of one request, when the config says (max_model_len)


class Catalog:
    """The session's generate models, read again when a request names one not known yet."""

    def __init__(self, http_url: str, headers: dict[str, str], repository: Path | None,
                 chat_template: Path | None = None) -> None:
        self._endpoint = HttpEndpoint(http_url, 10.0, headers)
        self._index = IndexReader()
        self._repository = repository
        self._chat_template = chat_template
        self._models: dict[str, DoorModel] = {}
        self._lock = threading.Lock()

    def models(self) -> list[DoorModel]:
        """Every ready generate model, read now (EndpointError: Triton did not answer)."""
        with self._lock:
            found: dict[str, DoorModel] = {}
            for entry in self._index.read(self._endpoint):
                if entry.state != MODEL_READY or entry.name in found:
                    continue
                config = fetch_model_config(self._endpoint, entry.name)
                if is_generate(config):
                    known = self._models.get(entry.name)
                    found[entry.name] = known or self._model(entry.name, entry.version, config)
            self._models = found
            return list(found.values())

    def get(self, name: str) -> DoorModel | None:
        """The model by name, reading the server again if it is not known (None: no such generate model)."""
        known = self._models.get(name)
        if known is not None:
            return known
        return next((model for model in self.models() if model.name == name), None)

    def close(self) -> None:
        """Close the connection to Triton."""
        self._endpoint.close()

    def _model(self, name: str, version: str, config: dict[str, Any]) -> DoorModel:
        """A generate model's bound, tokenizer and template."""
        limits = limits_from({key: value for key in (config.get("parameters") or {})
                              if (value := parameter(config, key)) is not None}, name)
        tokenizer, why = self._tokenizer(name, version, config)
        codec = None if tokenizer is None else TextCodec.from_file(tokenizer)
        return DoorModel(name, limits.max_tokens, codec, template_for(tokenizer, self._chat_template), why,
                         limits.max_model_len)

    def _tokenizer(self, name: str, version: str, config: dict[str, Any]) -> tuple[Path | None, str | None]:
        """The model's tokenizer.json in the session's repository, or why there is none."""
        text = parameter(config, TOKENIZER_PARAMETER)
        if text is None:
            return None, f"model {name!r} has no tokenizer (generate.tokenizer): the front door serves text"
        if self._repository is None:
            return None, (f"model {name!r}: the session has no local repository to read its tokenizer "
                          "from")
        try:
            path = resolve_path(text, self._repository / name / (version or "1"), name, TOKENIZER_PARAMETER)
        except GlueConfigError as exc:
            return None, str(exc)
        if path is None or not path.is_file():
            return None, f"model {name!r}: its tokenizer {path} is not in the session's repository"
        return path, None


__all__ = ["Catalog", "DoorModel", "EndpointError"]
