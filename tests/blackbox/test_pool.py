"""The scoring queue with its batches scored elsewhere (``blackbox._pool.PoolBatches``), on a pool
that stands in for Ray's here: several batches in flight at once, each formed when a place for
it frees up, the rest cut evenly once nothing more is coming, every call getting its own rows
back, and a failure reaching only the call whose rows raised it.

The pool scores with the scorers' own ``score_rows``, as the actors do; it holds each batch
until the test lets it go, so what is in flight is seen, not timed.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass

import pytest

from tests.helpers.waiting import GUARD_S, settle, until
from uqlm_bert._blackbox._pipeline import ScoringPipeline, score_rows
from uqlm_bert._blackbox._pool import PoolBatches
from uqlm_bert._blackbox._queue import ScoringQueue
from uqlm_bert.generation._records import GenerationResult
from uqlm_bert.scorers._base import Scorer


class Numbered(Scorer):
    """Scores each response by its number; raises on a batch that holds a poisoned one."""

    name = "numbered"

    def score(self, responses, sampled_responses, show_progress_bars=False):
        if "poison" in responses:
            raise ValueError("a poisoned answer")
        return [float(r) for r in responses]


@dataclass
class _Settings:
    batch_size: int


class HeldPool:
    """A pool of ``places`` places that scores with the scorers given by name, each batch held
    until :meth:`release`."""

    def __init__(self, scorers: list[Scorer], places: int, batch_size: int = 64) -> None:
        self.settings = _Settings(batch_size)
        self.scorers = {s.name: s for s in scorers}
        self.places = places
        self.in_flight = 0
        self.peak = 0
        self.sizes: list[int] = []
        self.gate = asyncio.Event()

    def start(self) -> int:
        return self.places

    async def run(self, names, inputs, *args):
        """As the actors do: ``score_rows`` with the scorers named, on what the batch sends."""
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        self.sizes.append(len(inputs))
        try:
            await self.gate.wait()
            return score_rows([self.scorers[n] for n in names], inputs, *args)
        finally:
            self.in_flight -= 1

    def release(self) -> None:
        self.gate.set()

    def close(self) -> None:
        pass


def call(pool: HeldPool, queue: ScoringQueue, scorer: Scorer, n: int) -> ScoringPipeline:
    p = ScoringPipeline([scorer], n, queue.max_batch, show=False, queue=queue)
    p.start()
    return p


async def finish(p: ScoringPipeline, n: int):
    return await asyncio.wait_for(p.finish(GenerationResult.empty(["q"] * n, 1)), GUARD_S)


async def test_batches_go_out_as_places_free_up_several_at_once_and_end_evenly():
    scorer = Numbered()
    pool = HeldPool([scorer], places=4)
    queue = ScoringQueue(max_batch=256, place=PoolBatches(pool))
    queue.GATHER_S = 0.0
    p = call(pool, queue, scorer, 40)
    for i in range(8):  # generation goes on: batches go out as places are free
        p.submit(i, str(i), [str(i)])
        await until(lambda i=i: len(pool.sizes) == i + 1 or pool.in_flight == 4)
    assert pool.in_flight == 4 and pool.peak == 4  # every place taken, no more
    for i in range(8, 40):  # queued while every place is taken
        p.submit(i, str(i), [str(i)])
    result = asyncio.ensure_future(finish(p, 40))
    await settle()
    assert pool.in_flight == 4 and sum(pool.sizes) < 40  # the rest waits for a place
    pool.release()
    scored = await result
    assert scored.scores["numbered"].tolist() == [float(i) for i in range(40)]
    assert sum(pool.sizes) == 40 and pool.peak == 4
    # once nothing more was coming, what was left went out in parts of at most a quarter
    tail = pool.sizes[4:]
    assert tail and max(tail) <= math.ceil((40 - sum(pool.sizes[:4])) / 4)
    assert queue.batch_sizes and sum(queue.batch_sizes) == 40


async def test_a_failure_in_a_shared_batch_reaches_only_the_call_whose_rows_raised_it():
    scorer = Numbered()
    pool = HeldPool([scorer], places=1)
    queue = ScoringQueue(max_batch=256, place=PoolBatches(pool))
    good, bad = call(pool, queue, scorer, 3), call(pool, queue, scorer, 1)
    for i in range(3):
        good.submit(i, str(i), [str(i)])
    bad.submit(0, "poison", ["poison"])
    pool.release()
    outcome = await asyncio.gather(finish(good, 3), finish(bad, 1), return_exceptions=True)
    assert outcome[0].scores["numbered"].tolist() == [0.0, 1.0, 2.0]
    assert isinstance(outcome[1], ValueError)
    assert pool.sizes[0] == 4  # the two calls shared a batch, then were scored apart
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_a_place_that_cannot_start_fails_every_call_waiting_on_it():
    class Unreachable(HeldPool):
        def start(self) -> int:
            raise ConnectionError("no Ray cluster at that address")

    scorer = Numbered()
    pool = Unreachable([scorer], places=2)
    queue = ScoringQueue(max_batch=256, place=PoolBatches(pool))
    p = call(pool, queue, scorer, 2)
    p.submit(0, "0", ["0"])
    with pytest.raises(ConnectionError, match="no Ray cluster"):
        await finish(p, 2)


async def test_a_cancelled_call_leaves_no_batch_task_behind():
    scorer = Numbered()
    pool = HeldPool([scorer], places=2)
    queue = ScoringQueue(max_batch=1, place=PoolBatches(pool))
    p = call(pool, queue, scorer, 5)
    for i in range(5):
        p.submit(i, str(i), [str(i)])
    await until(lambda: pool.in_flight == 2)
    await p.abort()
    assert pool.in_flight == 0
    assert asyncio.all_tasks() == {asyncio.current_task()}
