"""A sampled_responses cell as pandas writes it to CSV: lists parsed, anything else refused and never run."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.helpers.tables import expected_samples
from uqlm_bert.io import load_table
from uqlm_bert.io._rows import scoring_inputs, validate_rows
from uqlm_bert.io._samples import parse_samples

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
