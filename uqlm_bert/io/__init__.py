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

A scored table is the input's rows and columns plus one float64 column per scorer and
:data:`ERROR_COLUMN`; :func:`with_scores` builds it, for every engine alike. :func:`check_row`
checks one row by the rules of :func:`validate_rows` where there is no file (a batch of a Ray
Dataset, say), so that every engine fails the same rows with the same messages.
:func:`load_texts` reads the texts of one column (or of a ``.txt`` file, one per line) for
reference-based evaluation.

The package's modules, one job each: :mod:`~uqlm_bert.io._formats` (which format a suffix names),
:mod:`~uqlm_bert.io._table` (a table as read), :mod:`~uqlm_bert.io._reading` (the readers' entry
points) over :mod:`~uqlm_bert.io._json`, :mod:`~uqlm_bert.io._csv` and
:mod:`~uqlm_bert.io._parquet`, :mod:`~uqlm_bert.io._samples` (a samples cell as a list),
:mod:`~uqlm_bert.io._rows` (row checks and the scored table), :mod:`~uqlm_bert.io._writing`,
:mod:`~uqlm_bert.io._paths` (where a table can be written, atomically) and
:mod:`~uqlm_bert.io._file_scoring` (:func:`score_table_file`: load, check, score, attach, write, the
one sequence of every engine).

Example:
    >>> import os, tempfile
    >>> import pandas as pd
    >>> path = os.path.join(tempfile.mkdtemp(), "answers.csv")
    >>> write_table(pd.DataFrame({"response": ["Paris"],
    ...                           "sampled_responses": [["Paris", None]]}), path)
    >>> table = load_table(path)
    >>> good, problems = validate_rows(table.frame, path, lines=table.lines)
    >>> good.tolist(), problems
    ([True], [])
    >>> scoring_inputs(table.frame, good)
    (['Paris'], [['Paris', None]])
"""

from __future__ import annotations

from uqlm_bert.io._file_scoring import RowScorer, ScoredTable, score_table_file
from uqlm_bert.io._formats import FORMATS, MAX_NESTING, TEXT_SUFFIXES, table_format
from uqlm_bert.io._paths import check_output_location, same_file
from uqlm_bert.io._reading import Texts, load_prompts, load_table, load_texts, read_table
from uqlm_bert.io._rows import (
    ERROR_COLUMN,
    RowCheck,
    RowProblem,
    check_row,
    scoring_inputs,
    validate_rows,
    with_scores,
)
from uqlm_bert.io._samples import parse_samples
from uqlm_bert.io._table import Table
from uqlm_bert.io._writing import check_writable, write_table

__all__ = [
    "ERROR_COLUMN",
    "FORMATS",
    "MAX_NESTING",
    "TEXT_SUFFIXES",
    "RowCheck",
    "RowProblem",
    "RowScorer",
    "ScoredTable",
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
    "score_table_file",
    "parse_samples",
    "write_table",
    "check_writable",
    "check_output_location",
    "same_file",
]
