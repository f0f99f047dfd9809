"""BlackBoxUQ.score_sentences: one row per sentence, scores derived pair by pair."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from uqlm_bert import BERTScorer, BlackBoxUQ
from uqlm_bert.results._result import SentenceUQResult
from uqlm_bert.scorers._bertscore import SCORER_DEFAULTS


@pytest.fixture(scope="module")
def uq() -> BlackBoxUQ:
    return BlackBoxUQ(show_progress_bars=False)


def test_sentence_scores_are_mean_over_samples_of_best_sentence_match(uq):
    responses = ["Paris is the capital of France. It is known for the Eiffel Tower.", None]
    sentences = [["Paris is the capital of France.", "It is known for the Eiffel Tower."], None]
    samples = [
        [["France's capital is Paris.", "The Louvre is there."], ["Berlin is in Germany."]],
        [["x"]],
    ]
    sample_texts = [[" ".join(s) for s in group] for group in samples]
    result = uq.score_sentences(responses, sample_texts, sentences=sentences, method="reembed")
    assert isinstance(result, SentenceUQResult)
    df = result.to_df()
    assert list(df.columns) == ["response_index", "sentence_index", "sentence", "bert_score"]
    assert df["response_index"].tolist() == [0, 0]
    assert df["sentence"].tolist() == sentences[0]

    engine = BERTScorer.from_settings(SCORER_DEFAULTS, show_progress_bars=False)  # as uq's
    for k, sentence in enumerate(sentences[0]):
        per_sample = []
        for sample_sentences in samples[0]:
            F = [float(engine.score([sentence], [t])[2][0]) for t in sample_sentences]
            per_sample.append(max(F))
        assert df["bert_score"].iloc[k] == pytest.approx(np.mean(per_sample), abs=1e-5)


def test_precision_metric_and_missing_samples(uq):
    res = uq.score_sentences(
        ["A cat sat. A dog ran."], [[None, "A cat sat on a mat."]], metric="precision"
    )
    df = res.to_df()
    engine = BERTScorer.from_settings(SCORER_DEFAULTS, show_progress_bars=False)
    expected = float(engine.score(["A cat sat."], ["A cat sat on a mat."])[0][0])
    assert df["bert_score"].iloc[0] == pytest.approx(expected, abs=1e-5)
    assert res.metadata["metric"] == "precision"


def test_nan_from_pandas_counts_as_missing(uq):
    responses = pd.Series(["Water boils at 100 C.", None], dtype=object)
    conf = uq.score(list(responses), [["Water boils at 100 C.", float("nan")], [None]])
    assert conf.data["bert_score"][0] == pytest.approx(1.0, abs=1e-5)
    assert math.isnan(conf.data["bert_score"][1])


@pytest.mark.parametrize(
    "settings",
    [
        {"scorers": ["exact_match"], "scorer_kwargs": {"exact_match_normalize": False}},
        {
            "scorers": ["cosine_sim"],
            "sentence_transformer": "sentence-transformers/all-MiniLM-L6-v2",
        },
        {"scorers": ["bleu", "bert_score"], "num_layers": 4},
    ],
)
def test_sentence_scores_take_only_bertscore_settings(settings):
    # The other scorers' settings of the object are not BERTScore's: sentence scoring builds its
    # engine from BERTScore's settings alone (and the object's, where it has a BERTScore scorer).
    uq = BlackBoxUQ(show_progress_bars=False, **settings)
    sentences = ["The sky is blue.", "It rains today."]
    sample = "The sky is blue. It is dry."
    df = uq.score_sentences(
        [" ".join(sentences)], [[sample]], sentences=[sentences], method="reembed"
    ).to_df()
    own = {k: v for k, v in settings.items() if k == "num_layers"}
    engine = BERTScorer.from_settings(SCORER_DEFAULTS.replace(**own), show_progress_bars=False)
    for k, sentence in enumerate(sentences):
        F = [float(engine.score([sentence], [t])[2][0]) for t in ["The sky is blue.", "It is dry."]]
        assert df["bert_score"].iloc[k] == pytest.approx(max(F), abs=1e-5)


def test_by_default_sentences_are_scored_from_token_supports(uq):
    """The default is the token-support method: the engine's own score_sentences with no method,
    and every sentence of the answer given its span in the answer."""
    from uqlm_bert.scorers._sentences import score_sentences

    responses = ["Paris is the capital of France. It has ten moons.", "Lima is in Peru."]
    samples = [["Paris is the capital of France.", "France's capital is Paris."], ["Lima, Peru."]]
    got = uq.score_sentences(responses, samples).to_df()
    assert got["sentence"].tolist() == [
        "Paris is the capital of France.",
        "It has ten moons.",
        "Lima is in Peru.",
    ]
    engine = BERTScorer.from_settings(SCORER_DEFAULTS, show_progress_bars=False)  # as uq's
    expected = score_sentences(responses, samples, engine)
    np.testing.assert_allclose(got["bert_score"], expected["bert_score"], atol=1e-6)
    assert got["bert_score"].iloc[0] > got["bert_score"].iloc[1]  # the made-up claim is lowest
