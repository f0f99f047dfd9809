"""BlackBoxUQ.score_sentences: one row per sentence, scores derived pair by pair."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from tests.helpers.company import in_company
from uqlm_bert import BERTScorer, BERTScoreSettings, BlackBoxUQ, ScoringSettings
from uqlm_bert.scorers._bertscore import SCORER_DEFAULTS


def test_sentence_scores_are_mean_over_samples_of_best_sentence_match(default_uq):
    responses = ["Paris is the capital of France. It is known for the Eiffel Tower.", None]
    sentences = [["Paris is the capital of France.", "It is known for the Eiffel Tower."], None]
    samples = [
        [["France's capital is Paris.", "The Louvre is there."], ["Berlin is in Germany."]],
        [["x"]],
    ]
    sample_texts = [[" ".join(s) for s in group] for group in samples]
    df = default_uq.score_sentences(responses, sample_texts, sentences=sentences, method="reembed")
    assert isinstance(df, pd.DataFrame)
    assert list(df.columns) == [
        "prompt_index", "start", "end", "sentence", "support", "flagged", "sentence_index",
        "method",
    ]  # fmt: skip
    assert df["prompt_index"].tolist() == [0, 0]
    assert df["sentence"].tolist() == sentences[0]
    assert df["method"].tolist() == ["reembed", "reembed"]
    assert df["flagged"].isna().all()  # re-embedded scores are not supports: no threshold
    for start, end, sentence in zip(df["start"], df["end"], df["sentence"], strict=True):
        assert responses[0][start:end] == sentence

    engine = BERTScorer.from_settings(SCORER_DEFAULTS, show_progress_bars=False)  # as uq's
    for k, sentence in enumerate(sentences[0]):
        per_sample = []
        for sample_sentences in samples[0]:
            F = [float(engine.score([sentence], [t])[2][0]) for t in sample_sentences]
            per_sample.append(max(F))
        assert df["support"].iloc[k] == pytest.approx(np.mean(per_sample), abs=in_company(1e-5))


def test_precision_metric_and_missing_samples(default_uq):
    df = default_uq.score_sentences(
        ["A cat sat. A dog ran."], [[None, "A cat sat on a mat."]], method="reembed",
        metric="precision",
    )  # fmt: skip
    engine = BERTScorer.from_settings(SCORER_DEFAULTS, show_progress_bars=False)
    expected = float(engine.score(["A cat sat."], ["A cat sat on a mat."])[0][0])
    assert df["support"].iloc[0] == pytest.approx(expected, abs=1e-5)
    assert df.attrs["metric"] == "precision" and df.attrs["method"] == "reembed"


def test_nan_from_pandas_counts_as_missing(default_uq):
    responses = pd.Series(["Water boils at 100 C.", None], dtype=object)
    conf = default_uq.score(list(responses), [["Water boils at 100 C.", float("nan")], [None]])
    assert conf.data["bert_score"][0] == pytest.approx(1.0, abs=1e-5)
    assert math.isnan(conf.data["bert_score"][1])


@pytest.mark.parametrize(
    "settings",
    [
        {
            "scorers": ["exact_match"],
            "scoring": ScoringSettings(scorer_settings={"exact_match_normalize": False}),
        },
        {
            "scorers": ["cosine_sim"],
            "sentence_transformer": "sentence-transformers/all-MiniLM-L6-v2",
        },
        {"scorers": ["bleu", "bert_score"], "bertscore": BERTScoreSettings(num_layers=4)},
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
    )
    own = {"num_layers": 4} if "bertscore" in settings else {}
    engine = BERTScorer.from_settings(SCORER_DEFAULTS.replace(**own), show_progress_bars=False)
    for k, sentence in enumerate(sentences):
        F = [float(engine.score([sentence], [t])[2][0]) for t in ["The sky is blue.", "It is dry."]]
        assert df["support"].iloc[k] == pytest.approx(max(F), abs=1e-5)


def test_by_default_sentences_are_scored_from_token_supports(default_uq):
    """The default is the token-support method: the engine's own score_sentences with no method,
    and every sentence of the answer given its span in the answer."""
    from uqlm_bert.scorers._sentences import score_sentences

    responses = ["Paris is the capital of France. It has ten moons.", "Lima is in Peru."]
    samples = [["Paris is the capital of France.", "France's capital is Paris."], ["Lima, Peru."]]
    got = default_uq.score_sentences(responses, samples)
    assert got["sentence"].tolist() == [
        "Paris is the capital of France.",
        "It has ten moons.",
        "Lima is in Peru.",
    ]
    engine = BERTScorer.from_settings(SCORER_DEFAULTS, show_progress_bars=False)  # as uq's
    expected = score_sentences(responses, samples, engine)
    np.testing.assert_allclose(got["support"], expected["support"], atol=1e-6)
    assert got["support"].iloc[0] > got["support"].iloc[1]  # the made-up claim is lowest


def test_score_sentences_gives_the_sentence_table_of_a_result(default_uq):
    """One shape for one number: score_sentences and score(...).sentences() give the same
    columns, and with the support method the same rows."""
    responses = ["Paris is the capital of France. It has ten moons.", None, "Lima is in Peru."]
    samples = [["Paris is the capital of France.", "France's capital is Paris."], ["x"], ["Lima."]]
    table = default_uq.score_sentences(responses, samples)
    from_result = default_uq.score(responses, samples).sentences()
    assert list(table.columns) == list(from_result.columns)
    pd.testing.assert_frame_equal(
        table.drop(columns="support"), from_result.drop(columns="support")
    )
    np.testing.assert_allclose(table["support"], from_result["support"], atol=1e-6)
    reembedded = default_uq.score_sentences(responses, samples, method="reembed")
    assert list(reembedded.columns) == list(from_result.columns)
    assert reembedded[["prompt_index", "start", "end"]].equals(
        from_result[["prompt_index", "start", "end"]]
    )
