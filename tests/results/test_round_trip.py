"""A result travels as plain data: ``UQResult.from_dict(result.to_dict())``, also through JSON
(and ``UQResult(**result.to_dict())``), gives the original's tables at every level, its flags,
failures, thresholds and views, whatever the result holds: several scorers, failed calls, a
postprocessor's raw texts, a filter's labels, a calibrated probability."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from tests.helpers.retries import fast
from tests.helpers.scripted_chat import Recorder, ScriptedChatModel, http_error
from uqlm_bert import BlackBoxUQ, ScoreCalibrator, UQResult
from uqlm_bert.bertscore._token_support import TokenSupport

PROMPTS = [f"Tell me about <city {i}> & its river" for i in range(6)]


@pytest.fixture(scope="module")
def scored() -> UQResult:
    """A generating run with two scorers, a failed answer (row 0), a prompt whose samples all
    failed (row 2) and one that lost a sample (row 3), its texts postprocessed (the result
    shows the raw ones), and calibrated."""
    recorder = Recorder()
    llm = ScriptedChatModel(temperature=0.25, recorder=recorder)
    recorder.add_fault(PROMPTS[0], http_error(400), temperature=0.25, always=True)
    recorder.add_fault(PROMPTS[2], http_error(400), temperature=1.0, always=True)
    recorder.add_fault(PROMPTS[3], http_error(400), temperature=1.0)
    uq = BlackBoxUQ(
        llm,
        scorers=["bert_score", "exact_match"],
        postprocessor=lambda text: text.strip() + " ",
        return_responses="raw",
        show_progress_bars=False,
        **fast(max_retries=0),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the failed calls are warned of
        result = uq.generate_and_score_sync(PROMPTS, num_responses=3)
    calibrator = ScoreCalibrator().fit([0.2, 0.4, 0.6, 0.8, 0.9], [0, 0, 1, 1, 1])
    return result.calibrate(calibrator)


@pytest.fixture(scope="module", params=["whole", "filtered"])
def run(request, scored) -> UQResult:
    """The run whole (a failed answer among its rows), or filtered to the rows with a
    confidence (labels that are not positions, a lost sample among them)."""
    if request.param == "whole":
        assert scored.data["errors"][0] is not None
        return scored
    kept = scored.filter(threshold=0.0)
    assert kept.index == [1, 3, 4, 5]
    assert kept.failures().samples == 1
    return kept


def _views(result: UQResult) -> dict[str, object]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # refine() warns of the answers it empties
        return {
            "to_df": result.to_df(),
            "flag": result.flag(),
            "flag by probability": result.flag(threshold=0.5, scorer="bert_score_probability"),
            "words": result.words(),
            "sentences": result.sentences(),
            "refine": result.refine(),
            "html": result._repr_html_(),
            "answers": [str(result.answer(label)) for label in result.index],
            "failures": result.failures(),
            "thresholds": [result.threshold(level=level) for level in ("answer", "word")],
            "index": result.index,
            "scorers": result.scorers,
        }


@pytest.mark.parametrize("how", ["from_dict", "through JSON", "keywords"])
def test_a_result_read_back_is_the_original_at_every_level(run, how):
    plain = run.to_dict()
    if how == "through JSON":
        plain = json.loads(json.dumps(plain, allow_nan=False))  # strict JSON: no NaN token
    again = UQResult(**plain) if how == "keywords" else UQResult.from_dict(plain)
    mine, theirs = _views(run), _views(again)
    for name, value in mine.items():
        if isinstance(value, pd.DataFrame):
            pd.testing.assert_frame_equal(theirs[name], value, obj=name)
        else:
            assert theirs[name] == value, name
    # the failures keep their kinds, the supports their exact values and the scored text
    failures = [e for e in [*again.data["errors"], *sum(again.data["sample_errors"], [])] if e]
    assert failures and {e.kind for e in failures} == {"bad_request"}
    for got, original in zip(again.data["supports"], run.data["supports"], strict=True):
        assert (got is None) == (original is None)
        if original is not None:
            assert isinstance(got, TokenSupport) and got.text == original.text
            np.testing.assert_array_equal(got.support, original.support)
            assert got.support.dtype == original.support.dtype == np.float32


def test_the_scored_text_travels_with_its_supports(run):
    """With ``return_responses="raw"`` the result shows the raw answer, but the supports index
    the postprocessed text they were scored on: that text is what travels with them."""
    plain = run.to_dict()["data"]
    for response, support in zip(plain["responses"], plain["supports"], strict=True):
        if support is not None:
            assert support["text"] == response.strip() + " " != response


def test_from_dict_refuses_what_to_dict_does_not_give():
    from uqlm_bert import InputValidationError

    with pytest.raises(InputValidationError, match="what to_dict"):
        UQResult.from_dict({"prompts": ["a"]})
    with pytest.raises(InputValidationError, match=r"supports\[0\] is a str"):
        UQResult({"prompts": ["a"], "supports": ["not supports"]})
