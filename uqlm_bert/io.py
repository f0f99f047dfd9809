"""Reading and writing tables of answers: JSON Lines, CSV and Parquet, chosen by file suffix.

A table holds one row per prompt. For scoring it needs a ``response`` column (a string) and a
``sampled_responses`` column (a list of strings, ``null`` for a missing sample; in CSV a JSON list
such as ``["a", null]``); any other columns (``prompt``, ids, labels) are carried along untouched.

Reading never drops a row. A JSON Lines line that is not a JSON object becomes a row with every
field missing, and :attr:`Table.unreadable` says why, so that the output stays aligned with the
input. :func:`validate_rows` then checks every row and names the file, line and field of each
problem. Writing is atomic: the table goes to a temporary file in the target's directory, which
then replaces the target, so a failed or interrupted write never leaves a half-written file.

Formats by suffix: ``.jsonl``, ``.ndjson`` and ``.json`` (JSON Lines: one object per line),
``.csv`` (a header row; every cell is read as text, an empty cell as missing), ``.parquet`` and
``.pq`` (needs ``pyarrow``).

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

A scored table is the input's rows and columns plus one float64 column per scorer and
:data:`ERROR_COLUMN`; :func:`with_scores` builds it, for every engine alike. :func:`check_row`
checks one row by the rules of :func:`validate_rows` where there is no file (a batch of a Ray
Dataset, say), so that every engine fails the same rows with the same messages.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import os
import tempfile
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from uqlm_bert.exceptions import ConfigurationError, InputValidationError

__all__ = [
    "ERROR_COLUMN",
    "FORMATS",
    "RowCheck",
    "RowProblem",
    "Table",
    "table_format",
    "load_table",
    "read_table",
    "load_prompts",
    "check_row",
    "validate_rows",
    "scoring_inputs",
    "with_scores",
    "parse_samples",
    "write_table",
]

#: Table formats by file suffix.
FORMATS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}

RESPONSE = "response"
SAMPLES = "sampled_responses"
#: The column of a scored table that says why a row was not scored (null where it was).
ERROR_COLUMN = "score_error"


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


def table_format(path: str | os.PathLike[str]) -> str:
    """The format (``"jsonl"``, ``"csv"`` or ``"parquet"``) that the suffix of ``path`` names.

    Raises:
        InputValidationError: the suffix is not one of :data:`FORMATS`.

    Example:
        >>> table_format("out/answers.JSONL")
        'jsonl'
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


def load_table(path: str | os.PathLike[str]) -> Table:
    """Read a table and remember where each row came from.

    Raises:
        InputValidationError: the file is missing or unreadable, the suffix is unknown, or the
            file cannot be parsed as a whole (no CSV header, not Parquet, not UTF-8, ...).

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "t.jsonl")
        >>> _ = open(path, "w").write('{"response": "a"}\\n\\n{oops\\n')
        >>> table = load_table(path)
        >>> table.lines, sorted(table.unreadable)
        ([1, 3], [1])
    """
    name = os.fspath(path)
    fmt = table_format(name)
    _require_file(name)
    try:
        if fmt == "jsonl":
            return _read_jsonl(name)
        if fmt == "csv":
            return _read_csv(name)
        return _read_parquet(name)
    except UnicodeDecodeError as exc:
        raise InputValidationError(
            f"{name}: not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from exc
    except OSError as exc:
        raise InputValidationError(f"{name}: cannot read: {exc.strerror or exc}") from exc


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
        table = _read_text_lines(name)
    if "prompt" not in table.frame.columns:
        raise InputValidationError(
            f"{name}: no column 'prompt'; the columns are: {', '.join(map(str, table.frame.columns))}"
        )
    problems = []
    for i, value in enumerate(table.frame["prompt"].tolist()):
        if i in table.unreadable:
            problems.append(f"{table.location(i)}: {table.unreadable[i]}")
        elif _is_missing(value) or (isinstance(value, str) and not value.strip()):
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


def _require_file(name: str) -> None:
    if not os.path.exists(name):
        raise InputValidationError(f"{name}: no such file")
    if not os.path.isfile(name):
        raise InputValidationError(f"{name}: not a file")


def _read_text_lines(name: str) -> Table:
    _require_file(name)
    try:
        with open(name, encoding="utf-8-sig") as f:
            raw = [text.rstrip("\n") for text in f]
    except UnicodeDecodeError as exc:
        raise InputValidationError(
            f"{name}: not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from exc
    except OSError as exc:
        raise InputValidationError(f"{name}: cannot read: {exc.strerror or exc}") from exc
    lines = [n for n, text in enumerate(raw, start=1) if text.strip()]
    prompts = [raw[n - 1] for n in lines]
    return Table(pd.DataFrame({"prompt": pd.Series(prompts, dtype=object)}), name, lines)


def _read_jsonl(name: str) -> Table:
    records: list[dict[str, Any]] = []
    lines: list[int] = []
    unreadable: dict[int, str] = {}
    with open(name, encoding="utf-8-sig") as f:
        for number, text in enumerate(f, start=1):
            if not text.strip():
                continue
            try:
                record = json.loads(text)
            except json.JSONDecodeError as exc:
                unreadable[len(records)] = (
                    f"not valid JSON ({exc.msg} at column {exc.colno}): {_clip(text.strip())}"
                )
                record = {}
            if not isinstance(record, dict):
                unreadable[len(records)] = (
                    f"a JSON {_json_type(record)}, expected an object with the row's fields"
                )
                record = {}
            records.append(record)
            lines.append(number)
    columns: dict[str, None] = {}
    for record in records:
        columns.update(dict.fromkeys(record))
    frame = pd.DataFrame(
        {c: pd.Series([r.get(c) for r in records], dtype=object) for c in columns},
        index=pd.RangeIndex(len(records)),
    )
    return Table(frame, name, lines, unreadable)


def _read_csv(name: str) -> Table:
    # LLM answers can be long: lift the csv module's default 128 KiB per-field limit.
    csv.field_size_limit(max(csv.field_size_limit(), 2**31 - 1))
    with open(name, encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f)
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
        frame = pq.read_table(name).to_pandas()
    except Exception as exc:  # pyarrow raises ArrowInvalid, OSError, ... for a bad file
        raise InputValidationError(f"{name}: cannot read as Parquet: {exc}") from exc
    frame = frame.reset_index(drop=True)
    for column in frame.columns:
        if pd.api.types.is_string_dtype(frame[column].dtype):  # text, lists, structs
            frame[column] = pd.Series(
                [None if _is_missing(v) else _plain(v) for v in frame[column].tolist()],
                dtype=object,
                index=frame.index,
            )
    return Table(frame, name, None)


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
    a JSON list) of strings and missing values (None, NaN), as :func:`parse_samples` reads them.
    A missing response or a missing samples cell is a fault; an empty list is not.

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
        sampled_responses: not a JSON list (Expecting value at column 2)
    """
    problems: list[tuple[str, str]] = []
    if _is_missing(response):
        problems.append((response_column, "missing (empty or null)"))
    elif not isinstance(response, str):
        problems.append((response_column, f"a {type(response).__name__}, expected a string"))
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
    a JSON list) of strings and nulls; an empty list is good (it scores NaN). Each row is
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
        in.csv:3: field 'sampled_responses': not a JSON list (Expecting value at column 2)
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

    Accepts a list, tuple or array, or a string holding a JSON list (as CSV cells do).

    Raises:
        ValueError: the cell is missing, not a list, or holds an item that is not a string or
            null; the message says which.

    Example:
        >>> parse_samples('["a", null]')
        ['a', None]
    """
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not a JSON list ({exc.msg} at column {exc.colno})") from None
        if not isinstance(value, list):
            raise ValueError(f"a JSON {_json_type(value)}, expected a list of strings")
    elif _is_missing(value):
        raise ValueError("missing (empty or null); give a list of sampled responses, [] for none")
    elif isinstance(value, np.ndarray):
        value = value.tolist()
    elif not isinstance(value, (list, tuple)):
        raise ValueError(f"a {type(value).__name__}, expected a list of strings")
    out: list[str | None] = []
    for j, item in enumerate(value):
        if _is_missing(item):
            out.append(None)
        elif isinstance(item, str):
            out.append(item)
        else:
            raise ValueError(f"item {j} is a {type(item).__name__}, expected a string or null")
    return out


# -- writing ---------------------------------------------------------------------------------------


def write_table(df: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """Write ``df`` (without its index) in the format that the suffix of ``path`` names.

    JSON Lines keeps lists and numbers as JSON; CSV writes lists and dicts as JSON text and
    missing values as empty cells; Parquet stores lists natively (a column that mixes types
    Parquet cannot hold together is stored as JSON text, with a warning). NaN is written as null.
    The write is atomic: a temporary file in the same directory replaces ``path`` at the end.

    Raises:
        InputValidationError: unknown suffix, or a value that cannot be written.
        ConfigurationError: Parquet was asked for and pyarrow is not installed.
        OSError: the directory is missing or not writable.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "out.jsonl")
        >>> write_table(pd.DataFrame({"x": [1.5, float("nan")], "y": [["a"], None]}), path)
        >>> open(path).read()
        '{"x": 1.5, "y": ["a"]}\\n{"x": null, "y": null}\\n'
    """
    name = os.fspath(path)
    fmt = table_format(name)
    writer = {"jsonl": _write_jsonl, "csv": _write_csv, "parquet": _write_parquet}[fmt]
    if fmt == "parquet":
        _pyarrow_parquet()
    columns = [str(c) for c in df.columns]
    rows = [list(r) for r in df.itertuples(index=False, name=None)]
    _atomic_write(name, lambda tmp: writer(columns, rows, tmp, df))


def _write_jsonl(columns: list[str], rows: list[list[Any]], tmp: str, df: pd.DataFrame) -> None:
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for i, row in enumerate(rows):
            record = {c: _json_value(v, c, i) for c, v in zip(columns, row, strict=True)}
            f.write(json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n")


def _write_csv(columns: list[str], rows: list[list[Any]], tmp: str, df: pd.DataFrame) -> None:
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(columns)
        for i, row in enumerate(rows):
            writer.writerow([_csv_cell(v, c, i) for c, v in zip(columns, row, strict=True)])


def _write_parquet(columns: list[str], rows: list[list[Any]], tmp: str, df: pd.DataFrame) -> None:
    import pyarrow as pa

    pq = _pyarrow_parquet()
    arrays = []
    for j, column in enumerate(columns):
        series = df.iloc[:, j]
        try:
            if series.dtype == object:
                arrays.append(pa.array([_json_value(v, column, i) for i, v in enumerate(series)]))
            else:
                arrays.append(pa.array(series, from_pandas=True))
        except pa.ArrowException as exc:  # invalid, mistyped or unsupported values
            warnings.warn(
                f"column {column!r} mixes types that Parquet cannot hold in one column ({exc}); "
                "it is written as JSON text",
                UserWarning,
                stacklevel=4,
            )
            texts = [
                None
                if _is_missing(v)
                else json.dumps(_json_value(v, column, i), ensure_ascii=False)
                for i, v in enumerate(series)
            ]
            arrays.append(pa.array(texts, type=pa.string()))
    pq.write_table(pa.Table.from_arrays(arrays, names=columns), tmp)


def _atomic_write(name: str, write: Callable[[str], None]) -> None:
    target = Path(name)
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise FileNotFoundError(2, "the directory does not exist", str(directory))
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        mode = target.stat().st_mode & 0o777 if target.exists() else 0o666 & ~_umask()
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    # The only portable way to read the umask is to set it and put it back.
    current = os.umask(0o022)
    os.umask(current)
    return current


# -- values ----------------------------------------------------------------------------------------


def _is_missing(value: Any) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, (float, np.floating)) and math.isnan(value)


def _plain(value: Any) -> Any:
    """Arrays (as Parquet gives list cells) as nested lists; everything else as it is."""
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _json_value(value: Any, column: str, row: int) -> Any:
    """``value`` as plain JSON data: NaN as None, numpy scalars and arrays as Python ones."""
    if _is_missing(value):
        return None
    if isinstance(value, str):
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
        return [_json_value(v, column, row) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(v, column, row) for k, v in value.items()}
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    raise InputValidationError(
        f"column {column!r}, row {row + 1}: cannot write a {type(value).__name__} value"
    )


def _csv_cell(value: Any, column: str, row: int) -> str:
    plain = _json_value(value, column, row)
    if plain is None:
        return ""
    if isinstance(plain, (list, dict)):
        return json.dumps(plain, ensure_ascii=False)
    if isinstance(plain, float):
        return repr(plain)
    return str(plain)


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
