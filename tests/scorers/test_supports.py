"""Token supports from the confidence's own pass, through the scorers.

The invariant, on many inputs (hostile text, short and windowed long answers, with and without
prompts, with the scorers' fixed idf): at ``dtype="float32"`` each response's
``sum(weights * support)`` is its mean BERTScore precision over the samples within 1e-6; every
word row's text is the answer's own characters; collecting supports changes no score; and the
supports of ``dtype="auto"`` stay within their documented bound of float32's.
"""

from __future__ import annotations

import json
import random
import warnings

import numpy as np
import pytest

from tests.helpers.texts import LONG, OVERLONG, SHORT
from tests.helpers.texts_hostile import random_rows
from uqlm_bert import ConfigurationError
from uqlm_bert._inputs import scoring_lists
from uqlm_bert.scorers._base import score_all, score_with_supports
from uqlm_bert.scorers._registry import build_scorer

NAMES = ("bert_score", "bert_score_precision", "bert_score_recall")
#: dtype="auto" (bfloat16 on CPUs with bfloat16 units, float16 on CUDA): a token's support stays
#: within this of float32's (docs/supports.md).
AUTO_SUPPORT_BOUND = 0.02


@pytest.fixture(scope="module")
def float32_scorers():
    return [build_scorer(name, dtype="float32", device="cpu") for name in NAMES]


def _check(scorers, responses, samples, prompts=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # empty texts, repaired surrogates
        inputs = scoring_lists(responses, samples, prompts)
        scores, supports = score_with_supports(scorers, inputs)
        plain = score_all(scorers, inputs)
    for name in NAMES:
        assert np.array_equal(scores[name], plain[name], equal_nan=True), name
    assert supports is not None and len(supports) == len(responses)
    precision = scores["bert_score_precision"]
    for i, ts in enumerate(supports):
        present = [s for s in inputs.samples[i] if s is not None]
        if inputs.responses[i] is None or not present:
            assert ts is None and np.isnan(precision[i])
            continue
        assert ts.text == inputs.responses[i]
        assert ts.num_samples == len(present)
        assert abs(ts.precision - precision[i]) <= 1e-6, (i, ts.precision, precision[i])
        assert ((ts.support <= 1 + 1e-6) & (ts.support >= -1)).all()
        rows = ts.word_rows()
        for a, b, text in zip(rows.start.tolist(), rows.end.tolist(), rows.text, strict=True):
            assert text == ts.text[a:b]
            assert a < b  # a word has characters
        assert (rows.start[1:] >= rows.end[:-1]).all()  # in order, not overlapping
        assert np.isclose(float(np.dot(rows.weight, rows.support)), ts.precision, atol=1e-6)
    return scores, supports


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_hostile_text_keeps_the_invariant(float32_scorers, seed):
    rng = random.Random(seed)
    responses, samples = random_rows(rng, 24)
    _check(float32_scorers, responses, samples)


HAND_HOSTILE = [
    "<script>alert('x')</script> is <b>bad</b>!!!???",
    "日本語の文章です。東京は大きい。",
    "e\u0301te\u0301 in a cafe\u0301, n\u0303",
    "\u200bhidden\u200b text\u200d here\ufeff",
    "RTL \u202eabc\u202c and \u05e9\u05dc\u05d5\u05dd \u0645\u0631\u062d\u0628\u0627",
    "🇫🇷 flag, 👩\u200d👩\u200d👧 family, 🧑🏽 tone",
    "Pneumonoultramicroscopicsilicovolcanoconiosis" * 60,
    "...!!!???---",
    "\n\t  leading and trailing whitespace \r\n ",
]


def test_hand_made_hostile_text_keeps_the_invariant(float32_scorers):
    samples = [[HAND_HOSTILE[(i + 1) % len(HAND_HOSTILE)], "A plain sample."] for i in range(9)]
    _, supports = _check(float32_scorers, HAND_HOSTILE, samples)
    assert all(ts is not None and len(ts) > 0 for ts in supports)


def test_prompts_weigh_their_tokens_zero_and_keep_the_invariant(float32_scorers):
    responses = ["The capital of France is Paris.", "The capital of France?", "  Lima, Peru.  "]
    samples = [["Paris is the capital.", "Paris."], ["France's capital: Paris."], ["Lima."]]
    prompts = ["What is the capital of France?", "What is the capital of France?", None]
    _, supports = _check(float32_scorers, responses, samples, prompts)
    words = supports[0].word_rows()
    counted = dict(zip(words.text, words.counted.tolist(), strict=True))
    assert counted == {
        "The": False,
        "capital": False,
        "of": False,
        "France": False,
        "is": False,
        "Paris": True,
        ".": False,
    }
    assert not supports[1].weights.any()  # only the prompt's words: weighs 0, precision 0
    assert supports[2].text[supports[2].starts[0] :].startswith("Lima")  # spans past the lead


@pytest.mark.slow
def test_long_answers_read_in_windows_and_cut(float32_scorers):
    responses = [OVERLONG[0], LONG[4], SHORT[0]]
    samples = [[OVERLONG[1], LONG[3]], [OVERLONG[1]], [LONG[0], ""]]
    _, supports = _check(float32_scorers, responses, samples)
    assert len(supports[0]) > 512  # windows: every token scored
    cut = [build_scorer(n, dtype="float32", device="cpu", long_texts="truncate") for n in NAMES]
    _, supports = _check(cut, responses, samples)
    assert len(supports[0]) == 510  # cut at the model's window, special tokens aside
    assert supports[0].ends.max() < len(OVERLONG[0])


@pytest.mark.slow
def test_wikibio_passages(float32_scorers, shared_data_dir):
    rows = [json.loads(line) for line in (shared_data_dir / "wikibio_gpt3_dev.jsonl").open()][:6]
    prompts = [f"This is a Wikipedia passage about {r['response'].split(' (')[0]}:" for r in rows]
    _check(
        float32_scorers,
        [r["response"] for r in rows],
        [r["sampled_responses"][:5] for r in rows],
        prompts,
    )


def test_auto_dtype_supports_stay_near_float32(float32_scorers):
    auto = [build_scorer(name, device="cpu") for name in NAMES]
    responses = SHORT[:6] + LONG[:3]
    samples = [[SHORT[(i + k) % len(SHORT)] for k in (7, 9, 11)] for i in range(9)]
    _, exact = score_with_supports(float32_scorers, responses, samples)
    _, fast = score_with_supports(auto, responses, samples)
    for a, b in zip(exact, fast, strict=True):
        assert np.array_equal(a.starts, b.starts) and np.array_equal(a.weights, b.weights)
        assert np.abs(a.support - b.support).max() <= AUTO_SUPPORT_BOUND


def test_no_bertscore_scorer_no_supports():
    scores, supports = score_with_supports([build_scorer("exact_match")], ["a"], [["a"]])
    assert supports is None and scores["exact_match"].tolist() == [1.0]


def test_nothing_to_score_gives_none_per_response(float32_scorers):
    _, supports = score_with_supports(float32_scorers, ["a", None], [[None], ["b"]])
    assert supports == [None, None]


def test_score_all_collects_nothing(float32_scorers, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("score_all must not keep token matches")

    engine = float32_scorers[0].engine
    monkeypatch.setattr(type(engine), "score_matches", refuse)
    score_all(float32_scorers, ["Lima is in Peru."], [["Lima is in Peru."]])


def test_ids_that_differ_from_the_engine_are_an_error(float32_scorers, monkeypatch):
    from uqlm_bert.bertscore import _encoder as encoder

    real = encoder.token_spans

    def shifted(tokenizer, texts, max_length):
        out = real(tokenizer, texts, max_length)
        return [type(s)(s.ids[:-1], s.lead, s.offsets[:-1], s.words[:-1]) for s in out]

    monkeypatch.setattr(encoder, "token_spans", shifted)
    with pytest.raises(ConfigurationError, match="other token ids"):
        score_with_supports(float32_scorers, ["Lima is in Peru."], [["Lima."]])
