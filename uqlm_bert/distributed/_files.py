"""Scoring a file on Ray: read it here, score its rows on a pool of actors, write the table.

A file is scored by :func:`uqlm_bert.io.score_table_file`, the sequence the command's local
engine follows too: the input is read and its rows checked on the machine that calls
:func:`score_file`, the rows that can be scored are scored by :func:`ray_rows_scorer` on Ray,
and the output (the input frame, untouched, plus the scorer columns and ``score_error``) is
written atomically in the format the output's suffix names. The rows travel to Ray in blocks,
so a local file works with a remote cluster too; only the row index, the response and the
parsed samples travel. For the same input both engines write the same file.

Rows that cannot be scored are kept, with NaN scores and the reason in ``score_error``: a JSON
Lines line that is not a JSON object (a row whose fields are all missing), a missing or
malformed response, a samples cell that is missing or not a list (in CSV, not a JSON list). A
malformed cell is written as it was read.

Example:
    >>> from uqlm_bert.distributed import score_file
    >>> frame = score_file("answers.jsonl", "scored.parquet", num_workers=2)  # doctest: +SKIP
    >>> frame[["response", "bert_score", "score_error"]].head()  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import math
import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from functools import partial
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd

from uqlm_bert._exceptions import UQLMBertError
from uqlm_bert._inputs import ScoringInputs, present_pairs
from uqlm_bert._warn import warn_user
from uqlm_bert.bertscore._settings import BERTScoreSettings
from uqlm_bert.distributed._dataset import (
    DEFAULT_BATCH_SIZE,
    PoolSettings,
    check_batch_invariance,
    map_scorers,
    require_ray,
)
from uqlm_bert.distributed._session import ray_session
from uqlm_bert.io import _file_scoring as scoring
from uqlm_bert.io._file_scoring import RowScorer
from uqlm_bert.io._rows import ERROR_COLUMN
from uqlm_bert.io._table import Table
from uqlm_bert.scorers._registry import (
    DEFAULT_SCORERS,
    ScorerPlan,
    check_scorer_names,
    scorer_settings,
)

__all__ = ["ray_rows_scorer", "score_file"]

logger = logging.getLogger("uqlm_bert")

#: The hidden column that carries each row's position through Ray.
ROW_COLUMN = "__uqlm_bert_row__"
RESPONSE, SAMPLES = "response", "sampled_responses"


def score_file(
    input_path: str | os.PathLike[str] | Table,
    output_path: str | os.PathLike[str],
    scorers: Sequence[str] = DEFAULT_SCORERS,
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
    """Score the rows of a JSON Lines, JSON, CSV or Parquet file on Ray and write the scored table.

    Args:
        input_path: a ``.jsonl``/``.ndjson``/``.json``, ``.csv`` or ``.parquet``/``.pq`` file
            (in CSV the samples column holds a JSON list per row), or a table already read
            with :func:`uqlm_bert.io.load_table`.
        output_path: where to write the scored rows; its suffix sets the format, as for the
            input. Replaced atomically; a missing directory is created.
        scorers: scorer names, e.g. ``("bert_score",)``.
        scorer_kwargs: the scorers' settings, flat (``model_type``, ``dtype``, ...) or whole
            (``bertscore=BERTScoreSettings(...)``), as :func:`uqlm_bert.scorers.build_scorers`
            takes them. ``idf=True`` (without ``idf_sents``) computes idf once, here, from the
            references of all well-formed rows, as one process scoring the whole file would.
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
        and ``score_error`` (None, or why the row could not be scored), as written.

    Raises:
        InputValidationError: the input is missing, unreadable, of an unknown format, or lacks
            the response or samples column; the output's suffix is unknown.
        ConfigurationError: Ray is missing, a scorer is unknown, a count is invalid.

    Rows that cannot be scored are kept (see ``validate_rows``), and a
    warning says how many there are. When no row can be scored, Ray is not started.

    Example:
        >>> frame = score_file("answers.parquet", "scored.parquet",  # doctest: +SKIP
        ...                    address="auto", num_workers=8, batch_size=256)
    """
    names = check_scorer_names(scorers)
    settings = scorer_settings(names, **dict(scorer_kwargs or {}))
    pool = PoolSettings(num_workers, batch_size, num_gpus_per_worker, num_cpus_per_worker)
    score = ray_rows_scorer(
        names, settings, pool, address=address, show_progress_bars=show_progress_bars
    )
    scored = scoring.score_table_file(
        input_path,
        output_path,
        names,
        score,
        response_column=response_column,
        samples_column=samples_column,
        make_directory=True,
    )
    n, failed = len(scored.frame), int((~scored.good).sum())
    if scored.problems:
        warn_user(
            f"{failed} of {n} rows could not be scored (NaN, with the reason in "
            f"{ERROR_COLUMN!r}); first: {scored.problems[0]}",
            UserWarning,
        )
    logger.info("scored %d rows of %s into %s", n, scored.table.path, os.fspath(output_path))
    return scored.frame


def ray_rows_scorer(
    names: Sequence[str],
    settings: Mapping[str, Any],
    pool: PoolSettings | None = None,
    *,
    address: str | None = None,
    show_progress_bars: bool = True,
) -> RowScorer:
    """What scores a file's good rows on Ray: the ``score`` of :func:`uqlm_bert.io.score_table_file`.

    Everything that can be checked without the rows is checked now, before the file is read:
    that Ray is installed, and that the settings give every row the score it would get in one
    process. Ray is started (or joined, see :func:`score_file`) only when there are rows to
    score.

    Args:
        names: the scorer names, checked.
        settings: their settings objects, as :func:`uqlm_bert.scorers._registry.scorer_settings` builds
            them.
        pool: the actors (default: :class:`PoolSettings`'s defaults).
        address: the Ray cluster, as for :func:`score_file`.
        show_progress_bars: show Ray Data's progress bars.

    Raises:
        ConfigurationError: Ray is missing, or the settings would make a row's score depend on
            its batch.

    Example:
        >>> from uqlm_bert.scorers._registry import scorer_settings
        >>> score = ray_rows_scorer(["bert_score"], scorer_settings(["bert_score"]),
        ...                         PoolSettings(num_workers=1))  # doctest: +SKIP
        >>> score(["Paris."], [["Paris.", "Lyon."]])  # doctest: +SKIP
        {'bert_score': array([0.8...])}
    """
    require_ray()
    check_batch_invariance(settings, idf_from_run=True)
    pool = PoolSettings() if pool is None else pool

    def score(responses: list[str], samples: list[list[str | None]]) -> dict[str, np.ndarray]:
        run_settings = _run_wide_idf(settings, responses, samples)
        with ray_session(address) as ray:
            # the rows are already in memory: no read tasks need a CPU
            plan = pool.plan(ray.cluster_resources(), spare_cpu=False)
            sent = pd.DataFrame(
                {
                    RESPONSE: pd.Series(responses, dtype=object),
                    SAMPLES: pd.Series(samples, dtype=object),
                }
            )
            blocks = _blocks(ray, sent, pool.batch_size, plan.num_workers)
            scorers = ScorerPlan.of_settings(names, run_settings)
            scored = map_scorers(ray, blocks, scorers, plan, pool.batch_size)
            scored = scored.select_columns([ROW_COLUMN, *names])
            scored.context.enable_progress_bars = show_progress_bars
            back = _in_row_order(scored.to_pandas(), len(responses))
        return {name: back[name].to_numpy(dtype=np.float64) for name in names}

    return score


def _run_wide_idf(
    settings: Mapping[str, Any],
    responses: Sequence[str | None],
    samples: Sequence[Sequence[Any]],
) -> Mapping[str, Any]:
    """With BERTScore's ``idf=True`` and no ``idf_sents``: the same settings with ``idf`` fixed
    to the weights over the references of the rows to score (their present samples, as the
    engine takes them in one call), the weights one process scoring every row in one call
    computes, so that every batch on every actor weighs tokens alike. The references are read
    as the scorers read them, up to the engine's token limit for these settings."""
    bert = settings.get(BERTScoreSettings.keyword)
    if bert is None or bert.idf is not True or bert.idf_sents is not None:
        return settings
    from uqlm_bert.bertscore._encoder import tokenize_texts
    from uqlm_bert.bertscore._idf import idf_from_token_ids
    from uqlm_bert.bertscore._loading import load_token_limit

    _, _, refs = present_pairs(ScoringInputs(list(responses), [list(s) for s in samples]))
    # only the tokenizer is needed here, and the most tokens of a reference the scorers read
    tokenizer, limit = load_token_limit(bert)
    weights = idf_from_token_ids(tokenize_texts(tokenizer, refs, limit)[0])
    logger.info("idf weights computed from the %d references of the run", len(refs))
    fixed = defaultdict(partial(float, weights.default), weights.weights)
    return {**settings, BERTScoreSettings.keyword: bert.replace(idf=fixed)}


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
