"""Reading prompts and texts: one per line, or a table's column, problems located."""

from __future__ import annotations

import pytest

from tests.helpers.tables import jsonl, write_text
from uqlm_bert import InputValidationError
from uqlm_bert.io._reading import load_prompts

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
