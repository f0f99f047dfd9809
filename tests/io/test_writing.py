"""Writing tables atomically, and where an output may go."""

from __future__ import annotations

import os
import stat

import pandas as pd
import pytest

from tests.helpers.places import unwritable_directory
from tests.helpers.tables import jsonl, write_text
from uqlm_bert import InputValidationError
from uqlm_bert.io import load_table, write_table
from uqlm_bert.io._paths import check_output_location, same_file
from uqlm_bert.io._reading import load_texts, read_table
from uqlm_bert.io._writing import check_writable

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
