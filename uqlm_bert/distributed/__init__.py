"""Scoring at scale on Ray: the same numbers as one process, from a laptop to a cluster.

Needs the ``ray`` extra: ``pip install 'uqlm-bert[ray]'``.

- :func:`score_dataset` scores a Ray Dataset with ``map_batches`` over a pool of actors that each
  load the model once (on a GPU when the cluster has them, else on CPUs), keeping the input's
  rows, order and columns and adding one column per scorer plus ``score_error``.
- :func:`score_file` does the same for a JSONL, JSON, CSV or Parquet file and writes the scored
  table in the format of the output's suffix. Like ``uqlm-bert score INPUT -o OUTPUT`` with
  either engine, it goes through :func:`uqlm_bert.io.score_table_file`, which reads, checks and
  writes the rows, so both engines write the same file.
- :class:`ScoreBatch` is the per-actor work, usable on its own on a pandas frame.
- :class:`RayScoring` makes ``BlackBoxUQ`` score its main job on a pool of Ray actors
  (``BlackBoxUQ(llm, scoring=RayScoring(num_workers=4))``) while generation stays in the calling
  process.

A row's scores do not depend on which rows share its batch or block, so any partitioning gives
the numbers of single-process scoring; a row that cannot be scored (by the rules of
``uqlm-bert score``) gets NaN and a message in ``score_error`` instead of failing
the run; an actor that dies is restarted by Ray and its batch retried. See
``docs/scaling.md`` for clusters, KubeRay and sizing.

Example:
    >>> from uqlm_bert.distributed import score_file
    >>> frame = score_file("answers.jsonl", "scored.parquet", num_workers=2)  # doctest: +SKIP
    >>> frame["bert_score"].describe()  # doctest: +SKIP
"""

from uqlm_bert.distributed._actor_pool import RayScoring
from uqlm_bert.distributed._batches import ScoreBatch
from uqlm_bert.distributed._dataset import score_dataset
from uqlm_bert.distributed._files import score_file

__all__ = ["RayScoring", "ScoreBatch", "score_dataset", "score_file"]
