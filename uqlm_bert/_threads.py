"""A torch intra-op thread count that can change while a long scoring call runs.

``generate_and_score`` scores prompts in a worker thread while the event loop keeps the LLM calls
going. While generation runs and keeps the event loop's thread busy (:class:`LoopLoad`),
scoring uses one torch thread fewer, leaving a core to the event loop; otherwise it should use
them all. A batch that starts just before the last call returns may take tens of seconds, so
fixing the count when the batch starts would leave a core idle for most of it. Instead the
caller sets a *budget* here (a function giving the number of threads wanted now) and the encoder
follows it before every forward batch and every layer.

The budget lives in a :class:`contextvars.ContextVar`: it holds in the thread (or task) that set
it and in nothing else, so concurrent scoring calls elsewhere in the process are unaffected.

Example:
    >>> import torch
    >>> from uqlm_bert._threads import follow_budget, thread_budget
    >>> before = torch.get_num_threads()
    >>> with thread_budget(lambda: 1):
    ...     follow_budget()  # what the encoder does before each forward batch
    ...     torch.get_num_threads()
    1
    >>> torch.get_num_threads() == before
    True
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar

__all__ = ["LoopLoad", "follow_budget", "thread_budget"]

_BUDGET: ContextVar[Callable[[], int] | None] = ContextVar("uqlm_bert_thread_budget", default=None)


@contextlib.contextmanager
def thread_budget(budget: Callable[[], int]) -> Iterator[None]:
    """Within this block, forward passes run with ``budget()`` torch intra-op threads (at least
    1), asked again before every batch; the calling thread's count is put back on exit (when
    torch was loaded on entry: otherwise nothing here has used it before).

    ``torch.set_num_threads`` sets the calling thread's count and the default of threads that
    start using torch later: both are as they were after the block.
    """
    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch is not None else None
    token = _BUDGET.set(budget)
    try:
        follow_budget()
        yield
    finally:
        _BUDGET.reset(token)
        if before is not None and torch.get_num_threads() != before:
            torch.set_num_threads(before)


def follow_budget() -> None:
    """Set this thread's torch intra-op thread count to the budget in force (none: no change)."""
    budget = _BUDGET.get()
    torch = sys.modules.get("torch")
    if budget is None or torch is None:
        return
    wanted = max(1, int(budget()))
    if torch.get_num_threads() != wanted:
        torch.set_num_threads(wanted)


class LoopLoad:
    """How busy the event loop's thread is: its CPU time over the last ``window`` seconds of
    wall time, measured from inside the loop.

    Scoring alongside generation should leave the loop a core only while the loop needs one. With
    calls that return in a few milliseconds the client code keeps the loop's thread busy, and a
    scoring thread competing with it for the core slows both down; with calls that take a second,
    the loop mostly waits, and a core kept for it would idle.

    Example:
        >>> import asyncio
        >>> async def demo():
        ...     load = LoopLoad(window=0.05)
        ...     load.start()
        ...     await asyncio.sleep(0.2)  # an idle loop
        ...     await load.stop()
        ...     return load.fraction < 0.5
        >>> asyncio.run(demo())
        True
    """

    #: A loop using at least this share of a core counts as busy.
    BUSY = 0.5

    def __init__(self, window: float = 0.25) -> None:
        self.window = window
        #: The loop thread's CPU seconds per wall second over the last window; starts busy, so
        #: that nothing competes with the loop before the first reading.
        self.fraction = 1.0
        self._task: asyncio.Task[None] | None = None

    @property
    def busy(self) -> bool:
        """Whether the loop's thread used at least ``BUSY`` of a core in the last window."""
        return self.fraction >= self.BUSY

    def start(self) -> None:
        """Start measuring (call from a coroutine running on the loop)."""
        self._task = asyncio.ensure_future(self._watch())

    async def stop(self) -> None:
        """Stop measuring, and wait until the measuring task has ended."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _watch(self) -> None:
        cpu, wall = time.thread_time(), time.monotonic()
        while True:
            await asyncio.sleep(self.window)
            now_cpu, now = time.thread_time(), time.monotonic()
            self.fraction = (now_cpu - cpu) / max(now - wall, 1e-9)
            cpu, wall = now_cpu, now
