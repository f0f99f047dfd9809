"""Scoring a file on Ray: read Parquet, JSONL or CSV, score on a pool of actors, write Parquet.

The input is read on the machine that calls :func:`score_file` and its rows are handed to Ray
in blocks, so a local file works with a remote cluster too. Only the row index, the response and
the samples travel; the output is the input frame, untouched, plus the scorer columns and
``score_error``, matched back by row index, and written as one Parquet file, atomically (to a
temporary file beside it, then renamed).

Rows that cannot be scored are kept: a JSONL line that is not a JSON object becomes a row of
nulls, a CSV cell that is not a JSON list becomes a null, and the reason is in ``score_error``.
The returned frame holds malformed values as they were read; in the Parquet file, a malformed
response or samples cell that its column's type cannot hold (a number among texts) is a null.

Example:
    >>> from uqlm_bert.distributed import score_file
    >>> frame = score_file("answers.jsonl", "scored.parquet", num_workers=2)  # doctest: +SKIP
    >>> frame[["response", "bert_score", "score_error"]].head()  # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
import math
import os
import tempfile
import warnings
from collections import defaultdict
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd

from uqlm_bert.bertscore import BERTScorer
from uqlm_bert.bertscore.idf import idf_from_token_ids
from uqlm_bert.distributed.batches import ERROR_COLUMN, check_row
from uqlm_bert.distributed.dataset import (
    DEFAULT_BATCH_SIZE,
    check_batch_size,
    check_scorer_kwargs,
    check_scorer_names,
    plan_workers,
    score_dataset,
)
from uqlm_bert.distributed.session import ray_session
from uqlm_bert.exceptions import InputValidationError, UQLMBertError
from uqlm_bert.scorers.bert import ENGINE_ARGS

__all__ = ["read_rows", "score_file", "write_parquet_atomic"]

logger = logging.getLogger("uqlm_bert")

#: The hidden column that carries each row's position through Ray.
ROW_COLUMN = "__uqlm_bert_row__"

_FORMATS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
}


def score_file(
    input_path: str | os.PathLike[str],
    output_path: str | os.PathLike[str],
    scorers: Sequence[str] = ("bert_score",),
    scorer_kwargs: Mapping[str, Any] | None = None,
    address: str | None = None,
    num_workers: int | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    show_progress_bars: bool = True,
    *,
    num_gpus_per_worker: float | None = None,
    num_cpus_per_worker: float | None = None,
    response_column: str = "response",
    samples_column: str = "sampled_responses",
) -> pd.DataFrame:
    """Score the rows of a Parquet, JSONL or CSV file on Ray and write them to Parquet.

    Args:
        input_path: a ``.parquet``/``.pq``, ``.jsonl``/``.ndjson`` or ``.csv`` file (in CSV the
            samples column holds a JSON list per row).
        output_path: where to write the scored rows as Parquet (replaced atomically).
        scorers: scorer names, e.g. ``("bert_score",)``.
        scorer_kwargs: keyword arguments for the scorers (``model_type``, ``dtype``, ...).
            ``idf=True`` (without ``idf_sents``) computes idf once, here, from the references
            of all well-formed rows, as one process scoring the whole file would.
        address: the Ray cluster: ``"auto"``, ``"ray://host:10001"``, ``"host:6379"``. None:
            the one ``RAY_ADDRESS`` names, else a new local Ray on this machine, shut down at
            the end. When Ray is already initialized in this process, that session is used.
        num_workers: actors in the pool; None: one per GPU, else one per CPU.
        batch_size: rows per batch given to an actor.
        show_progress_bars: show Ray Data's progress bars.
        num_gpus_per_worker: GPUs per actor; None: 1 on a cluster with GPUs, else 0.
        num_cpus_per_worker: CPUs per actor, also its torch thread count; None: 1.
        response_column: the column holding the responses.
        samples_column: the column holding the lists of sampled responses.

    Returns:
        The output frame: the input's rows and columns in order, one float64 column per scorer,
        and ``score_error`` (None, or why the row could not be scored).

    Raises:
        InputValidationError: the input is missing, unreadable, of an unknown format, or lacks
            the response or samples column.
        ConfigurationError: Ray is missing, a scorer is unknown, a count is invalid.

    Example:
        >>> frame = score_file("answers.parquet", "scored.parquet",  # doctest: +SKIP
        ...                    address="auto", num_workers=8, batch_size=256)
    """
    names = check_scorer_names(scorers)
    check_batch_size(batch_size)
    frame, read_errors = read_rows(input_path, samples_column=samples_column)
    absent = [c for c in (response_column, samples_column) if c not in frame.columns]
    if absent:
        raise InputValidationError(
            f"{os.fspath(input_path)} has no column {absent[0]!r} (columns: "
            f"{list(frame.columns)}); name the right ones with response_column= and samples_column="
        )
    scorer_kwargs = _run_wide_idf(
        check_scorer_kwargs(scorer_kwargs, idf_from_run=True),
        frame[response_column],
        frame[samples_column],
    )
    replaced = [c for c in (*names, ERROR_COLUMN) if c in frame.columns]
    if replaced:
        warnings.warn(
            f"the input already has column(s) {replaced}; the output replaces them with new scores",
            UserWarning,
            stacklevel=2,
        )
    n = len(frame)
    if n == 0:
        scores = pd.DataFrame({**{name: np.zeros(0) for name in names}, ERROR_COLUMN: []})
    else:
        with ray_session(address) as ray:
            plan = plan_workers(
                ray.cluster_resources(),
                num_workers,
                num_gpus_per_worker,
                num_cpus_per_worker,
                spare_cpu=False,  # the rows are already in memory: no read tasks need a CPU
            )
            rows = _blocks(
                ray, frame[[response_column, samples_column]], batch_size, plan.num_workers
            )
            scored = score_dataset(
                rows,
                names,
                scorer_kwargs,
                plan.num_workers,
                batch_size,
                num_gpus_per_worker,
                num_cpus_per_worker=num_cpus_per_worker,
                response_column=response_column,
                samples_column=samples_column,
            ).select_columns([ROW_COLUMN, *names, ERROR_COLUMN])
            scored.context.enable_progress_bars = show_progress_bars
            scores = _in_row_order(scored.to_pandas(), n)
    out = frame.copy()
    for name in names:
        out[name] = scores[name].to_numpy(dtype=np.float64)
    errors = [read_errors.get(i, e) for i, e in enumerate(scores[ERROR_COLUMN])]
    out[ERROR_COLUMN] = pd.Series(
        [e if isinstance(e, str) else None for e in errors], index=out.index, dtype=object
    )
    failed = [(i, e) for i, e in enumerate(out[ERROR_COLUMN]) if e is not None]
    if failed:
        warnings.warn(
            f"{len(failed)} of {n} rows could not be scored (NaN, with the reason in "
            f"{ERROR_COLUMN!r}); first: row {failed[0][0]}: {failed[0][1]}",
            UserWarning,
            stacklevel=2,
        )
    bad = {i for i, e in enumerate(scores[ERROR_COLUMN]) if isinstance(e, str)}
    write_parquet_atomic(_storable(out, (response_column, samples_column), bad), output_path)
    logger.info("scored %d rows of %s into %s", n, os.fspath(input_path), os.fspath(output_path))
    return out


def _run_wide_idf(
    kwargs: dict[str, Any], responses: Sequence[Any], samples: Sequence[Any]
) -> dict[str, Any]:
    """With ``idf=True`` and no ``idf_sents``: the same kwargs with ``idf`` fixed to the weights
    over the references of all well-formed rows, the weights one process scoring every row in
    one call computes, so that every batch on every actor weighs tokens alike."""
    if kwargs.get("idf") is not True or kwargs.get("idf_sents") is not None:
        return kwargs
    refs: list[str] = []
    for response, row_samples in zip(responses, samples, strict=True):
        response, row_samples, error = check_row(response, row_samples)
        if error is None and response is not None:
            refs.extend(s for s in row_samples if s is not None)
    engine_kwargs = {k: v for k, v in kwargs.items() if k in ENGINE_ARGS and v is not None}
    engine_kwargs.update(idf=False, device="cpu")  # here only the tokenizer is needed
    engine_kwargs.pop("idf_sents", None)
    engine_kwargs.pop("rescale_with_baseline", None)
    encoder = BERTScorer(show_progress_bars=False, **engine_kwargs).encoder
    weights = idf_from_token_ids(encoder.tokenize(refs))
    logger.info("idf weights computed from the %d references of the run", len(refs))
    return {**kwargs, "idf": defaultdict(partial(float, weights.default), weights.weights)}


def read_rows(
    path: str | os.PathLike[str], samples_column: str = "sampled_responses"
) -> tuple[pd.DataFrame, dict[int, str]]:
    """Read a Parquet, JSONL or CSV file into a frame, keeping rows that cannot be parsed.

    Returns:
        ``(frame, errors)``: one row per input row (JSONL: per non-blank line), and
        ``{row: message}`` for rows whose line or samples cell could not be parsed.

    Raises:
        InputValidationError: the file is missing, its suffix is unknown, or it is unreadable.

    Example:
        >>> frame, errors = read_rows("answers.jsonl")  # doctest: +SKIP
    """
    path = Path(path)
    kind = _FORMATS.get(path.suffix.lower())
    if kind is None:
        raise InputValidationError(
            f"cannot tell the format of {path}: use one of {', '.join(sorted(_FORMATS))}"
        )
    if not path.is_file():
        raise InputValidationError(f"input file {path} does not exist")
    try:
        if kind == "parquet":
            return pd.read_parquet(path), {}
        if kind == "jsonl":
            return _read_jsonl(path)
        return _read_csv(path, samples_column)
    except (OSError, ValueError) as exc:
        if isinstance(exc, UQLMBertError):
            raise
        raise InputValidationError(f"cannot read {path} as {kind}: {exc}") from exc


def _read_jsonl(path: Path) -> tuple[pd.DataFrame, dict[int, str]]:
    records: list[dict[str, Any]] = []
    errors: dict[int, str] = {}
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                record, why = {}, f"line {lineno} is not valid JSON: {exc.msg} (column {exc.colno})"
            else:
                why = (
                    None
                    if isinstance(record, dict)
                    else (f"line {lineno} is a JSON {type(record).__name__}, expected an object")
                )
            if why is not None:
                errors[len(records)] = why
                record = {}
            records.append(record)
    return (pd.DataFrame.from_records(records) if records else pd.DataFrame()), errors


def _read_csv(path: Path, samples_column: str) -> tuple[pd.DataFrame, dict[int, str]]:
    # Only empty cells are missing: a response reading "NA" or "null" is text.
    frame = pd.read_csv(path, keep_default_na=False, na_values=[""])
    errors: dict[int, str] = {}
    if samples_column in frame.columns:
        cells = []
        for i, cell in enumerate(frame[samples_column]):
            if not isinstance(cell, str):
                cells.append(None)
                continue
            try:
                value = json.loads(cell)
            except json.JSONDecodeError as exc:
                value, errors[i] = None, f"{samples_column} is not a JSON list: {exc.msg}"
            if value is not None and not isinstance(value, list):
                value, errors[i] = (
                    None,
                    f"{samples_column} is a JSON {type(value).__name__}, expected a list",
                )
            cells.append(value)
        frame[samples_column] = pd.Series(cells, index=frame.index, dtype=object)
    return frame, errors


def write_parquet_atomic(frame: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """Write ``frame`` as one Parquet file at ``path``, via a temporary file and a rename.

    A reader of ``path`` sees the old file or the new one, never half of one. A column whose
    values mix types Parquet cannot hold together (a number among strings, say) is written with
    its non-string values as JSON text, with a warning.

    Example:
        >>> import pandas as pd
        >>> write_parquet_atomic(pd.DataFrame({"a": [1]}), "out.parquet")  # doctest: +SKIP
    """
    import pyarrow.parquet as pq

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    table = _arrow_table(frame)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _storable(frame: pd.DataFrame, columns: Sequence[str], bad_rows: set[int]) -> pd.DataFrame:
    """``frame``, or a copy whose malformed cells are nulls in the columns Parquet cannot
    otherwise hold (a number among responses, a string among lists of samples); the reason,
    with the value, is in ``score_error``."""
    import pyarrow as pa

    fixed = frame
    for column in columns:
        try:
            pa.array(frame[column], from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            fixed = fixed.copy() if fixed is frame else fixed
            fixed[column] = pd.Series(
                [None if i in bad_rows else v for i, v in enumerate(frame[column])],
                index=frame.index,
                dtype=object,
            )
    return fixed


def _arrow_table(frame: pd.DataFrame) -> Any:
    import pyarrow as pa

    bad = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError)
    try:
        return pa.Table.from_pandas(frame, preserve_index=False)
    except bad:
        pass
    fixed = frame.copy()
    mixed = []
    for column in frame.columns:
        try:
            pa.array(frame[column], from_pandas=True)
        except bad:
            fixed[column] = [_as_text(v) for v in frame[column]]
            mixed.append(column)
    warnings.warn(
        f"column(s) {mixed} mix value types that one Parquet column cannot hold; their "
        "non-string values are written as JSON text",
        UserWarning,
        stacklevel=3,
    )
    return pa.Table.from_pandas(fixed, preserve_index=False)


def _as_text(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, default=lambda v: v.tolist() if hasattr(v, "tolist") else str(v))


def _blocks(ray: ModuleType, rows: pd.DataFrame, batch_size: int, num_workers: int) -> Any:
    """The rows, with their index, as a Ray dataset of in-order blocks: several per actor."""
    rows = rows.copy()
    rows.insert(0, ROW_COLUMN, np.arange(len(rows), dtype=np.int64))
    per_block = max(batch_size, min(math.ceil(len(rows) / (4 * num_workers)), 16 * batch_size))
    chunks = [rows.iloc[i : i + per_block] for i in range(0, len(rows), per_block)]
    return ray.data.from_pandas(chunks)


def _in_row_order(scores: pd.DataFrame, n: int) -> pd.DataFrame:
    """The scores sorted by row index, after checking every row came back exactly once."""
    index = scores[ROW_COLUMN].to_numpy()
    if len(index) != n or not np.array_equal(np.sort(index), np.arange(n)):
        raise UQLMBertError(
            f"Ray returned {len(index)} rows for {n} input rows "
            f"({len(np.unique(index))} distinct); the output was not written"
        )
    return scores.sort_values(ROW_COLUMN, kind="stable").reset_index(drop=True)
