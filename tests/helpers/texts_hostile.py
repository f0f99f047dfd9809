"""Random hostile text for property tests: lone surrogates, NUL and C0/C1 controls, combining
marks, right-to-left text and direction marks, emoji sequences, invisible characters, very long
lines, and empty or blank texts, mixed with ordinary words. Seeded: a test that fails names its
seed, and the same seed gives the same texts."""

from __future__ import annotations

import random

SURROGATES = ["\ud800", "\udbff", "\udc00", "\udfff"]
CONTROLS = [chr(c) for c in range(0, 32)] + ["\x7f"] + [chr(c) for c in range(0x80, 0xA0)]
COMBINING = [chr(c) for c in range(0x300, 0x370)] + ["\u20dd", "\u0489"]
RTL = [*"שלום עולם", *"مرحبا بالعالم", "\u202e", "\u202b", "\u200f", "\u2067"]
EMOJI = ["😀", "👩\u200d👩\u200d👧", "🏳\ufe0f\u200d🌈", "🇫🇷", "🧑🏽", "\ufe0f"]
INVISIBLE = ["\ufeff", "\u200b", "\u2028", "\u2029", "\u3000", "\xa0", "\ufffd", "\U0010ffff"]
OTHER = ["𝔘𝔫𝔦", "日本語", "Ω", "ﬁ", "İ", "ß"]
WORDS = ["Paris", "is", "the", "capital", "of", "France", ".", "1820", "U.S.", "don't", "São"]
SPACE = [" ", "\n", "\t", "\r\n"]
POOLS = [SURROGATES, CONTROLS, COMBINING, RTL, EMOJI, INVISIBLE, OTHER, WORDS, SPACE]


def random_text(rng: random.Random, *, surrogates: bool = True) -> str:
    """One text: mostly a mix of the pools above, sometimes empty, blank or one very long line."""
    roll = rng.random()
    if roll < 0.05:
        return ""
    if roll < 0.10:
        return rng.choice([" ", "\n\n", "\t \u3000", "\x00", "\u200b"])
    if roll < 0.13:
        return rng.choice(WORDS) * rng.randint(2_000, 20_000)  # one line, no space in it
    pools = POOLS if surrogates else [p for p in POOLS if p is not SURROGATES]
    parts = []
    for _ in range(rng.randint(1, 40)):
        parts.append(rng.choice(rng.choice(pools)))
        if rng.random() < 0.5:
            parts.append(" ")
    return "".join(parts)


def random_rows(
    rng: random.Random, n: int, *, surrogates: bool = True
) -> tuple[list[str | None], list[list[str | None]]]:
    """``n`` responses (some missing) and their samples (0 to 4, some missing)."""
    responses: list[str | None] = []
    samples: list[list[str | None]] = []
    for _ in range(n):
        responses.append(None if rng.random() < 0.1 else random_text(rng, surrogates=surrogates))
        samples.append(
            [
                None if rng.random() < 0.1 else random_text(rng, surrogates=surrogates)
                for _ in range(rng.randint(0, 4))
            ]
        )
    return responses, samples
