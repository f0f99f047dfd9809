"""Reading and writing tables of answers: JSON Lines, JSON, CSV and Parquet, chosen by file suffix.

A table holds one row per prompt. For scoring it needs a ``response`` column (a string) and a
``sampled_responses`` column (a list of strings, ``null`` for a missing sample); any other
columns (``prompt``, ids, labels) are carried along untouched.

Formats by suffix (:data:`FORMATS`):

- ``.jsonl``, ``.ndjson``: JSON Lines, one object per line (blank lines are skipped).
- ``.json``: a JSON array of records, as ``df.to_json(path, orient="records")`` writes it,
  compact or indented; a ``.json`` file holding JSON Lines is read as JSON Lines. Written as an
  array with one record per line.
- ``.csv``: a header row; every cell is read as text, an empty cell as missing. A
  ``sampled_responses`` cell holds a JSON list (``["a", null]``, as this module writes it) or a
  Python list literal (``['a', None]``, as ``df.to_csv`` writes it, where ``nan`` is a missing
  sample). A Python literal is parsed, never evaluated.
- ``.parquet``, ``.pq`` (needs ``pyarrow``): types are kept. A column whose type JSON has no
  word for (binary, decimal, date, time, timestamp, duration, ...) and an integer column with
  nulls are read as ``pd.ArrowDtype`` columns, so that a Parquet output gets them back with the
  same Arrow type.

Reading never drops a row. A record that cannot be parsed (a JSON Lines line that is not a JSON
object, a record nested more than :data:`MAX_NESTING` levels deep, a CSV record with too many
fields) becomes a row with every field missing, and :attr:`Table.unreadable` says why, so that
the output stays aligned with the input. Text is decoded as UTF-8 (a leading BOM is skipped); a
byte that is not UTF-8 is reported with its line and its offset in the file. :func:`validate_rows`
then checks every row and names the file, line and field of each problem.

Writing is atomic: the table goes to a temporary file in the target's directory, which then
replaces the target, so a failed or interrupted write never leaves a half-written file. JSON and
CSV have no type for some values, which are written as text: dates, times and timestamps in ISO
8601 (``2024-01-31``, ``12:30:00``, ``2024-01-31T12:30:00+00:00``), durations in ISO 8601
(``P0DT0H1M30S``), decimals as their exact digits (``"12.50"``, a JSON string), bytes in base64
(RFC 4648, with padding). :func:`check_writable` finds a value that cannot be written before
any work is done, and :func:`check_output_location` a place that cannot be written to.

Example:
    >>> import os, tempfile
    >>> import pandas as pd
    >>> path = os.path.join(tempfile.mkdtemp(), "answers.csv")
    >>> write_table(pd.DataFrame({"response": ["Paris"],
    ...                           "sampled_responses": [["Paris", None]]}), path)
    >>> open(path).read().splitlines()[1]
    'Paris,"[""Paris"", null]"'
    >>> table = load_table(path)
    >>> good, problems = validate_rows(table.frame, path, lines=table.lines)
    >>> good.tolist(), problems
    ([True], [])
    >>> scoring_inputs(table.frame, good)
    (['Paris'], [['Paris', None]])
    >>> parse_samples("['Paris', None, nan]")  # a cell of df.to_csv
    ['Paris', None, None]

A scored table is the input's rows and columns plus one float64 column per scorer and
:data:`ERROR_COLUMN`; :func:`with_scores` builds it, for every engine alike. :func:`check_row`
checks one row by the rules of :func:`validate_rows` where there is no file (a batch of a Ray
Dataset, say), so that every engine fails the same rows with the same messages.
:func:`load_texts` reads the texts of one column (or of a ``.txt`` file, one per line) for
reference-based evaluation.
"""

from __future__ import annotations

import ast
import base64
import codecs
import contextlib
import csv
import datetime as dt
import decimal
import io
import json
import math
import os
import re
import secrets
import sys
import threading
import tokenize
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from uqlm_bert._warn import warn_user
from uqlm_bert.exceptions import ConfigurationError, InputValidationError
from uqlm_bert.inputs import is_missing, repair_text

__all__ = [
    "ERROR_COLUMN",
    "FORMATS",
    "MAX_NESTING",
    "TEXT_SUFFIXES",
    "RowCheck",
    "RowProblem",
    "Table",
    "Texts",
    "table_format",
    "load_table",
    "read_table",
    "load_prompts",
    "load_texts",
    "check_row",
    "validate_rows",
    "scoring_inputs",
    "with_scores",
    "parse_samples",
    "write_table",
    "check_writable",
    "check_output_location",
    "same_file",
]

#: Table formats by file suffix.
FORMATS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}

#: Suffixes of plain text files, read by :func:`load_texts` as one text per line.
TEXT_SUFFIXES = (".txt",)

#: How deeply lists and objects may nest in a JSON record; a deeper record is unreadable.
MAX_NESTING = 100

RESPONSE = "response"
SAMPLES = "sampled_responses"
#: The column of a scored table that says why a row was not scored (null where it was).
ERROR_COLUMN = "score_error"

_TOO_DEEP = f"nested more than {MAX_NESTING} levels deep"
_SURROGATE = re.compile("[\ud800-\udfff]")
_JSON_SPACE = re.compile(r"[ \t\n\r]*")
#: A JSON string, or one of the characters that nest or separate JSON values.
_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},]', re.DOTALL)


@dataclass(frozen=True)
class RowProblem:
    """Why one row cannot be scored.

    Attributes:
        path: the file the row came from.
        row: the row's 0-based position in the table.
        line: the line the row starts on (JSON Lines and CSV), or None (Parquet).
        field: the column at fault, or None when the whole record is unreadable.
        message: what is wrong.

    Example:
        >>> str(RowProblem("a.csv", 0, 2, "sampled_responses", "not a JSON list"))
        "a.csv:2: field 'sampled_responses': not a JSON list"
    """

    path: str
    row: int
    line: int | None
    field: str | None
    message: str

    @property
    def reason(self) -> str:
        """The problem without its location, as the row's :data:`ERROR_COLUMN` cell gives it."""
        return _reason(self.field, self.message)

    def __str__(self) -> str:
        where = (
            f"{self.path}:{self.line}"
            if self.line is not None
            else f"{self.path}: row {self.row + 1}"
        )
        return f"{where}: {self.reason}"


@dataclass(frozen=True)
class RowCheck:
    """One row checked for scoring by :func:`check_row`.

    Attributes:
        response: the response, or None when the row cannot be scored.
        samples: the sampled responses as a list of strings and Nones ([] when the row cannot
            be scored).
        problems: ``(field, message)`` for each fault; empty for a row that can be scored.

    Example:
        >>> check = RowCheck(None, [], (("response", "missing (empty or null)"),))
        >>> check.ok, check.error
        (False, "field 'response': missing (empty or null)")
    """

    response: str | None
    samples: list[str | None]
    problems: tuple[tuple[str, str], ...] = ()

    @property
    def ok(self) -> bool:
        """True when the row can be scored."""
        return not self.problems

    @property
    def error(self) -> str | None:
        """The row's :data:`ERROR_COLUMN` cell: None, or its problems joined by ``"; "``."""
        return _joined(_reason(f, m) for f, m in self.problems)


@dataclass(frozen=True)
class Table:
    """A table as read from a file, with where each row came from.

    Attributes:
        frame: the rows, in file order; columns in first-seen order.
        path: the file.
        lines: the line each row starts on (JSON Lines and CSV), or None (Parquet).
        unreadable: row position -> why that record could not be parsed (its fields are missing).

    Example:
        >>> Table(pd.DataFrame({"a": [1]}), "t.jsonl", [1]).location(0)
        't.jsonl:1'
    """

    frame: pd.DataFrame
    path: str
    lines: list[int] | None = None
    unreadable: dict[int, str] = field(default_factory=dict)

    def location(self, row: int) -> str:
        """``file:line`` (or ``file: row N`` for Parquet) of the row at position ``row``."""
        if self.lines is not None:
            return f"{self.path}:{self.lines[row]}"
        return f"{self.path}: row {row + 1}"


@dataclass(frozen=True)
class Texts:
    """The texts of one column of a table, or of a text file, as :func:`load_texts` reads them.

    Attributes:
        path: the file.
        column: the column the texts came from, or None for a text file (one text per line).
        texts: one entry per row, in file order: the text, or None where the row has none.
        problems: one :class:`RowProblem` for each row without a usable text.
        table: the file as read (a text file gives a table with one ``text`` column).

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "preds.txt")
        >>> _ = open(path, "w").write("first\\n\\nthird\\n")
        >>> load_texts(path).texts
        ['first', '', 'third']
    """

    path: str
    column: str | None
    texts: list[str | None]
    problems: list[RowProblem]
    table: Table

    @property
    def good(self) -> np.ndarray:
        """A boolean mask over the rows: True where the row has a usable text."""
        return np.array([t is not None for t in self.texts], dtype=bool)


def table_format(path: str | os.PathLike[str]) -> str:
    """The format (``"jsonl"``, ``"json"``, ``"csv"`` or ``"parquet"``) that ``path``'s suffix names.

    Raises:
        InputValidationError: the suffix is not one of :data:`FORMATS`.

    Example:
        >>> table_format("out/answers.JSONL"), table_format("answers.json")
        ('jsonl', 'json')
    """
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        known = ", ".join(FORMATS)
        raise InputValidationError(
            f"{os.fspath(path)}: unknown table format {suffix or '(no suffix)'!r}; "
            f"use one of {known}"
        )
    return FORMATS[suffix]


# -- reading ---------------------------------------------------------------------------------------
# -- reading ---------------------------------------------------------------------------------------


def load_table(path: str | os.PathLike[str]) -> Table:
    """Read a table and remember where each row came from.

    Raises:
        InputValidationError: the file is missing or unreadable, the suffix is unknown, or the
            file cannot be parsed as a whole (no CSV header, not Parquet, not UTF-8, a ``.json``
            array that is not valid JSON, ...).

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "t.jsonl")
        >>> _ = open(path, "w").write('{"response": "a"}\\n\\n{oops\\n')
        >>> table = load_table(path)
        >>> table.lines, sorted(table.unreadable)
        ([1, 3], [1])
        >>> path = os.path.join(os.path.dirname(path), "t.json")
        >>> _ = open(path, "w").write('[{"response": "a"},\\n {"response": "b"}]')
        >>> load_table(path).frame["response"].tolist(), load_table(path).lines
        (['a', 'b'], [1, 2])
    """
    name = os.fspath(path)
    fmt = table_format(name)
    _require_file(name)
    if fmt == "parquet":
        try:
            return _read_parquet(name)
        except OSError as exc:
            raise InputValidationError(f"{name}: cannot read: {exc.strerror or exc}") from exc
    text = _read_text(name)
    if fmt == "jsonl":
        return _read_jsonl(name, text)
    if fmt == "json":
        return _read_json(name, text)
    return _read_csv(name, text)


def read_table(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read a table into a DataFrame (see :func:`load_table` for where rows came from).

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "t.csv")
        >>> _ = open(path, "w").write("prompt,response\\nq,NA\\nr,\\n")
        >>> read_table(path)["response"].tolist()  # CSV cells are text; empty is missing
        ['NA', None]
    """
    return load_table(path).frame


def load_prompts(path: str | os.PathLike[str]) -> Table:
    """Read prompts: a table with a ``prompt`` column, or any other file as one prompt per line.

    In a plain text file blank lines are skipped; every prompt must be a non-empty string.

    Raises:
        InputValidationError: the file cannot be read, has no ``prompt`` column, no prompts, or
            a prompt that is missing or not a string (the message lists file, line and field).

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "prompts.txt")
        >>> _ = open(path, "w").write("What is 2+2?\\n\\nCapital of Peru?\\n")
        >>> table = load_prompts(path)
        >>> table.frame["prompt"].tolist(), table.lines
        (['What is 2+2?', 'Capital of Peru?'], [1, 3])
    """
    name = os.fspath(path)
    if Path(name).suffix.lower() in FORMATS:
        table = load_table(name)
    else:
        table = _read_text_lines(name, skip_blank=True)
    if "prompt" not in table.frame.columns:
        raise InputValidationError(
            f"{name}: no column 'prompt'; the columns are: "
            f"{', '.join(map(str, table.frame.columns)) or '(none)'}"
        )
    problems = []
    for i, value in enumerate(table.frame["prompt"].tolist()):
        if i in table.unreadable:
            problems.append(f"{table.location(i)}: {table.unreadable[i]}")
        elif is_missing(value) or (isinstance(value, str) and not value.strip()):
            problems.append(f"{table.location(i)}: field 'prompt': missing or empty")
        elif not isinstance(value, str):
            problems.append(
                f"{table.location(i)}: field 'prompt': a {type(value).__name__}, expected a string"
            )
    if problems:
        raise InputValidationError("\n".join(problems))
    if table.frame.empty:
        raise InputValidationError(f"{name}: no prompts found")
    return table


def load_texts(
    path: str | os.PathLike[str],
    column: str | None = None,
    *,
    default_columns: Sequence[str] = ("text",),
) -> Texts:
    """Read texts to evaluate: one column of a table, or a ``.txt`` file with one text per line.

    A table (any suffix of :data:`FORMATS`) gives the texts of ``column``, or of the first of
    ``default_columns`` it has; a row whose cell is missing, not a string or not valid Unicode
    (or whose record is unreadable) is kept, with None as its text and a :class:`RowProblem`.
    A text file (a suffix of :data:`TEXT_SUFFIXES`) gives one text per line; an empty line is
    an empty text. Any other suffix is refused, so that a table is never read as lines of text.

    Args:
        path: the file.
        column: the table's column of texts; None: the first of ``default_columns``.
        default_columns: the columns to look for when ``column`` is None.

    Raises:
        InputValidationError: the suffix is neither a table's nor a text file's, the file cannot
            be read, ``column`` is given for a text file, or the table has no such column.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "answers.jsonl")
        >>> _ = open(path, "w").write('{"response": "Lima"}\\n{"response": null}\\n')
        >>> texts = load_texts(path, default_columns=("prediction", "response"))
        >>> texts.column, texts.texts
        ('response', ['Lima', None])
        >>> print(texts.problems[0])  # doctest: +ELLIPSIS
        /...answers.jsonl:2: field 'response': missing (empty or null)
    """
    name = os.fspath(path)
    suffix = Path(name).suffix.lower()
    if suffix in TEXT_SUFFIXES:
        if column is not None:
            raise InputValidationError(
                f"{name}: a column ({column!r}) is named, but a {suffix} file is plain text, "
                "one text per line; name a column only for a table"
            )
        table = _read_text_lines(name, skip_blank=False)
        chosen, used = "text", None
    elif suffix in FORMATS:
        table = load_table(name)
        wanted = [column] if column is not None else list(default_columns)
        found = next((c for c in wanted if c in table.frame.columns), None)
        if found is None:
            raise InputValidationError(
                f"{name}: no column {' or '.join(map(repr, wanted))}; the columns are: "
                f"{', '.join(map(str, table.frame.columns)) or '(none)'}"
            )
        chosen = used = found
    else:
        raise InputValidationError(
            f"{name}: unknown format {suffix or '(no suffix)'!r}; give a text file "
            f"({', '.join(TEXT_SUFFIXES)}: one text per line) or a table ({', '.join(FORMATS)})"
        )
    texts: list[str | None] = []
    problems: list[RowProblem] = []
    for i, value in enumerate(table.frame[chosen].tolist()):
        line = None if table.lines is None else table.lines[i]
        if i in table.unreadable:
            problem: tuple[str | None, str] | None = (None, table.unreadable[i])
        else:
            reason = _text_problem(value)
            problem = None if reason is None else (used, reason)
        if problem is None:
            texts.append(str(value))
        else:
            texts.append(None)
            problems.append(RowProblem(name, i, line, *problem))
    return Texts(name, used, texts, problems, table)


def _require_file(name: str) -> None:
    if not os.path.exists(name):
        raise InputValidationError(f"{name}: no such file")
    if not os.path.isfile(name):
        raise InputValidationError(f"{name}: not a file")


def _read_text(name: str) -> str:
    """The file's text, decoded as UTF-8 with a leading BOM skipped.

    The whole file is decoded at once, so that a byte that is not UTF-8 is reported at its
    offset in the file (and its line), not at an offset within some buffer.
    """
    try:
        data = Path(name).read_bytes()
    except OSError as exc:
        raise InputValidationError(f"{name}: cannot read: {exc.strerror or exc}") from exc
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        # utf-8-sig counts positions after the BOM it skips
        offset = exc.start + (len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0)
        line = data.count(b"\n", 0, offset) + 1
        raise InputValidationError(
            f"{name}:{line}: not UTF-8 text: byte 0x{data[offset]:02x} at offset {offset} of "
            f"the file ({exc.reason}); save the file as UTF-8"
        ) from None


def _read_text_lines(name: str, *, skip_blank: bool) -> Table:
    """A text file as a table with one column, ``prompt`` (``skip_blank``) or ``text``."""
    _require_file(name)
    raw = [text.rstrip("\n") for text in io.StringIO(_read_text(name), newline=None)]
    if skip_blank:
        lines = [n for n, text in enumerate(raw, start=1) if text.strip()]
    else:
        lines = list(range(1, len(raw) + 1))
    values = pd.Series([raw[n - 1] for n in lines], dtype=object)
    return Table(pd.DataFrame({"prompt" if skip_blank else "text": values}), name, lines)


def _read_jsonl(name: str, text: str) -> Table:
    records: list[Any] = []
    lines: list[int] = []
    unreadable: dict[int, str] = {}
    for number, line in enumerate(io.StringIO(text, newline=None), start=1):
        if not line.strip():
            continue
        record, problem = _parse_json(line.rstrip("\n"))
        if problem is not None:
            unreadable[len(records)] = f"not valid JSON ({problem}): {_clip(line.strip())}"
        elif not isinstance(record, dict):
            hint = ""
            if isinstance(record, list) and record and all(isinstance(r, dict) for r in record):
                hint = " (a JSON array of records is read from a .json file)"
            unreadable[len(records)] = (
                f"a JSON {_json_type(record)}, expected an object with the row's fields{hint}"
            )
        records.append(record)
        lines.append(number)
    return _records_table(name, records, lines, unreadable)


def _read_json(name: str, text: str) -> Table:
    """A ``.json`` file: a JSON array of records, else JSON Lines."""
    start = _JSON_SPACE.match(text).end()  # type: ignore[union-attr]  # always matches
    if text.startswith("[", start):
        return _read_json_array(name, text, start)
    try:
        whole = json.loads(text)
    except (ValueError, RecursionError):
        whole = None  # several values (JSON Lines), or broken: each line is checked on its own
    if isinstance(whole, dict):
        over_lines = "\n" in text.strip()
        if over_lines or (whole and all(isinstance(v, dict) for v in whole.values())):
            raise InputValidationError(
                f"{name}: one JSON object{' over several lines' if over_lines else ''}, not a "
                "table; a .json table is a JSON array of records, as "
                "df.to_json(path, orient='records') writes it, or JSON Lines, one object per line"
            )
    return _read_jsonl(name, text)


def _read_json_array(name: str, text: str, start: int) -> Table:
    """The records of a JSON array, each with the line it starts on.

    The array is decoded item by item, so that an item nested too deeply for Python is one
    unreadable row. A syntax error stops the file: where items begin and end is then unknown.
    """
    decoder = json.JSONDecoder()
    records: list[Any] = []
    lines: list[int] = []
    unreadable: dict[int, str] = {}
    where = _Lines(text)

    def fail(pos: int, what: str) -> InputValidationError:
        return InputValidationError(
            f"{name}:{where.line(pos)}: not valid JSON ({what} at column {where.column(pos)}); "
            "a .json file is one JSON array and is read as a whole: fix it, or write JSON "
            "Lines (.jsonl), where a broken line fails only its own row"
        )

    pos = _skip_space(text, start + 1)
    if text.startswith("]", pos):
        pos += 1
    else:
        while True:
            problem: str | None = None
            try:
                record, end = decoder.raw_decode(text, pos)
                if _nesting_exceeds(record, text, pos, end):
                    problem = _TOO_DEEP
            except json.JSONDecodeError as exc:
                raise fail(exc.pos, exc.msg.removesuffix(" at")) from None
            except (RecursionError, ValueError) as exc:  # too deep, or a number too long
                end = _end_of_item(text, pos)
                if end is None:
                    raise fail(pos, "an array item that never ends") from None
                problem = _TOO_DEEP if isinstance(exc, RecursionError) else _number_error(exc)
                record = None
            if problem is not None:
                unreadable[len(records)] = (
                    f"not valid JSON ({problem}): {_clip(text[pos:end].strip())}"
                )
            elif not isinstance(record, dict):
                unreadable[len(records)] = (
                    f"a JSON {_json_type(record)}, expected an object with the row's fields"
                )
            records.append(record)
            lines.append(where.line(pos))
            pos = _skip_space(text, end)
            if text.startswith(",", pos):
                pos = _skip_space(text, pos + 1)
            elif text.startswith("]", pos):
                pos += 1
                break
            else:
                raise fail(pos, f"expecting ',' or ']' after item {len(records)} of the array")
    pos = _skip_space(text, pos)
    if pos != len(text):
        raise fail(pos, "extra data after the array")
    return _records_table(name, records, lines, unreadable)


class _Lines:
    """Line and column of positions in a text, counting forward from the last one asked."""

    def __init__(self, text: str) -> None:
        self.text, self.pos, self.number = text, 0, 1

    def line(self, pos: int) -> int:
        if pos < self.pos:
            return self.text.count("\n", 0, pos) + 1
        self.number += self.text.count("\n", self.pos, pos)
        self.pos = pos
        return self.number

    def column(self, pos: int) -> int:
        return pos - self.text.rfind("\n", 0, pos)


def _skip_space(text: str, pos: int) -> int:
    return _JSON_SPACE.match(text, pos).end()  # type: ignore[union-attr]  # always matches


def _end_of_item(text: str, pos: int) -> int | None:
    """Where the array item starting at ``pos`` ends: the ``,`` or ``]`` after it (None: never).

    Scans without recursion, counting brackets outside strings, for an item the decoder could
    not finish (nested deeper than Python recurses).
    """
    depth = 0
    for match in _JSON_TOKEN.finditer(text, pos):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
        elif token in ("]", "}"):
            if depth == 0:
                return match.start()
            depth -= 1
        elif token == "," and depth == 0:
            return match.start()
    return None


def _parse_json(text: str) -> tuple[Any, str | None]:
    """``(value, None)``, or ``(None, why)`` when ``text`` is not one readable JSON value."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, _json_error(exc)
    except RecursionError:
        return None, _TOO_DEEP
    except ValueError as exc:  # a number longer than Python converts
        return None, _number_error(exc)
    if _nesting_exceeds(value, text):
        return None, _TOO_DEEP
    return value, None


def _nesting_exceeds(value: Any, text: str, start: int = 0, end: int | None = None) -> bool:
    """Whether lists and objects nest more than :data:`MAX_NESTING` deep in ``value``, the JSON
    value parsed from ``text[start:end]``. Walks without recursion, and only when the text has
    enough brackets to be that deep."""
    stop = len(text) if end is None else end
    if text.count("[", start, stop) + text.count("{", start, stop) <= MAX_NESTING:
        return False
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        if depth > MAX_NESTING:
            return True
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def _json_error(exc: json.JSONDecodeError) -> str:
    """json's message with the column: ``Unterminated string starting at column 12``.

    json ends some messages with "at", meaning the position it adds itself.
    """
    return f"{exc.msg.removesuffix(' at')} at column {exc.colno}"


def _number_error(exc: ValueError) -> str:
    if "integer string conversion" in str(exc):
        return f"a number longer than {sys.get_int_max_str_digits()} digits"
    return str(exc)


def _records_table(
    name: str, records: list[Any], lines: list[int], unreadable: dict[int, str]
) -> Table:
    """A table of parsed records; an unreadable one is a row with every field missing.

    Text that is not valid Unicode (a lone surrogate, which only a JSON ``\\ud800`` escape can
    give) is repaired to U+FFFD, as everywhere in this package, with one warning that counts it.
    """
    rows = [{} if i in unreadable else r for i, r in enumerate(records)]
    rows, repaired = _repair_records(rows)
    if repaired:
        first = lines[repaired[0]]
        warn_user(
            f"{name}: {len(repaired)} record(s) held text that is not valid Unicode (lone "
            f"surrogates, first on line {first}); each was replaced by U+FFFD",
            UserWarning,
        )
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    frame = pd.DataFrame(
        {j: pd.Series([r.get(c) for r in rows], dtype=object) for j, c in enumerate(columns)},
        index=pd.RangeIndex(len(rows)),
    )
    # the names as they are: a string index pandas infers cannot hold a lone surrogate
    frame.columns = pd.Index(list(columns), dtype=object)
    return Table(frame, name, lines, unreadable)


def _repair_records(rows: list[Any]) -> tuple[list[Any], list[int]]:
    """The records with lone surrogates replaced in every key and string, and which changed."""
    out: list[Any] = []
    changed: list[int] = []
    for i, row in enumerate(rows):
        fixed, did = _repair_value(row)
        out.append(fixed)
        if did:
            changed.append(i)
    return out, changed


def _repair_value(value: Any) -> tuple[Any, bool]:
    if isinstance(value, str):
        return repair_text(value)
    if isinstance(value, list):
        items = [_repair_value(v) for v in value]
        return [v for v, _ in items], any(d for _, d in items)
    if isinstance(value, dict):
        pairs = [(repair_text(k), _repair_value(v)) for k, v in value.items()]
        fixed = {k: v for (k, _), (v, _) in pairs}
        return fixed, any(dk or dv for (_, dk), (_, dv) in pairs)
    return value, False


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


def _read_csv(name: str, text: str) -> Table:
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


def _read_parquet(name: str) -> Table:
    pq = _pyarrow_parquet()
    try:
        arrow = pq.read_table(name)
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... for a bad file
        raise InputValidationError(f"{name}: cannot read as Parquet: {exc}") from exc
    names = arrow.column_names
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise InputValidationError(f"{name}: the file repeats column(s) {duplicates}")
    kept = {f.type for f in arrow.schema if _kept_as_arrow(f.type)}
    try:
        frame = arrow.to_pandas(types_mapper=lambda t: pd.ArrowDtype(t) if t in kept else None)
    except Exception as exc:  # a value pandas cannot hold
        raise InputValidationError(f"{name}: cannot read as Parquet: {exc}") from exc
    frame = frame.reset_index(drop=True)
    for i, f in enumerate(arrow.schema):
        # an integer column with nulls would become float64 (1 -> 1.0): keep its Arrow type
        if f.name in frame.columns and _is_integer(f.type) and arrow.column(i).null_count:
            frame[f.name] = pd.Series(
                pd.arrays.ArrowExtensionArray(arrow.column(i)), index=frame.index
            )
    for column in frame.columns:
        dtype = frame[column].dtype
        if not isinstance(dtype, pd.ArrowDtype) and pd.api.types.is_string_dtype(dtype):
            # text, lists, structs: plain Python values
            frame[column] = pd.Series(
                [None if is_missing(v) else _plain(v) for v in frame[column].tolist()],
                dtype=object,
                index=frame.index,
            )
    return Table(frame, name, None)


def _is_integer(arrow_type: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_integer(arrow_type))


def _kept_as_arrow(arrow_type: Any) -> bool:
    """Whether a column of this Arrow type is read as ``pd.ArrowDtype``: its values (or values
    inside it) have no JSON type (binary, decimal, temporal, extension, union, ...)."""
    import pyarrow as pa

    t, types = arrow_type, pa.types
    plain = (types.is_null, types.is_boolean, types.is_integer, types.is_floating,
             types.is_string, types.is_large_string, getattr(types, "is_string_view", None))  # fmt: skip
    if any(check is not None and check(t) for check in plain):
        return False
    if types.is_dictionary(t):
        return _kept_as_arrow(t.value_type)
    lists = (types.is_list, types.is_large_list, types.is_fixed_size_list,
             getattr(types, "is_list_view", None), getattr(types, "is_large_list_view", None))  # fmt: skip
    if any(check is not None and check(t) for check in lists):
        return _kept_as_arrow(t.value_type)
    if types.is_map(t):
        return _kept_as_arrow(t.key_type) or _kept_as_arrow(t.item_type)
    if types.is_struct(t):
        return any(_kept_as_arrow(t.field(i).type) for i in range(t.num_fields))
    return True


# -- checking rows ---------------------------------------------------------------------------------


def check_row(
    response: Any,
    samples: Any,
    *,
    response_column: str = RESPONSE,
    samples_column: str = SAMPLES,
) -> RowCheck:
    """Check one row for scoring, by the rules of :func:`validate_rows`, and parse its samples.

    The response must be a string; the samples a list, tuple or 1-d array (or a string holding
    a JSON or Python list) of strings and missing values (None, NaN), as :func:`parse_samples`
    reads them. A missing response or a missing samples cell is a fault; an empty list is not;
    text that is not valid Unicode (a lone surrogate) is not a fault: the scorers repair it (see
    :mod:`uqlm_bert.inputs`).

    Args:
        response: the row's response.
        samples: the row's sampled responses.
        response_column: the response's column, named in the problems.
        samples_column: the samples' column, named in the problems.

    Example:
        >>> import numpy as np
        >>> check_row("yes", np.array(["yes", None], dtype=object))
        RowCheck(response='yes', samples=['yes', None], problems=())
        >>> for field, message in check_row(None, "[oops").problems:
        ...     print(f"{field}: {message}")
        response: missing (empty or null)
        sampled_responses: not a JSON list (Expecting value at column 2) nor a Python list ('[' was never closed at column 1)
    """
    problems: list[tuple[str, str]] = []
    if (reason := _text_problem(response)) is not None:
        problems.append((response_column, reason))
    try:
        parsed = parse_samples(samples)
    except ValueError as exc:
        problems.append((samples_column, str(exc)))
    if problems:
        return RowCheck(None, [], tuple(problems))
    return RowCheck(str(response), parsed)


def validate_rows(
    df: pd.DataFrame,
    path: str | os.PathLike[str],
    *,
    lines: Sequence[int] | None = None,
    unreadable: dict[int, str] | None = None,
    response_column: str = RESPONSE,
    samples_column: str = SAMPLES,
) -> tuple[np.ndarray, list[RowProblem]]:
    """Check every row for scoring: ``response`` a string, ``sampled_responses`` a list.

    A row is good when its response is a string and its samples are a list (or, in a text cell,
    a JSON or Python list) of strings and nulls; an empty list is good (it scores NaN). Each row is
    checked by :func:`check_row`. ``df`` is not modified.

    Args:
        df: the table.
        path: the file it came from, for messages.
        lines: the line each row starts on (see :attr:`Table.lines`); None for row numbers.
        unreadable: rows whose record could not be parsed (see :attr:`Table.unreadable`).
        response_column: the column holding the responses.
        samples_column: the column holding the lists of sampled responses.

    Returns:
        ``(good, problems)``: a boolean mask over the rows, and one :class:`RowProblem` per fault.

    Raises:
        InputValidationError: a required column is missing (the message names file and column).

    Example:
        >>> df = pd.DataFrame({"response": ["a", None], "sampled_responses": ['["a"]', "[oops"]})
        >>> good, problems = validate_rows(df, "in.csv", lines=[2, 3])
        >>> good.tolist()
        [True, False]
        >>> print("\\n".join(map(str, problems)))
        in.csv:3: field 'response': missing (empty or null)
        in.csv:3: field 'sampled_responses': not a JSON list (Expecting value at column 2) nor a Python list ('[' was never closed at column 1)
    """
    name = os.fspath(path)
    for column in (response_column, samples_column):
        if column not in df.columns:
            raise InputValidationError(
                f"{name}: no column {column!r}; the columns are: "
                f"{', '.join(map(str, df.columns)) or '(none)'}"
            )
    unreadable = unreadable or {}
    good = np.ones(len(df), dtype=bool)
    problems: list[RowProblem] = []

    def flag(i: int, column: str | None, message: str) -> None:
        good[i] = False
        line = None if lines is None else int(lines[i])
        problems.append(RowProblem(name, i, line, column, message))

    for i, (response, samples) in enumerate(
        zip(df[response_column].tolist(), df[samples_column].tolist(), strict=True)
    ):
        if i in unreadable:
            flag(i, None, unreadable[i])
            continue
        check = check_row(
            response, samples, response_column=response_column, samples_column=samples_column
        )
        for column, message in check.problems:
            flag(i, column, message)
    return good, problems


def scoring_inputs(
    df: pd.DataFrame,
    good: np.ndarray,
    *,
    response_column: str = RESPONSE,
    samples_column: str = SAMPLES,
) -> tuple[list[str], list[list[str | None]]]:
    """The responses and parsed sample lists of the rows where ``good`` is True, in order.

    Example:
        >>> df = pd.DataFrame({"response": ["a", "b"], "sampled_responses": [["a"], '["b", null]']})
        >>> scoring_inputs(df, np.array([True, True]))
        (['a', 'b'], [['a'], ['b', None]])
    """
    rows = np.flatnonzero(np.asarray(good, dtype=bool))
    responses = df[response_column].tolist()
    samples = df[samples_column].tolist()
    return [responses[i] for i in rows], [parse_samples(samples[i]) for i in rows]


def with_scores(
    df: pd.DataFrame, scores: Mapping[str, Sequence[float]], problems: Sequence[RowProblem]
) -> pd.DataFrame:
    """The scored table: a copy of ``df`` with one float64 column per scorer and the errors.

    A scorer column that ``df`` already has is replaced in place, and so is
    :data:`ERROR_COLUMN`; new ones are added at the end, scorers first, in the order of
    ``scores``. A row's :data:`ERROR_COLUMN` cell joins the :attr:`RowProblem.reason` of each of
    its problems with ``"; "``, or is None.

    Args:
        df: the table as read.
        scores: ``{scorer name: one score per row}`` (NaN where a row was not scored).
        problems: the problems :func:`validate_rows` found.

    Example:
        >>> df = pd.DataFrame({"response": ["a", None], "sampled_responses": [["a"], ["b"]]})
        >>> _, problems = validate_rows(df, "t.jsonl", lines=[1, 2])
        >>> out = with_scores(df, {"bert_score": [0.9, float("nan")]}, problems)
        >>> list(out.columns)
        ['response', 'sampled_responses', 'bert_score', 'score_error']
        >>> out["score_error"].tolist()
        [None, "field 'response': missing (empty or null)"]
    """
    out = df.copy()
    for name, values in scores.items():
        column = np.asarray(values, dtype=np.float64)
        if column.shape != (len(out),):
            raise InputValidationError(
                f"scores for {name!r} have shape {column.shape}; expected one per row ({len(out)})"
            )
        out[name] = column
    reasons: list[list[str]] = [[] for _ in range(len(out))]
    for p in problems:
        reasons[p.row].append(p.reason)
    out[ERROR_COLUMN] = pd.Series([_joined(r) for r in reasons], index=out.index, dtype=object)
    return out


def parse_samples(value: Any) -> list[str | None]:
    """A ``sampled_responses`` cell as a list of strings and Nones.

    Accepts a list, tuple or array, or a string holding a list: JSON (``["a", null]``, as
    :func:`write_table` writes CSV cells) or, failing that, a Python list literal as ``repr``
    writes it (``['a', None]``, as ``df.to_csv`` writes list cells), where ``nan`` is a missing
    sample. A Python literal is parsed, never evaluated: only string constants, ``None``,
    ``nan`` and ``np.str_('...')`` are accepted as items.

    Raises:
        ValueError: the cell is missing, not a list, or holds an item that is not a string or
            null; the message says which.

    Example:
        >>> parse_samples('["a", null]')
        ['a', None]
        >>> parse_samples("['Paris', \\"it's\\", None, nan]")
        ['Paris', "it's", None, None]
        >>> parse_samples("['a' 'b']")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: not a JSON list (...) nor a Python list (two strings with no comma between ...)
    """
    if isinstance(value, str):
        value = _list_from_text(value)
    elif is_missing(value):
        raise ValueError("missing (empty or null); give a list of sampled responses, [] for none")
    elif isinstance(value, np.ndarray):
        value = value.tolist()
    elif not isinstance(value, (list, tuple)):
        raise ValueError(f"a {type(value).__name__}, expected a list of strings")
    out: list[str | None] = []
    for j, item in enumerate(value):
        if is_missing(item):
            out.append(None)
        elif isinstance(item, str):
            out.append(str(item))
        else:
            raise ValueError(f"item {j} is a {type(item).__name__}, expected a string or null")
    return out


def _list_from_text(text: str) -> list[Any]:
    """The list a text cell holds: JSON, else (for text that starts with ``[``) Python."""
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        json_problem = _json_error(exc)
    except RecursionError:
        json_problem = "nested too deeply to read"
    except ValueError as exc:  # a number longer than Python converts
        json_problem = _number_error(exc)
    else:
        if not isinstance(parsed, list):
            raise ValueError(f"a JSON {_json_type(parsed)}, expected a list of strings")
        return parsed
    if not text.lstrip().startswith("["):
        raise ValueError(f"not a JSON list ({json_problem})")
    try:
        return _python_list(text)
    except ValueError as exc:
        raise ValueError(f"not a JSON list ({json_problem}) nor a Python list ({exc})") from None


def _python_list(text: str) -> list[Any]:
    """A Python list literal, as ``repr`` writes a list, parsed without evaluating anything.

    Items may be constants (a string, None, a number: :func:`parse_samples` then says which
    item is not a string), ``nan`` (how ``repr`` writes a float NaN: a missing sample) and
    ``np.str_('...')`` (how NumPy 2 writes its strings). Anything else is refused.
    """
    source = text.strip()
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        where = f"column {exc.offset}"
        if "\n" in source:
            where = f"line {exc.lineno}, {where}"
        raise ValueError(f"{exc.msg} at {where}") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, too deep, too big
        raise ValueError(str(exc) or type(exc).__name__) from None
    node = tree.body
    if not isinstance(node, ast.List):
        raise ValueError("not a list literal")
    if _adjacent_strings(source):
        # 'a' 'b' is one string to Python: refuse, rather than join two samples into one
        raise ValueError(
            "two strings with no comma between them, as NumPy writes an array; "
            "write lists, or write JSON"
        )
    items: list[Any] = []
    for j, item in enumerate(node.elts):
        if isinstance(item, ast.Constant):
            items.append(item.value)
        elif isinstance(item, ast.Name) and item.id == "nan":
            items.append(None)
        elif _is_numpy_string(item):
            items.append(item.args[0].value)  # type: ignore[attr-defined]
        else:
            segment = ast.get_source_segment(source, item) or type(item).__name__
            raise ValueError(
                f"item {j} is not a literal string or None: {_clip(segment, 40)} "
                f"at column {item.col_offset + 1}"
            )
    return items


def _adjacent_strings(source: str) -> bool:
    """Whether two string tokens follow each other in ``source`` (valid Python)."""
    skip = {tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT}
    previous = None
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in skip:
            continue
        if token.type == tokenize.STRING and previous == tokenize.STRING:
            return True
        previous = token.type
    return False


def _is_numpy_string(node: ast.expr) -> bool:
    """``np.str_('...')`` or ``numpy.str_('...')`` with one string constant, and nothing else."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "str_"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id in ("np", "numpy")
        and len(node.args) == 1
        and not node.keywords
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    )


# -- writing ---------------------------------------------------------------------------------------


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
    Parquet cannot hold together is stored as JSON text, with a warning). In JSON and CSV, values with no JSON
    type are written as text (see the module's docstring): ISO 8601 dates, times, timestamps and
    durations, decimal digits, base64 bytes. The write is atomic: a temporary file in the same
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
        _pyarrow_parquet()
    writer = {
        "jsonl": _write_jsonl,
        "json": _write_json,
        "csv": _write_csv,
        "parquet": _write_parquet,
    }[fmt]
    try:
        _atomic_write(name, lambda tmp: writer(df, tmp))
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
        uqlm_bert.exceptions.InputValidationError: in.jsonl:2: field 'response': a lone surrogate ...
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
            _pyarrow_parquet()
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


def check_output_location(path: str | os.PathLike[str]) -> None:
    """Fail now if a table cannot be written at ``path``: before any work, not after it.

    The suffix must name a format, the directory must exist, ``path`` must not be a directory,
    and a file must be creatable (and is then removed) in the directory, which is what an
    atomic write needs.

    Raises:
        InputValidationError: the path, and what is wrong with it.

    Example:
        >>> import tempfile
        >>> check_output_location(tempfile.mkdtemp() + "/scored.csv")
        >>> check_output_location("no/such/dir/scored.csv")
        Traceback (most recent call last):
        uqlm_bert.exceptions.InputValidationError: no/such/dir/scored.csv: the directory no/such/dir does not exist
    """
    name = os.fspath(path)
    table_format(name)
    target = Path(name)
    directory = target.parent
    if not directory.is_dir():
        raise InputValidationError(f"{name}: the directory {directory} does not exist")
    if target.is_dir():
        raise InputValidationError(f"{name}: is a directory; give the output file's name")
    try:
        os.unlink(_new_file(directory, target.name))
    except OSError as exc:
        raise InputValidationError(
            f"{name}: cannot write in the directory {directory}: {exc.strerror or exc}"
        ) from None


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether the paths ``a`` and ``b`` name one file.

    True when both exist and are the same file (:func:`os.path.samefile`: through symlinks and
    hard links too), or when they resolve to the same path (``./a.csv`` and ``a.csv``).

    Example:
        >>> same_file("answers.csv", "./answers.csv"), same_file("a.csv", "b.csv")
        (True, False)
    """
    with contextlib.suppress(OSError):
        if os.path.exists(a) and os.path.exists(b):
            return os.path.samefile(a, b)
    resolved = [os.path.normcase(os.path.realpath(p)) for p in (a, b)]
    return resolved[0] == resolved[1]


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

    pq = _pyarrow_parquet()
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


def _atomic_write(name: str, write: Callable[[str], None]) -> None:
    target = Path(name)
    directory = target.parent
    if not directory.is_dir():
        raise FileNotFoundError(2, "the directory does not exist", str(directory))
    tmp = _new_file(directory, target.name)
    try:
        write(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        if target.exists():
            os.chmod(tmp, target.stat().st_mode & 0o777)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _new_file(directory: Path, name: str) -> str:
    """Create a new empty file, hidden, beside ``name`` in ``directory``; return its path.

    It is created with mode 0o666, so that the umask (and a default ACL) set its permissions as
    for any new file: the umask is never read, which could only be done by changing it, for
    every thread of the process.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        path = os.path.join(directory, f".{name[:64]}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(path, flags, 0o666)
        except FileExistsError:
            continue
        os.close(fd)
        return path
    raise FileExistsError(17, "no free temporary file name", str(directory))


# -- values ----------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """Arrays (as Parquet gives list cells) as nested lists; everything else as it is."""
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


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


def _text_problem(value: Any) -> str | None:
    """Why ``value`` is not a usable text (None when it is one)."""
    if is_missing(value):
        return "missing (empty or null)"
    if not isinstance(value, str):
        return f"a {type(value).__name__}, expected a string"
    return None


def _unicode_problem(text: str) -> str | None:
    """Why ``text`` is not valid Unicode: a lone surrogate, as a JSON ``\\ud800`` escape gives."""
    match = _SURROGATE.search(text)
    if match is None:
        return None
    return (
        f"a lone surrogate ({ascii(match.group())[1:-1]} at character {match.start()}), "
        "which is not text"
    )


def _reason(field: str | None, message: str) -> str:
    return f"field {field!r}: {message}" if field else message


def _joined(reasons: Iterable[str]) -> str | None:
    return "; ".join(reasons) or None


def _json_type(value: Any) -> str:
    names = {
        dict: "object",
        list: "array",
        str: "string",
        bool: "boolean",
        int: "number",
        float: "number",
        type(None): "null",
    }
    return names.get(type(value), type(value).__name__)


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def _pyarrow_parquet() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ConfigurationError(
            "Parquet files need pyarrow: pip install pyarrow (or 'uqlm-bert[cli]')"
        ) from exc
    return pq
