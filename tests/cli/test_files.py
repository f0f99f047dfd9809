"""The files people have, and hostile ones, through ``uqlm-bert score``; and the outputs a
command must refuse before any work (the input itself, a place it cannot write to)."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import os

import numpy as np
import pandas as pd
import pytest

from tests.helpers.company import in_company
from tests.helpers.expected import default_confidence
from tests.helpers.places import unwritable_directory
from uqlm_bert import BERTScorer
from uqlm_bert.cli import main
from uqlm_bert.io._formats import MAX_NESTING
from uqlm_bert.io._reading import read_table

#: A model that does not exist: a command that gets as far as loading it fails differently.
NO_MODEL = ["--model-type", "/nonexistent/model-directory"]

ANSWERS = pd.DataFrame(
    {
        "id": [1, 2, 3],
        "response": [
            "Water boils at 100 degrees Celsius.",
            "Lima is the capital of Peru.",
            'He said "it\'s Shakespeare".',
        ],
        "sampled_responses": [
            ["At sea level water boils at 100 C.", None, "It boils at 90 C."],
            ["The capital of Peru is Lima.", "Cusco, it's 'Cusco'."],
            ["William Shakespeare.", 'Marlowe\\"s play', float("nan")],
        ],
    }
)


def expected_confidence(scorer: BERTScorer, response: str, samples: list) -> float:
    """The default confidence of the response against each present sample (NaN and None
    skipped; no prompts: punctuation weighs 0)."""
    return default_confidence(scorer, response, samples)


def record(i: int) -> dict:
    """Row ``i`` of ANSWERS as a JSON-ready dict."""
    row = ANSWERS.iloc[i]
    samples = [s if isinstance(s, str) else None for s in row["sampled_responses"]]
    return {"id": int(row["id"]), "response": row["response"], "sampled_responses": samples}


def run(argv, capsys):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write_shape(frame: pd.DataFrame, directory, shape: str) -> str:
    """Write ``frame`` as a pandas user would, in the file shape named."""
    writers = {
        "jsonl": ("answers.jsonl", lambda p: frame.to_json(p, orient="records", lines=True)),
        "json-compact": ("answers.json", lambda p: frame.to_json(p, orient="records")),
        "json-indented": ("answers.json", lambda p: frame.to_json(p, orient="records", indent=2)),
        "csv-from-pandas": ("answers.csv", lambda p: frame.to_csv(p, index=False)),
        "parquet": ("answers.parquet", lambda p: frame.to_parquet(p, index=False)),
    }
    name, write = writers[shape]
    path = str(directory / name)
    write(path)
    return path


SHAPES = ["jsonl", "json-compact", "json-indented", "csv-from-pandas", "parquet"]


@pytest.mark.parametrize("shape", SHAPES)
def test_score_reads_every_file_shape_pandas_writes(tmp_path, capsys, default_engine, shape):
    if shape == "parquet":
        pytest.importorskip("pyarrow")
    src = write_shape(ANSWERS, tmp_path, shape)
    out = tmp_path / "scored.jsonl"
    code, stdout, stderr = run(["score", src, "-o", out, "-q"], capsys)
    assert code == 0, stderr
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [str(r["id"]) for r in records] == [str(i) for i in ANSWERS["id"]]
    assert [r["response"] for r in records] == ANSWERS["response"].tolist()
    expected = [
        expected_confidence(default_engine, r, s)
        for r, s in zip(ANSWERS["response"], ANSWERS["sampled_responses"], strict=True)
    ]
    np.testing.assert_allclose([r["bert_score"] for r in records], expected, atol=in_company(1e-6))
    assert [r["score_error"] for r in records] == [None] * 3
    assert "rows: 3  failed: 0" in stdout


def test_score_names_a_csv_cell_that_is_neither_json_nor_python(tmp_path, capsys):
    src = tmp_path / "answers.csv"
    src.write_text(
        "response,sampled_responses\n"
        "fine,\"['fine', None]\"\n"
        "bad,\"['a' 'b']\"\n"  # line 3: the text of a NumPy array, not a list
        "worse,\"[__import__('os').system('echo unsafe')]\"\n",  # line 4: never run
        encoding="utf-8",
    )
    out = tmp_path / "scored.csv"
    code, stdout, stderr = run(["score", src, "-o", out, "-q"], capsys)
    assert code == 1
    assert f"{src}:3: field 'sampled_responses': not a JSON list (" in stderr
    assert "no comma between them, as NumPy writes an array" in stderr
    assert f"{src}:4: field 'sampled_responses': not a JSON list (" in stderr
    assert "item 0 is not a literal string or None" in stderr
    assert "unsafe" not in stdout
    df = read_table(str(out))
    assert df["bert_score"][0] is not None and df["bert_score"][1:].isna().all()
    assert df["sampled_responses"].tolist()[1] == "['a' 'b']"  # kept as it was read


# -- hostile input ---------------------------------------------------------------------------------

DEEP = "[" * 5000 + "]" * 5000


def deep_file(directory, shape: str) -> str:
    """Three rows, the second holding a value nested 5,000 deep."""
    first, last = record(0), record(1)
    if shape == "jsonl":
        text = (json.dumps(first) + "\n" + '{"id": 9, "response": "deep", "sampled_responses": '
                + DEEP + "}\n" + json.dumps(last) + "\n")  # fmt: skip
        name = "deep.jsonl"
    elif shape == "json":
        text = ("[\n" + json.dumps(first) + ',\n{"id": 9, "response": "deep", "meta": ' + DEEP
                + "},\n" + json.dumps(last) + "\n]\n")  # fmt: skip
        name = "deep.json"
    else:
        rows = [[first["id"], first["response"], json.dumps(first["sampled_responses"])],
                [9, "deep", DEEP],
                [last["id"], last["response"], json.dumps(last["sampled_responses"])]]  # fmt: skip
        text = pd.DataFrame(rows, columns=["id", "response", "sampled_responses"]).to_csv(
            index=False
        )
        name = "deep.csv"
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("shape", ["jsonl", "json", "csv"])
def test_deeply_nested_value_fails_its_row_and_the_others_are_scored(
    tmp_path, capsys, default_engine, shape
):
    src = deep_file(tmp_path, shape)
    out = tmp_path / "scored.jsonl"
    code, stdout, stderr = run(["score", src, "-o", out, "-q"], capsys)
    assert code == 1, stderr
    assert "Traceback" not in stderr and "RecursionError" not in stderr
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(records) == 3
    reason = records[1]["score_error"]
    if shape == "csv":
        assert reason.startswith("field 'sampled_responses': not a JSON list (nested too deeply")
        assert f"{src}:3: field 'sampled_responses'" in stderr
    else:
        assert reason.startswith(f"not valid JSON (nested more than {MAX_NESTING} levels deep)")
        line = 2 if shape == "jsonl" else 3  # the array's "[" has a line of its own
        assert f"{src}:{line}: not valid JSON (nested more than" in stderr
    assert records[1]["bert_score"] is None
    for i in (0, 2):
        row = ANSWERS.iloc[i // 2]
        assert records[i]["score_error"] is None
        assert records[i]["bert_score"] == pytest.approx(
            expected_confidence(default_engine, row["response"], row["sampled_responses"]),
            abs=in_company(1e-6),
        )
    assert "rows: 3  failed: 1" in stdout


def test_lone_surrogate_is_repaired_and_every_row_scored(tmp_path, capsys):
    src = tmp_path / "answers.jsonl"
    src.write_text(
        '{"response": "broken \\ud800 text", "sampled_responses": ["x"], "note": "bad \\udc80"}\n'
        '{"response": "fine", "sampled_responses": ["fine", "also fine"], "note": "ok"}\n',
        encoding="utf-8",
    )
    for out in (tmp_path / "scored.jsonl", tmp_path / "scored.csv"):
        with pytest.warns(UserWarning, match=r"1 record\(s\) held text that is not valid"):
            code, _, stderr = run(["score", src, "-o", out, "-q"], capsys)
        assert code == 0, stderr
        frame = read_table(out)
        assert frame["response"].tolist() == ["broken \ufffd text", "fine"]
        assert frame["note"].tolist() == ["bad \ufffd", "ok"]
        assert frame["bert_score"].notna().all()


def test_json_error_messages_read_well(tmp_path, capsys):
    src = tmp_path / "answers.jsonl"
    src.write_text(json.dumps(record(0)) + '\n{"response": "never closed\n', encoding="utf-8")
    code, _, stderr = run(["score", src, "-o", tmp_path / "out.jsonl", "-q"], capsys)
    assert code == 1
    assert f"{src}:2: not valid JSON (Unterminated string starting at column 14)" in stderr
    assert "at at" not in stderr


def test_bad_byte_is_reported_at_its_offset_in_the_file_and_its_line(tmp_path, capsys):
    row = json.dumps(record(1)).encode() + b"\n"
    body = row * (46_014 // len(row))
    body += b"x" * (46_014 - len(body))
    src = tmp_path / "answers.jsonl"
    src.write_bytes(body + b"\xfe\n")
    code, _, stderr = run(["score", src, "-o", tmp_path / "out.jsonl", "-q"], capsys)
    assert code == 2
    line = body.count(b"\n") + 1
    assert f"{src}:{line}: not UTF-8 text: byte 0xfe at offset 46014 of the file" in stderr


# -- Parquet with types JSON has no word for -------------------------------------------------------


def odd_answers(path) -> tuple:
    """A Parquet file of answers with binary, decimal, temporal and nullable integer columns."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    utc = dt.timezone.utc
    table = pa.table(
        {
            "response": ANSWERS["response"].tolist()[:2],
            "sampled_responses": [["At sea level it is 100 C.", None], ["Lima.", "Cusco."]],
            "blob": pa.array([b"\x00\x01binary\xff", None], pa.binary()),
            "price": pa.array([decimal.Decimal("1234.5678"), None], pa.decimal128(12, 4)),
            "day": pa.array([dt.date(1999, 12, 31), dt.date(2024, 2, 29)], pa.date32()),
            "at": pa.array([dt.datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=utc), None],
                           pa.timestamp("us", tz="UTC")),
            "local": pa.array([dt.datetime(2262, 4, 12), None], pa.timestamp("ms")),
            "clock": pa.array([dt.time(0, 0, 1), dt.time(23, 59)], pa.time32("s")),
            "wait": pa.array([dt.timedelta(days=1, milliseconds=5), None], pa.duration("ms")),
            "labels": pa.array([1, None], pa.int16()),
        }
    )  # fmt: skip
    pq.write_table(table, str(path))
    return table, pq


def test_parquet_odd_types_are_carried_to_parquet_with_their_types(tmp_path, capsys):
    source, pq = odd_answers(tmp_path / "answers.parquet")
    out = tmp_path / "scored.parquet"
    code, _, stderr = run(["score", tmp_path / "answers.parquet", "-o", out, "-q"], capsys)
    assert code == 0, stderr
    written = pq.read_table(str(out))
    # the types as the input reads back (Parquet itself stores time32[s] as time32[ms])
    for field in pq.read_schema(str(tmp_path / "answers.parquet")):
        assert written.schema.field(field.name).type == field.type, field.name
        assert written.column(field.name).to_pylist() == source.column(field.name).to_pylist()
    assert written.column_names[-2:] == ["bert_score", "score_error"]


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".csv"])
def test_parquet_odd_types_are_carried_to_text_formats_as_documented(tmp_path, capsys, suffix):
    source, _ = odd_answers(tmp_path / "answers.parquet")
    out = tmp_path / f"scored{suffix}"
    code, _, stderr = run(["score", tmp_path / "answers.parquet", "-o", out, "-q"], capsys)
    assert code == 0, stderr
    df = read_table(str(out))
    values = {name: source.column(name).to_pylist() for name in source.column_names}
    # documented: base64 bytes, decimal digits, ISO 8601 dates, times, timestamps, durations
    texts = {
        "blob": [base64.b64encode(values["blob"][0]).decode("ascii"), None],
        "price": [str(values["price"][0]), None],
        "day": [d.isoformat() for d in values["day"]],
        "at": [values["at"][0].isoformat(), None],
        "local": [values["local"][0].isoformat(), None],
        "clock": [t.isoformat() for t in values["clock"]],
        "wait": [pd.Timedelta(values["wait"][0]).isoformat(), None],
    }
    for name, expected in texts.items():
        assert df[name].tolist() == expected, name
    assert texts["price"][0] == "1234.5678" and texts["local"][0] == "2262-04-12T00:00:00"
    labels = df["labels"].tolist()
    assert labels == (["1", None] if suffix == ".csv" else [1, None])
    assert not df["bert_score"].isna().any()


# -- outputs refused before any work ---------------------------------------------------------------


@pytest.mark.parametrize("how", ["same", "dot-slash", "absolute", "symlink", "hard-link"])
def test_output_that_is_the_input_is_refused_before_any_work(tmp_path, capsys, monkeypatch, how):
    monkeypatch.chdir(tmp_path)
    src = write_shape(ANSWERS, tmp_path, "csv-from-pandas")
    before = open(src, "rb").read()
    output = {
        "same": "answers.csv",
        "dot-slash": "./answers.csv",
        "absolute": str(tmp_path / "." / "answers.csv"),
        "symlink": "link.csv",
        "hard-link": "hard.csv",
    }[how]
    if how == "symlink":
        os.symlink("answers.csv", "link.csv")
    if how == "hard-link":
        os.link("answers.csv", "hard.csv")
    code, stdout, stderr = run(["score", "answers.csv", "-o", output, "-q", *NO_MODEL], capsys)
    assert code == 2 and stdout == ""
    assert f"-o {output} is the same file as INPUT answers.csv" in stderr
    assert open(src, "rb").read() == before


def test_output_directory_that_cannot_be_written_is_refused_before_the_model_loads(
    tmp_path, capsys
):
    src = write_shape(ANSWERS, tmp_path, "jsonl")
    directory = unwritable_directory(tmp_path)
    out = os.path.join(directory, "scored.jsonl")
    code, _, stderr = run(["score", src, "-o", out, "-q", *NO_MODEL], capsys)
    assert code == 2
    assert f"{out}: cannot write in the directory {directory}" in stderr
    assert "model" not in stderr


def test_output_that_is_a_directory_is_refused_before_any_work(tmp_path, capsys):
    src = write_shape(ANSWERS, tmp_path, "jsonl")
    (tmp_path / "scored.csv").mkdir()
    code, _, stderr = run(["score", src, "-o", tmp_path / "scored.csv", "-q", *NO_MODEL], capsys)
    assert code == 2
    assert f"{tmp_path / 'scored.csv'}: is a directory" in stderr
