"""Writing tables: JSON Lines, JSON arrays, CSV and Parquet, chosen by suffix, atomically.

JSON and CSV have no type for some values, which are written as text: dates, times and
timestamps in ISO 8601 (``2024-01-31``, ``12:30:00``, ``2024-01-31T12:30:00+00:00``), durations
in ISO 8601 (``P0DT0H1M30S``), decimals as their exact digits (``"12.50"``, a JSON string),
bytes in base64 (RFC 4648, with padding). :func:`check_writable` finds a value that cannot be
written before any work is done.

Example:
    >>> import datetime, decimal, os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "answers.csv")
    >>> write_table(pd.DataFrame({"when": [datetime.date(2024, 1, 31)],
    ...                           "price": [decimal.Decimal("12.50")]}), path)
    >>> open(path).read().splitlines()
    ['when,price', '2024-01-31,12.50']
"""

from __future__ import annotations

import base64
import csv
import datetime as dt
import decimal
import json
import math
import os
import re
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd

from uqlm_bert._exceptions import InputValidationError
from uqlm_bert._inputs import is_missing
from uqlm_bert._warn import warn_user
from uqlm_bert.io._formats import pyarrow_parquet, table_format
from uqlm_bert.io._paths import atomic_write

__all__ = ["check_writable", "write_table"]

_SURROGATE = re.compile("[\ud800-\udfff]")


class _Unwritable(Exception):
    """A value that cannot be written: its column, its row (0-based) and why."""

    def __init__(self, column: str, row: int, reason: str) -> None:
        super().__init__(f"column {column!r}, row {row + 1}: {reason}")
        self.column, self.row, self.reason = column, row, reason


def write_table(df: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """Write ``df`` (without its index) in the format that the suffix of ``path`` names.

    JSON Lines (``.jsonl``, ``.ndjson``) writes one object per line; JSON (``.json``) a JSON
    array of records, one per line. Both keep lists and numbers as JSON and write NaN as null;
    a lone surrogate in a string is written as its JSON escape (``\\ud800``, say). CSV writes
    lists and dicts as JSON text and missing values as empty cells. Parquet stores lists
    natively and ``pd.ArrowDtype`` columns with their Arrow type (a column that mixes types
    Parquet cannot hold together is stored as JSON text, with a warning). In JSON and CSV,
    values with no JSON type are written as text (see the module's docstring): ISO 8601 dates,
    times, timestamps and durations, decimal digits, base64 bytes. The write is atomic: a temporary file in the same
    directory replaces ``path`` at the end.

    Raises:
        InputValidationError: unknown suffix, or a value that cannot be written (the message
            names its column and row); :func:`check_writable` finds it before any work.
        ConfigurationError: Parquet was asked for and pyarrow is not installed.
        OSError: the directory is missing or not writable.

    Example:
        >>> import datetime, os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "out.jsonl")
        >>> write_table(pd.DataFrame({"x": [1.5, float("nan")], "y": [["a"], None]}), path)
        >>> open(path).read()
        '{"x": 1.5, "y": ["a"]}\\n{"x": null, "y": null}\\n'
        >>> path = path.replace(".jsonl", ".json")
        >>> write_table(pd.DataFrame({"day": [datetime.date(2024, 1, 31)], "raw": [b"hi"]}), path)
        >>> open(path).read()
        '[\\n{"day": "2024-01-31", "raw": "aGk="}\\n]\\n'
    """
    name = os.fspath(path)
    fmt = table_format(name)
    if fmt == "parquet":
        pyarrow_parquet()
    writer = {
        "jsonl": _write_jsonl,
        "json": _write_json,
        "csv": _write_csv,
        "parquet": _write_parquet,
    }[fmt]
    try:
        atomic_write(name, lambda tmp: writer(df, tmp))
    except _Unwritable as exc:
        raise InputValidationError(str(exc)) from None


def check_writable(
    df: pd.DataFrame,
    path: str | os.PathLike[str],
    *,
    source: str | os.PathLike[str] | None = None,
    lines: Sequence[int] | None = None,
) -> None:
    """Fail now if some value of ``df`` cannot be written to ``path`` by :func:`write_table`.

    Converts every value as the writer of ``path``'s format would, and writes nothing, so that
    a command can refuse its input before any work rather than after it. A scored table adds
    only floats and strings to its input, so checking the input is enough.

    Args:
        df: the table (as read).
        path: the output file; its suffix sets the format.
        source: the file ``df`` came from, to name in the message.
        lines: the line each row of ``df`` starts on in ``source`` (see :attr:`Table.lines`).

    Raises:
        InputValidationError: a value cannot be written; the message names the file, line (or
            row) and field.
        ConfigurationError: Parquet was asked for and pyarrow is not installed.

    Example:
        >>> df = pd.DataFrame({"response": pd.Series(["ok", "bro\\ud800ken"], dtype=object)})
        >>> check_writable(df, "out.jsonl")  # JSON keeps it as an escape
        >>> check_writable(df, "out.csv", source="in.jsonl", lines=[1, 2])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        uqlm_bert.InputValidationError: in.jsonl:2: field 'response': a lone surrogate ...
    """
    fmt = table_format(path)
    if fmt in ("csv", "parquet"):
        for column in map(str, df.columns):
            if (problem := _unicode_problem(column)) is not None:
                raise InputValidationError(
                    f"{os.fspath(source or path)}: the column name {ascii(column)} holds {problem}"
                    f"; {fmt.upper() if fmt == 'csv' else 'Parquet'} holds only UTF-8 text "
                    f"(writing {os.fspath(path)})"
                )
    try:
        if fmt == "parquet":
            pyarrow_parquet()
            for j, column in enumerate(df.columns):
                _arrow_column(df.iloc[:, j], str(column), warn=False)
        else:
            columns = [str(c) for c in df.columns]
            for i, row in enumerate(df.itertuples(index=False, name=None)):
                for column, value in zip(columns, row, strict=True):
                    if fmt == "csv":
                        _csv_cell(value, column, i)
                    else:
                        _plain_value(value, column, i, text=True)
    except _Unwritable as exc:
        if source is None:
            where = f"row {exc.row + 1}"
        elif lines is None:
            where = f"{os.fspath(source)}: row {exc.row + 1}"
        else:
            where = f"{os.fspath(source)}:{lines[exc.row]}"
        raise InputValidationError(
            f"{where}: field {exc.column!r}: {exc.reason} (writing {os.fspath(path)})"
        ) from None


def _json_records(df: pd.DataFrame) -> Iterator[tuple[int, dict[str, Any]]]:
    columns = [str(c) for c in df.columns]
    for i, row in enumerate(df.itertuples(index=False, name=None)):
        yield i, {c: _plain_value(v, c, i, text=True) for c, v in zip(columns, row, strict=True)}


def _write_jsonl(df: pd.DataFrame, tmp: str) -> None:
    with open(tmp, "wb") as f:
        for _, record in _json_records(df):
            f.write(_json_text(record).encode("utf-8") + b"\n")


def _write_json(df: pd.DataFrame, tmp: str) -> None:
    with open(tmp, "wb") as f:
        f.write(b"[")
        for i, record in _json_records(df):
            f.write((b"\n" if i == 0 else b",\n") + _json_text(record).encode("utf-8"))
        f.write(b"\n]\n" if len(df) else b"]\n")


def _write_csv(df: pd.DataFrame, tmp: str) -> None:
    columns = [str(c) for c in df.columns]
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(columns)
        for i, row in enumerate(df.itertuples(index=False, name=None)):
            writer.writerow([_csv_cell(v, c, i) for c, v in zip(columns, row, strict=True)])


def _write_parquet(df: pd.DataFrame, tmp: str) -> None:
    import pyarrow as pa

    pq = pyarrow_parquet()
    columns = [str(c) for c in df.columns]
    arrays = [_arrow_column(df.iloc[:, j], c, warn=True) for j, c in enumerate(columns)]
    pq.write_table(pa.Table.from_arrays(arrays, names=columns), tmp)


def _arrow_column(series: pd.Series, column: str, *, warn: bool) -> Any:
    """``series`` as an Arrow array: typed columns as they are, object columns inferred."""
    import pyarrow as pa

    if series.dtype != object:
        try:
            return pa.array(series, from_pandas=True)
        except (pa.ArrowException, UnicodeEncodeError):
            pass  # e.g. text with a lone surrogate: found and named below
    values = series.tolist()
    plain = [_plain_value(v, column, i, text=False) for i, v in enumerate(values)]
    try:
        return pa.array(plain)
    except pa.ArrowException as exc:  # invalid, mistyped or unsupported values
        if warn:
            warn_user(
                f"column {column!r} mixes types that Parquet cannot hold in one column ({exc}); "
                "it is written as JSON text",
                UserWarning,
            )
        texts = [
            None if is_missing(v) else _json_text(_plain_value(v, column, i, text=True))
            for i, v in enumerate(values)
        ]
        return pa.array(texts, type=pa.string())


def _plain_value(value: Any, column: str, row: int, *, text: bool) -> Any:
    """``value`` as plain Python data: NaN as None, NumPy scalars and arrays as Python ones.

    With ``text`` (for JSON and CSV) values JSON has no type for become text: ISO 8601 for
    dates, times, timestamps and durations, the digits of a decimal, base64 for bytes. Without
    it (for Arrow) they stay as they are, and a string must be valid UTF-8.

    Raises:
        _Unwritable: a value of a type that cannot be written, or (without ``text``) a string
            holding a lone surrogate.
    """
    if is_missing(value):
        return None
    if isinstance(value, str):
        if not text and (problem := _unicode_problem(value)) is not None:
            raise _Unwritable(column, row, f"{problem}; Parquet holds only UTF-8 text")
        return str(value)
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain_value(v, column, row, text=text) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain_value(v, column, row, text=text) for k, v in value.items()}
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii") if text else bytes(value)
    if not text and isinstance(value, (decimal.Decimal, dt.date, dt.time, dt.timedelta)):
        return value  # pyarrow infers decimal, date, time, timestamp and duration types
    try:
        if isinstance(value, decimal.Decimal):
            return str(value)
        if isinstance(value, (dt.date, dt.time)):  # datetime and pd.Timestamp too
            return value.isoformat()
        if isinstance(value, dt.timedelta):  # pd.Timedelta too
            return pd.Timedelta(value).isoformat()
        if isinstance(value, np.datetime64):
            return str(np.datetime_as_string(value)) if text else value
        if isinstance(value, np.timedelta64):
            return pd.Timedelta(value).isoformat() if text else value
    except (ValueError, OverflowError) as exc:  # out of the range pandas can represent
        reason = f"cannot write the {type(value).__name__} {value}: {exc}"
        raise _Unwritable(column, row, reason) from None
    raise _Unwritable(column, row, f"cannot write a {type(value).__name__} value")


def _json_text(value: Any) -> str:
    """JSON text of plain data; ASCII-escaped if it holds a lone surrogate, which UTF-8 cannot."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    if _SURROGATE.search(text):
        return json.dumps(value, ensure_ascii=True, allow_nan=False)
    return text


def _csv_cell(value: Any, column: str, row: int) -> str:
    plain = _plain_value(value, column, row, text=True)
    if plain is None:
        return ""
    if isinstance(plain, (list, dict)):
        return _json_text(plain)
    if isinstance(plain, float):
        return repr(plain)
    if isinstance(plain, str) and (problem := _unicode_problem(plain)) is not None:
        raise _Unwritable(
            column,
            row,
            f"{problem}; CSV holds only UTF-8 text: write JSON Lines (.jsonl) or JSON (.json), "
            "which keep it as a \\u escape",
        )
    return str(plain)


def _unicode_problem(text: str) -> str | None:
    """Why ``text`` is not valid Unicode: a lone surrogate, as a JSON ``\\ud800`` escape gives."""
    match = _SURROGATE.search(text)
    if match is None:
        return None
    return (
        f"a lone surrogate ({ascii(match.group())[1:-1]} at character {match.start()}), "
        "which is not text"
    )
