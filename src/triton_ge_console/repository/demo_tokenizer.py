"""The demo llama's tokenizer (`generate: {tokenizer: demo:llama_kv}`), built in code so no download is
needed: word level, exactly one token per id of the demo's 32000-entry vocabulary, so every id the model
can emit decodes to a word.

Its words: three specials, the words and punctuation of a short built-in text in order of first use, then
made-up words of two and three syllables until the vocabulary is full. Deterministic: the same JSON always.
"""

from __future__ import annotations

import functools
import itertools
import re

from triton_ge_console.repository.demo_decoder import VOCAB

DEMO_TOKENIZER = "demo:llama_kv"  # the spec's name for it (the model it goes with)
SPECIALS = ("<unk>", "<s>", "</s>")
TEXT = """
The console watches a model repository served by Triton on Ascend NPUs. A generate model streams one
token at a time: the prompt is read once, then every step adds a word to each running sequence, and the
cache of keys and values grows with it. Operators want the time to the first token, the time between
tokens, how many tokens leave each second, how many sequences run or wait, and how full the cache is.
When a sequence ends, by its length, its stop token, a cancel or an error, its cache is given back.
"""
_CONSONANTS, _VOWELS = "bdfgklmnprstvz", "aeiou"


def _made_up_words() -> itertools.chain[str]:
    """Pseudo-words: every consonant-vowel syllable pair, then triple."""
    syllables = [c + v for c in _CONSONANTS for v in _VOWELS]
    return itertools.chain.from_iterable(
        ("".join(parts) for parts in itertools.product(syllables, repeat=n)) for n in (2, 3))


def demo_vocabulary() -> dict[str, int]:
    """Word → id for all VOCAB ids."""
    words = list(SPECIALS)
    for word in re.findall(r"\w+|[^\w\s]+", TEXT.lower()):
        if word not in words:
            words.append(word)
    known = set(words)
    fill = (w for w in _made_up_words() if w not in known)
    words.extend(itertools.islice(fill, VOCAB - len(words)))
    return {word: i for i, word in enumerate(words)}


@functools.lru_cache(maxsize=1)
def demo_tokenizer_json() -> str:
    """The tokenizer as a `tokenizer.json` (the `tokenizers` library's own format)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel(demo_vocabulary(), unk_token="<unk>"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.add_special_tokens(list(SPECIALS))
    return tokenizer.to_str()
