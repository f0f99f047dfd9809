"""Reading CSV into tables: every cell as text, an empty cell as missing, no row dropped.

A record with more fields than the header is a row with every field missing, and the reason in
:attr:`~uqlm_bert.io._table.Table.unreadable`; a record with fewer is padded with missing cells.

Example:
    >>> table = read_csv("t.csv", "prompt,response\\nq,NA\\n\\nr,\\n")
    >>> table.frame["response"].tolist(), table.lines
    (['NA', None], [2, 4])
"""

from __future__ import annotations

import contextlib
import csv
import io
import threading
from collections.abc import Iterator

import pandas as pd

from uqlm_bert._exceptions import InputValidationError
from uqlm_bert.io._table import Table

__all__ = ["read_csv"]

_CSV_LIMIT_LOCK = threading.Lock()
_CSV_READERS = 0
_CSV_SAVED_LIMIT = 0


@contextlib.contextmanager
def _long_csv_fields() -> Iterator[None]:
    """Lift the csv module's 128 KiB per-field limit (LLM answers can be longer) while this
    package reads CSV, and put it back after the last read ends.

    The csv module keeps the limit process-wide only; raising it cannot make another reader
    fail, and the counter keeps overlapping reads from putting it back too early.
    """
    global _CSV_READERS, _CSV_SAVED_LIMIT
    with _CSV_LIMIT_LOCK:
        if _CSV_READERS == 0:
            _CSV_SAVED_LIMIT = csv.field_size_limit()
            csv.field_size_limit(max(_CSV_SAVED_LIMIT, 2**31 - 1))
        _CSV_READERS += 1
    try:
        yield
    finally:
        with _CSV_LIMIT_LOCK:
            _CSV_READERS -= 1
            if _CSV_READERS == 0:
                csv.field_size_limit(_CSV_SAVED_LIMIT)


def read_csv(name: str, text: str) -> Table:
    """The table of a CSV text read from the file ``name``.

    Raises:
        InputValidationError: no header row, or a header that repeats a column.
    """
    with _long_csv_fields():
        return _parse_csv(name, text)


def _parse_csv(name: str, text: str) -> Table:
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None)
    while header == []:
        header = next(reader, None)
    if header is None:
        raise InputValidationError(f"{name}: empty file; a CSV table needs a header row")
    duplicates = sorted({h for h in header if header.count(h) > 1})
    if duplicates:
        raise InputValidationError(f"{name}: the header repeats column(s) {duplicates}")
    rows: list[list[str | None]] = []
    lines: list[int] = []
    unreadable: dict[int, str] = {}
    start = reader.line_num + 1
    for record in reader:
        if not record:
            start = reader.line_num + 1
            continue
        if len(record) > len(header):
            unreadable[len(rows)] = (
                f"{len(record)} fields but the header has {len(header)} (an unquoted comma?)"
            )
            record = []
        cells = [c if c != "" else None for c in record]
        rows.append(cells + [None] * (len(header) - len(cells)))
        lines.append(start)
        start = reader.line_num + 1
    frame = pd.DataFrame(
        {h: pd.Series([r[j] for r in rows], dtype=object) for j, h in enumerate(header)},
        index=pd.RangeIndex(len(rows)),
    )
    return Table(frame, name, lines, unreadable)
