"""Every scorer on text that is not valid Unicode, and on random hostile text.

A lone surrogate (``"\\ud800"``, as scraped or mis-decoded text can hold) cannot be encoded as
UTF-8, so a tokenizer or a regular expression may fail on it; one such text must not fail its
batch. It is repaired to U+FFFD, with one warning, and the batch is scored.
"""

from __future__ import annotations

import math
import random
import warnings

import pytest

from tests.helpers.company import in_company
from tests.helpers.texts_hostile import random_rows
from uqlm_bert.scorers._registry import build_scorer

SCORERS = ["exact_match", "rouge_l", "bleu", "cosine_sim", "bert_score"]
MODEL_SCORERS = {"cosine_sim", "bert_score", "bert_score_precision", "bert_score_recall"}


@pytest.fixture(scope="module")
def hostile_scorers():
    built = {}

    def get(name):
        if name not in built:
            settings = {"device": "cpu"} if name in MODEL_SCORERS else {}
            built[name] = build_scorer(name, **settings)
        return built[name]

    return get


@pytest.mark.parametrize("name", SCORERS)
def test_a_lone_surrogate_is_repaired_with_one_warning_and_the_batch_scored(hostile_scorers, name):
    scorer = hostile_scorers(name)
    responses = ["Paris is the capital \ud800 of France.", "Lima is in Peru.", "Rome."]
    samples = [
        ["Paris is the capital of France.", "It is Paris."],
        ["Lima is the capital of Peru.", "broken \udc80 sample"],
        ["Rome.", "Rome!"],
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = scorer.score(responses, samples)
    repaired = [[t.replace("\ud800", "\ufffd").replace("\udc80", "\ufffd") for t in row]
                for row in [responses, *samples]]  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the repaired batch is valid text: no warning
        expected = scorer.score(repaired[0], repaired[1:])
    unicode_warnings = [w for w in caught if "not valid Unicode" in str(w.message)]
    assert len(unicode_warnings) == 1, [str(w.message) for w in caught]
    assert unicode_warnings[0].category is UserWarning
    assert unicode_warnings[0].filename == __file__  # the user's line, not the library's
    assert str(unicode_warnings[0].message).startswith("2 text(s) held characters")
    assert len(got) == 3 and all(0.0 <= v <= 1.0 + 1e-6 for v in got)
    assert list(got) == pytest.approx(list(expected), abs=1e-6)


def scores_are_valid(name, values, responses, samples) -> None:
    """One score per row, in [0, 1], NaN exactly where the row has no answer or no sample."""
    assert len(values) == len(responses)
    for i, v in enumerate(values):
        has_pair = responses[i] is not None and any(s is not None for s in samples[i])
        if has_pair:
            assert -1e-6 <= v <= 1.0 + 1e-6, (name, i, v, responses[i], samples[i])
        else:
            assert math.isnan(v), (name, i, v)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("name", ["exact_match", "rouge_l", "bleu"])
def test_text_scorers_on_random_hostile_text(hostile_scorers, name, seed):
    responses, samples = random_rows(random.Random(seed), 60)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        values = hostile_scorers(name).score(responses, samples)
    scores_are_valid(name, values, responses, samples)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", ["cosine_sim", "bert_score", "bert_score_precision"])
def test_model_scorers_on_random_hostile_text(hostile_scorers, name, seed):
    responses, samples = random_rows(random.Random(100 + seed), 30)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        values = hostile_scorers(name).score(responses, samples)
    scores_are_valid(name, values, responses, samples)
    # and each row alone gets the score it gets in the batch (the fixed idf, the default, and
    # cosine similarity do not depend on the other rows; the dtype's rounding aside)
    rng = random.Random(seed)
    for i in rng.sample(range(len(responses)), 3):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            alone = hostile_scorers(name).score([responses[i]], [samples[i]])
        assert alone[0] == pytest.approx(values[i], abs=in_company(1e-5), nan_ok=True)
