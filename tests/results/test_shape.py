"""One result shape per level, one key: answers (``to_df()``), words and sentences keyed by
``prompt_index``; a row named by its label or by its position, never one for the other;
``filter``/``flag``/``calibrate`` keep the type and the columns; every view shows each row's
own text; the spellings of earlier releases still work, with a ``FutureWarning``."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from tests.helpers.html import Page
from uqlm_bert import BlackBoxUQ, InputValidationError, UQResult
from uqlm_bert.bertscore import SENTENCE_THRESHOLD, WEAK_SUPPORT

RESPONSES = [
    "Lima is the capital of Peru. It has nine moons.",
    "Paris is in <b>France</b> & Europe.",
    None,
    "Quito is in Ecuador. It orbits Jupiter.",
]
SAMPLES = [
    ["Lima is the capital of Peru.", "Peru's capital is Lima."],
    ["Paris is in France.", "Paris is a French city in Europe."],
    ["x"],
    ["Quito is the capital of Ecuador.", None],
]


@pytest.fixture(scope="module")
def result() -> UQResult:
    uq = BlackBoxUQ(scorers=["bert_score", "exact_match"], show_progress_bars=False)
    return uq.score(RESPONSES, SAMPLES, prompts=[f"Question {i}?" for i in range(4)])


def _filtered(result: UQResult) -> UQResult:
    """The rows below the first row's confidence (its own is not below it; NaN is): labels 1,
    2 and 3 at positions 0, 1 and 2."""
    low = result.filter(float(result.data["bert_score"][0]), keep="below")
    assert low.index == [1, 2, 3]
    return low


def test_every_level_is_keyed_by_prompt_index(result):
    answers, words, sentences = result.to_df(), result.words(), result.sentences()
    assert answers.index.name == "prompt_index"
    assert words.columns[0] == "prompt_index" and sentences.columns[0] == "prompt_index"
    assert set(words["prompt_index"]) == set(sentences["prompt_index"]) == {0, 1, 3}
    low = _filtered(result)
    assert low.to_df().index.tolist() == low.index
    assert set(low.words()["prompt_index"]) == set(low.index) - {2}
    assert set(low.sentences()["prompt_index"]) == set(low.index) - {2}


def test_a_row_is_named_by_its_label_or_by_its_position(result):
    low = _filtered(result)
    labels = low.index
    assert len(labels) >= 2 and labels != list(range(len(labels)))
    for position, label in enumerate(labels):
        by_label, by_position = low.answer(label), low.answer(position=position)
        assert by_label.prompt_index == by_position.prompt_index == label
        assert by_label.response == by_position.response
        assert by_label.removed == by_position.removed
        assert by_label.response == RESPONSES[label]
        words = low.words()
        mine = words[words["prompt_index"] == label].reset_index(drop=True)
        assert by_label.words["word"].tolist() == mine["word"].tolist()
        assert by_label.words["support"].tolist() == mine["support"].tolist()
    with pytest.raises(InputValidationError, match="no row labelled prompt_index=0"):
        low.answer(0)  # label 0 was filtered out, though position 0 exists
    with pytest.raises(InputValidationError, match="either by its label"):
        low.answer(labels[0], position=0)
    with pytest.raises(InputValidationError, match="either by its label"):
        low.answer()
    assert low.answer(position=-1).prompt_index == labels[-1]


def test_filter_flag_and_calibrate_keep_the_type_and_the_columns(result):
    from uqlm_bert import ScoreCalibrator

    columns = result.to_df().columns.tolist()
    kept = result.filter(0.5)
    assert type(kept) is UQResult and kept.to_df().columns.tolist() == columns
    flagged = result.flag(0.5)
    assert flagged.columns.tolist() == [*columns, "flagged"]
    assert flagged.index.tolist() == result.index
    calibrated = result.calibrate(ScoreCalibrator().fit([0.2, 0.5, 0.9, 0.95], [0, 0, 1, 1]))
    assert type(calibrated) is UQResult
    # the one column added, after the scores, and every other column as it was
    got = calibrated.to_df().columns.tolist()
    at = columns.index("exact_match") + 1
    assert got == [*columns[:at], "bert_score_probability", *columns[at:]]
    # the filtered, calibrated result is still the same kind of result, rows and all
    both = calibrated.filter(0.5, scorer="bert_score_probability", keep="below")
    assert type(both) is UQResult and set(both.index) <= set(result.index)
    assert both.words().columns.tolist() == result.words().columns.tolist()
    assert both.sentences().columns.tolist() == result.sentences().columns.tolist()


def test_every_view_shows_each_row_s_own_text_and_strikes_what_refine_removes(result):
    """The result's HTML table and each answer's view (its own kind of result) show every row's
    text, escaped, with the sentences ``refine()`` removes struck through; so does a filtered
    result, whose rows are its own."""
    refined = result.refine()
    for shown in (result, _filtered(result)):
        page = Page("del")
        page.feed(shown._repr_html_())
        text = "".join(page.text)
        assert not {"b", "script"} & set(page.tags)  # the answers' markup is shown as text
        for label, response in zip(shown.index, shown.data["responses"], strict=True):
            if response is None:
                assert "(no answer)" in text
                continue
            assert response in text
            gone = refined.loc[label, "removed_sentences"]
            assert all(g["sentence"] in "".join(page.inside) for g in gone)
        for position in range(len(shown)):
            answer = shown.answer(position=position)
            one = Page("del")
            one.feed(answer._repr_html_())
            assert (answer.response or "(no answer)") in "".join(one.text)
            gone = refined.loc[answer.prompt_index, "removed_sentences"]
            assert "".join(one.inside) == "".join(g["sentence"] for g in gone)
    assert "<b>France</b>" not in result._repr_html_()  # the answer's markup is text


def test_sentences_flag_what_refine_removes(result):
    sentences = result.sentences()
    assert sentences["flagged"].dtype == "boolean"
    expected = sentences["support"] < SENTENCE_THRESHOLD
    assert sentences["flagged"].tolist() == expected.tolist()
    assert result.threshold(level="sentence") == SENTENCE_THRESHOLD
    assert result.threshold(level="word") == WEAK_SUPPORT
    with pytest.raises(InputValidationError, match="level must be one of"):
        result.threshold(level="paragraph")
    # a threshold of one's own
    mine = result.sentences(threshold=0.9)
    assert mine["flagged"].tolist() == (mine["support"] < 0.9).tolist()


def test_earlier_spellings_still_work_with_a_future_warning(result):
    with pytest.warns(FutureWarning, match="now UQResult.words"):
        old = result.supports()
    new = result.words()
    assert old.columns.tolist() == ["response_index", "start", "end", "text", "support", "counted"]
    assert old["text"].tolist() == new["word"].tolist()
    with pytest.warns(FutureWarning, match=r"plot_histogram\(\.\.\., scorer\) by position"):
        ax = result.plot_histogram("exact_match")
    assert ax.get_xlabel() == "exact_match"
    with pytest.warns(FutureWarning, match="by position is deprecated"):
        result.plot_supports(0, 0.5)
    with pytest.warns(FutureWarning, match="SentenceUQResult is gone"):
        from uqlm_bert.results import SentenceUQResult  # noqa: F401
    data = dict(result.data)
    data["token_supports"] = data.pop("supports")
    with pytest.warns(FutureWarning, match='now data\\["supports"\\]'):
        again = UQResult(data, result.metadata, index=result.index)
    assert again.words().equals(new)
    with pytest.raises(TypeError, match="takes 1 positional argument"):
        result.plot_histogram("bert_score", [1, 0, 1, 0], None, "extra")


def test_plot_options_are_keyword_only(result):
    import inspect

    for name in ("plot_histogram", "plot_accuracy_vs_fraction_kept", "plot_threshold",
                 "plot_supports"):  # fmt: skip
        parameters = inspect.signature(getattr(UQResult, name)).parameters
        assert parameters["ax"].kind is inspect.Parameter.KEYWORD_ONLY, name
        assert all(
            p.kind is inspect.Parameter.KEYWORD_ONLY
            for n, p in parameters.items()
            if n in ("scorer", "labels", "threshold", "ax", "position")
            and not (name == "plot_threshold" and n == "threshold")
        ), name
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the keywords warn nothing
        ax = result.plot_threshold(labels=[1, 0, 0, 1])
    assert math.isclose(float(ax.lines[0].get_ydata()[0]), result.threshold())
    assert np.isfinite(result.threshold())
