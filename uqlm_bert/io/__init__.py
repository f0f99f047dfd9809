"""Reading and writing tables of answers: JSON Lines, JSON, CSV and Parquet, chosen by file suffix.

A table holds one row per prompt. For scoring it needs a ``response`` column (a string) and a
``sampled_responses`` column (a list of strings, ``null`` for a missing sample); any other
columns (``prompt``, ids, labels) are carried along untouched.

Formats by suffix:

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
object, a record nested too deep, a CSV record with too many fields) becomes a row with every
field missing, and the table says why (``load_table(path).unreadable``), so that the output
stays aligned with the input. Text is decoded as UTF-8 (a leading BOM is skipped); a byte that
is not UTF-8 is reported with its line and its offset in the file. Scoring checks every row and
names the file, line and field of each problem.

Writing is atomic: the table goes to a temporary file in the target's directory, which then
replaces the target, so a failed or interrupted write never leaves a half-written file. JSON and
CSV have no type for some values, which are written as text: dates, times and timestamps in ISO
8601 (``2024-01-31``, ``12:30:00``, ``2024-01-31T12:30:00+00:00``), durations in ISO 8601
(``P0DT0H1M30S``), decimals as their exact digits (``"12.50"``, a JSON string), bytes in base64
(RFC 4648, with padding). A value that cannot be written, and a place that cannot be written
to, are found before any work is done.

A scored table is the input's rows and columns plus one float64 column per scorer and
``score_error`` (why a row was not scored). :func:`score_table_file` is the one sequence of every
engine that scores a file: load, check every row, score the good ones, attach the scores,
write; the command, its Ray engine and :func:`uqlm_bert.distributed.score_file` call it, and
differ only in the function that scores the rows.

Example:
    >>> import os, tempfile
    >>> import pandas as pd
    >>> path = os.path.join(tempfile.mkdtemp(), "answers.csv")
    >>> write_table(pd.DataFrame({"response": ["Paris"],
    ...                           "sampled_responses": [["Paris", None]]}), path)
    >>> load_table(path).frame["response"].tolist()
    ['Paris']
    >>> def same_as_first(responses, samples):
    ...     return {"match": [float(s[0] == r) for r, s in zip(responses, samples)]}
    >>> scored = score_table_file(path, path + ".jsonl", ["match"], same_as_first)
    >>> scored.frame["match"].tolist(), scored.frame["score_error"].tolist()
    ([1.0], [None])
"""

from __future__ import annotations

from uqlm_bert.io._file_scoring import score_table_file
from uqlm_bert.io._reading import load_table
from uqlm_bert.io._writing import write_table

__all__ = ["load_table", "score_table_file", "write_table"]
