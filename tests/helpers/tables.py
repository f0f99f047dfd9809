"""Answer tables for the tests of reading and writing them: a file's text, JSON Lines of records,
and a frame as pandas writes one."""

from __future__ import annotations

import json

import pandas as pd


def write_text(path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def jsonl(records) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def read_jsonl(path) -> list[dict]:
    """The records of a JSON Lines file (a checkpoint, say), blank lines skipped."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


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
