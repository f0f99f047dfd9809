"""Checking rows for scoring, and building the scored table: the rules every engine applies.

A row can be scored when its ``response`` is a string and its ``sampled_responses`` a list (or,
in a text cell, a JSON or Python list) of strings and missing values; an empty list can be
scored (it scores NaN). :func:`check_row` checks one row, :func:`validate_rows` a table read from
a file, naming file, line and field of each problem; :func:`with_scores` builds the scored table:
the input's rows and columns plus one float64 column per scorer and :data:`ERROR_COLUMN`.

Example:
    >>> import pandas as pd
    >>> df = pd.DataFrame({"response": ["a", None], "sampled_responses": [["a"], ["b"]]})
    >>> good, problems = validate_rows(df, "t.jsonl", lines=[1, 2])
    >>> scoring_inputs(df, good)
    (['a'], [['a']])
    >>> with_scores(df, {"bert_score": [1.0, float("nan")]}, problems)["score_error"].tolist()
    [None, "field 'response': missing (empty or null)"]
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from uqlm_bert._exceptions import InputValidationError
from uqlm_bert._inputs import text_problem
from uqlm_bert.io._samples import parse_samples

__all__ = [
    "ERROR_COLUMN",
    "RESPONSE",
    "SAMPLES",
    "RowCheck",
    "RowProblem",
    "check_row",
    "scoring_inputs",
    "validate_rows",
    "with_scores",
]

#: The column of the responses, unless told.
RESPONSE = "response"
#: The column of the lists of sampled responses, unless told.
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
    :mod:`uqlm_bert._inputs`).

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
    if (reason := text_problem(response)) is not None:
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


def _reason(field: str | None, message: str) -> str:
    return f"field {field!r}: {message}" if field else message


def _joined(reasons: Iterable[str]) -> str | None:
    return "; ".join(reasons) or None
