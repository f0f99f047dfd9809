"""``uqlm-bert score`` on random hostile files: every row is kept, in order, and scored or given a
reason; no row can fail the whole file.

The rows mix the texts of ``tests/helpers/texts_hostile.py`` (lone surrogates as JSON escapes, NUL and
other controls, combining marks, right-to-left text, emoji, very long lines) with rows of the
wrong shape: missing fields, numbers where text belongs, samples nested thousands of lists deep,
a line that is not JSON.
"""

from __future__ import annotations

import json
import math
import random
import warnings

import pandas as pd
import pytest

from tests.helpers.texts_hostile import random_text
from uqlm_bert.cli import main
from uqlm_bert.io._reading import read_table

SCORERS = ["bert_score", "exact_match", "rouge_l", "bleu"]  # cosine_sim: tests/scorers


def deep_list(depth: int) -> str:
    return "[" * depth + '"x"' + "]" * depth


def random_record(rng: random.Random, i: int, *, surrogates: bool) -> dict | str:
    """One row: a dict (written as JSON), or raw JSON text for shapes ``json.dumps`` cannot
    make. Every row has its index as ``id``."""

    def text():
        return random_text(rng, surrogates=surrogates)

    record: dict = {"id": i, "response": text(),
                    "sampled_responses": [None if rng.random() < 0.1 else text()
                                          for _ in range(rng.randint(0, 4))]}  # fmt: skip
    if rng.random() < 0.3:
        record["note"] = text()
    roll = rng.random()
    if roll < 0.05:
        del record["response"]
    elif roll < 0.10:
        record["response"] = rng.choice([42, 3.5, True, ["a list"], {"a": "dict"}])
    elif roll < 0.15:
        record["sampled_responses"] = rng.choice([7, "not a list", {"a": 1}, [1, 2]])
    elif roll < 0.20:  # nested deeper than anyone should read
        body = json.dumps(record)
        return body.replace('"id": ', f'"deep": {deep_list(rng.choice([50, 5000]))}, "id": ', 1)
    elif roll < 0.25:
        record["sampled_responses"] = deep_list(rng.choice([50, 5000]))  # as text, in the cell
    return record


def numbers(frame: pd.DataFrame, column: str) -> list[float]:
    return pd.to_numeric(frame[column], errors="coerce").astype(float).tolist()


def check_output(path, has_pair: list[bool]) -> None:
    """Every input row, in its place; each score in [0, 1], or NaN with a reason. A row that
    could not be read at all (not JSON, nested too deep) is there with its reason and no id."""
    frame = read_table(str(path))
    assert len(frame) == len(has_pair)
    errors = [e if isinstance(e, str) and e else None for e in frame["score_error"]]
    ids = numbers(frame, "id")
    for k, row_id in enumerate(ids):
        assert row_id == k or (math.isnan(row_id) and errors[k] is not None), (k, row_id)
    for name in SCORERS:
        for k, value in enumerate(numbers(frame, name)):
            if math.isnan(value):
                assert errors[k] is not None or not has_pair[k], (name, k)
            else:
                assert -1e-6 <= value <= 1 + 1e-6 and errors[k] is None, (name, k, value)


def pairs_in(record) -> bool:
    """Whether a well-formed row has an answer and a sample to compare it with."""
    if not isinstance(record, dict):
        return False
    samples = record.get("sampled_responses")
    return (
        isinstance(record.get("response"), str)
        and isinstance(samples, list)
        and any(isinstance(s, str) for s in samples)
    )


def run_score(src, out, capsys) -> tuple[int, str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # repaired text, truncated text, empty texts
        code = main(["score", str(src), "-o", str(out), "--scorers", ",".join(SCORERS), "-q"])
    return code, capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_random_hostile_jsonl_keeps_every_row(tmp_path, capsys, seed):
    rng = random.Random(seed)
    records = [random_record(rng, i, surrogates=True) for i in range(40)]
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    broken = rng.randrange(len(lines))
    lines[broken] = lines[broken][: len(lines[broken]) // 2]  # a line cut short: not JSON
    src = tmp_path / "answers.jsonl"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    has_pair = [pairs_in(r) and i != broken for i, r in enumerate(records)]
    for suffix in (".jsonl", ".csv"):
        out = tmp_path / f"scored{suffix}"
        code, stderr = run_score(src, out, capsys)
        assert code == 1, stderr  # the broken line, at least, is a failed row
        assert f"{src}:{broken + 1}:" in stderr
        check_output(out, has_pair)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_random_hostile_csv_keeps_every_row(tmp_path, capsys, seed):
    rng = random.Random(10 + seed)
    rows = []
    has_pair = []
    for i in range(40):
        record = random_record(rng, i, surrogates=False)
        if isinstance(record, str):  # CSV has no nesting of its own: a plain row instead
            record = {"id": i, "response": random_text(rng, surrogates=False)}
        has_pair.append(pairs_in(record))
        samples = record.get("sampled_responses")
        rows.append(
            {
                "id": i,
                "response": record.get("response"),
                "sampled_responses": samples if isinstance(samples, str) else json.dumps(samples),
                "note": record.get("note"),
            }
        )
    src = tmp_path / "answers.csv"
    pd.DataFrame(rows).to_csv(src, index=False)
    for suffix in (".jsonl", ".csv"):
        out = tmp_path / f"scored{suffix}"
        code, stderr = run_score(src, out, capsys)
        assert code in (0, 1), stderr
        check_output(out, has_pair)
