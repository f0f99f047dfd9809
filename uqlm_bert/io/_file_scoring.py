"""Scoring a table file: load, check the rows, score the good ones, attach the scores, write.

The one sequence every engine follows, so that the same input gives the same output file, the
same rows refused with the same messages, and the same checks made once: the command's local
engine, its Ray engine and :func:`uqlm_bert.distributed.score_file` all call
:func:`score_table_file`, and differ only in the function that scores the good rows.

Example:
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> src, out = os.path.join(d, "answers.jsonl"), os.path.join(d, "scored.csv")
    >>> _ = open(src, "w").write('{"response": "a", "sampled_responses": ["a", "b"]}\\n'
    ...                          '{"response": null, "sampled_responses": ["c"]}\\n')
    >>> def same_as_first(responses, samples):
    ...     return {"match": [float(s[0] == r) for r, s in zip(responses, samples)]}
    >>> scored = score_table_file(src, out, ["match"], same_as_first)
    >>> scored.frame["match"].tolist(), scored.frame["score_error"].tolist()
    ([1.0, nan], [None, "field 'response': missing (empty or null)"])
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from uqlm_bert._exceptions import UQLMBertError
from uqlm_bert._warn import warn_user
from uqlm_bert.io._reading import load_table
from uqlm_bert.io._rows import (
    ERROR_COLUMN,
    RESPONSE,
    SAMPLES,
    RowProblem,
    scoring_inputs,
    validate_rows,
    with_scores,
)
from uqlm_bert.io._table import Table
from uqlm_bert.io._writing import check_writable, write_table

__all__ = ["RowScorer", "ScoredTable", "score_table_file"]

#: Scores the rows that can be scored: ``(responses, samples) -> {scorer name: one score per
#: row}``, in the rows' order.
RowScorer = Callable[[list[str], list[list[str | None]]], Mapping[str, Sequence[float]]]


@dataclass(frozen=True)
class ScoredTable:
    """A table file scored by :func:`score_table_file`.

    Attributes:
        table: the input as read.
        frame: the output as written: the input's rows and columns, one float64 column per
            scorer and ``score_error``.
        good: a boolean mask over the rows: True where the row was scored.
        problems: one :class:`~uqlm_bert.io._rows.RowProblem` per fault of the rows not scored.
    """

    table: Table
    frame: pd.DataFrame
    good: np.ndarray
    problems: list[RowProblem]


def score_table_file(
    source: str | os.PathLike[str] | Table,
    output: str | os.PathLike[str],
    scorers: Sequence[str],
    score: RowScorer,
    *,
    response_column: str = RESPONSE,
    samples_column: str = SAMPLES,
    on_checked: Callable[[Table, np.ndarray, list[RowProblem]], None] | None = None,
    make_directory: bool = False,
    extra_columns: Sequence[str] = (),
) -> ScoredTable:
    """Score the rows of a table file and write the scored table, atomically.

    The input is read (unless ``source`` is a table already read), refused before any work if a
    value of it cannot be written in the output's format, and every row checked
    (``validate_rows``). ``score`` is called once, with the rows that can be
    scored, and never when there are none; the rows that cannot be scored get NaN and their
    reasons in ``score_error``.

    Args:
        source: the input file, or a table read with :func:`~uqlm_bert.io.load_table`.
        output: the output file; its suffix sets the format.
        scorers: the names of the scorers, one output column each (checked by the caller).
        score: scores the good rows (see :data:`RowScorer`).
        response_column: the column holding the responses.
        samples_column: the column holding the lists of sampled responses.
        on_checked: called with the table, the mask of good rows and the problems once the rows
            are checked, before any scoring (the command reports the problems there).
        make_directory: create the output's directory if it is missing.
        extra_columns: more columns ``score`` gives beside the scores (one value per good row,
            any type: the command's ``words`` or ``refined_response``, say), written after them;
            None in the rows not scored.

    Returns:
        The :class:`ScoredTable`.

    Raises:
        InputValidationError: the input cannot be read, lacks a column, or holds a value the
            output's format cannot hold.
        UQLMBertError: ``score`` gave no score, or the wrong number, for a scorer or an extra
            column.
    """
    table = source if isinstance(source, Table) else load_table(source)
    check_writable(table.frame, output, source=table.path, lines=table.lines)
    columns = {"response_column": response_column, "samples_column": samples_column}
    good, problems = validate_rows(
        table.frame, table.path, lines=table.lines, unreadable=table.unreadable, **columns
    )
    replaced = [c for c in (*scorers, ERROR_COLUMN) if c in table.frame.columns]
    if replaced:
        warn_user(
            f"the input already has column(s) {replaced}; the output replaces them with new scores",
            UserWarning,
        )
    if on_checked is not None:
        on_checked(table, good, problems)
    scores = {name: np.full(len(table.frame), np.nan) for name in scorers}
    extra: dict[str, list] = {name: [None] * len(table.frame) for name in extra_columns}
    if good.any():
        responses, samples = scoring_inputs(table.frame, good, **columns)
        given = score(responses, samples)
        rows = np.flatnonzero(good)
        for name in (*scorers, *extra_columns):
            values = list(given.get(name, ()))
            if len(values) != len(responses):
                what = "score(s)" if name in scores else "value(s)"
                raise UQLMBertError(
                    f"scoring gave {len(values)} {name!r} {what} for {len(responses)} rows; "
                    "the output was not written"
                )
            if name in scores:
                scores[name][good] = np.asarray(values, dtype=np.float64)
            else:
                for row, value in zip(rows, values, strict=True):
                    extra[name][row] = value
    out = with_scores(table.frame, scores, problems)
    for name, values in extra.items():
        out[name] = pd.Series(values, index=out.index, dtype=object)
    if make_directory:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
    write_table(out, output)
    return ScoredTable(table, out, good, problems)
