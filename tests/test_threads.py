"""The torch thread budget a long scoring call follows (uqlm_bert._threads)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
import torch

from uqlm_bert._threads import LoopLoad, follow_budget, thread_budget
from uqlm_bert.bertscore.engine import BERTScorer


def test_the_budget_is_followed_in_its_block_and_the_count_restored_after():
    before = torch.get_num_threads()
    wanted = [1]
    with thread_budget(lambda: wanted[0]):
        assert torch.get_num_threads() == 1  # followed on entry
        wanted[0] = before + 1
        follow_budget()
        assert torch.get_num_threads() == before + 1
        wanted[0] = 0  # never below one thread
        follow_budget()
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    follow_budget()  # no budget in force: nothing changes
    assert torch.get_num_threads() == before


def test_the_budget_holds_only_in_the_thread_that_set_it():
    before = torch.get_num_threads()
    seen = []

    def other() -> None:
        torch.set_num_threads(before)  # a new thread starts from torch's latest setting
        follow_budget()
        seen.append(torch.get_num_threads())

    with thread_budget(lambda: 1):
        worker = threading.Thread(target=other)
        worker.start()
        worker.join()
    assert seen == [before]


def test_the_encoder_asks_for_the_budget_before_every_forward_batch_and_every_layer():
    scorer = BERTScorer(batch_size=2, idf=False, show_progress_bars=False)
    texts = [f"Text number {i} says something about {i * 7} apples." for i in range(7)]
    calls = []

    def budget() -> int:
        calls.append(torch.get_num_threads())
        return 1

    before = torch.get_num_threads()
    with thread_budget(budget):
        p, r, f = scorer.score(texts[:4] + texts[:3], texts[3:] + texts[4:])
    # 7 distinct texts in batches of 2 = 4 forward batches, each asking before it starts and
    # before each of its layers (a batch on one thread can take seconds), plus the ask on entry
    assert scorer.encoder.loaded.packed is not None
    assert len(calls) == 1 + 4 * (1 + scorer.num_layers)
    assert torch.get_num_threads() == before
    expected = BERTScorer(batch_size=64, idf=False, show_progress_bars=False).score(
        texts[:4] + texts[:3], texts[3:] + texts[4:]
    )
    assert torch.allclose(f, expected[2], atol=1e-6)


@pytest.mark.parametrize("bad", ["two", None])
def test_a_budget_that_is_not_a_number_fails_loudly(bad):
    with pytest.raises((TypeError, ValueError)), thread_budget(lambda: bad):
        pass


def test_the_loop_load_tells_a_waiting_loop_from_a_busy_one():
    async def measure() -> tuple[float, float, float]:
        load = LoopLoad(window=0.1)
        start = load.fraction  # before any reading: busy, so nothing competes with the loop yet
        load.start()
        await asyncio.sleep(0.35)  # waiting, as for replies that take a second
        idle = load.fraction
        end = time.thread_time() + 0.4
        while time.thread_time() < end:  # the loop's thread at work, as for fast replies
            pass
        for _ in range(3):  # the watcher's window ended during the work: it reads it now
            await asyncio.sleep(0)
        busy = load.fraction
        await load.stop()
        return start, idle, busy

    start, idle, busy = asyncio.run(measure())
    assert start == 1.0
    assert idle < LoopLoad.BUSY <= busy
