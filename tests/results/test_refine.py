"""Refined answers (``UQResult.refine()``): the answer minus its unsupported sentences, order and
white space kept, what went and why; refining twice changes nothing; hostile text keeps every
offset right; failed, unscored and wholly unsupported answers are said so."""

from __future__ import annotations

import math
import random
import warnings

import numpy as np
import pytest

from tests.helpers.texts_hostile import random_text
from uqlm_bert import BlackBoxUQ, ConfigurationError, InputValidationError
from uqlm_bert.bertscore._token_support import SENTENCE_THRESHOLD
from uqlm_bert.results._refine import REFINEMENTS, refine_text
from uqlm_bert.scorers._sentences import locate_sentences, sentence_spans


def _without(text: str, spans: list[tuple[int, int]], removed: list[int]) -> str:
    """``text`` minus the removed sentences, by hand: each kept sentence with the separator
    before it (the text before the first, when it is the first kept), the text after the last
    sentence, and, where sentences went between two kept ones, the separator of theirs with the
    most line breaks (the last of equals)."""
    gaps = [text[: spans[0][0]]] + [
        text[spans[k - 1][1] : spans[k][0]] for k in range(1, len(spans))
    ]
    kept = [k for k in range(len(spans)) if k not in removed]
    out, previous = gaps[0], None
    for k in kept:
        if previous is not None:
            between = gaps[previous + 1 : k + 1]
            out += max(reversed(between), key=lambda g: g.count("\n"))
        out += text[spans[k][0] : spans[k][1]]
        previous = k
    return out + text[spans[-1][1] :]


@pytest.mark.parametrize(
    ("text", "supports", "expected"),
    [
        ("A b. C d. E f.", [0.9, 0.1, 0.9], "A b. E f."),
        ("A b. C d. E f.", [0.1, 0.9, 0.9], "C d. E f."),
        ("A b. C d. E f.", [0.9, 0.9, 0.1], "A b. C d."),
        ("  A b.  C d.\n", [0.1, 0.9], "  C d.\n"),  # the answer's own leading and trailing space
        ("A b.\n\nC d. E f.", [0.9, 0.1, 0.9], "A b.\n\nE f."),  # the paragraph break stays
        ("A b. C d.\n\nE f.", [0.9, 0.1, 0.9], "A b.\n\nE f."),
        ("A b. C d. E f.", [0.9, float("nan"), 0.1], "A b. C d."),  # NaN: nothing to judge by
    ],
)
def test_the_refined_text_is_the_answer_without_its_unsupported_sentences(text, supports, expected):
    spans = sentence_spans(text)
    refined, removed = refine_text(text, spans, supports, 0.5)
    assert refined == expected
    assert removed == [k for k, v in enumerate(supports) if v < 0.5]


def test_every_sentence_gone_is_none_and_none_gone_is_the_text_itself():
    assert refine_text("A b. C d.", [(0, 4), (5, 9)], [0.1, 0.2], 0.5) == (None, [0, 1])
    text = "A b. C d."
    refined, removed = refine_text(text, [(0, 4), (5, 9)], [0.6, 0.7], 0.5)
    assert refined is text and removed == []


@pytest.mark.parametrize("seed", range(8))
def test_hostile_and_long_answers_keep_every_offset_and_refine_to_a_fixed_point(seed):
    """On random hostile text (controls, right-to-left, combining marks, emoji, invisible
    characters, very long lines; lone surrogates as the scorers repair them) and random
    supports: the refined answer is the answer minus the removed sentences (derived by hand),
    the kept sentences are found in it in order, and refining it again, each kept sentence with
    its support, removes nothing."""
    rng = random.Random(seed)
    parts = []
    for _ in range(rng.randint(1, 12)):
        parts.append(random_text(rng, surrogates=False).strip() or "x" + ".")
        parts.append(rng.choice([" ", "  ", "\n", "\n\n", "\t", " \u3000"]))
    text = "".join(parts)
    spans = sentence_spans(text)
    if not spans:
        return
    supports = [rng.choice([rng.random(), float("nan")]) for _ in spans]
    refined, removed = refine_text(text, spans, supports, 0.5)
    if refined is None:
        assert len(removed) == len(spans)
        return
    assert refined == _without(text, spans, removed)
    kept = [k for k in range(len(spans)) if k not in removed]
    sentences = [text[a:b] for a, b in (spans[k] for k in kept)]
    again = locate_sentences(refined, sentences)
    assert [refined[a:b] for a, b in again] == sentences
    assert refine_text(refined, again, [supports[k] for k in kept], 0.5) == (refined, [])


def test_a_result_refines_its_answers_and_says_what_went_and_why(default_uq):
    responses = [
        "Lima is the capital of Peru.  It has nine moons.\n\nLima is on the coast.",
        None,
        "Paris is in France.",
        "The Moon is made of cheese. It orbits Saturn.",
        "Quito is in Ecuador.",
    ]
    samples = [
        ["Lima is the capital of Peru, on the coast.", "Lima, Peru's capital, is on the coast."],
        ["x"],
        ["Paris is in France.", "Paris is the capital of France."],
        ["The Moon orbits the Earth.", "The Moon is rock and dust."],
        [None, None],
    ]
    result = default_uq.score(responses, samples)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        table = result.refine()
    sentences = result.sentences()
    assert list(table.columns[-3:]) == ["refined_response", "removed_sentences", "refinement"]
    assert table.index.tolist() == result.to_df().index.tolist()
    assert table.attrs["sentence_threshold"] == SENTENCE_THRESHOLD
    assert set(table["refinement"]) <= set(REFINEMENTS)
    for label, row in table.iterrows():
        mine = sentences[sentences["prompt_index"] == label]
        low = mine[mine["support"] < SENTENCE_THRESHOLD]
        assert [r["sentence_index"] for r in row["removed_sentences"]] == low[
            "sentence_index"
        ].tolist()
        for gone in row["removed_sentences"]:
            assert row["response"][gone["start"] : gone["end"]] == gone["sentence"]
            assert gone["support"] < SENTENCE_THRESHOLD
            assert "below the sentence threshold" in gone["reason"]
        spans = list(zip(mine["start"], mine["end"], strict=True))
        removed = low["sentence_index"].tolist()
        if row["response"] is None:
            assert row["refinement"] == "no_answer" and row["refined_response"] is None
        elif mine.empty or math.isnan(row["bert_score"]):
            assert row["refinement"] == "unscored" and row["refined_response"] == row["response"]
        elif len(removed) == len(spans):
            assert row["refinement"] == "all_removed" and row["refined_response"] is None
        else:
            expected = _without(row["response"], spans, removed) if removed else row["response"]
            assert row["refined_response"] == expected
            assert row["refinement"] == ("refined" if removed else "unchanged")
    # the made-up claim goes, and the supported answer stays whole
    assert (
        table.loc[0, "refined_response"] == "Lima is the capital of Peru.\n\nLima is on the coast."
    )
    assert table.loc[2, "refinement"] == "unchanged"
    emptied = (table["refinement"] == "all_removed").sum()
    said = [w for w in caught if "had every sentence below" in str(w.message)]
    assert len(said) == (1 if emptied else 0)
    # refining twice changes nothing
    again = result.refine()
    assert again.drop(columns=["removed_sentences"]).equals(
        table.drop(columns=["removed_sentences"])
    )
    assert again["removed_sentences"].tolist() == table["removed_sentences"].tolist()


def test_refine_takes_a_threshold_and_a_split_of_one_s_own(default_uq):
    text = "Lima is in Peru. It has nine moons."
    result = default_uq.score([text], [["Lima is the capital of Peru."]])
    support = result.sentences()["support"].to_numpy()
    above_all = float(np.nanmax(support)) + 0.01
    assert result.refine(threshold=above_all)["refinement"].tolist() == ["all_removed"]
    assert result.refine(threshold=0.0)["refinement"].tolist() == ["unchanged"]
    whole = result.refine(
        threshold=above_all, sentences=[[text]]
    )  # one "sentence": the whole answer
    assert whole["removed_sentences"][0][0]["sentence"] == text
    with pytest.raises(InputValidationError, match="threshold must be a number"):
        result.refine(threshold="high")


def test_refine_after_filter_keeps_the_labels(default_uq):
    result = default_uq.score(
        ["Lima is in Peru. It has nine moons.", "Paris is in France."],
        [["Lima is the capital of Peru."], ["Paris is in France."]],
    )
    low = result.filter(threshold=0.999, keep="below")
    assert low.refine().index.tolist() == low.index


def test_off_the_default_encoder_and_layer_there_is_no_default_sentence_threshold():
    uq = BlackBoxUQ(show_progress_bars=False, bertscore=_layer(4))
    result = uq.score(["Lima is in Peru. It has nine moons."], [["Lima is the capital of Peru."]])
    with pytest.raises(ConfigurationError, match="no default sentence threshold"):
        result.refine()
    with pytest.raises(ConfigurationError, match="no default word threshold"):
        result.threshold(level="word")
    assert result.sentences()["flagged"].isna().all()
    assert result.refine(threshold=0.5)["refinement"].tolist()[0] in (
        "refined",
        "unchanged",
        "all_removed",
    )
    # the view marks nothing, and says why
    assert "No marks" in result._repr_html_() and "<mark" not in result._repr_html_()


def _layer(n: int):
    from uqlm_bert import BERTScoreSettings

    return BERTScoreSettings(num_layers=n)


@pytest.mark.slow
def test_hostile_answers_and_a_ten_thousand_word_one_refine_with_every_offset_right(default_uq):
    """Through scoring: control characters, lone surrogates (scored as repaired), right-to-left
    text and a 10,000-word answer keep every removed sentence's offsets into the text scored,
    and each refined answer is that text minus its removed sentences."""
    from uqlm_bert._inputs import repair_text

    rng = random.Random(5)
    words = "Marie Curie worked in Paris on radium and polonium with Pierre".split()
    made_up = "She flew to Mars on a steam rocket."
    parts = [
        made_up if k % 25 == 24 else " ".join(rng.choice(words) for _ in range(12)) + "."
        for k in range(850)
    ]
    long_answer = " ".join(parts)
    responses = [
        "Paris is in France.\x1b[2J It has \x00 nine moons.\u202e Evil text.",
        "Lima \ud800 is in Peru. It is made of \udfff cheese.",
        "שלום עולם. Paris is the capital of France. مرحبا بالعالم.",
        long_answer,
    ]
    samples = [
        ["Paris is in France.", "France's capital is Paris."],
        ["Lima is the capital of Peru.", "Lima is in Peru."],
        ["Paris is the capital of France.", "Paris is a French city."],
        [" ".join(p for p in parts if p != made_up)] * 2,
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # texts repaired, answers emptied
        result = default_uq.score(responses, samples)
        table = result.refine()
    sentences = result.sentences()
    for label, row in table.iterrows():
        scored = repair_text(responses[label])[0]
        mine = sentences[sentences["prompt_index"] == label]
        for start, end, sentence in zip(mine["start"], mine["end"], mine["sentence"], strict=True):
            assert scored[start:end] == sentence
        for gone in row["removed_sentences"]:
            assert scored[gone["start"] : gone["end"]] == gone["sentence"]
        removed = [g["sentence_index"] for g in row["removed_sentences"]]
        spans = list(zip(mine["start"], mine["end"], strict=True))
        if row["refinement"] == "refined":
            assert row["refined_response"] == _without(scored, spans, removed)
    assert len(long_answer.split()) >= 10_000
    assert table.loc[3, "refinement"] == "refined"
    gone = [g["sentence"] for g in table.loc[3, "removed_sentences"]]
    assert made_up in gone
