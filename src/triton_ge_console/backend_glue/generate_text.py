"""Text as well as ids for a generate model: a local `tokenizer.json` (the `tokenizers` library) encodes a
text prompt and turns the streamed ids back into text, one piece per response.

The pieces of one stream joined are the decoding of all its ids: each piece is what decoding the ids so far
adds to what was sent; a decoding that ends in an incomplete character (U+FFFD) or rewrites what was sent
waits for the next token, and the last response carries whatever remains.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


class TextCodec:
    """One model's tokenizer: text → prompt ids, ids → text."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer
        vocabulary = tokenizer.get_vocab(with_added_tokens=True)
        # what one token spans at most: bounds the text a context can hold before any is tokenized
        self.longest_token_bytes = max((len(t.encode("utf-8")) for t in vocabulary), default=1)

    @classmethod
    def from_file(cls, path: Path) -> TextCodec:
        """Read a `tokenizer.json`; an unreadable one raises ValueError naming the file."""
        from tokenizers import Tokenizer

        try:
            return cls(Tokenizer.from_file(str(path)))
        except Exception as exc:  # the library raises its own Exception for missing and malformed files
            raise ValueError(f"tokenizer {path}: {exc}") from None

    def encode(self, text: str) -> tuple[int, ...]:
        """A text prompt's ids (no special tokens added: the prompt is what the client wrote). Through
        encode_batch, which lets go of the GIL while it works (encode holds it: the stub's stepping thread
        stood still for as long as a long text took, 0.4 s for 262 kB here)."""
        (encoding,) = self._tokenizer.encode_batch([text], add_special_tokens=False)
        return tuple(encoding.ids)

    def decode(self, ids: list[int]) -> str:
        """Ids as text, special tokens left out."""
        return str(self._tokenizer.decode(ids, skip_special_tokens=True))

    def stream(self) -> TextStream:
        """A fresh incremental decoder for one stream."""
        return TextStream(self)


class TextStream:
    """The text pieces of one stream, one per token."""

    def __init__(self, codec: TextCodec) -> None:
        self._codec = codec
        self._ids: list[int] = []
        self._sent = ""

    def piece(self, token: int, final: bool) -> str:
        """What this token adds to the text sent so far (everything left when final)."""
        self._ids.append(token)
        return self.rest(final)

    def rest(self, final: bool = True) -> str:
        """What the ids so far add to the text sent (an incomplete character waits unless final): the
        last piece of a stream whose end is known only after its last token (the front door's)."""
        text = self._codec.decode(self._ids)
        if not text.startswith(self._sent) or (text.endswith("\ufffd") and not final):
            return ""
        piece, self._sent = text[len(self._sent):], text
        return piece
