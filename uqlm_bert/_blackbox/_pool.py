"""``BlackBoxUQ``'s batches scored on a pool of Ray actors (``scoring="ray"``).

:func:`scoring_place` turns ``BlackBoxUQ``'s ``scoring`` argument into where its scoring queues
score their batches: None for this process (each queue's worker thread), or a
:class:`PoolBatches` over a :class:`~uqlm_bert.distributed._actor_pool.ScorerPool` whose actors build the
object's scorers from its :class:`~uqlm_bert.scorers._registry.ScorerPlan` and run :func:`~uqlm_bert._blackbox._pipeline.score_rows`,
the scoring step of one process. The queue forms the batches (when to send one, how large) and
sends as many at once as the pool takes; :class:`PoolBatches` sends a batch's texts and prompts,
with the names of the scorers to run, and hands each call its rows' share of the result. As in
one process, a failure in a batch shared by several calls scores each call's rows again on their
own, so that it reaches only the call whose rows raised it. Ray is imported, and started, only
with ``scoring="ray"``.

Example:
    >>> from uqlm_bert.scorers._registry import ScorerPlan
    >>> scoring_place("local", ScorerPlan.of()) is None
    True
    >>> place = scoring_place("ray", ScorerPlan.of())  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from uqlm_bert._blackbox._pipeline import Scored, score_rows
from uqlm_bert._blackbox._queue import Outcome, QueuedCall, Row, by_call, shares

if TYPE_CHECKING:
    from uqlm_bert.distributed._actor_pool import ScorerPool
    from uqlm_bert.scorers._registry import ScorerPlan

__all__ = ["PoolBatches", "scoring_place"]


def scoring_place(where: Any, plan: ScorerPlan) -> PoolBatches | None:
    """Where ``BlackBoxUQ`` scores (``ScoringSettings.where``): None for ``"local"``, else a
    pool of Ray actors (not started yet) that each build the scorers of ``plan``.

    Raises:
        ConfigurationError: ``where`` is none of ``"local"``, ``"ray"`` and a
            :class:`~uqlm_bert.distributed.RayScoring`; Ray is not installed.
    """
    if isinstance(where, str) and where == "local":
        return None
    from uqlm_bert.distributed._actor_pool import RayScoring, ScorerPool
    from uqlm_bert.distributed._dataset import require_ray

    ray_scoring = RayScoring.of(where)
    if ray_scoring is None:
        return None
    require_ray()
    return PoolBatches(ScorerPool(ray_scoring, plan, score_rows))


class PoolBatches:
    """A queue's batches scored on ``pool`` (see the module's doc).

    Attributes:
        pool: the actors.
        max_batch: at most this many prompts per batch (the pool's ``batch_size``).
    """

    def __init__(self, pool: ScorerPool) -> None:
        self.pool = pool
        self.max_batch = pool.settings.batch_size

    async def start(self) -> int:
        """Start the pool (Ray, and the actors) if not started; the batches it takes at once."""
        return await asyncio.to_thread(self.pool.start)

    async def score(self, batch: list[Row]) -> Outcome:
        """Score ``batch`` on the pool; each call's share, or the exception its rows raised."""
        calls = by_call(batch)
        try:
            scored = await self._run(
                batch[0].call, [row for rows in calls.values() for row in rows]
            )
        except Exception as exc:  # noqa: BLE001 - handed to the call(s) it belongs to
            if len(calls) == 1:
                return [(call, rows, exc) for call, rows in calls.items()]
            alone = await asyncio.gather(
                *(self._run(call, rows) for call, rows in calls.items()), return_exceptions=True
            )
            return [
                (call, rows, result)
                for (call, rows), result in zip(calls.items(), alone, strict=True)
            ]
        return shares(calls, scored)

    def close(self) -> None:
        """Stop the actors, and the Ray session if the pool opened it."""
        self.pool.close()

    async def _run(self, call: QueuedCall, rows: list[Row]) -> Scored:
        """``rows`` (of ``call``'s recipe) scored by the actors' copies of its scorers."""
        names = [scorer.name for scorer in call.overlapped]
        return await self.pool.run(
            names, call.inputs(rows), call.use_best, False, call.with_supports
        )
