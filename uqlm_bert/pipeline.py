"""Scoring prompts as they complete, beside generation: the overlap scheduler of
``BlackBoxUQ.generate_and_score``.

A prompt is queued for scoring as soon as its last LLM call returns, and a worker thread scores
whatever has queued up as one batch while the event loop keeps the LLM calls going. A scorer
whose numbers depend on the whole batch (BERTScore with ``idf=True`` and no ``idf_sents``: idf
comes from the references it is given) is run once over all prompts at the end instead, so the
result never depends on the order in which calls complete. :func:`generate_and_score` runs
a generator with a :class:`ScoringPipeline` beside it; :func:`score_rows` is the one scoring step
both paths take (and ``BlackBoxUQ.score``).

Example:
    >>> import asyncio
    >>> from uqlm_bert.generation.records import GenerationResult
    >>> from uqlm_bert.scorers.text import ExactMatchScorer
    >>> async def run():
    ...     pipeline = ScoringPipeline([ExactMatchScorer()], n=2, max_batch=8, show=False)
    ...     pipeline.start()
    ...     pipeline.submit(1, "Lima", ["lima", "Quito"])  # in the order calls complete
    ...     pipeline.submit(0, "Paris", ["Paris"])
    ...     return await pipeline.finish(GenerationResult.empty(["q0", "q1"], 2))
    >>> asyncio.run(run()).scores["exact_match"].tolist()
    [1.0, 0.5]
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from uqlm_bert.inputs import ScoringInputs, prompt_text
from uqlm_bert.scorers.base import Scorer, score_all
from uqlm_bert.scorers.best import ORIGINAL, best_of

if TYPE_CHECKING:
    from uqlm_bert.generation.generator import ResponseGenerator
    from uqlm_bert.generation.records import GenerationResult

__all__ = ["Scored", "ScoringPipeline", "generate_and_score", "score_rows"]


class ScoringPipeline:
    """Scores prompts in batches, in a worker thread, as generation finishes them.

    The queued prompts are scored as one batch once ``MIN_BATCH`` of them have queued, or
    ``GATHER_S`` after the oldest of them queued, or at once when no more prompts are coming
    (every prompt is queued, or generation is over): a small batch wastes the engine's forward
    passes, and waiting for prompts that will not come wastes time. At most ``max_batch``
    prompts go in one batch. ``busy_seconds`` is the time spent scoring.

    While generation runs, a ready batch also waits while the event loop is busy with the CPU:
    when its thread used more than ``LOOP_SHARE`` of a core per torch thread over the last
    window (half a core with 2 threads; never with 4 or more, as the loop uses one core at
    most). Then generation is bound by the client's CPU, not by the provider's latency, and
    scoring beside it only time-shares the cores: both go slower, and the run takes as long as
    generation and scoring one after the other. The batch is scored once the loop calms down or
    generation ends.
    """

    #: Wait at most this long after a prompt queues for more before scoring a small batch.
    GATHER_S = 0.2
    #: A batch this large is scored without waiting.
    MIN_BATCH = 32
    #: While generation runs, hold a batch while the loop uses more than this share of a core
    #: per torch thread (0.25: half a core with 2 threads).
    LOOP_SHARE = 0.25
    #: How long a held batch waits before the loop's load is measured again.
    HOLD_S = 0.2

    def __init__(
        self,
        scorers: list[Scorer],
        n: int,
        max_batch: int,
        show: bool,
        use_best: bool = False,
        postprocess: Callable[[list[str | None], list[list[str | None]]], ScoringInputs]
        | None = None,
        prompts: list[Any] | None = None,
    ) -> None:
        self._prompts = None if prompts is None else [prompt_text(p) for p in prompts]
        # best-of needs every scorer on the same candidates: all run together, at the end if
        # one of them depends on the whole batch
        invariant = all(s.batch_invariant for s in scorers)
        self.overlapped = [s for s in scorers if s.batch_invariant and (invariant or not use_best)]
        self.deferred = [s for s in scorers if s not in self.overlapped]
        self.scores = {s.name: np.full(n, np.nan) for s in scorers}
        self.best: list[int] | None = [ORIGINAL] * n if use_best else None
        self._use_best = use_best
        self._postprocess = postprocess or ScoringInputs
        self.busy_seconds = 0.0
        self.batch_sizes: list[int] = []
        self._n = n
        self._max_batch = max_batch
        self._min_batch = min(max_batch, self.MIN_BATCH)
        self._show = show
        # (queued at, index, response, samples), oldest first
        self._queue: list[tuple[float, int, str | None, list[str | None]]] = []
        self._submitted = 0
        self._ended = False
        self._changed: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._bar: Any = None
        self._threads: int | None = None
        # the loop thread's CPU time and the wall clock when its load was last measured (start)
        self._loop_mark = (0.0, 0.0)
        # set once no more prompts can come, to end a held batch's wait at once
        self._all_in: asyncio.Event | None = None
        self.held_seconds = 0.0

    def start(self) -> None:
        if not self.overlapped:
            return
        from tqdm.auto import tqdm

        # the torch thread count of the caller's thread (the event loop's), for the worker
        # threads that score (see _score_batch)
        torch = sys.modules.get("torch")
        self._threads = torch.get_num_threads() if torch is not None else None
        self._changed = asyncio.Event()
        self._all_in = asyncio.Event()
        self._loop_mark = (time.thread_time(), time.perf_counter())
        self._bar = tqdm(total=self._n, desc="Scoring", unit="prompt", disable=not self._show)
        self._task = asyncio.ensure_future(self._consume())

    def submit(self, index: int, response: str | None, samples: list[str | None]) -> None:
        """Queue a finished prompt; re-raise a scoring failure so that generation stops."""
        if self._task is None or self._changed is None:
            return
        if self._task.done() and not self._task.cancelled() and self._task.exception():
            raise self._task.exception()  # type: ignore[misc]
        self._queue.append((time.monotonic(), index, response, samples))
        self._submitted += 1
        self._wake()

    async def finish(self, generation: GenerationResult) -> Scored:
        if self._task is not None and self._changed is not None:
            self._ended = True
            self._wake()
            try:
                await self._task
            finally:
                self._bar.close()
        if self.deferred:
            await asyncio.to_thread(
                self._score,
                self.deferred,
                list(range(self._n)),
                list(generation.responses),
                [list(s) for s in generation.sampled_responses],
            )
        return Scored(self.scores, self.best)

    async def abort(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._bar is not None:
            self._bar.close()

    def _wake(self) -> None:
        """Tell the consumer the queue or generation changed (after :meth:`start`)."""
        assert self._changed is not None and self._all_in is not None
        self._changed.set()
        if not self.more_coming():
            self._all_in.set()

    def more_coming(self) -> bool:
        """Whether prompts not yet queued may still come."""
        return not self._ended and self._submitted < self._n

    def waited(self) -> float:
        """Seconds since the oldest queued prompt queued (0 with none queued)."""
        return time.monotonic() - self._queue[0][0] if self._queue else 0.0

    def batch_ready(self) -> bool:
        """Whether to score the queued prompts now."""
        queued = len(self._queue)
        return queued > 0 and (
            queued >= self._min_batch or not self.more_coming() or self.waited() >= self.GATHER_S
        )

    async def _next_batch(self) -> list[tuple[float, int, str | None, list[str | None]]]:
        """The next batch to score; empty when generation is over and every prompt scored."""
        assert self._changed is not None
        while not self.batch_ready():
            if not self._queue and not self.more_coming():
                return []
            self._changed.clear()
            timeout = self.GATHER_S - self.waited() if self._queue else None
            try:
                await asyncio.wait_for(self._changed.wait(), timeout)
            except asyncio.TimeoutError:
                pass
        await self._wait_while_loop_busy()
        batch = self._queue[: self._max_batch]
        del self._queue[: self._max_batch]
        return batch

    def loop_load(self) -> float:
        """Cores' worth of CPU the event loop's thread used since the last call (this runs on
        that thread), and start a new window."""
        cpu, wall = time.thread_time(), time.perf_counter()
        last_cpu, last_wall = self._loop_mark
        self._loop_mark = (cpu, wall)
        return (cpu - last_cpu) / max(wall - last_wall, 1e-9)

    def loop_busy(self, load: float) -> bool:
        """Whether a loop using ``load`` cores leaves scoring too little CPU to overlap."""
        threads = self._threads or 1
        return load > self.LOOP_SHARE * threads

    async def _wait_while_loop_busy(self) -> None:
        """Hold the ready batch while generation runs and keeps the loop busy (class doc)."""
        assert self._all_in is not None
        started = time.perf_counter()
        while self.more_coming():
            # a short window mostly sees the loop running this very code: measure over HOLD_S
            wait = self.HOLD_S - (time.perf_counter() - self._loop_mark[1])
            if wait <= 0:
                if not self.loop_busy(self.loop_load()):
                    break
                wait = self.HOLD_S
            try:
                await asyncio.wait_for(self._all_in.wait(), wait)
            except asyncio.TimeoutError:
                pass
        self.held_seconds += time.perf_counter() - started

    async def _consume(self) -> None:
        while batch := await self._next_batch():
            await asyncio.to_thread(
                self._score_batch,
                self.overlapped,
                [i for _, i, _, _ in batch],
                [r for _, _, r, _ in batch],
                [s for _, _, _, s in batch],
            )
            self._bar.update(len(batch))

    def _score_batch(self, *args: Any) -> None:
        """:meth:`_score`, in a worker thread, with the torch thread count of the thread that
        started the pipeline.

        A thread that starts using torch takes the count the last ``torch.set_num_threads``
        anywhere in the process set, not the main thread's, so without this a batch could be
        scored on one core. Every core is used, also while generation runs: a batch waits
        instead while the loop is busy (see the class doc), since a core spared for the loop
        made scoring slower, not the run faster (benchmarks/RESULTS.md).
        """
        torch = sys.modules.get("torch")  # loaded when _threads was read, if it is set
        if self._threads is not None and torch.get_num_threads() != self._threads:
            torch.set_num_threads(self._threads)
        self._score(*args)

    def _score(
        self,
        scorers: list[Scorer],
        indices: list[int],
        responses: list[str | None],
        samples: list[list[str | None]],
    ) -> None:
        started = time.perf_counter()
        inputs = self._postprocess(responses, samples)
        if self._prompts is not None:  # the BERTScore scorers weigh the prompt's tokens 0
            inputs = replace(inputs, prompts=[self._prompts[i] for i in indices])
        scored = score_rows(scorers, inputs, self._use_best)
        for name, values in scored.scores.items():
            self.scores[name][indices] = values
        if self.best is not None and scored.best is not None:
            for i, k in zip(indices, scored.best, strict=True):
                self.best[i] = k
        self.busy_seconds += time.perf_counter() - started
        self.batch_sizes.append(len(indices))


@dataclass(frozen=True)
class Scored:
    """Scores of a run, and with ``use_best`` the candidate chosen for each prompt."""

    scores: dict[str, np.ndarray]
    best: list[int] | None


def score_rows(
    scorers: list[Scorer], inputs: ScoringInputs, use_best: bool, show: bool = False
) -> Scored:
    """Every scorer's confidences for ``inputs``, and with ``use_best`` the best candidates."""
    if not use_best:
        return Scored(score_all(scorers, inputs, show_progress_bars=show), None)
    best = best_of(scorers, inputs, show_progress_bars=show)
    return Scored(best.scores, best.index)


async def generate_and_score(
    generator: ResponseGenerator,
    prompts: list[Any],
    num_responses: int,
    scorers: list[Scorer],
    *,
    max_batch: int,
    show: bool,
    use_best: bool = False,
    postprocess: Callable[[list[str | None], list[list[str | None]]], ScoringInputs]
    | None = None,
    checkpoint: Any = None,
) -> tuple[GenerationResult, Scored, dict[str, float]]:
    """Generate for ``prompts`` (checked prompts) and score each one as its calls complete.

    Returns:
        The generation, the scores, and the run's timings: ``generation_s``, ``scoring_s``
        (time spent scoring), ``scoring_after_generation_s``, ``scoring_held_s`` (time ready
        batches waited for a busy event loop) and ``total_s``.
    """
    started = time.perf_counter()
    pipeline = ScoringPipeline(
        scorers, len(prompts), max_batch, show, use_best, postprocess, prompts=prompts
    )
    pipeline.start()
    try:
        generation = await generator.generate(
            prompts,
            num_responses,
            checkpoint=checkpoint,
            on_prompt_done=pipeline.submit,
            show_progress_bars=show,
        )
        generated = time.perf_counter()
        scored = await pipeline.finish(generation)
    except BaseException:
        await pipeline.abort()
        raise
    finished = time.perf_counter()
    timings = {
        "generation_s": generated - started,
        "scoring_s": pipeline.busy_seconds,
        "scoring_after_generation_s": finished - generated,
        "scoring_held_s": pipeline.held_seconds,
        "total_s": finished - started,
    }
    return generation, scored, timings
