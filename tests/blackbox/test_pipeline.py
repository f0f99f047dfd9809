"""The scoring pipeline (uqlm_bert._blackbox._pipeline): which prompts are scored together, and when.

The pipeline is driven by hand here, as the generator drives it: ``submit`` for each finished
prompt, ``finish`` when generation is over. Nothing is timed: the gathering window is made so
long that a test would hang (and fail on its guard) if it were waited for, or zero.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time

import numpy as np
import torch

from tests.helpers.waiting import GUARD_S, settle, until
from uqlm_bert._blackbox._pipeline import ScoringPipeline
from uqlm_bert.generation._records import GenerationResult
from uqlm_bert.scorers._base import Scorer

FOREVER = 1e6


class Recording(Scorer):
    """Scores each response by its number, and records each call's batch and torch threads."""

    name = "recording"

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.threads: list[int] = []

    def score(self, responses, sampled_responses, show_progress_bars=False):
        self.batches.append(list(responses))
        self.threads.append(torch.get_num_threads())
        return [float(r) for r in responses]


def pipeline(
    scorer: Scorer,
    n: int,
    *,
    max_batch: int = 256,
    gather_s: float = FOREVER,
    min_batch: int | None = None,
) -> ScoringPipeline:
    p = ScoringPipeline([scorer], n, max_batch, show=False)
    p.queue.GATHER_S = gather_s
    if min_batch is not None:
        p.queue.min_batch = min_batch
    p.start()
    return p


def submit(p: ScoringPipeline, indices) -> None:
    for i in indices:
        p.submit(i, str(i), [str(i)])


async def finish(p: ScoringPipeline, n: int) -> dict[str, np.ndarray]:
    scored = await asyncio.wait_for(p.finish(GenerationResult.empty(list(range(n)), 1)), GUARD_S)
    return scored.scores


async def test_when_every_prompt_has_queued_they_are_scored_at_once_in_one_batch():
    scorer = Recording()
    p = pipeline(scorer, 5)
    submit(p, [3, 0, 4, 1, 2])
    await until(lambda: p.batch_sizes)  # no gathering wait: nothing more can come
    scores = await finish(p, 5)
    assert p.batch_sizes == [5] and scorer.batches == [["3", "0", "4", "1", "2"]]
    assert scores["recording"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]  # each in its own row


async def test_a_small_batch_waits_for_more_prompts_while_more_are_coming():
    scorer = Recording()
    p = pipeline(scorer, 10, min_batch=4)
    submit(p, [0, 1])
    await settle()
    assert p.batch_sizes == []  # 2 of 10 finished: wait for more (up to GATHER_S)
    submit(p, [2, 3])
    await until(lambda: p.batch_sizes)  # MIN_BATCH reached: scored without waiting
    assert p.batch_sizes == [4]
    submit(p, [4])
    await settle()
    assert p.batch_sizes == [4]
    await finish(p, 10)  # generation over: what queued is scored, nothing more is waited for
    assert p.batch_sizes == [4, 1]


async def test_a_small_batch_is_scored_when_the_gathering_window_closes():
    scorer = Recording()
    p = pipeline(scorer, 10, gather_s=0.0)
    submit(p, [7])
    await until(lambda: p.batch_sizes)
    await finish(p, 10)
    assert p.batch_sizes == [1] and scorer.batches == [["7"]]


async def test_prompts_that_queued_during_a_batch_are_scored_next_up_to_max_batch():
    scorer = Recording()
    p = pipeline(scorer, 10, max_batch=4)
    submit(p, range(10))
    scores = await finish(p, 10)
    assert p.batch_sizes == [4, 4, 2]
    assert scores["recording"].tolist() == [float(i) for i in range(10)]


async def test_batches_score_with_the_thread_count_of_the_thread_that_started_the_pipeline():
    # torch gives a thread that starts using it the count the last set_num_threads anywhere
    # set: an executor thread made while other code held one thread must not score a whole
    # batch on one core
    main_threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        await asyncio.to_thread(torch.set_num_threads, 1)  # an executor thread now holds one
        seen = []
        fresh = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
        fresh.start()
        fresh.join()
        assert seen == [1]  # the premise: a new thread starts from the latest setting
        scorer = Recording()
        p = pipeline(scorer, 3, min_batch=2)
        submit(p, [0, 1])  # scored while the third prompt is still being generated
        await until(lambda: p.batch_sizes)
        submit(p, [2])
        await finish(p, 3)
        assert scorer.threads == [2, 2]  # every core, while generating and after
        assert torch.get_num_threads() == 2
    finally:
        await asyncio.to_thread(torch.set_num_threads, main_threads)
        torch.set_num_threads(main_threads)


def test_the_loop_counts_as_busy_above_a_share_of_a_core_per_torch_thread():
    q = ScoringPipeline([Recording()], 4, 256, show=False).queue
    share = q.LOOP_SHARE
    q._threads = 2  # LOOP_SHARE of a core per thread
    assert q.loop_busy(2 * share + 0.05) and not q.loop_busy(2 * share - 0.05)
    q._threads = math.ceil(1 / share) + 1  # the loop uses one core at most: never busy enough
    assert not q.loop_busy(1.0)


async def test_a_ready_batch_waits_while_generation_keeps_the_loop_busy():
    # generation bound by the client's CPU: scoring beside it would only time-share the cores,
    # so the batch waits for the loop to calm down or for generation to end
    scorer = Recording()
    p = pipeline(scorer, 6, min_batch=2)
    p.queue.LOOP_SHARE = (
        0.05  # busy above a tenth of a core with 2 threads, however loaded the machine
    )
    p.queue.HOLD_S = 0.05
    submit(p, [0, 1, 2])  # a batch is ready while more prompts are coming

    def spin(seconds: float) -> None:  # the loop's thread working, as on many fast replies
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    for _ in range(20):  # a busy loop that still lets the pipeline's task run between chunks
        spin(0.02)
        await asyncio.sleep(0)
    assert p.batch_sizes == []  # held, although 3 >= MIN_BATCH
    assert p.held_seconds == 0.0  # still holding: the wait is counted when it ends
    submit(p, [3, 4, 5])  # generation's last prompts: nothing more is coming
    await until(lambda: p.batch_sizes)
    scores = await finish(p, 6)
    assert p.batch_sizes == [6] and p.held_seconds > 0
    assert scores["recording"].tolist() == [float(i) for i in range(6)]


async def test_a_burst_of_replies_after_a_quiet_wait_holds_the_batch_it_makes_ready():
    # the replies of a whole run arrive together after the provider's latency: the loop idled
    # until then, and a load measured over that wait would call the busy loop calm
    scorer = Recording()
    p = pipeline(scorer, 6, min_batch=2)
    p.queue.LOOP_SHARE = 0.05  # busy above a tenth of a core with 2 threads
    p.queue.HOLD_S = 0.05
    await asyncio.sleep(0.3)  # the loop waits on the replies: six windows of quiet
    submit(p, [0, 1, 2])  # the first replies of the burst make a batch ready

    def spin(seconds: float) -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    for _ in range(20):  # the rest of the burst keeps the loop's thread busy
        spin(0.02)
        await asyncio.sleep(0)
    assert p.batch_sizes == []  # held for the burst, not scored beside it
    submit(p, [3, 4, 5])
    await finish(p, 6)
    assert p.batch_sizes == [6] and p.held_seconds > 0


async def test_a_ready_batch_is_scored_beside_generation_while_the_loop_waits_on_replies():
    scorer = Recording()
    p = pipeline(scorer, 6, min_batch=2)
    p.queue.HOLD_S = 0.05
    submit(p, [0, 1, 2])
    await until(lambda: p.batch_sizes)  # the loop idles (awaiting), so scoring goes ahead
    assert p.batch_sizes == [3] and p.more_coming()
    submit(p, [3, 4, 5])
    await finish(p, 6)
    assert p.batch_sizes == [3, 3]


class WholeBatch(Recording):
    """A scorer whose numbers depend on the whole batch: scored once, at the end."""

    name = "whole_batch"
    batch_invariant = False


async def test_the_scores_come_in_the_scorers_order_whichever_are_scored_at_the_end():
    from uqlm_bert.scorers._lexical import ExactMatchScorer

    for rounds in (False, True):
        p = ScoringPipeline([WholeBatch(), ExactMatchScorer()], 3, 256, show=False, rounds=rounds)
        assert [s.name for s in p.deferred] == ["whole_batch"]  # the other beside generation
        p.queue.GATHER_S = 0.0
        p.start()
        submit(p, range(3))
        scores = await finish(p, 3)
        assert list(scores) == ["whole_batch", "exact_match"], rounds
        assert scores["whole_batch"].tolist() == [0.0, 1.0, 2.0]
