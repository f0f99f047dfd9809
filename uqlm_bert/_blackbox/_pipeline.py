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
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from uqlm_bert._blackbox._gathered import Gathered, combines_over_rounds
from uqlm_bert._blackbox._queue import Row, ScoringQueue, recipe_of
from uqlm_bert._inputs import ScoringInputs, prompt_text
from uqlm_bert.scorers._base import Scorer, score_pass
from uqlm_bert.scorers._best import ORIGINAL, best_of

if TYPE_CHECKING:
    from uqlm_bert.bertscore._token_support import TokenSupport
    from uqlm_bert.generation._generator import ResponseGenerator
    from uqlm_bert.generation._records import GenerationResult
    from uqlm_bert.generation._settings import GenerationSettings

__all__ = ["Scored", "ScoringPipeline", "generate_and_score", "score_rows"]

#: What the scorers see of one prompt's texts: ``(index, response, samples, start)`` to the
#: ``(response, samples)`` that are scored (``Assembly.scored_row``); ``samples`` are the
#: prompt's samples from slot ``start`` on, and the response is None where it was seen before.
Postprocess = Callable[
    [int, str | None, list[str | None], int], tuple[str | None, list[str | None]]
]


def _as_given(
    index: int, response: str | None, samples: list[str | None], start: int = 0
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
            applied once per text, when it is submitted.
        queue: the queue shared with the owner's other calls; ``None``: one of the call's own.
        prompts: the call's prompts, whose texts the scorers may read (``None``: not known).
        supports: collect each answer's token supports from the scoring pass.
        rounds: the prompts' samples come in rounds (:meth:`score_round` scores each round as
            it comes): only pairwise scorers, whose confidences combine over rounds, score
            beside generation; the others run over all the samples at the end.

    Attributes:
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
        rounds: bool = False,
    ) -> None:
        self._prompts = None if prompts is None else [prompt_text(p) for p in prompts]
        self._names = [s.name for s in scorers]
        if rounds:
            self.overlapped = [s for s in scorers if combines_over_rounds(s)]
        else:
            # best-of needs every scorer on the same candidates: all run together, at the end
            # if one of them depends on the whole batch
            invariant = all(s.batch_invariant for s in scorers)
            self.overlapped = [
                s for s in scorers if s.batch_invariant and (invariant or not use_best)
            ]
        self.deferred = [s for s in scorers if s not in self.overlapped]
        self.gathered = Gathered([s.name for s in self.overlapped], n)
        self._deferred: Scored | None = None
        self.queue = queue if queue is not None else ScoringQueue(max_batch)
        self.recipe = recipe_of(self.overlapped, use_best, postprocess, supports)
        self.busy_seconds = 0.0
        self.held_seconds = 0.0
        self.batch_sizes: list[int] = []
        self.use_best = use_best
        self.with_supports = supports
        self._postprocess = postprocess or _as_given
        # what the scorers saw of each prompt's texts so far
        self._seen: list[tuple[str | None, list[str | None]] | None] = [None] * n
        self._rounds: dict[int, asyncio.Future[None]] = {}  # rounds awaiting their scores
        self._n = n
        self._show = show
        self._finished = 0
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
        """Prompt ``index`` is done: postprocess the texts the scorers have not seen and queue
        them (a prompt that drew rounds has had all but its last round's scored already);
        re-raise a scoring failure of this call (or the postprocessor's) so that its generation
        stops."""
        if self._error is not None:
            raise self._error
        response, new = self._see(index, response, samples)
        self._finished += 1
        if not self._joined:
            return
        if self.gathered.scored(index) and not new:  # its rounds are all scored
            self._bar.update(1)
            self._settle()
            self.queue.wake()
            return
        self._pending += 1
        self.queue.put(self, index, response, new)

    async def score_round(
        self, index: int, response: str | None, samples: list[str | None]
    ) -> Gathered:
        """Score prompt ``index``'s samples that the scorers have not seen (the round just
        drawn) with the other prompts' in the shared queue, and return what is gathered once
        they are in (generation waits on it: the row is never held for a busy event loop).

        Raises:
            Exception: what scoring the call's prompts raised.
        """
        if self._error is not None:
            raise self._error
        response, new = self._see(index, response, samples)
        future = self._rounds[index] = asyncio.get_running_loop().create_future()
        self._pending += 1
        self.queue.put(self, index, response, new, awaited=True)
        await future
        return self.gathered

    def more_coming(self) -> bool:
        """Whether prompts not yet queued may still come."""
        return self._joined and not self._ended and self._finished < self._n

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
        return self._scored(texts)

    async def abort(self) -> None:
        """The call ends without its scores (cancelled, or generation failed): its queued
        prompts are dropped and batches being scored write nothing back to it."""
        for future in self._rounds.values():
            future.cancel()
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
        """Take the scores of the call's ``rows`` from a batch of ``batch_size``."""
        if not self._joined or self._error is not None:
            return
        indices = [r.index for r in rows]
        self.gathered.add(indices, scored)
        self.busy_seconds += seconds
        self.batch_sizes.append(batch_size)
        self._pending -= len(rows)
        for row in rows:
            future = self._rounds.pop(row.index, None) if row.awaited else None
            if future is not None and not future.done():
                future.set_result(None)
            elif not row.awaited:
                self._bar.update(1)
        self._settle()

    def failed(self, error: BaseException) -> None:
        """Scoring the call's prompts raised ``error``: the call stops with it."""
        if self._error is None:
            self._error = error
        self.queue.leave(self)
        for future in self._rounds.values():
            if not future.done():
                future.set_exception(error)
        self._rounds.clear()
        if self._settled is not None:
            self._settled.set()

    # -- internals ----------------------------------------------------------------------------

    def _see(
        self, index: int, response: str | None, samples: list[str | None]
    ) -> tuple[str | None, list[str | None]]:
        """Postprocess what the scorers have not seen of prompt ``index``'s texts (its response
        the first time, its samples from the first unseen slot on) and keep it: the prompt's
        response as seen, and its new samples as seen."""
        seen = self._seen[index]
        start = 0 if seen is None else len(seen[1])
        processed, new = self._postprocess(
            index, response if seen is None else None, samples[start:], start
        )
        if seen is None:
            seen = self._seen[index] = (processed, [])
        seen[1].extend(new)
        return seen[0], new

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
        for i, seen in enumerate(self._seen):
            if seen is None:
                self._see(i, generation.responses[i], list(generation.sampled_responses[i]))
        pairs = [t for t in self._seen if t is not None]
        return ScoringInputs([r for r, _ in pairs], [list(s) for _, s in pairs])

    def _score_deferred(self, texts: ScoringInputs) -> None:
        started = time.perf_counter()
        inputs = self._with_prompts(texts, list(range(self._n)))
        self._deferred = score_rows(
            self.deferred, inputs, self.use_best, supports=self.with_supports
        )
        self.busy_seconds += time.perf_counter() - started

    def _scored(self, texts: ScoringInputs) -> Scored:
        """The call's scores: the overlapped scorers' gathered from its rows, the deferred
        scorers' from their one pass (in the scorers' order), with the texts they saw."""
        scores = self.gathered.scores()
        supports = self.gathered.supports()
        best: list[int] | None = None
        if self.use_best:
            best = [ORIGINAL if b is None else b for b in self.gathered.best()]
        if self._deferred is not None:
            scores.update(self._deferred.scores)
            best = self._deferred.best if self._deferred.best is not None else best
            supports = supports if supports is not None else self._deferred.supports
        return Scored({name: scores[name] for name in self._names}, best, texts, supports)

    def prompt_of(self, index: int) -> str | None:
        """The text of prompt ``index`` of the call, where the call was given its prompts."""
        return None if self._prompts is None else self._prompts[index]

    def _with_prompts(self, inputs: ScoringInputs, indices: list[int]) -> ScoringInputs:
        """``inputs`` of the prompts ``indices`` with their prompts' texts (the BERTScore
        scorers weigh a prompt's own tokens 0)."""
        if self._prompts is None:
            return inputs
        return replace(inputs, prompts=[self._prompts[i] for i in indices])


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
    #: each pairwise scorer's pair scores per row (:class:`~uqlm_bert.scorers._base.Pass`)
    pairs: dict[str, list[np.ndarray]] = field(default_factory=dict)

    def rows(self, start: int, stop: int) -> Scored:
        """The scores of rows ``start`` to ``stop`` (a call's share of a shared batch)."""
        best = None if self.best is None else self.best[start:stop]
        supports = None if self.supports is None else self.supports[start:stop]
        scores = {k: np.asarray(v)[start:stop] for k, v in self.scores.items()}
        pairs = {k: v[start:stop] for k, v in self.pairs.items()}
        return Scored(scores, best, supports=supports, pairs=pairs)


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
    found = score_pass(scorers, inputs, show, supports)
    return Scored(found.scores, None, supports=found.supports, pairs=found.pairs)


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
    threshold: float | None = None,
) -> tuple[GenerationResult, Scored, dict[str, float]]:
    """Generate for ``prompts`` (checked prompts) with ``settings`` (default: the generator's)
    and score each one as its calls complete, in ``queue`` (shared with the owner's other
    calls; ``None``: the call's own). With ``settings.sampling == "until_settled"`` and a
    scorer to decide (:func:`~uqlm_bert._blackbox._settle.decider`: ``threshold``, where given,
    is the first scorer's), each prompt draws its
    samples in rounds, each round scored as it comes, until its answer is settled; the
    generation's ``run["sampling"]`` says how it sampled.

    Returns:
        The generation, the scores, and the run's timings: ``generation_s``, ``scoring_s``
        (time spent scoring), ``scoring_after_generation_s``, ``scoring_held_s`` (time ready
        batches waited for a busy event loop) and ``total_s``.
    """
    from uqlm_bert._blackbox._settle import SettleJudge, decider

    started = time.perf_counter()
    settings = generator.settings if settings is None else settings
    decides = None
    if settings.sampling == "until_settled":
        decides = decider(scorers, use_best, threshold)
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
        rounds=decides is not None,
    )
    judge = None if decides is None else SettleJudge(pipeline.score_round, *decides)
    pipeline.start()
    try:
        generation = await generator.generate(
            prompts,
            num_responses,
            checkpoint=checkpoint,
            on_prompt_done=pipeline.submit,
            show_progress_bars=show,
            settings=settings,
            judge=judge,
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
