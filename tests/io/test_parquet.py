"""Parquet: lists round-trip, and the types JSON has no word for are kept or written as documented text."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest

from tests.helpers.tables import write_text
from uqlm_bert import InputValidationError
from uqlm_bert.io import load_table, write_table
from uqlm_bert.io._reading import read_table
from uqlm_bert.io._rows import scoring_inputs, validate_rows, with_scores
from uqlm_bert.io._writing import check_writable

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
