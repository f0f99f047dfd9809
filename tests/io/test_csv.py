"""Reading and writing CSV: every cell as text, line numbers across multi-line records, no row shifted."""

from __future__ import annotations

import csv

import pandas as pd
import pytest

from tests.helpers.tables import write_text
from uqlm_bert import InputValidationError
from uqlm_bert.io import load_table, write_table
from uqlm_bert.io._reading import read_table
from uqlm_bert.io._rows import validate_rows
from uqlm_bert.io._samples import parse_samples

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
