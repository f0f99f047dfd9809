"""A 50 MB answer costs what its first few thousand characters cost.

An LLM that loops can answer with megabytes of text. The model scores at most ``max_length``
tokens of it, and the work to find them must not grow with the rest of the text: no string much
longer than ``max_length`` tokens' worth of characters is ever handed to the tokenizer, and the
score is the one of the text cut to its first few thousand characters.
"""

from __future__ import annotations

import math
import warnings

import pytest

from uqlm_bert.scorers import build_scorer

MB = 1024 * 1024
SENTENCE = "The quick brown fox jumps over the lazy dog near the river bank. "
SAMPLES = ["The quick brown fox jumps over the lazy dog.", "A fox and a dog by a river."]


class RecordingTokenizer:
    """Stands in for a tokenizer: refuses any text over ``most`` characters (where the
    unbounded code would spend minutes and gigabytes), records the rest and delegates."""

    def __init__(self, inner, most: int) -> None:
        self._inner = inner
        self._most = most
        self.lengths: list[int] = []

    def __call__(self, texts, *args, **kwargs):
        batch = [texts] if isinstance(texts, str) else list(texts)
        longest = max((len(t) for t in batch), default=0)
        assert longest <= self._most, f"a text of {longest:,} characters was tokenized"
        self.lengths += [len(t) for t in batch]
        return self._inner(texts, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._inner, name)


def huge(kind: str) -> str:
    if kind == "sentences":
        return (SENTENCE * (50 * MB // len(SENTENCE) + 1))[: 50 * MB]
    if kind == "one word":  # a loop on one character: no whitespace at all
        return "a" * (50 * MB)
    return "Paris" + " " * (50 * MB) + "Lyon"  # whitespace, then a word at the very end


@pytest.fixture(scope="module")
def scorers():
    return {name: build_scorer(name, device="cpu") for name in ("bert_score", "cosine_sim")}


def encoder_of(scorer):
    return scorer.engine.encoder if hasattr(scorer, "engine") else scorer.encoder


@pytest.mark.parametrize("name", ["bert_score", "cosine_sim"])
@pytest.mark.parametrize("kind", ["sentences", "one word", "whitespace"])
def test_a_50_mb_answer_is_scored_from_its_first_characters(scorers, monkeypatch, name, kind):
    scorer = scorers[name]
    encoder = encoder_of(scorer)
    most = encoder.max_length * 128  # 64 KiB for 512 tokens
    recording = RecordingTokenizer(encoder.tokenizer, most)
    text = huge(kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "texts truncated to the model's maximum"
        cut = scorer.score([text[:8192], "Paris"], [SAMPLES, SAMPLES])
        monkeypatch.setattr(encoder, "tokenizer", recording)
        whole = scorer.score([text, "Paris"], [SAMPLES, SAMPLES])
    assert recording.lengths and max(recording.lengths) <= most
    assert not math.isnan(whole[0])
    assert list(whole) == pytest.approx(list(cut), abs=1e-6)
