"""Which format a file's suffix names, and what reading a file that cannot be read says."""

from __future__ import annotations

import pytest

from uqlm_bert import InputValidationError
from uqlm_bert.io import load_table
from uqlm_bert.io._formats import table_format

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
