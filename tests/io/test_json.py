"""Reading JSON Lines and JSON arrays into tables: every row kept in its place, hostile nesting and numbers refused row by row."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tests.helpers.tables import PANDAS_ROWS, expected_samples, jsonl, write_text
from uqlm_bert import InputValidationError
from uqlm_bert.io import load_table, write_table
from uqlm_bert.io._formats import MAX_NESTING
from uqlm_bert.io._rows import check_row, scoring_inputs, validate_rows

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


# -- JSON (.json): arrays of records ---------------------------------------------------------------


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
