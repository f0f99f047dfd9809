"""Reading tables and texts from files: the entry points, by format.

Reading never drops a row: a record that cannot be parsed becomes a row with every field
missing, and :attr:`~uqlm_bert.io._table.Table.unreadable` says why. Text is decoded as UTF-8 (a
leading BOM is skipped); a byte that is not UTF-8 is reported with its line and its offset in
the file. The formats' own readers are :mod:`~uqlm_bert.io._json`,
:mod:`~uqlm_bert.io._csv` and :mod:`~uqlm_bert.io._parquet`.

Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "t.jsonl")
    >>> _ = open(path, "w").write('{"response": "a"}\\n')
    >>> read_table(path)["response"].tolist()
    ['a']
"""

from __future__ import annotations

import codecs
import io
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from uqlm_bert._exceptions import InputValidationError
from uqlm_bert._inputs import is_missing, text_problem
from uqlm_bert.io._csv import read_csv
from uqlm_bert.io._formats import FORMATS, TEXT_SUFFIXES, table_format
from uqlm_bert.io._json import read_json, read_jsonl
from uqlm_bert.io._parquet import read_parquet
from uqlm_bert.io._rows import RowProblem
from uqlm_bert.io._table import Table

__all__ = ["Texts", "load_prompts", "load_table", "load_texts", "read_table"]


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
            return read_parquet(name)
        except OSError as exc:
            raise InputValidationError(f"{name}: cannot read: {exc.strerror or exc}") from exc
    text = _read_text(name)
    if fmt == "jsonl":
        return read_jsonl(name, text)
    if fmt == "json":
        return read_json(name, text)
    return read_csv(name, text)


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
            reason = text_problem(value)
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
