"""UQResult: data layout, DataFrame view, thresholds."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from uqlm_bert.exceptions import InputValidationError
from uqlm_bert.generation.records import CallFailure
from uqlm_bert.result import UQResult

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
        "response_errors": [None, BAD, None, None],
        "sample_errors": [[None, None], [None, None], [FAIL, None], [FAIL, FAIL]],
    }
    return UQResult(data, {"scorers": ["bert_score", "exact_match"], "num_responses": 2})


def test_to_df_columns_rows_and_errors():
    df = make().to_df()
    assert list(df.columns) == [
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
    assert df.index.tolist() == [0, 1, 2, 3]
    assert df["error"].tolist() == [None, str(BAD), None, None]
    assert str(BAD) == "bad_request after 1 attempt: HTTP 400: too long"
    assert df["sample_errors"].tolist()[2] == [str(FAIL), None]
    assert df["num_failed_samples"].tolist() == [0, 0, 1, 2]
    assert df["bert_score"].dtype == np.float64 and df["num_failed_samples"].dtype == np.int64
    assert df["response"].tolist() == ["r0", None, "r2", "r3"]
    assert math.isnan(df["bert_score"][1])


def test_filter_partitions_rows_and_keeps_the_original_index():
    r = make()
    above = r.filter(0.5)
    below = r.filter(0.5, keep="below")
    assert above.data["prompts"] == ["p0"]
    # below: 0.4 < 0.5, and the NaN rows (nothing to judge by)
    assert below.data["prompts"] == ["p1", "p2", "p3"]
    assert below.to_df().index.tolist() == [1, 2, 3]
    assert sorted(above.to_df().index.tolist() + below.to_df().index.tolist()) == [0, 1, 2, 3]
    assert below.data["sample_errors"][1] == [FAIL, None]
    assert below.metadata["filter"] == {"threshold": 0.5, "scorer": "bert_score", "keep": "below"}
    assert r.filter(0.9).data["prompts"] == ["p0"]  # >= keeps the boundary
    assert r.filter(0.5, scorer="exact_match").data["prompts"] == ["p0"]
    assert "filter" not in r.metadata


def test_filter_copies_rather_than_shares():
    r = make()
    kept = r.filter(0.0)
    kept.data["sampled_responses"][0].append("x")
    assert r.data["sampled_responses"][0] == ["a", "b"]


def test_flag_marks_low_and_unscorable_rows():
    df = make().flag(0.5)
    assert df["flagged"].tolist() == [False, True, True, True]
    assert make().flag(0.95, scorer="bert_score")["flagged"].tolist() == [True] * 4


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
