"""Checking rows for scoring, and the scored table: the rules every engine applies."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest

from uqlm_bert import InputValidationError
from uqlm_bert.io._rows import (
    ERROR_COLUMN,
    RowCheck,
    RowProblem,
    check_row,
    scoring_inputs,
    validate_rows,
    with_scores,
)

# -- checking rows ---------------------------------------------------------------------------------


def test_validate_rows_names_each_field_and_leaves_the_frame_alone():
    df = pd.DataFrame(
        {
            "response": pd.Series(["ok", 5, "x", "y", "z", None, "w"], dtype=object),
            "sampled_responses": pd.Series(
                [["ok", None], ["a"], {"a": 1}, ["a", 3], '{"a": 1}', ["b"], None], dtype=object
            ),
        }
    )
    before = copy.deepcopy(df)
    good, problems = validate_rows(df, "t.jsonl", lines=[1, 2, 3, 4, 5, 6, 7])
    assert good.tolist() == [True, False, False, False, False, False, False]
    assert [str(p) for p in problems] == [
        "t.jsonl:2: field 'response': a int, expected a string",
        "t.jsonl:3: field 'sampled_responses': a dict, expected a list of strings",
        "t.jsonl:4: field 'sampled_responses': item 1 is a int, expected a string or null",
        "t.jsonl:5: field 'sampled_responses': a JSON object, expected a list of strings",
        "t.jsonl:6: field 'response': missing (empty or null)",
        "t.jsonl:7: field 'sampled_responses': missing (empty or null); give a list of sampled "
        "responses, [] for none",
    ]
    assert all(isinstance(p, RowProblem) for p in problems)
    assert problems[0].row == 1 and problems[0].line == 2 and problems[0].field == "response"
    pd.testing.assert_frame_equal(df, before)


@pytest.mark.parametrize("missing", ["response", "sampled_responses"])
def test_missing_required_column_names_file_and_column(missing):
    df = pd.DataFrame({"response": ["a"], "sampled_responses": [["a"]], "prompt": ["q"]})
    with pytest.raises(InputValidationError, match=rf"answers.csv: no column '{missing}'"):
        validate_rows(df.drop(columns=[missing]), "answers.csv")


def test_empty_sample_list_is_a_good_row():
    df = pd.DataFrame({"response": ["a"], "sampled_responses": [[]]})
    good, problems = validate_rows(df, "t.jsonl")
    assert good.tolist() == [True] and problems == []


def test_check_row_normalises_missing_values_and_arrays():
    samples = np.array(["a", None, float("nan")], dtype=object)
    assert check_row("x", samples) == RowCheck("x", ["a", None, None])
    assert check_row("x", ("a", "b")) == RowCheck("x", ["a", "b"])
    assert check_row("x", '["a", null]') == RowCheck("x", ["a", None])
    assert check_row("x", np.array([], dtype=object)) == RowCheck("x", [])
    assert check_row("x", ["a"]).ok and check_row("x", ["a"]).error is None


@pytest.mark.parametrize(
    ("response", "samples", "error"),
    [
        (float("nan"), ["a"], "field 'response': missing (empty or null)"),
        (42, ["a"], "field 'response': a int, expected a string"),
        ("x", "a", "field 'sampled_responses': not a JSON list (Expecting value at column 1)"),
        ("x", {"a": 1}, "field 'sampled_responses': a dict, expected a list of strings"),
        ("x", ["a", 3.5],
         "field 'sampled_responses': item 1 is a float, expected a string or null"),
        ("x", np.array([["a"]], dtype=object),
         "field 'sampled_responses': item 0 is a list, expected a string or null"),
        (pd.NA, None, "field 'response': missing (empty or null); field 'sampled_responses': "
         "missing (empty or null); give a list of sampled responses, [] for none"),
    ],
)  # fmt: skip
def test_check_row_reports_what_validate_rows_reports(response, samples, error):
    check = check_row(response, samples)
    assert (check.ok, check.response, check.samples, check.error) == (False, None, [], error)
    df = pd.DataFrame(
        {"response": pd.Series([response], dtype=object),
         "sampled_responses": pd.Series([samples], dtype=object)}
    )  # fmt: skip
    good, problems = validate_rows(df, "t.jsonl", lines=[1])
    assert not good[0]
    assert "; ".join(p.reason for p in problems) == error
    assert with_scores(df, {"s": [float("nan")]}, problems)[ERROR_COLUMN].tolist() == [error]


def test_check_row_names_the_columns_it_is_given():
    check = check_row(None, ["a"], response_column="answer", samples_column="samples")
    assert check.problems == (("answer", "missing (empty or null)"),)
    df = pd.DataFrame({"answer": ["a", 3], "samples": [["a"], ["b"]]})
    good, problems = validate_rows(df, "t.csv", response_column="answer", samples_column="samples")
    assert good.tolist() == [True, False]
    assert [str(p) for p in problems] == ["t.csv: row 2: field 'answer': a int, expected a string"]
    assert scoring_inputs(df, good, response_column="answer", samples_column="samples") == (
        ["a"],
        [["a"]],
    )


def test_with_scores_replaces_columns_in_place_and_leaves_the_frame_alone():
    df = pd.DataFrame(
        {"bert_score": ["old", "old"], "response": ["a", None], "sampled_responses": [["a"], []]}
    )
    before = copy.deepcopy(df)
    _, problems = validate_rows(df, "t.jsonl", lines=[1, 2])
    out = with_scores(df, {"bert_score": [0.5, float("nan")], "other": [1, 2]}, problems)
    assert list(out.columns) == [
        "bert_score",
        "response",
        "sampled_responses",
        "other",
        ERROR_COLUMN,
    ]
    assert out["bert_score"].dtype == np.float64 and out["other"].tolist() == [1.0, 2.0]
    assert out[ERROR_COLUMN].tolist() == [None, "field 'response': missing (empty or null)"]
    pd.testing.assert_frame_equal(df, before)
    with pytest.raises(InputValidationError, match="one per row"):
        with_scores(df, {"bert_score": [0.5]}, problems)
