"""Deterministic test texts: short, long, unicode, odd whitespace, LLM-answer sized."""

from __future__ import annotations

import random

_WORDS = (
    "the a of and in to is was he she it born known for his her career team city river "
    "university award film album played wrote released served member president football "
    "american british french german novel song year early later life died married children "
    "professional league season record first second national government science research "
    "published studied worked became founded led won"
).split()


def passage(seed: int, n_words: int) -> str:
    """A pseudo-biography of ``n_words`` words with sentence punctuation."""
    rng = random.Random(seed)
    words = []
    for i in range(n_words):
        w = rng.choice(_WORDS)
        if i == 0 or words[-1].endswith("."):
            w = w.capitalize()
        if rng.random() < 0.08:
            w += "."
        elif rng.random() < 0.05:
            w += ","
        words.append(w)
    return " ".join(words).rstrip(",") + "."


SHORT = [
    "The cat sat on the mat.",
    "A cat is sitting on a mat.",
    "Paris is the capital of France.",
    "The capital of France is Paris, a large city.",
    "hello  world",
    "héllo wörld ✓",
    "  leading and trailing spaces   ",
    "tabs\tand\nnewlines\n\nhere",
    "Numbers: 3.14159, 42, 1,000,000 and 10%.",
    "東京は日本の首都です。",
    "Emoji 🙂🚀 and accents: naïve café façade.",
    "מילים בעברית and English mixed",
    "!!!???...",
    "He was born in 1952 in Ohio and played football for the Buckeyes.",
    "She is known for her work on protein folding and won a Nobel Prize.",
    "x",
]

LONG = [passage(i, n) for i, n in enumerate([60, 120, 180, 250, 400])]

# Past the model's 512-token maximum: truncated by both implementations.
OVERLONG = [passage(100 + i, 700) for i in range(2)]
