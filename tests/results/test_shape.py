"""One result shape per level: answers (``flag()``), sentences and words as tables with the
same leading columns (``prompt_index``; ``start``, ``end``), a score and ``flagged``; the
threshold taken the same way by every method; a row named by its label;
``filter``/``flag``/``calibrate`` keep the type and the columns; every view shows each row's own
text, or its error."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from tests.helpers.html import Page
from uqlm_bert import BlackBoxUQ, ConfigurationError, InputValidationError, UQResult
from uqlm_bert.bertscore._token_support import SENTENCE_THRESHOLD, WEAK_SUPPORT
from uqlm_bert.scorers._bertscore import DEFAULT_THRESHOLD

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
    low = result.filter(threshold=float(result.data["bert_score"][0]), keep="below")
    assert low.index == [1, 2, 3]
    return low


#: What every level's table starts with, and the columns of each level after that start.
LEADING = ["prompt_index"]
SPANS = ["start", "end"]


def test_the_three_levels_share_their_leading_columns_a_score_and_flagged(result):
    """Answers (``flag()``), sentences and words: the answer's label first, then for sentences
    and words the offsets into the scored text; each with its score and ``flagged``, a
    nullable boolean by that level's threshold."""
    answers = result.flag()
    sentences, words = result.sentences(), result.words()
    assert answers.columns[: len(LEADING)].tolist() == LEADING
    for table, text in ((sentences, "sentence"), (words, "word")):
        assert table.columns[:4].tolist() == [*LEADING, *SPANS, text]
        assert table.columns[4:6].tolist() == ["support", "flagged"]
    assert answers.columns.get_loc("flagged") == answers.columns.get_loc("exact_match") + 1
    for table in (answers, sentences, words):
        assert table["flagged"].dtype == "boolean"
        assert table.index.tolist() == list(range(len(table)))
        assert table["prompt_index"].dtype == np.int64
    # each level's flags, by hand from its own scores and the defaults the run recorded
    answer_cut, sentence_cut, word_cut = DEFAULT_THRESHOLD, SENTENCE_THRESHOLD, WEAK_SUPPORT
    conf = answers["bert_score"].to_numpy()
    assert answers["flagged"].tolist() == [bool(np.isnan(c) or c < answer_cut) for c in conf]
    assert sentences["flagged"].tolist() == (sentences["support"] < sentence_cut).tolist()
    weak = words["counted"] & (words["support"] < word_cut)
    assert words["flagged"].tolist() == weak.tolist()
    assert set(words["prompt_index"]) == set(sentences["prompt_index"]) == {0, 1, 3}
    assert answers["prompt_index"].tolist() == result.index == [0, 1, 2, 3]
    # filtered, every level keeps the labels
    low = _filtered(result)
    assert low.to_df()["prompt_index"].tolist() == low.index
    assert set(low.words()["prompt_index"]) == set(low.index) - {2}
    assert set(low.sentences()["prompt_index"]) == set(low.index) - {2}


THRESHOLD_METHODS = ("flag", "filter", "sentences", "words", "refine", "answer")


@pytest.mark.parametrize("name", THRESHOLD_METHODS)
def test_every_method_takes_the_threshold_the_same_way(result, name):
    """One keyword, ``threshold``, keyword-only, default None (the result's default for that
    level); a threshold given is used, a bad one refused with the same error."""
    import inspect

    method = getattr(UQResult, name)
    parameter = inspect.signature(method).parameters["threshold"]
    assert parameter.kind is inspect.Parameter.KEYWORD_ONLY and parameter.default is None
    label = result.index[0]
    call = {
        "flag": lambda **kw: result.flag(**kw)["flagged"],
        "filter": lambda **kw: result.filter(**kw).index,
        "sentences": lambda **kw: result.sentences(**kw)["flagged"],
        "words": lambda **kw: result.words(**kw)["flagged"],
        "refine": lambda **kw: result.refine(**kw)["refinement"],
        "answer": lambda **kw: result.answer(label, **kw).weak_words,
    }[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # refine() warns of the answers it empties
        default = call()
        assert _same(call(threshold=None), default)
        # everything is below 2 (confidences and supports are at most 1): the other extreme
        assert not _same(call(threshold=2.0), default)
    for bad in ("0.5", float("nan"), True):
        with pytest.raises(InputValidationError, match="threshold"):
            call(threshold=bad)
    before = {"answer": (label,), "sentences": (None, "en")}.get(name, ())
    with pytest.raises(TypeError):
        getattr(result, name)(*before, 0.5)


def _same(a, b) -> bool:
    return list(a) == list(b)


def test_without_a_default_a_level_says_nothing_and_a_decision_asks_for_one():
    r = UQResult({"prompts": ["a", "b"], "bert_score": [0.9, 0.2]})
    assert r.flag()["flagged"].isna().all()  # no default: nothing is said
    assert r.flag(threshold=0.5)["flagged"].tolist() == [False, True]
    with pytest.raises(ConfigurationError, match="threshold=..."):
        r.filter()
    with pytest.raises(ConfigurationError, match="threshold=..."):
        r.threshold()


def test_a_row_is_named_by_its_label(result):
    low = _filtered(result)
    labels = low.index
    assert len(labels) >= 2 and labels != list(range(len(labels)))
    words = low.words()
    for label in labels:
        answer = low.answer(label)
        assert answer.prompt_index == label and answer.response == RESPONSES[label]
        mine = words[words["prompt_index"] == label].reset_index(drop=True)
        assert answer.words["word"].tolist() == mine["word"].tolist()
        assert answer.words["support"].tolist() == mine["support"].tolist()
        assert answer.words["flagged"].tolist() == mine["flagged"].tolist()
    with pytest.raises(InputValidationError, match="no row labelled prompt_index=0"):
        low.answer(0)  # label 0 was filtered out, though position 0 exists
    assert low.answer(low.index[-1]).prompt_index == labels[-1]


def test_a_failed_row_shows_its_error_in_every_view():
    from uqlm_bert.generation import CallFailure

    down = CallFailure("server", "HTTP 503 <busy>", attempts=3)
    r = UQResult(
        {"prompts": ["a", "b"], "responses": ["Lima", None], "sampled_responses": [["Lima"], [None]],
         "bert_score": [1.0, None], "errors": [None, down], "sample_errors": [[None], [down]]},
    )  # fmt: skip
    assert str(r.answer(1)) == f"(no answer: {down})"
    page = Page("i")
    page.feed(r._repr_html_())
    assert f"(no answer: {down})" in "".join(page.inside)
    assert "<busy>" not in r._repr_html_()  # the message is escaped
    one = Page("i")
    one.feed(r.answer(1)._repr_html_())
    assert "".join(one.inside) == f"(no answer: {down})"
    assert "failed=1" in repr(r)


def test_filter_flag_and_calibrate_keep_the_type_and_the_columns(result):
    from uqlm_bert import ScoreCalibrator

    columns = result.to_df().columns.tolist()
    kept = result.filter(threshold=0.5)
    assert type(kept) is UQResult and kept.to_df().columns.tolist() == columns
    flagged = result.flag(threshold=0.5)
    at = columns.index("exact_match") + 1
    assert flagged.columns.tolist() == [*columns[:at], "flagged", *columns[at:]]
    assert flagged["prompt_index"].tolist() == result.index
    calibrated = result.calibrate(ScoreCalibrator().fit([0.2, 0.5, 0.9, 0.95], [0, 0, 1, 1]))
    assert type(calibrated) is UQResult
    # a column, after the scores, not a scorer; every other column as it was
    assert calibrated.scorers == result.scorers
    assert calibrated.metadata["thresholds"] == result.metadata["thresholds"]
    got = calibrated.to_df().columns.tolist()
    assert got == [*columns[:at], "bert_score_probability", *columns[at:]]
    # the filtered, calibrated result is still the same kind of result, rows and all
    both = calibrated.filter(threshold=0.5, scorer="bert_score_probability", keep="below")
    assert type(both) is UQResult and set(both.index) <= set(result.index)
    assert both.words().columns.tolist() == result.words().columns.tolist()
    assert both.sentences().columns.tolist() == result.sentences().columns.tolist()


def test_every_view_shows_each_row_s_own_text_and_strikes_what_refine_removes(result):
    """The result's HTML table and each answer's view (its own kind of result) show every row's
    text, escaped, with the sentences ``refine()`` removes struck through; so does a filtered
    result, whose rows are its own."""
    refined = result.refine().set_index("prompt_index")
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
        for label in shown.index:
            answer = shown.answer(label)
            one = Page("del")
            one.feed(answer._repr_html_())
            assert (answer.response or "(no answer)") in "".join(one.text)
            gone = refined.loc[answer.prompt_index, "removed_sentences"]
            assert "".join(one.inside) == "".join(g["sentence"] for g in gone)
    assert "<b>France</b>" not in result._repr_html_()  # the answer's markup is text


def test_sentences_flag_what_refine_removes(result):
    sentences = result.sentences()
    expected = sentences["support"] < SENTENCE_THRESHOLD
    assert sentences["flagged"].tolist() == expected.tolist()
    assert result.threshold(level="sentence") == SENTENCE_THRESHOLD
    assert result.threshold(level="word") == WEAK_SUPPORT
    with pytest.raises(InputValidationError, match="level must be one of"):
        result.threshold(level="paragraph")
    # a threshold of one's own
    mine = result.sentences(threshold=0.9)
    assert mine["flagged"].tolist() == (mine["support"] < 0.9).tolist()
    removed = result.refine()["removed_sentences"].tolist()
    gone = {(label, g["start"]) for label, row in zip(result.index, removed, strict=True)
            for g in row}  # fmt: skip
    flagged = sentences[sentences["flagged"]]
    assert gone == set(zip(flagged["prompt_index"], flagged["start"], strict=True))


def test_plot_options_are_keyword_only(result):
    import inspect

    for name in ("plot_histogram", "plot_accuracy_vs_fraction_kept", "plot_threshold",
                 "plot_supports"):  # fmt: skip
        parameters = inspect.signature(getattr(UQResult, name)).parameters
        assert parameters["ax"].kind is inspect.Parameter.KEYWORD_ONLY, name
        assert all(
            p.kind is inspect.Parameter.KEYWORD_ONLY
            for n, p in parameters.items()
            if n in ("scorer", "labels", "threshold", "ax")
        ), name
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the keywords warn nothing
        ax = result.plot_threshold(labels=[1, 0, 0, 1])
    assert math.isclose(float(ax.lines[0].get_ydata()[0]), result.threshold())
    assert np.isfinite(result.threshold())
