"""Scoring prompts as they complete, beside generation: a call's side of the shared scoring
queue, and ``BlackBoxUQ``'s scoring step.

A prompt's texts go through the postprocessor once, when its last LLM call returns, and the
prompt is queued for scoring at once; the queue
(:class:`~uqlm_bert._blackbox._queue.ScoringQueue`, one per ``BlackBoxUQ`` and event loop) scores
the prompts of every call in flight together, in batches, in a worker thread, while the event
loop keeps the LLM calls going. :class:`ScoringPipeline` is one call's side: it queues the call's
prompts, receives exactly their rows back, and counts them on the call's own progress bar. A
scorer whose numbers depend on the whole batch (BERTScore with ``idf=True`` and no
``idf_sents``: idf comes from the references it is given) is run once over the call's prompts at
the end instead, so the result never depends on the order in which calls complete, nor on other
calls. :func:`generate_and_score` runs a generator with a :class:`ScoringPipeline` beside it;
:func:`score_rows` is the scoring step of every batch and of ``BlackBoxUQ.score`` (the scorers'
own :func:`~uqlm_bert.scorers._base.score_all`, or :func:`~uqlm_bert.scorers._best.best_of` with
``use_best``). The texts the scorers saw come back with the scores (:attr:`Scored.texts`), so the
result shows them without postprocessing them again.

Example:
    >>> import asyncio
    >>> from uqlm_bert.generation._records import GenerationResult
    >>> from uqlm_bert.scorers._lexical import ExactMatchScorer
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
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from uqlm_bert._blackbox._queue import Row, ScoringQueue, recipe_of
from uqlm_bert._inputs import ScoringInputs, prompt_text
from uqlm_bert.scorers._base import Scorer, score_all, score_with_supports
from uqlm_bert.scorers._best import ORIGINAL, best_of

if TYPE_CHECKING:
    from uqlm_bert.bertscore._token_support import TokenSupport
    from uqlm_bert.generation._generator import ResponseGenerator
    from uqlm_bert.generation._records import GenerationResult
    from uqlm_bert.generation._settings import GenerationSettings

__all__ = ["Scored", "ScoringPipeline", "generate_and_score", "score_rows"]

#: What the scorers see of one prompt's texts: ``(index, response, samples)`` to the
#: ``(response, samples)`` that are scored (``Assembly.scored_row``).
Postprocess = Callable[[int, str | None, list[str | None]], tuple[str | None, list[str | None]]]


def _as_given(
    index: int, response: str | None, samples: list[str | None]
) -> tuple[str | None, list[str | None]]:
    return response, list(samples)


class ScoringPipeline:
    """One call's prompts, scored in the shared queue as generation finishes them.

    Args:
        scorers: the call's scorers.
        n: the call's prompts.
        max_batch: at most this many prompts per batch (of a queue of the call's own).
        show: a progress bar over the call's prompts.
        use_best: choose each prompt's best candidate (all scorers then run together).
        postprocess: what the scorers see of a prompt's texts (default: the texts as they are),
            applied once per prompt, when it is submitted.
        queue: the queue shared with the owner's other calls; ``None``: one of the call's own.
        prompts: the call's prompts, whose texts the scorers may read (``None``: not known).
        supports: collect each answer's token supports from the scoring pass.

    Attributes:
        scores: each scorer's confidences, by prompt (NaN until scored).
        busy_seconds: time spent scoring the batches that held the call's prompts.
        held_seconds: time those batches waited for a busy event loop.
        batch_sizes: the size of each batch that held the call's prompts.
    """

    def __init__(
        self,
        scorers: list[Scorer],
        n: int,
        max_batch: int,
        show: bool,
        use_best: bool = False,
        postprocess: Postprocess | None = None,
        queue: ScoringQueue | None = None,
        prompts: list[Any] | None = None,
        supports: bool = True,
    ) -> None:
        self._prompts = None if prompts is None else [prompt_text(p) for p in prompts]
        # best-of needs every scorer on the same candidates: all run together, at the end if
        # one of them depends on the whole batch
        invariant = all(s.batch_invariant for s in scorers)
        self.overlapped = [s for s in scorers if s.batch_invariant and (invariant or not use_best)]
        self.deferred = [s for s in scorers if s not in self.overlapped]
        self.scores = {s.name: np.full(n, np.nan) for s in scorers}
        self.best: list[int] | None = [ORIGINAL] * n if use_best else None
        # each prompt's token supports, where a scorer gives them (the bert_score scorers)
        self.supports: list[TokenSupport | None] | None = None
        self.queue = queue if queue is not None else ScoringQueue(max_batch)
        self.recipe = recipe_of(self.overlapped, use_best, postprocess, supports)
        self.busy_seconds = 0.0
        self.held_seconds = 0.0
        self.batch_sizes: list[int] = []
        self.use_best = use_best
        self.with_supports = supports
        self._postprocess = postprocess or _as_given
        # what the scorers saw of each submitted prompt's texts
        self._texts: list[tuple[str | None, list[str | None]] | None] = [None] * n
        self._n = n
        self._show = show
        self._submitted = 0
        self._pending = 0
        self._ended = False
        self._joined = False
        self._error: BaseException | None = None
        self._settled: asyncio.Event | None = None
        self._bar: Any = None

    def start(self) -> None:
        """Join the queue (on the running loop); nothing to do without overlapped scorers."""
        if not self.overlapped:
            return
        from tqdm.auto import tqdm

        self._settled = asyncio.Event()
        self._bar = tqdm(total=self._n, desc="Scoring", unit="prompt", disable=not self._show)
        self._joined = True
        self.queue.join(self)

    def submit(self, index: int, response: str | None, samples: list[str | None]) -> None:
        """Postprocess a finished prompt's texts and queue them; re-raise a scoring failure of
        this call (or the postprocessor's) so that its generation stops."""
        if self._error is not None:
            raise self._error
        response, samples = self._texts[index] = self._postprocess(index, response, samples)
        if not self._joined:
            return
        self._submitted += 1
        self._pending += 1
        self.queue.put(self, index, response, samples)

    def more_coming(self) -> bool:
        """Whether prompts not yet queued may still come."""
        return self._joined and not self._ended and self._submitted < self._n

    async def finish(self, generation: GenerationResult) -> Scored:
        """Wait until the call's queued prompts are scored, run the deferred scorers over all
        its prompts, and return its scores.

        Raises:
            Exception: what scoring the call's prompts raised.
        """
        if self._joined:
            assert self._settled is not None
            self._ended = True
            self._settle()
            self.queue.wake()
            try:
                await self._settled.wait()
            finally:
                await self._close()
        if self._error is not None:
            raise self._error
        texts = self._all_texts(generation)
        if self.deferred:
            await asyncio.to_thread(self._score_deferred, texts)
        return Scored(self.scores, self.best, texts, self.supports)

    async def abort(self) -> None:
        """The call ends without its scores (cancelled, or generation failed): its queued
        prompts are dropped and batches being scored write nothing back to it."""
        await self._close()

    # -- called by the queue ------------------------------------------------------------------

    def inputs(self, rows: list[Row]) -> ScoringInputs:
        """What the scorers take for ``rows``, postprocessed already: rows of the calls of one
        recipe, each with its own prompt (the BERTScore scorers weigh a prompt's own tokens 0)."""
        prompts = [r.call.prompt_of(r.index) for r in rows]
        return ScoringInputs(
            [r.response for r in rows],
            [r.samples for r in rows],
            prompts if any(p is not None for p in prompts) else None,
        )

    def score(self, rows: list[Row]) -> Scored:
        """Score ``rows``, postprocessed already (a worker thread of the queue)."""
        return score_rows(
            self.overlapped, self.inputs(rows), self.use_best, supports=self.with_supports
        )

    def scored(self, rows: list[Row], scored: Scored, seconds: float, batch_size: int) -> None:
        """Write back the scores of the call's ``rows`` from a batch of ``batch_size``."""
        if not self._joined or self._error is not None:
            return
        self._write([r.index for r in rows], scored)
        self.busy_seconds += seconds
        self.batch_sizes.append(batch_size)
        self._pending -= len(rows)
        self._bar.update(len(rows))
        self._settle()

    def failed(self, error: BaseException) -> None:
        """Scoring the call's prompts raised ``error``: the call stops with it."""
        if self._error is None:
            self._error = error
        self.queue.leave(self)
        if self._settled is not None:
            self._settled.set()

    # -- internals ----------------------------------------------------------------------------

    def _settle(self) -> None:
        if self._settled is not None and self._ended and self._pending == 0:
            self._settled.set()

    async def _close(self) -> None:
        if self._joined:
            self._joined = False
            self.queue.leave(self)
            self._bar.close()
        await self.queue.stop_if_idle()

    def _all_texts(self, generation: GenerationResult) -> ScoringInputs:
        """What the scorers see of every prompt's texts: as submitted, and the texts of a
        prompt that was not (postprocessed now, once)."""
        for i, done in enumerate(self._texts):
            if done is None:
                self._texts[i] = self._postprocess(
                    i, generation.responses[i], list(generation.sampled_responses[i])
                )
        pairs = [t for t in self._texts if t is not None]
        return ScoringInputs([r for r, _ in pairs], [s for _, s in pairs])

    def _score_deferred(self, texts: ScoringInputs) -> None:
        started = time.perf_counter()
        indices = list(range(self._n))
        inputs = self._with_prompts(texts, indices)
        scored = score_rows(self.deferred, inputs, self.use_best, supports=self.with_supports)
        self._write(indices, scored)
        self.busy_seconds += time.perf_counter() - started

    def prompt_of(self, index: int) -> str | None:
        """The text of prompt ``index`` of the call, where the call was given its prompts."""
        return None if self._prompts is None else self._prompts[index]

    def _with_prompts(self, inputs: ScoringInputs, indices: list[int]) -> ScoringInputs:
        """``inputs`` of the prompts ``indices`` with their prompts' texts (the BERTScore
        scorers weigh a prompt's own tokens 0)."""
        if self._prompts is None:
            return inputs
        return replace(inputs, prompts=[self._prompts[i] for i in indices])

    def _write(self, indices: list[int], scored: Scored) -> None:
        for name, values in scored.scores.items():
            self.scores[name][indices] = values
        if self.best is not None and scored.best is not None:
            for i, k in zip(indices, scored.best, strict=True):
                self.best[i] = k
        if scored.supports is not None:
            if self.supports is None:
                self.supports = [None] * self._n
            for i, support in zip(indices, scored.supports, strict=True):
                self.supports[i] = support


@dataclass(frozen=True)
class Scored:
    """Scores of a run, with ``use_best`` the candidate chosen for each prompt, the texts the
    scorers saw (``None`` where the caller holds them), and each prompt's token supports from
    the same pass (``None`` where no scorer gives them; see
    :func:`~uqlm_bert.scorers._base.score_with_supports`)."""

    scores: dict[str, np.ndarray]
    best: list[int] | None
    texts: ScoringInputs | None = None
    supports: list[TokenSupport | None] | None = None

    def rows(self, start: int, stop: int) -> Scored:
        """The scores of rows ``start`` to ``stop`` (a call's share of a shared batch)."""
        best = None if self.best is None else self.best[start:stop]
        supports = None if self.supports is None else self.supports[start:stop]
        scores = {k: np.asarray(v)[start:stop] for k, v in self.scores.items()}
        return Scored(scores, best, supports=supports)


def score_rows(
    scorers: list[Scorer],
    inputs: ScoringInputs,
    use_best: bool,
    show: bool = False,
    supports: bool = True,
) -> Scored:
    """Every scorer's confidences for ``inputs`` with (``supports``) each answer's token
    supports from the same pass, or with ``use_best`` the best candidates (and no supports)."""
    if use_best:
        best = best_of(scorers, inputs, show_progress_bars=show)
        return Scored(best.scores, best.index)
    if not supports:
        return Scored(score_all(scorers, inputs, show_progress_bars=show), None)
    scores, found = score_with_supports(scorers, inputs, show_progress_bars=show)
    return Scored(scores, None, supports=found)


async def generate_and_score(
    generator: ResponseGenerator,
    prompts: list[Any],
    num_responses: int,
    scorers: list[Scorer],
    *,
    max_batch: int,
    show: bool,
    use_best: bool = False,
    postprocess: Postprocess | None = None,
    checkpoint: Any = None,
    queue: ScoringQueue | None = None,
    settings: GenerationSettings | None = None,
    supports: bool = True,
) -> tuple[GenerationResult, Scored, dict[str, float]]:
    """Generate for ``prompts`` (checked prompts) with ``settings`` (default: the generator's)
    and score each one as its calls complete, in ``queue`` (shared with the owner's other
    calls; ``None``: the call's own).

    Returns:
        The generation, the scores, and the run's timings: ``generation_s``, ``scoring_s``
        (time spent scoring), ``scoring_after_generation_s``, ``scoring_held_s`` (time ready
        batches waited for a busy event loop) and ``total_s``.
    """
    started = time.perf_counter()
    pipeline = ScoringPipeline(
        scorers,
        len(prompts),
        max_batch,
        show,
        use_best,
        postprocess,
        queue=queue,
        prompts=prompts,
        supports=supports,
    )
    pipeline.start()
    try:
        generation = await generator.generate(
            prompts,
            num_responses,
            checkpoint=checkpoint,
            on_prompt_done=pipeline.submit,
            show_progress_bars=show,
            settings=settings,
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
