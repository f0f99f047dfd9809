"""UQResult: data layout, DataFrame view, thresholds."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from uqlm_bert import InputValidationError
from uqlm_bert.generation._records import CallFailure
from uqlm_bert.results._result import UQResult

NAN = float("nan")
FAIL = CallFailure("server", "HTTP 503", attempts=3, status_code=503)
BAD = CallFailure("bad_request", "HTTP 400: too long", attempts=1, status_code=400)


def make() -> UQResult:
    data = {
        "prompts": ["p0", "p1", "p2", "p3"],
        "responses": ["r0", None, "r2", "r3"],
        "sampled_responses": [["a", "b"], ["c", "d"], [None, "e"], [None, None]],
        "bert_score": [0.9, NAN, 0.4, NAN],
        "exact_match": [1.0, NAN, 0.0, NAN],
        "errors": [None, BAD, None, None],
        "sample_errors": [[None, None], [None, None], [FAIL, None], [FAIL, FAIL]],
    }
    return UQResult(data, {"scorers": ["bert_score", "exact_match"], "num_responses": 2})


def test_to_df_columns_rows_and_errors():
    df = make().to_df()
    assert list(df.columns) == [
        "prompt_index",
        "prompt",
        "response",
        "sampled_responses",
        "bert_score",
        "exact_match",
        "error",
        "sample_errors",
        "num_failed_samples",
    ]
    assert df["prompt"].tolist() == ["p0", "p1", "p2", "p3"]
    assert df.index.tolist() == df["prompt_index"].tolist() == [0, 1, 2, 3]
    assert df["error"].tolist() == [None, str(BAD), None, None]
    assert str(BAD) == "bad_request after 1 attempt: HTTP 400: too long"
    assert df["sample_errors"].tolist()[2] == [str(FAIL), None]
    assert df["num_failed_samples"].tolist() == [0, 0, 1, 2]
    assert df["bert_score"].dtype == np.float64 and df["num_failed_samples"].dtype == np.int64
    assert df["response"].tolist() == ["r0", None, "r2", "r3"]
    assert math.isnan(df["bert_score"][1])


def test_filter_partitions_rows_and_keeps_the_original_index():
    r = make()
    above = r.filter(threshold=0.5)
    below = r.filter(threshold=0.5, keep="below")
    assert above.data["prompts"] == ["p0"]
    # below: 0.4 < 0.5, and the NaN rows (nothing to judge by)
    assert below.data["prompts"] == ["p1", "p2", "p3"]
    assert below.to_df()["prompt_index"].tolist() == below.index == [1, 2, 3]
    assert sorted(above.index + below.index) == [0, 1, 2, 3]
    assert below.data["sample_errors"][1] == [FAIL, None]
    assert below.metadata["filter"] == {"threshold": 0.5, "scorer": "bert_score", "keep": "below"}
    assert r.filter(threshold=0.9).data["prompts"] == ["p0"]  # >= keeps the boundary
    assert r.filter(threshold=0.5, scorer="exact_match").data["prompts"] == ["p0"]
    assert "filter" not in r.metadata


def test_filter_copies_rather_than_shares():
    r = make()
    kept = r.filter(threshold=0.0)
    kept.data["sampled_responses"][0].append("x")
    assert r.data["sampled_responses"][0] == ["a", "b"]


def test_flag_marks_low_and_unscorable_rows():
    df = make().flag(threshold=0.5)
    assert df["flagged"].tolist() == [False, True, True, True]
    assert make().flag(threshold=0.95, scorer="bert_score")["flagged"].tolist() == [True] * 4


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"threshold": "high"}, "threshold must be a number"),
        ({"threshold": NAN}, "NaN"),
        ({"threshold": True}, "threshold must be a number"),
        ({"threshold": 0.5, "scorer": "rouge_l"}, "bert_score, exact_match"),
        ({"threshold": 0.5, "keep": "sideways"}, "keep must be"),
    ],
)
def test_filter_rejects_bad_arguments(kwargs, fragment):
    with pytest.raises(InputValidationError, match=fragment):
        make().filter(**kwargs)


def test_lengths_must_agree_and_scorers_are_inferred():
    with pytest.raises(InputValidationError, match="differ in length"):
        UQResult({"prompts": ["a", "b"], "bert_score": [0.1]})
    r = UQResult({"prompts": ["a"], "responses": ["x"], "cosine_sim": [0.3]})
    assert r.scorers == ["cosine_sim"] and len(r) == 1
    assert repr(r) == "UQResult(rows=1, scorers=['cosine_sim'])"
    df = r.to_df()
    assert df["error"].tolist() == [None] and df["num_failed_samples"].tolist() == [0]


def test_to_df_does_not_alias_data():
    r = make()
    df = r.to_df()
    df.at[0, "sampled_responses"].append("z")
    assert r.data["sampled_responses"][0] == ["a", "b"]
    assert isinstance(df, pd.DataFrame)


# -- calibrate ---------------------------------------------------------------------------------


def _calibrator(method: str = "isotonic"):
    from uqlm_bert.evaluation._calibration import ScoreCalibrator

    return ScoreCalibrator(method).fit([0.1, 0.3, 0.5, 0.6, 0.8, 0.95], [0, 0, 1, 0, 1, 1])


@pytest.mark.parametrize("method", ["isotonic", "platt"])
def test_calibrate_adds_a_probability_column_and_leaves_the_original(method):
    r = make()
    cal = _calibrator(method)
    out = r.calibrate(cal)
    df = out.to_df()
    expected = cal.predict(np.array([0.9, NAN, 0.4, NAN]))
    assert df["bert_score_probability"].dtype == np.float64
    np.testing.assert_array_equal(df["bert_score_probability"].to_numpy(), expected)
    assert [math.isnan(v) for v in df["bert_score_probability"]] == [False, True, False, True]
    assert out.scorers == ["bert_score", "exact_match"]  # a column, not a scorer
    assert out.metadata["calibration"] == {
        "bert_score_probability": {"scorer": "bert_score", "method": method}
    }
    assert out.metadata["num_responses"] == 2
    # every other column is as before
    pd.testing.assert_frame_equal(df.drop(columns="bert_score_probability"), r.to_df())
    # the original result is unchanged
    assert "bert_score_probability" not in r.data and r.scorers == ["bert_score", "exact_match"]
    assert "calibration" not in r.metadata
    assert type(out) is UQResult


def test_filter_and_flag_keep_the_probability_column_aligned():
    r = make()
    cal = _calibrator()
    out = r.calibrate(cal)
    kept = out.filter(threshold=0.5, scorer="bert_score_probability")
    probability = cal.predict(np.array([0.9, NAN, 0.4, NAN]))
    rows = [i for i, p in enumerate(probability) if p >= 0.5]
    assert kept.data["prompts"] == [f"p{i}" for i in rows]
    assert kept.to_df()["prompt_index"].tolist() == rows
    assert kept.data["bert_score_probability"] == probability[rows].tolist()
    below = out.filter(threshold=0.5, keep="below")  # by bert_score: rows 1, 2, 3
    assert below.to_df()["prompt"].tolist() == ["p1", "p2", "p3"]
    np.testing.assert_array_equal(
        below.to_df()["bert_score_probability"].to_numpy(), probability[[1, 2, 3]]
    )
    flagged = out.flag(threshold=0.5, scorer="bert_score_probability")
    assert flagged["flagged"].tolist() == [bool(np.isnan(p) or p < 0.5) for p in probability]
    # calibrating a filtered result lines up with its own rows
    again = r.filter(threshold=0.5, keep="below").calibrate(cal)
    assert again.to_df()["prompt_index"].tolist() == [1, 2, 3]
    np.testing.assert_array_equal(
        again.to_df()["bert_score_probability"].to_numpy(), probability[[1, 2, 3]]
    )


def test_calibrate_another_scorer_twice():
    r = make().calibrate(_calibrator(), scorer="exact_match")
    r2 = r.calibrate(_calibrator("platt"), scorer="exact_match")
    assert r2.scorers == ["bert_score", "exact_match"]
    assert r2.to_df().columns.tolist().count("exact_match_probability") == 1
    assert r2.metadata["calibration"]["exact_match_probability"]["method"] == "platt"
    np.testing.assert_array_equal(
        r2.to_df()["exact_match_probability"].to_numpy(),
        _calibrator("platt").predict(np.array([1.0, NAN, 0.0, NAN])),
    )


def test_calibrate_errors():
    from uqlm_bert import NotFittedError
    from uqlm_bert.evaluation._calibration import ScoreCalibrator

    with pytest.raises(InputValidationError, match="no scores for scorer 'rouge_l'"):
        make().calibrate(_calibrator(), scorer="rouge_l")
    with pytest.raises(InputValidationError, match="must be a fitted"):
        make().calibrate("isotonic")
    with pytest.raises(NotFittedError):
        make().calibrate(ScoreCalibrator())
    with pytest.raises(InputValidationError, match="has: none"):
        UQResult({"prompts": ["a"]}, {"scorers": []}).calibrate(_calibrator())


def test_failures_are_grouped_by_kind_with_their_rows_and_follow_a_filter():
    """Per kind: the calls counted (answer and samples alike), the rows in first-seen order, the
    first message in row order; a prompt counts as failed when its answer failed or every
    sample did, not when only some samples did."""
    server = CallFailure("server", "HTTP 503")
    timeout = CallFailure("timeout", "no reply", attempts=6)
    result = UQResult(
        {
            "prompts": ["a", "b", "c", "d"],
            "responses": ["x", None, "z", "w"],
            "sampled_responses": [[None, "x"], [None], [None, None], ["w"]],
            "bert_score": [0.9, math.nan, math.nan, 0.8],
            "errors": [None, timeout, None, None],
            "sample_errors": [[server, None], [server], [timeout, "unexplained"], [None]],
        }
    )
    failures = result.failures()
    assert (failures.responses, failures.samples) == (1, 4)
    assert (failures.prompts_with_failures, failures.failed_prompts) == (3, 2)
    assert [(g.kind, g.count, g.prompts, g.example) for g in failures.groups] == [
        ("other", 1, (2,), "unexplained"),
        ("server", 2, (0, 1), str(server)),
        ("timeout", 2, (1, 2), str(timeout)),
    ]
    assert failures.as_metadata()["by_kind"]["timeout"] == {"count": 2, "example": str(timeout)}
    assert failures.lines(lambda i: f"p.txt:{i + 1}", shown=1)[1] == (
        f"2 call(s) failed for good (server) in 2 row(s): p.txt:1 and 1 more; first: {server}"
    )
    kept = result.filter(threshold=0.85, keep="below").failures()  # rows b, c and d: labels 1, 2, 3
    assert [(g.kind, g.prompts) for g in kept.groups] == [
        ("other", (2,)),
        ("server", (1,)),
        ("timeout", (1, 2)),
    ]


def test_every_field_is_shown_in_the_column_named_like_it():
    """Each data field's column is the field's name, in the singular where the field holds one
    value per row (responses: response), and every column of to_df comes from a field."""
    from uqlm_bert.results._fields import FIELD_COLUMNS

    n = 2
    data = {field: [None] * n for field in FIELD_COLUMNS}
    data.update(
        sampled_responses=[["a"], ["b"]],
        raw_sampled_responses=[["a"], ["b"]],
        sample_errors=[[None], [None]],
        best_response_index=[-1, 0],
        bert_score=[0.5, 0.25],
    )
    df = UQResult(data, {"scorers": ["bert_score"]}).to_df()
    for field, column in FIELD_COLUMNS.items():
        assert column in df.columns, field
        assert column == field or field == column + "s", (field, column)
    derived = {"prompt_index", "num_failed_samples"}
    assert set(df.columns) == set(FIELD_COLUMNS.values()) | {"bert_score"} | derived
