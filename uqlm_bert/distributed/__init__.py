"""Scoring at scale on Ray: the same numbers as one process, from a laptop to a cluster.

Needs the ``ray`` extra: ``pip install 'uqlm-bert[ray]'``.

- :func:`score_dataset` scores a Ray Dataset with ``map_batches`` over a pool of actors that each
  load the model once (on a GPU when the cluster has them, else on CPUs), keeping the input's
  rows, order and columns and adding one column per scorer plus ``score_error``.
- :func:`score_file` does the same for a Parquet, JSONL or CSV file and writes Parquet; it is
  what ``uqlm-bert score INPUT -o OUTPUT --engine ray`` runs.
- :class:`ScoreBatch` is the per-actor work, usable on its own on a pandas frame.

A row's scores do not depend on which rows share its batch or block, so any partitioning gives
the numbers of single-process scoring; a malformed row gets NaN and a message in
``score_error`` instead of failing the run; an actor that dies is restarted by Ray and its batch
retried. See ``docs/scaling.md`` for clusters, KubeRay and sizing.

Example:
    >>> from uqlm_bert.distributed import score_file
    >>> frame = score_file("answers.jsonl", "scored.parquet", num_workers=2)  # doctest: +SKIP
    >>> frame["bert_score"].describe()  # doctest: +SKIP
"""

from uqlm_bert.distributed.batches import ERROR_COLUMN, ScoreBatch, check_row
from uqlm_bert.distributed.dataset import (
    DEFAULT_BATCH_SIZE,
    WorkerPlan,
    plan_workers,
    score_dataset,
)
from uqlm_bert.distributed.files import read_rows, score_file, write_parquet_atomic
from uqlm_bert.distributed.session import ray_session, start_local_ray

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "ERROR_COLUMN",
    "ScoreBatch",
    "WorkerPlan",
    "check_row",
    "plan_workers",
    "ray_session",
    "read_rows",
    "score_dataset",
    "score_file",
    "start_local_ray",
    "write_parquet_atomic",
]
