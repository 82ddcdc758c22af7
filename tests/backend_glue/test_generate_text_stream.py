"""The text pieces of a stream, without Triton: joined, they are the decoding of all its ids, even where
one character spans several byte-level tokens."""

from __future__ import annotations

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from triton_ge_console.backend_glue.generate_text import TextCodec

TEXT = "naïve café déjà vu, über straße — ünïcödé everywhere; ÿes"


def _byte_level() -> TextCodec:
    """A byte-level BPE trained on TEXT, whose rare characters take two tokens each."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator([TEXT], trainers.BpeTrainer(
        vocab_size=280, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    return TextCodec(tokenizer)


def test_pieces_join_to_the_whole_text_and_never_split_a_character() -> None:
    """Byte-level tokens: a token holding half a character adds nothing until its other half arrives."""
    codec = _byte_level()
    ids = codec.encode(TEXT)
    stream = codec.stream()
    pieces = [stream.piece(token, i == len(ids) - 1) for i, token in enumerate(ids)]
    assert "".join(pieces) == codec.decode(list(ids)) == TEXT
    assert "" in pieces  # some token held half a character
    assert not any("\ufffd" in piece for piece in pieces)
