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

from tests.places import unwritable_directory
from uqlm_bert import InputValidationError
from uqlm_bert.io import (
    ERROR_COLUMN,
    MAX_NESTING,
    RowCheck,
    RowProblem,
    check_output_location,
    check_row,
    check_writable,
    load_prompts,
    load_table,
    load_texts,
    parse_samples,
    read_table,
    same_file,
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
    [("a.jsonl", "jsonl"), ("a.NDJSON", "jsonl"), ("a.json", "json"), ("d/a.csv", "csv"),
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
    offset = len(b"response\ncaf")
    with pytest.raises(
        InputValidationError,
        match=rf"latin1.csv:2: not UTF-8 text: byte 0xe9 at offset {offset} of the file",
    ):
        load_table(str(path))


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"])
@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".csv"])
def test_a_bad_byte_far_into_a_file_is_reported_at_its_offset_in_the_file(tmp_path, suffix, bom):
    # the decoder reads files in chunks: the offset must be the file's, not the chunk's
    header = b"response,sampled_responses\n" if suffix == ".csv" else b""
    row = b'{"response": "fine", "sampled_responses": ["fine"]}\n'
    if suffix == ".csv":
        row = b'fine,"[""fine""]"\n'
    body = bom + header
    body += row * ((46_014 - len(body)) // len(row))
    body += b"x" * (46_014 - len(body))  # the bad byte lands at offset 46,014 exactly
    path = tmp_path / f"big{suffix}"
    path.write_bytes(body + b"\xff tail\n")
    line = body.count(b"\n") + 1
    with pytest.raises(InputValidationError) as info:
        load_table(str(path))
    assert str(info.value).startswith(
        f"{path}:{line}: not UTF-8 text: byte 0xff at offset 46014 of the file"
    )


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


# -- JSON (.json): arrays of records ---------------------------------------------------------------

PANDAS_ROWS = pd.DataFrame(
    {
        "id": [7, 8, 9],
        "response": ["Lima", 'it\'s "quoted"', "Café\nnew line"],
        "sampled_responses": [["Lima", None, "Cusco"], ["a\\b", "it's"], []],
    }
)


def expected_samples(frame: pd.DataFrame) -> list[list[str | None]]:
    """The frame's sample lists as the scorer takes them: NaN and None are a missing sample."""
    return [[None if v is None or v != v else v for v in row] for row in frame["sampled_responses"]]


@pytest.mark.parametrize("indent", [None, 2, 4])
def test_json_array_of_records_from_pandas_is_a_table(tmp_path, indent):
    path = str(tmp_path / "answers.json")
    PANDAS_ROWS.to_json(path, orient="records", indent=indent)
    text = open(path, encoding="utf-8").read()
    table = load_table(path)
    assert table.unreadable == {}
    assert table.frame["id"].tolist() == PANDAS_ROWS["id"].tolist()
    assert table.frame["response"].tolist() == PANDAS_ROWS["response"].tolist()
    good, problems = validate_rows(table.frame, path, lines=table.lines)
    assert good.all() and problems == []
    assert scoring_inputs(table.frame, good)[1] == expected_samples(PANDAS_ROWS)
    # each row is located at the line its record opens on
    if indent is None:
        assert table.lines == [1, 1, 1]
    else:
        opens = [n for n, line in enumerate(text.splitlines(), 1) if line.strip() == "{"]
        assert table.lines == opens and len(opens) == 3


def test_json_file_holding_json_lines_is_read_as_json_lines(tmp_path):
    path = str(tmp_path / "answers.json")
    PANDAS_ROWS.to_json(path, orient="records", lines=True)
    table = load_table(path)
    assert table.lines == [1, 2, 3]
    assert table.frame["response"].tolist() == PANDAS_ROWS["response"].tolist()


def test_json_output_is_an_array_of_records_that_pandas_reads_back(tmp_path):
    path = str(tmp_path / "out.json")
    df = PANDAS_ROWS.assign(score=[0.5, float("nan"), 1.0])
    write_table(df, path)
    records = json.load(open(path, encoding="utf-8"))
    assert isinstance(records, list) and len(records) == 3
    assert records[1] == {"id": 8, "response": df["response"][1],
                          "sampled_responses": df["sampled_responses"][1], "score": None}  # fmt: skip
    back = pd.read_json(path, orient="records")
    assert back["response"].tolist() == df["response"].tolist()
    assert load_table(path).lines == [2, 3, 4]  # one record per line, after the "["
    write_table(df.iloc[:0], path)
    assert json.load(open(path, encoding="utf-8")) == []


def test_json_array_items_that_are_not_objects_are_unreadable_rows(tmp_path):
    path = write_text(
        tmp_path / "t.json",
        '[\n  {"response": "a", "sampled_responses": ["a"]},\n  [1, 2],\n  "text",\n'
        '  {"response": "b", "sampled_responses": ["b"]}\n]\n',
    )
    table = load_table(path)
    assert table.lines == [2, 3, 4, 5]
    assert table.unreadable == {
        1: "a JSON array, expected an object with the row's fields",
        2: "a JSON string, expected an object with the row's fields",
    }
    good, problems = validate_rows(
        table.frame, path, lines=table.lines, unreadable=table.unreadable
    )
    assert good.tolist() == [True, False, False, True]
    assert [str(p).split(": ")[0] for p in problems] == [f"{path}:3", f"{path}:4"]


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ('[{"response": "a"},\n {"response": "b}]', 2, "Unterminated string starting at column 15"),
        ('[{"response": "a"},\n]', 2, "Expecting value at column 1"),
        ('[{"response": "a"}\n {"response": "b"}]', 2,
         "expecting ',' or ']' after item 1 of the array at column 2"),
        ('[{"response": "a"}] []', 1, "extra data after the array at column 21"),
        ('[{"response": "a"},', 1, "Expecting value at column 20"),
    ],
)  # fmt: skip
def test_broken_json_array_is_an_input_error_naming_line_and_column(tmp_path, text, line, message):
    path = write_text(tmp_path / "t.json", text)
    with pytest.raises(InputValidationError) as info:
        load_table(path)
    assert str(info.value).startswith(f"{path}:{line}: not valid JSON ({message})")
    assert " at at " not in str(info.value)


@pytest.mark.parametrize("orient", ["columns", "index", "split"])
def test_json_object_written_by_pandas_in_another_orient_is_refused_with_the_fix(tmp_path, orient):
    path = str(tmp_path / "t.json")
    PANDAS_ROWS.to_json(path, orient=orient, indent=2 if orient == "split" else None)
    with pytest.raises(InputValidationError, match=r"not a table; .*orient='records'"):
        load_table(path)


def test_jsonl_line_holding_an_array_of_records_hints_at_json(tmp_path):
    path = str(tmp_path / "t.jsonl")
    PANDAS_ROWS.to_json(path, orient="records")
    table = load_table(path)
    assert "read from a .json file" in table.unreadable[0]


# -- CSV written by pandas -------------------------------------------------------------------------


def test_csv_from_pandas_to_csv_has_python_list_cells_that_are_parsed(tmp_path):
    df = pd.DataFrame(
        {
            "response": ["a", "b", "c"],
            "sampled_responses": [
                ["it's", 'say "hi"', None, "back\\slash", "tab\tand\nnewline"],
                [None, "x", float("nan"), np.nan],  # NaN in a list: pandas writes nan
                ["Café ☕", "\u2028", "[", "]", "', '"],
            ],
        }
    )
    path = str(tmp_path / "from_pandas.csv")
    df.to_csv(path, index=False)
    assert "nan" in open(path, encoding="utf-8").read()  # the repr pandas writes, not JSON
    table = load_table(path)
    good, problems = validate_rows(table.frame, path, lines=table.lines)
    assert problems == [] and good.all()
    assert scoring_inputs(table.frame, good)[1] == expected_samples(df)


@pytest.mark.parametrize(
    ("cell", "items"),
    [
        ("['a', \"b\"]", ["a", "b"]),
        ("[None, 'x']", [None, "x"]),
        ("['don\\'t', 'say \"x\"']", ["don't", 'say "x"']),
        ("['\\\\u00e9 is \\u00e9', '\\x00']", ["\\u00e9 is é", "\x00"]),
        ("[np.str_('q'), 'r']", ["q", "r"]),
        ("[\n 'multi',\n 'line',\n]", ["multi", "line"]),
        ("[]", []),
    ],
)
def test_python_list_literals_are_read(cell, items):
    assert parse_samples(cell) == items


@pytest.mark.parametrize(
    ("cell", "python_problem"),
    [
        ("[__import__('os').system('echo unsafe')]", "item 0 is not a literal string or None"),
        ("['a' 'b']", "two strings with no comma between them"),  # a NumPy array's text
        ("['a' None]", "invalid syntax"),
        ("['x', <NA>]", "invalid syntax"),  # pd.NA in a list: not a literal
        ("[x for x in 'ab']", "not a list literal"),
        ("['a', f'{1}']", "item 1 is not a literal string or None"),
        ("['a'", "was never closed at column 1"),
    ],
)
def test_other_python_text_is_refused_and_never_run(cell, python_problem, capfd):
    with pytest.raises(ValueError) as info:
        parse_samples(cell)
    message = str(info.value)
    assert message.startswith("not a JSON list (") and " nor a Python list (" in message
    assert python_problem in message
    assert capfd.readouterr().out == ""  # nothing was run


def test_python_list_items_of_other_types_are_named():
    with pytest.raises(ValueError, match="item 1 is a int, expected a string or null"):
        parse_samples("['a', 1]")


def test_numpy_array_cells_from_pandas_are_refused_not_joined(tmp_path):
    df = pd.DataFrame(
        {"response": ["a"], "sampled_responses": [np.array(["a", "b"], dtype=object)]}
    )
    path = str(tmp_path / "arrays.csv")
    df.to_csv(path, index=False)
    table = load_table(path)
    good, problems = validate_rows(table.frame, path, lines=table.lines)
    assert not good[0]
    assert str(problems[0]).startswith(f"{path}:2: field 'sampled_responses': not a JSON list")
    assert "no comma between them, as NumPy writes an array" in str(problems[0])


# -- hostile input: nesting, long numbers, surrogates ----------------------------------------------

DEEP = "[" * 5000 + "]" * 5000


def test_deeply_nested_jsonl_line_is_one_unreadable_row(tmp_path):
    path = write_text(
        tmp_path / "deep.jsonl",
        jsonl([{"response": "a", "sampled_responses": ["a"]}])
        + '{"response": "b", "sampled_responses": ' + DEEP + "}\n"
        + jsonl([{"response": "c", "sampled_responses": ["c"]}]),
    )  # fmt: skip
    table = load_table(path)
    assert table.lines == [1, 2, 3]
    assert list(table.unreadable) == [1]
    assert table.unreadable[1].startswith(f"not valid JSON (nested more than {MAX_NESTING} levels")
    assert table.frame["response"].tolist() == ["a", None, "c"]


def test_deeply_nested_item_of_a_json_array_is_one_unreadable_row(tmp_path):
    path = write_text(
        tmp_path / "deep.json",
        '[{"response": "a", "sampled_responses": ["a"]},\n'
        ' {"response": "b", "meta": {"x": ' + DEEP + ', "s": "]}"}},\n'
        ' {"response": "c", "sampled_responses": ["c"]}]\n',
    )
    table = load_table(path)
    assert table.lines == [1, 2, 3]
    assert list(table.unreadable) == [1]
    assert "nested more than" in table.unreadable[1]
    assert table.frame["response"].tolist() == ["a", None, "c"]


def _spy_on_the_json_decoder(monkeypatch) -> list[str]:
    """The text of every value json's decoder read (to the end, where it failed)."""
    seen: list[str] = []
    raw_decode = json.JSONDecoder.raw_decode

    def spy(self, s, idx=0):
        try:
            value, end = raw_decode(self, s, idx)
        except BaseException:
            seen.append(s[idx:])
            raise
        seen.append(s[idx:end])
        return value, end

    monkeypatch.setattr(json.JSONDecoder, "raw_decode", spy)
    return seen


@pytest.mark.parametrize("layout", ["array", "one object", "json lines"])
def test_a_json_file_nested_too_deep_is_never_handed_to_the_decoder(tmp_path, monkeypatch, layout):
    # the decoder would recurse to Python's limit, where a garbage collection running any
    # finalizer fails too: the depth is found by a scan first
    deep_row = '{"response": "b", "sampled_responses": ' + DEEP + "}"
    text = {
        "array": '[{"response": "a", "sampled_responses": ["a"]},\n ' + deep_row + "]\n",
        "one object": deep_row + "\n",
        "json lines": '{"response": "a", "sampled_responses": ["a"]}\n' + deep_row + "\n",
    }[layout]
    path = write_text(tmp_path / "deep.json", text)
    seen = _spy_on_the_json_decoder(monkeypatch)
    table = load_table(path)
    assert not any(part.count("[") > MAX_NESTING for part in seen)
    assert seen or layout == "one object"  # the readable rows were decoded
    bad = len(table.lines) - 1
    assert list(table.unreadable) == [bad]
    assert f"nested more than {MAX_NESTING} levels" in table.unreadable[bad]


def test_nesting_deeper_than_the_limit_but_readable_is_refused_too(tmp_path):
    # deep enough to break writing it back (recursion), shallow enough for json to parse
    deep = "[" * (MAX_NESTING + 1) + "]" * (MAX_NESTING + 1)
    at_limit = "[" * (MAX_NESTING - 1) + "]" * (MAX_NESTING - 1)  # plus the record: the limit
    path = write_text(tmp_path / "t.jsonl", f'{{"x": {deep}}}\n{{"x": {at_limit}}}\n')
    table = load_table(path)
    assert list(table.unreadable) == [0]
    write_table(table.frame, str(tmp_path / "out.jsonl"))
    assert load_table(str(tmp_path / "out.jsonl")).unreadable == {}


def test_an_array_item_one_level_past_the_limit_is_refused_and_one_at_it_is_read(tmp_path):
    # the record itself is the first level: a field MAX_NESTING - 1 deep is at the limit
    deep = "[" * MAX_NESTING + "]" * MAX_NESTING
    at_limit = "[" * (MAX_NESTING - 1) + "]" * (MAX_NESTING - 1)
    path = write_text(tmp_path / "t.json", f'[{{"x": {deep}}},\n {{"x": {at_limit}}}]\n')
    table = load_table(path)
    assert list(table.unreadable) == [0]
    assert f"nested more than {MAX_NESTING} levels" in table.unreadable[0]
    assert table.lines == [1, 2]


def test_deeply_nested_samples_cell_in_csv_is_a_row_problem(tmp_path):
    path = write_text(tmp_path / "deep.csv", f'response,sampled_responses\na,"[""a""]"\nb,{DEEP}\n')
    table = load_table(path)
    good, problems = validate_rows(table.frame, path, lines=table.lines)
    assert good.tolist() == [True, False]
    assert str(problems[0]).startswith(
        f"{path}:3: field 'sampled_responses': not a JSON list (nested too deeply to read)"
    )


def test_number_too_long_for_python_is_a_row_problem_not_a_crash(tmp_path):
    digits = "1" * 5000
    path = write_text(tmp_path / "t.jsonl", f'{{"response": "a", "n": {digits}}}\n')
    assert "a number longer than" in load_table(path).unreadable[0]
    path = write_text(tmp_path / "t.json", f'[{{"n": {digits}}}, {{"n": 1}}]')
    table = load_table(path)
    assert list(table.unreadable) == [0] and table.frame["n"].tolist() == [None, 1]


def test_lone_surrogate_is_repaired_on_reading_with_one_warning(tmp_path):
    path = write_text(
        tmp_path / "t.jsonl",
        '{"response": "a\\ud800b", "sampled_responses": ["x"]}\n'
        '{"response": "ok", "sampled_responses": ["fine", "bad\\udfff"]}\n'
        '{"response": "emoji \\ud83d\\ude00", "sampled_responses": ["\\ud83d\\ude00"]}\n',
    )
    with pytest.warns(UserWarning, match=r"2 record\(s\) held text that is not valid Unicode"):
        table = load_table(path)
    good, problems = validate_rows(table.frame, path, lines=table.lines)
    assert good.tolist() == [True, True, True] and problems == []
    assert table.frame["response"].tolist() == ["a\ufffdb", "ok", "emoji \U0001f600"]
    assert table.frame["sampled_responses"][1] == ["fine", "bad\ufffd"]
    for suffix in (".jsonl", ".csv"):  # every format can hold the repaired text
        out = str(tmp_path / f"out{suffix}")
        write_table(table.frame, out)
        assert load_table(out).frame["response"].tolist() == table.frame["response"].tolist()


def test_json_messages_do_not_double_at(tmp_path):
    path = write_text(tmp_path / "t.jsonl", '{"response": "never closed\n')
    message = load_table(path).unreadable[0]
    assert message.startswith("not valid JSON (Unterminated string starting at column 14)")
    error = check_row("x", '["a", "b').error
    assert error.startswith(
        "field 'sampled_responses': not a JSON list (Unterminated string starting at column 7) "
        "nor a Python list ("
    )
    assert " at at " not in message + error


# -- Parquet: types JSON has no word for -----------------------------------------------------------


def odd_parquet(path):
    """Write a Parquet file with columns of binary, decimal, temporal and nullable integer
    types at ``path``; return the pyarrow table written."""
    import datetime as dt
    import decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    utc = dt.timezone.utc
    table = pa.table(
        {
            "response": ["Lima is the capital of Peru.", "Paris."],
            "sampled_responses": [["Lima.", None], ["Paris.", "Lyon."]],
            "blob": pa.array([b"\x00\xffraw", None], pa.binary()),
            "price": pa.array([decimal.Decimal("12.50"), decimal.Decimal("-0.01")],
                              pa.decimal128(10, 2)),
            "day": pa.array([dt.date(2024, 1, 31), None], pa.date32()),
            "at": pa.array([dt.datetime(2024, 1, 31, 12, 30, 0, 123456, tzinfo=utc), None],
                           pa.timestamp("us", tz="UTC")),
            "far": pa.array([dt.datetime(3000, 1, 1, 8), dt.datetime(1677, 1, 1)],
                            pa.timestamp("ms")),  # outside the range of nanoseconds
            "clock": pa.array([dt.time(12, 30, 1, 5), None], pa.time64("us")),
            "wait": pa.array([dt.timedelta(seconds=90), None], pa.duration("s")),
            "days": pa.array([[dt.date(2024, 1, 1)], []], pa.list_(pa.date32())),
            "count": pa.array([3, None], pa.int64()),
        }
    )  # fmt: skip
    pq.write_table(table, str(path))
    return table


def test_parquet_odd_types_round_trip_to_parquet_with_their_arrow_types(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    source = odd_parquet(tmp_path / "in.parquet")
    table = load_table(str(tmp_path / "in.parquet"))
    good, problems = validate_rows(table.frame, table.path)
    assert good.all() and problems == []
    out = str(tmp_path / "out.parquet")
    write_table(with_scores(table.frame, {"bert_score": [0.5, 0.25]}, problems), out)
    written = pq.read_table(out)
    for field in source.schema:
        assert written.schema.field(field.name).type == field.type, field.name
        assert written.column(field.name).to_pylist() == source.column(field.name).to_pylist()


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".csv"])
def test_parquet_odd_types_are_written_as_documented_text(tmp_path, suffix):
    pytest.importorskip("pyarrow")
    import base64

    source = odd_parquet(tmp_path / "in.parquet")
    table = load_table(str(tmp_path / "in.parquet"))
    out = str(tmp_path / f"out{suffix}")
    check_writable(table.frame, out)
    write_table(table.frame, out)
    back = read_table(out)
    first = {name: source.column(name)[0].as_py() for name in source.column_names}
    expected = {
        "blob": base64.b64encode(first["blob"]).decode("ascii"),
        "price": str(first["price"]),
        "day": first["day"].isoformat(),
        "at": first["at"].isoformat(),
        "far": first["far"].isoformat(),
        "clock": first["clock"].isoformat(),
        "wait": pd.Timedelta(first["wait"]).isoformat(),
    }
    for name, text in expected.items():
        assert back[name][0] == text, name
    assert expected["price"] == "12.50" and expected["at"].endswith("+00:00")
    days = back["days"][0]
    assert (json.loads(days) if suffix == ".csv" else days) == [first["days"][0].isoformat()]
    assert back["count"].tolist() == (["3", None] if suffix == ".csv" else [3, None])


def test_unwritable_value_is_found_before_writing_and_named(tmp_path):
    df = pd.DataFrame({"a": [1, 2], "b": pd.Series([None, {1, 2}], dtype=object)})
    for suffix in (".jsonl", ".json", ".csv"):
        with pytest.raises(
            InputValidationError, match=r"in.jsonl:8: field 'b': cannot write a set"
        ):
            check_writable(df, str(tmp_path / f"out{suffix}"), source="in.jsonl", lines=[4, 8])
    assert os.listdir(tmp_path) == []


# -- where outputs go ------------------------------------------------------------------------------


def test_same_file_sees_through_relative_paths_symlinks_and_hard_links(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.csv").write_text("x\n")
    os.symlink("a.csv", tmp_path / "link.csv")
    os.link(tmp_path / "a.csv", tmp_path / "hard.csv")
    assert same_file("a.csv", "./a.csv") and same_file("a.csv", str(tmp_path / "a.csv"))
    assert same_file("link.csv", "a.csv") and same_file("hard.csv", "a.csv")
    assert same_file("new.csv", "./new.csv")  # neither exists yet
    assert not same_file("a.csv", "b.csv") and not same_file("a.csv", "new.csv")


def test_check_output_location_names_what_is_wrong(tmp_path):
    check_output_location(str(tmp_path / "out.csv"))
    assert os.listdir(tmp_path) == []  # the probe file is gone
    with pytest.raises(InputValidationError, match="out.txt: unknown table format"):
        check_output_location(str(tmp_path / "out.txt"))
    with pytest.raises(InputValidationError, match=r"the directory .*missing does not exist"):
        check_output_location(str(tmp_path / "missing" / "out.csv"))
    (tmp_path / "taken.csv").mkdir()
    with pytest.raises(InputValidationError, match="taken.csv: is a directory"):
        check_output_location(str(tmp_path / "taken.csv"))


def test_check_output_location_refuses_a_directory_it_cannot_write(tmp_path):
    directory = unwritable_directory(tmp_path)
    with pytest.raises(InputValidationError, match=rf"cannot write in the directory {directory}"):
        check_output_location(os.path.join(directory, "out.csv"))


def test_writing_never_changes_the_umask(tmp_path, monkeypatch):
    # os.umask sets the mask for every thread of the process; reading it must not use it
    calls = []
    real_umask = os.umask

    def spy(mask):
        calls.append(mask)
        return real_umask(mask)

    previous = real_umask(0o027)
    try:
        monkeypatch.setattr(os, "umask", spy)
        for name in ("out.jsonl", "out.csv", "out.json"):
            write_table(pd.DataFrame({"a": [1]}), str(tmp_path / name))
            assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o666 & ~0o027
        check_output_location(str(tmp_path / "next.csv"))
    finally:
        real_umask(previous)
    assert calls == []


def test_load_texts_reads_a_column_or_lines_and_refuses_other_files(tmp_path):
    path = write_text(
        tmp_path / "p.jsonl",
        jsonl([{"prediction": "x", "response": "y"}, {"prediction": 3, "response": "z"}]),
    )
    texts = load_texts(path, default_columns=("prediction", "response"))
    assert (texts.column, texts.texts) == ("prediction", ["x", None])
    assert [str(p) for p in texts.problems] == [
        f"{path}:2: field 'prediction': a int, expected a string"
    ]
    assert load_texts(path, "response").texts == ["y", "z"]
    with pytest.raises(
        InputValidationError, match=r"no column 'answer'; the columns are: prediction, response"
    ):
        load_texts(path, "answer")
    lines = write_text(tmp_path / "p.txt", "one\n\nthree\n")
    assert load_texts(lines).texts == ["one", "", "three"]
    with pytest.raises(InputValidationError, match="plain text, one text per line"):
        load_texts(lines, "prediction")
    for name in ("p.tsv", "predictions"):
        other = write_text(tmp_path / name, "one\n")
        with pytest.raises(InputValidationError, match="unknown format .*give a text file"):
            load_texts(other)


def test_column_name_with_a_lone_surrogate_is_repaired_too(tmp_path):
    path = write_text(tmp_path / "t.jsonl", '{"response": "a", "bad \\ud800 key": 1}\n')
    with pytest.warns(UserWarning, match="not valid Unicode"):
        table = load_table(path)
    assert list(table.frame.columns) == ["response", "bad \ufffd key"]
    for suffix in (".jsonl", ".csv", ".parquet"):
        out = str(tmp_path / f"out{suffix}")
        check_writable(table.frame, out, source=path)
        write_table(table.frame, out)
        assert list(load_table(out).frame.columns) == ["response", "bad \ufffd key"]


def test_a_frame_from_elsewhere_with_a_lone_surrogate_is_refused_for_csv_before_writing(tmp_path):
    frame = pd.DataFrame({"response": pd.Series(["ok", "bro\ud800ken"], dtype=object)})
    check_writable(frame, str(tmp_path / "out.jsonl"))  # JSON keeps it as an escape
    with pytest.raises(InputValidationError, match=r"field 'response': a lone surrogate"):
        check_writable(frame, str(tmp_path / "out.csv"), source="in.jsonl", lines=[1, 2])
