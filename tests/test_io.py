"""Reading, checking and writing answer tables: formats, line numbers, problems, atomic writes."""

from __future__ import annotations

import copy
import csv
import json
import os
import stat

import numpy as np
import pandas as pd
import pytest

from uqlm_bert.exceptions import InputValidationError
from uqlm_bert.io import (
    ERROR_COLUMN,
    RowCheck,
    RowProblem,
    check_row,
    load_prompts,
    load_table,
    parse_samples,
    read_table,
    scoring_inputs,
    table_format,
    validate_rows,
    with_scores,
    write_table,
)


def write_text(path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def jsonl(records) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


# -- formats ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "fmt"),
    [("a.jsonl", "jsonl"), ("a.NDJSON", "jsonl"), ("a.json", "jsonl"), ("d/a.csv", "csv"),
     ("a.parquet", "parquet"), ("a.pq", "parquet")],
)  # fmt: skip
def test_format_is_chosen_by_suffix(name, fmt):
    assert table_format(name) == fmt


@pytest.mark.parametrize("name", ["answers.txt", "answers", "answers.xlsx"])
def test_unknown_suffix_is_an_input_error_naming_the_file(name):
    with pytest.raises(InputValidationError, match=rf"{name}: unknown table format.*\.jsonl"):
        table_format(name)


def test_missing_file_is_an_input_error(tmp_path):
    path = str(tmp_path / "absent.jsonl")
    with pytest.raises(InputValidationError, match="absent.jsonl: no such file"):
        load_table(path)


def test_non_utf8_file_is_an_input_error(tmp_path):
    path = tmp_path / "latin1.csv"
    path.write_bytes("response\ncaf\xe9\n".encode("latin-1"))
    with pytest.raises(InputValidationError, match="latin1.csv: not UTF-8"):
        load_table(str(path))


# -- JSON Lines ------------------------------------------------------------------------------------


def test_jsonl_keeps_values_columns_in_first_seen_order_and_missing_keys_as_none(tmp_path):
    records = [
        {"id": 7, "response": "Café", "sampled_responses": ["a", None], "meta": {"k": [1, 2]}},
        {"id": 8, "prompt": "q", "response": "b", "sampled_responses": []},
    ]
    path = write_text(tmp_path / "in.jsonl", jsonl(records))
    table = load_table(path)
    assert list(table.frame.columns) == ["id", "response", "sampled_responses", "meta", "prompt"]
    assert table.lines == [1, 2]
    assert table.unreadable == {}
    assert table.frame["id"].tolist() == [7, 8]
    assert table.frame["meta"].tolist() == [{"k": [1, 2]}, None]
    assert table.frame["prompt"].tolist() == [None, "q"]

    out = str(tmp_path / "out.jsonl")
    write_table(table.frame, out)
    back = [json.loads(line) for line in open(out, encoding="utf-8")]
    # every record comes back, with the keys a record lacked present as null
    columns = list(table.frame.columns)
    assert back == [{c: r.get(c) for c in columns} for r in records]


def test_jsonl_bad_lines_keep_their_place_and_blank_lines_are_skipped(tmp_path):
    text = (
        '{"response": "a", "sampled_responses": ["a"]}\n'  # line 1
        "\n"  # line 2: blank, skipped
        '{"response": "b", oops}\n'  # line 3: not JSON
        "[1, 2]\n"  # line 4: JSON, but not an object
        '{"response": "c", "sampled_responses": ["c"]}\n'  # line 5
    )
    path = write_text(tmp_path / "in.jsonl", text)
    table = load_table(path)
    assert table.lines == [1, 3, 4, 5]
    assert sorted(table.unreadable) == [1, 2]
    assert (
        "not valid JSON" in table.unreadable[1] and '{"response": "b", oops}' in table.unreadable[1]
    )
    assert "JSON array" in table.unreadable[2]
    assert table.frame["response"].tolist() == ["a", None, None, "c"]

    good, problems = validate_rows(
        table.frame, path, lines=table.lines, unreadable=table.unreadable
    )
    assert good.tolist() == [True, False, False, True]
    assert [str(p).split(" ", 1)[0] for p in problems] == [f"{path}:3:", f"{path}:4:"]


# -- CSV -------------------------------------------------------------------------------------------


def test_csv_cells_are_text_empty_cells_are_missing(tmp_path):
    path = write_text(
        tmp_path / "in.csv",
        'id,response,sampled_responses\n007,NA,"[""None"", null]"\n8,,[]\n',
    )
    df = read_table(path)
    assert df["id"].tolist() == ["007", "8"]  # text as written, leading zero kept
    assert df["response"].tolist() == ["NA", None]  # "NA" is an answer, not a missing value
    assert parse_samples(df["sampled_responses"][0]) == ["None", None]


def test_csv_line_numbers_follow_multiline_records(tmp_path):
    text = (
        "response,sampled_responses\n"  # line 1: header
        '"first line\nsecond line","[""x""]"\n'  # lines 2-3: one record
        "\n"  # line 4: blank, skipped
        "b,[oops\n"  # line 5
    )
    path = write_text(tmp_path / "in.csv", text)
    table = load_table(path)
    assert table.lines == [2, 5]
    assert table.frame["response"].tolist() == ["first line\nsecond line", "b"]
    good, problems = validate_rows(table.frame, path, lines=table.lines)
    assert good.tolist() == [True, False]
    assert len(problems) == 1
    assert str(problems[0]).startswith(f"{path}:5: field 'sampled_responses': not a JSON list")


def test_csv_field_longer_than_the_csv_module_default_limit(tmp_path):
    long_answer = "word " * 40_000  # 200,000 characters, over csv's 131,072 default
    path = str(tmp_path / "long.csv")
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([["response", "sampled_responses"], [long_answer, "[]"]])
    assert read_table(path)["response"][0] == long_answer


def test_csv_record_with_too_many_fields_is_unreadable_not_shifted(tmp_path):
    path = write_text(tmp_path / "in.csv", "response,sampled_responses\na,[],extra\nb,[]\n")
    table = load_table(path)
    assert table.unreadable == {0: "3 fields but the header has 2 (an unquoted comma?)"}
    assert table.frame["response"].tolist() == [None, "b"]


def test_csv_header_repeating_a_column_is_an_input_error(tmp_path):
    path = write_text(tmp_path / "in.csv", "response,response\na,b\n")
    with pytest.raises(
        InputValidationError, match=r"in.csv: the header repeats column\(s\) \['response'\]"
    ):
        load_table(path)


def test_csv_writes_lists_as_json_and_missing_as_empty(tmp_path):
    df = pd.DataFrame(
        {
            "response": ["Paris", None],
            "sampled_responses": [["Paris", None], []],
            "score": [0.25, float("nan")],
            "n": [3, 4],
        }
    )
    path = str(tmp_path / "out.csv")
    write_table(df, path)
    assert open(path, encoding="utf-8").read().splitlines() == [
        "response,sampled_responses,score,n",
        'Paris,"[""Paris"", null]",0.25,3',
        ",[],,4",
    ]
    back = read_table(path)
    assert [parse_samples(v) for v in back["sampled_responses"]] == [["Paris", None], []]


# -- Parquet ---------------------------------------------------------------------------------------


def test_parquet_round_trip_gives_lists_back(tmp_path):
    pytest.importorskip("pyarrow")
    df = pd.DataFrame(
        {
            "prompt": ["q0", "q1"],
            "response": ["a", "b"],
            "sampled_responses": [["a", None], ["b", "c", "d"]],
            "score": [0.5, np.nan],
        }
    )
    path = str(tmp_path / "t.parquet")
    write_table(df, path)
    table = load_table(path)
    assert table.lines is None
    assert table.frame["sampled_responses"].tolist() == [["a", None], ["b", "c", "d"]]
    assert table.frame["score"].tolist()[0] == 0.5 and np.isnan(table.frame["score"].tolist()[1])
    good, problems = validate_rows(table.frame, path)
    assert good.all() and problems == []
    assert scoring_inputs(table.frame, good) == (["a", "b"], [["a", None], ["b", "c", "d"]])


def test_parquet_column_of_mixed_types_is_written_as_json_text(tmp_path):
    pytest.importorskip("pyarrow")
    df = pd.DataFrame({"sampled_responses": pd.Series([["a"], "[oops", None], dtype=object)})
    path = str(tmp_path / "t.parquet")
    with pytest.warns(UserWarning, match="'sampled_responses' mixes types"):
        write_table(df, path)
    assert read_table(path)["sampled_responses"].tolist() == ['["a"]', '"[oops"', None]


def test_problems_in_parquet_are_located_by_row_number(tmp_path):
    pytest.importorskip("pyarrow")
    path = str(tmp_path / "t.parquet")
    write_table(pd.DataFrame({"response": ["a", None], "sampled_responses": [["a"], ["b"]]}), path)
    table = load_table(path)
    _, problems = validate_rows(table.frame, path, lines=table.lines)
    assert [str(p) for p in problems] == [
        f"{path}: row 2: field 'response': missing (empty or null)"
    ]


def test_a_file_that_is_not_parquet_is_an_input_error(tmp_path):
    pytest.importorskip("pyarrow")
    path = write_text(tmp_path / "t.parquet", "not parquet")
    with pytest.raises(InputValidationError, match="t.parquet: cannot read as Parquet"):
        load_table(path)


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


# -- prompts ---------------------------------------------------------------------------------------


def test_text_prompts_one_per_line_blank_lines_skipped(tmp_path):
    path = write_text(tmp_path / "prompts.txt", "What is 2+2?\r\n\n  \nCapital of Peru?")
    table = load_prompts(path)
    assert table.frame["prompt"].tolist() == ["What is 2+2?", "Capital of Peru?"]
    assert table.lines == [1, 4]


def test_table_prompts_keep_other_columns(tmp_path):
    path = write_text(
        tmp_path / "p.jsonl", jsonl([{"id": 1, "prompt": "a"}, {"id": 2, "prompt": "b"}])
    )
    table = load_prompts(path)
    assert table.frame.to_dict("list") == {"id": [1, 2], "prompt": ["a", "b"]}


def test_bad_prompts_are_listed_with_file_and_line(tmp_path):
    path = write_text(
        tmp_path / "p.jsonl", jsonl([{"prompt": "a"}, {"prompt": ""}, {"prompt": 3}, {"id": 1}])
    )
    with pytest.raises(InputValidationError) as info:
        load_prompts(path)
    assert str(info.value).splitlines() == [
        f"{path}:2: field 'prompt': missing or empty",
        f"{path}:3: field 'prompt': a int, expected a string",
        f"{path}:4: field 'prompt': missing or empty",
    ]


def test_prompt_table_without_prompt_column(tmp_path):
    path = write_text(tmp_path / "p.csv", "question\nwhy?\n")
    with pytest.raises(
        InputValidationError, match=r"p.csv: no column 'prompt'; the columns are: question"
    ):
        load_prompts(path)


# -- atomic writes ---------------------------------------------------------------------------------


def test_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path):
    target = tmp_path / "out.jsonl"
    target.write_text("previous results\n")
    df = pd.DataFrame({"a": [1, 2], "b": [None, {1, 2}]})  # a set cannot be written as JSON
    with pytest.raises(InputValidationError, match="column 'b', row 2: cannot write a set"):
        write_table(df, str(target))
    assert target.read_text() == "previous results\n"
    assert os.listdir(tmp_path) == ["out.jsonl"]


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_successful_write_replaces_the_file_with_ordinary_permissions(tmp_path, suffix):
    target = tmp_path / f"out{suffix}"
    write_table(pd.DataFrame({"a": [1]}), str(target))
    assert os.listdir(tmp_path) == [target.name]
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask


def test_failed_parquet_write_leaves_the_old_file_and_no_temporary_file(tmp_path, monkeypatch):
    pq = pytest.importorskip("pyarrow.parquet")
    target = tmp_path / "out.parquet"
    write_table(pd.DataFrame({"a": [1, 2]}), str(target))

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(pq, "write_table", fail)
    with pytest.raises(OSError, match="disk full"):
        write_table(pd.DataFrame({"a": [3]}), str(target))
    assert read_table(str(target))["a"].tolist() == [1, 2]
    assert os.listdir(tmp_path) == ["out.parquet"]


def test_write_into_a_missing_directory_fails_before_writing(tmp_path):
    with pytest.raises(FileNotFoundError):
        write_table(pd.DataFrame({"a": [1]}), str(tmp_path / "nope" / "out.csv"))
    assert os.listdir(tmp_path) == []
