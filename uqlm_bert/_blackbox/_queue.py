"""Scoring shared by every call in flight on one ``BlackBoxUQ``: prompts from all its calls are
scored together, in batches.

In an async app each request awaits its own ``generate_and_score`` call, often for one prompt.
Scored alone, each call would run the engine on a handful of texts: a forward pass per request,
and on a GPU a trickle of tiny launches. Instead a call's finished prompts join one queue per
``BlackBoxUQ`` and event loop (:class:`ScoringQueue`), whatever call they belong to, and a
worker thread scores what has queued up as one batch while the event loop keeps the LLM calls
going; each call gets exactly its own rows back (:class:`~uqlm_bert._blackbox._pipeline.ScoringPipeline` is
a call's side of it).

When a batch is scored. Queued prompts are scored once ``MIN_BATCH`` of them have queued, or
``GATHER_S`` (a few milliseconds) after the oldest of them queued, or at once when no more
prompts are coming from any call. Prompts that queue while a batch is being scored wait for it,
so a busy engine scores larger batches, and an idle one is never kept waiting for long. At most
``max_batch`` prompts go in one batch. While generation runs, a ready batch also waits while the
event loop is busy with the CPU: when its thread used more than ``LOOP_SHARE`` of a core per torch
thread over the last ``HOLD_S`` (0.3 of a core with 2 threads; never with 7 or more, as the loop uses
one core at most). Then generation is bound by the client's CPU and scoring beside it would only
time-share the cores. The window is always a recent one: one that reached back over the time the
loop idled waiting for replies would call calm a loop that has just begun a burst of them, and a
batch scored then slows every reply of the burst. The batch is scored once the loop calms down,
or generation ends, or a call with a prompt queued has nothing more coming (it waits for its
scores alone: a one-prompt call is not held for a long call's generation), or a queued round is
one its prompt's generation waits on (sampling in rounds).

Where a batch is scored. By default in a worker thread of this process, one batch at a time
(:meth:`ScoringQueue._score_batch`). A queue given a :class:`BatchScoring` (``BlackBoxUQ``'s
``scoring="ray"``: :class:`~uqlm_bert._blackbox._pool.PoolBatches`) hands its batches to that
instead, as many at once as it takes, each formed when a place for it is free; there batches
are not held for a busy event loop, as they run in other processes, and once no more prompts are
coming what is left is cut into as many even batches as it takes at once, so that they end
together.

Calls stay apart. A batch holds only prompts whose calls score the same way (the same scorers,
``use_best`` and postprocessing). If scoring a batch fails, each call's rows are scored again on
their own, so a failure (a postprocessor that raises on one call's text, say) reaches only the
call whose rows caused it; a cancelled call's queued prompts are dropped and its rows in a batch
being scored are not written back.

Example:
    >>> import asyncio
    >>> from uqlm_bert.generation._records import GenerationResult
    >>> from uqlm_bert._blackbox._pipeline import ScoringPipeline
    >>> from uqlm_bert.scorers._lexical import ExactMatchScorer
    >>> async def two_calls():
    ...     queue, scorers = ScoringQueue(max_batch=8), [ExactMatchScorer()]
    ...     calls = [ScoringPipeline(scorers, 1, 8, False, queue=queue) for _ in range(2)]
    ...     for call in calls:
    ...         call.start()
    ...     calls[0].submit(0, "Lima", ["lima", "Quito"])
    ...     calls[1].submit(0, "Paris", ["Paris"])
    ...     done = [await c.finish(GenerationResult.empty(["q"], 2)) for c in calls]
    ...     return [d.scores["exact_match"].tolist() for d in done], queue.batch_sizes
    >>> asyncio.run(two_calls())
    ([[0.5], [1.0]], [2])
"""

from __future__ import annotations

import asyncio
import sys
import time
import weakref
from asyncio import FIRST_COMPLETED
from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from uqlm_bert._checks import check_int

__all__ = ["BatchScoring", "QueuedCall", "ScoringQueue", "ScoringQueues"]

#: A batch's outcome: each call, its rows, and their share of the result or the exception they
#: raised.
Outcome = list[tuple["QueuedCall", list["Row"], Any]]


class QueuedCall(Protocol):
    """What the queue needs of a call (:class:`~uqlm_bert._blackbox._pipeline.ScoringPipeline` is one)."""

    #: calls whose prompts may share a batch have equal recipes (:func:`recipe_of`)
    recipe: Hashable
    #: time batches that held the call's prompts waited for a busy event loop
    held_seconds: float

    def more_coming(self) -> bool:
        """Whether the call may still queue prompts."""

    def prompt_of(self, index: int) -> str | None:
        """The text of the call's prompt ``index``, where known."""

    #: the scorers that score the call's queued prompts, and whether they choose the best
    #: candidate: equal for the calls of one recipe
    overlapped: list[Any]
    use_best: bool
    #: whether the answers' token supports are collected (equal for the calls of one recipe)
    with_supports: bool

    def inputs(self, rows: list[Row]) -> Any:
        """What the scorers take for ``rows`` of this call or of calls of its recipe."""

    def score(self, rows: list[Row]) -> Any:
        """Score ``rows`` of this call or of calls of its recipe (a worker thread); a result
        with ``rows(start, stop)``."""

    def scored(self, rows: list[Row], scored: Any, seconds: float, batch_size: int) -> None:
        """Take the scores of the call's ``rows``."""

    def failed(self, error: BaseException) -> None:
        """Scoring the call's rows raised ``error``."""


@dataclass
class Row:
    """A finished prompt (or a prompt's round of samples) waiting to be scored; ``awaited``:
    the prompt's generation waits on its scores (to decide on another round)."""

    queued_at: float
    call: QueuedCall
    index: int
    response: str | None
    samples: list[str | None]
    awaited: bool = False


class BatchScoring(Protocol):
    """Where a queue's batches are scored, when not in its own worker thread."""

    #: at most this many prompts per batch
    max_batch: int

    async def start(self) -> int:
        """Get ready to score; how many batches it scores at once."""

    async def score(self, batch: list[Row]) -> Outcome:
        """Score ``batch``: each call, its rows, and their share of the result or the exception
        they raised (a failure reaching only the call whose rows raised it, as in
        :meth:`ScoringQueue._score_batch`)."""

    def close(self) -> None:
        """Release what it holds; :meth:`start` makes it ready again."""


class ScoringQueue:
    """Prompts of the calls in flight on one owner and event loop, scored in shared batches.

    Args:
        max_batch: at most this many prompts per batch.
        place: where batches are scored; None: in a worker thread of this process.

    Attributes:
        batch_sizes: the size of every batch scored, in order.
        held_seconds: time ready batches waited for a busy event loop.
    """

    #: Wait at most this long after a prompt queues for more before scoring a small batch.
    GATHER_S = 0.005
    #: A batch this large is scored without waiting.
    MIN_BATCH = 32
    #: While generation runs, hold a batch while the loop uses more than this share of a core
    #: per torch thread (0.3 of a core with 2 threads): below what a burst of replies keeps the
    #: loop's thread at even where the provider's own work shares the cores, above what a
    #: trickle of rate-limited replies does (benchmarks/RESULTS.md, "Generation at the
    #: defaults").
    LOOP_SHARE = 0.15
    #: How long a held batch waits before the loop's load is measured again.
    HOLD_S = 0.2

    def __init__(self, max_batch: int, place: BatchScoring | None = None) -> None:
        self._place = place
        self._slots = 1  # batches scored at once
        self.resize(max_batch)
        self.batch_sizes: list[int] = []
        self.held_seconds = 0.0
        self._rows: list[Row] = []
        self._calls: list[QueuedCall] = []
        self._task: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()
        self._all_in = asyncio.Event()  # set while no more prompts can come
        self._threads: int | None = None
        # the loop thread's CPU time and the wall clock when its load was last measured
        self._loop_mark = (0.0, 0.0)

    def resize(self, max_batch: int) -> None:
        """Batches formed from now on hold at most ``max_batch`` prompts."""
        check_int("max_batch", max_batch, 1)
        self.max_batch = max_batch
        self.min_batch = min(max_batch, self.MIN_BATCH)

    # -- calls join and leave ----------------------------------------------------------------

    def join(self, call: QueuedCall) -> None:
        """Start taking ``call``'s prompts (on the running loop); starts the worker if idle."""
        self._calls.append(call)
        if self._task is None or self._task.done():
            # the torch thread count of the event loop's thread, for the worker threads
            torch = sys.modules.get("torch")
            self._threads = torch.get_num_threads() if torch is not None else None
            self._loop_mark = (time.thread_time(), time.perf_counter())
            self._task = asyncio.ensure_future(self._consume())
        self.wake()

    def leave(self, call: QueuedCall) -> None:
        """Stop taking ``call``'s prompts and drop those still queued."""
        if call in self._calls:
            self._calls.remove(call)
        self._rows = [r for r in self._rows if r.call is not call]
        self.wake()

    async def stop_if_idle(self) -> None:
        """With no call left, stop the worker now (a batch it is scoring in a thread is left to
        end there, its rows no longer wanted), so that no task outlives the calls."""
        task = self._task
        if not self._calls and task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    def put(
        self,
        call: QueuedCall,
        index: int,
        response: str | None,
        samples: list,
        awaited: bool = False,
    ) -> None:
        """Queue one finished prompt of ``call`` (or, ``awaited``, a round its generation waits
        on)."""
        self._rows.append(Row(time.monotonic(), call, index, response, samples, awaited))
        self.wake()

    def wake(self) -> None:
        """Tell the worker that the queue or a call changed."""
        self._changed.set()
        if self.more_coming():
            self._all_in.clear()
        else:
            self._all_in.set()

    def more_coming(self) -> bool:
        """Whether a call may still queue prompts."""
        return any(call.more_coming() for call in self._calls)

    # -- when to score -----------------------------------------------------------------------

    def waited(self) -> float:
        """Seconds since the oldest queued prompt queued (0 with none queued)."""
        return time.monotonic() - self._rows[0].queued_at if self._rows else 0.0

    def batch_ready(self) -> bool:
        """Whether to score the queued prompts now."""
        queued = len(self._rows)
        return queued > 0 and (
            queued >= self.min_batch or not self.more_coming() or self.waited() >= self.GATHER_S
        )

    def loop_load(self) -> float:
        """Cores' worth of CPU the event loop's thread used since the last call (this runs on
        that thread), and start a new window."""
        cpu, wall = time.thread_time(), time.perf_counter()
        last_cpu, last_wall = self._loop_mark
        self._loop_mark = (cpu, wall)
        return (cpu - last_cpu) / max(wall - last_wall, 1e-9)

    def loop_busy(self, load: float) -> bool:
        """Whether a loop using ``load`` cores leaves scoring too little CPU to overlap."""
        return load > self.LOOP_SHARE * (self._threads or 1)

    async def _next_batch(self) -> list[Row]:
        """The next batch to score; empty once no call is open and nothing is queued."""
        while not self.batch_ready():
            if not self._rows and not self._calls:
                return []
            self._changed.clear()
            timeout = self.GATHER_S - self.waited() if self._rows else None
            try:
                await asyncio.wait_for(self._changed.wait(), timeout)
            except asyncio.TimeoutError:
                pass
        held = await self._wait_while_loop_busy() if self._place is None else 0.0
        if not self._rows:  # the calls queued left while the batch was held
            return await self._next_batch()
        recipe = self._rows[0].call.recipe
        batch = [r for r in self._rows if r.call.recipe == recipe][: self._batch_limit()]
        taken = {id(r) for r in batch}
        self._rows = [r for r in self._rows if id(r) not in taken]
        for call in {id(r.call): r.call for r in batch}.values():
            call.held_seconds += held
        return batch

    def _batch_limit(self) -> int:
        """The most prompts the next batch takes: ``max_batch``; but once no more prompts are
        coming, a place that scores several batches at once gets what is left in as many
        even parts, so that they end together."""
        if self._slots <= 1 or self.more_coming():
            return self.max_batch
        return max(1, min(self.max_batch, -(-len(self._rows) // self._slots)))

    def _awaited(self) -> bool:
        """Whether a queued prompt is waited on: its call has nothing more coming (it waits for
        its scores alone, and is not held for the others' generation), or its generation waits
        on the round's scores to go on."""
        return any(row.awaited or not row.call.more_coming() for row in self._rows)

    async def _wait_while_loop_busy(self) -> float:
        """Hold the ready batch while generation runs and keeps the loop busy (module doc);
        the seconds it was held."""
        started = time.perf_counter()
        while self.more_coming() and self._rows and not self._awaited():
            age = time.perf_counter() - self._loop_mark[1]
            if age > 2 * self.HOLD_S:
                # the window reaches back before the batch was ready (the loop idling while
                # the replies were on their way, say): it would call a loop that has just
                # started on a burst of replies calm. Measure the load from now on instead.
                self._loop_mark = (time.thread_time(), time.perf_counter())
                wait = self.HOLD_S
            elif age < self.HOLD_S:
                # a short window mostly sees the loop running this very code
                wait = self.HOLD_S - age
            elif not self.loop_busy(self.loop_load()):
                break
            else:
                wait = self.HOLD_S
            try:
                await asyncio.wait_for(self._all_in.wait(), wait)
            except asyncio.TimeoutError:
                pass
        held = time.perf_counter() - started
        self.held_seconds += held
        return held

    # -- scoring -----------------------------------------------------------------------------

    async def _consume(self) -> None:
        if self._place is not None:
            return await self._consume_on(self._place)
        while batch := await self._next_batch():
            started = time.perf_counter()
            self._deliver(batch, await asyncio.to_thread(self._score_batch, batch), started)

    async def _consume_on(self, place: BatchScoring) -> None:
        """Hand batches to ``place``, as many at once as it takes; a batch is formed when a
        place for it is free, so that prompts queue up into larger batches while all are busy."""
        running: set[asyncio.Future[None]] = set()

        async def score(batch: list[Row]) -> None:
            started = time.perf_counter()
            self._deliver(batch, await place.score(batch), started)

        try:
            self._slots = slots = await place.start()
            while True:
                while len(running) >= slots:
                    done, running = await asyncio.wait(running, return_when=FIRST_COMPLETED)
                    for task in done:
                        task.result()
                batch = await self._next_batch()
                if not batch:
                    break
                running.add(asyncio.ensure_future(score(batch)))
            await asyncio.gather(*running)
        except Exception as exc:  # noqa: BLE001 - the place cannot score: every call stops
            for call in list(self._calls):
                call.failed(exc)
        finally:  # cancelled: the batches in flight are no longer wanted
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)

    def _deliver(self, batch: list[Row], outcome: Outcome, started: float) -> None:
        """Give each call of ``batch`` its rows' scores, or the error they raised."""
        seconds = time.perf_counter() - started
        self.batch_sizes.append(len(batch))
        for call, rows, result in outcome:
            if isinstance(result, BaseException):
                call.failed(result)
            else:
                call.scored(rows, result, seconds, len(batch))

    def _score_batch(self, batch: list[Row]) -> Outcome:
        """Score ``batch`` (in a worker thread, with the torch thread count of the loop's
        thread): each call, its rows, and their share of the result or the exception they
        raised."""
        torch = sys.modules.get("torch")  # loaded when _threads was read, if it is set
        if self._threads is not None and torch.get_num_threads() != self._threads:
            torch.set_num_threads(self._threads)
        calls = by_call(batch)
        try:
            scored = batch[0].call.score([row for rows in calls.values() for row in rows])
        except Exception as exc:  # noqa: BLE001 - handed to the call(s) it belongs to
            if len(calls) == 1:
                return [(call, rows, exc) for call, rows in calls.items()]
            # a failure in a shared batch: each call's rows again on their own, so that it
            # reaches only the call whose rows caused it
            return [(call, rows, _score_or_error(call, rows)) for call, rows in calls.items()]
        return shares(calls, scored)


class ScoringQueues:
    """An owner's scoring queues, one per event loop (a queue's worker runs on its loop), all
    scoring their batches in ``place`` (None: each in its own worker thread)."""

    def __init__(self, place: BatchScoring | None = None) -> None:
        self.place = place
        self._queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, ScoringQueue] = (
            weakref.WeakKeyDictionary()
        )

    def of_running_loop(self, max_batch: int) -> ScoringQueue:
        """The running loop's queue, its batches now of at most ``max_batch`` prompts (and at
        most the place's ``max_batch``)."""
        loop = asyncio.get_running_loop()
        if self.place is not None:
            max_batch = min(max_batch, self.place.max_batch)
        queue = self._queues.get(loop)
        if queue is None:
            queue = self._queues[loop] = ScoringQueue(max_batch, self.place)
        queue.resize(max_batch)
        return queue

    def close(self) -> None:
        """Release the place's resources (a pool of Ray actors); a later call starts it again."""
        if self.place is not None:
            self.place.close()

    def __iter__(self) -> Iterator[ScoringQueue]:
        return iter(list(self._queues.values()))


def by_call(batch: list[Row]) -> dict[QueuedCall, list[Row]]:
    """The batch's rows grouped by call, calls in order of their first row."""
    groups: dict[QueuedCall, list[Row]] = {}
    for row in batch:
        groups.setdefault(row.call, []).append(row)
    return groups


def shares(calls: dict[QueuedCall, list[Row]], scored: Any) -> Outcome:
    """Each call's share of the result of its batch (``calls``, in the batch's order)."""
    out = []
    start = 0
    for call, rows in calls.items():
        out.append((call, rows, scored.rows(start, start + len(rows))))
        start += len(rows)
    return out


def _score_or_error(call: QueuedCall, rows: list[Row]) -> Any:
    """``call``'s scores of ``rows``, or the exception scoring them raised."""
    try:
        return call.score(rows)
    except Exception as exc:  # noqa: BLE001 - handed to the call that caused it
        return exc


def recipe_of(
    scorers: list[Any], use_best: bool, postprocess: Any, supports: bool = True
) -> Hashable:
    """What must be equal for two calls' prompts to share a batch: the same scorer objects,
    ``use_best``, postprocessing (a method of equal objects counts as the same) and whether
    token supports are collected."""
    owner = getattr(postprocess, "__self__", postprocess)
    return (tuple(id(s) for s in scorers), use_best, owner, supports)
