"""How many LLM calls may be in flight, and how many may reach the provider in any window.

Two limits work together, both on the event loop of one run:

- :class:`RateLimiter` keeps ``max_calls`` in any window of ``period`` seconds *as the provider
  counts them*, by arrival. A call holds a token from the moment it is issued until its reply
  (or its failure) returns, plus one period. Every call that arrives in a window
  ``[t, t + period]`` was issued by ``t + period`` and returned after ``t``, so it still holds
  its token at ``t + period``: at most ``max_calls`` of them. This holds however long the
  calls take to reach the provider (a busy machine delays them), which a limit on issue times
  alone does not. Throughput stays close to the limit: each token serves one call every
  ``period`` plus the call's latency.
- :class:`AdaptiveConcurrency` is congestion control for the calls in flight: it starts at
  ``initial`` calls and doubles them each round trip (one more place per reply) while the
  provider keeps up: no 429, 5xx or timeout, and latency flat. The first 429, 5xx or timeout
  ends this slow start and cuts the limit to 0.7 of itself; each later one cuts it again, but
  only once per round trip (calls started before a cut report the congestion that caused it).
  After a cut the limit grows by one place per round trip, and by one per four round trips
  within one place of the limit that was last cut, where the provider pushed back: a provider
  with a fixed capacity is probed there rarely, so its 429s stay few, and once the limit passes
  that point by a whole place with no push-back it grows by one per round trip again. Growth
  holds while latency is more than twice (and 0.25 s above) the lowest seen. The limit never
  exceeds ``maximum`` (a hard cap) or the rate limit's ``max_calls``.

Example:
    >>> import asyncio
    >>> async def demo():
    ...     limit = AdaptiveConcurrency(initial=2, maximum=8)
    ...     permit = await limit.acquire()
    ...     limit.release(permit, latency=0.1)
    ...     return limit.limit
    >>> asyncio.run(demo())
    3
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["AdaptiveConcurrency", "Permit", "RateLimiter"]

#: A latency this much above the lowest seen (and this many seconds above it) counts as the
#: provider slowing down: growth stops.
_LATENCY_FACTOR = 2.0
_LATENCY_SLACK = 0.25
#: The multiplicative cut on a congestion signal.
_DECREASE = 0.7
#: Within one place of the limit last cut, growth is one place per this many round trips.
_PROBE_ROUND_TRIPS = 4


class RateLimiter:
    """At most ``max_calls`` calls per ``period`` seconds, counted where they arrive.

    ``acquire`` before sending a request, ``release`` once its reply or failure is back.

    Args:
        max_calls: calls allowed in any window of ``period`` seconds.
        period: the window, in seconds.
        clock: a monotonic clock (tests may pass their own).

    Example:
        >>> import asyncio
        >>> async def two_calls():
        ...     limiter = RateLimiter(max_calls=2, period=60)
        ...     for _ in range(2):
        ...         await limiter.acquire()
        ...         limiter.release()
        ...     return limiter.available()
        >>> asyncio.run(two_calls())
        0
    """

    def __init__(
        self, max_calls: int, period: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.max_calls = max_calls
        self.period = period
        self._clock = clock
        self._active = 0
        self._expiries: deque[float] = deque()
        self._changed = asyncio.Event()

    def available(self) -> int:
        """Tokens free now."""
        self._expire(self._clock())
        return self.max_calls - self._active - len(self._expiries)

    async def acquire(self) -> None:
        """Wait for a token and take it."""
        while True:
            now = self._clock()
            if self.available() > 0:
                self._active += 1
                return
            self._changed.clear()
            wait = self._expiries[0] - now if self._expiries else None
            try:
                await asyncio.wait_for(self._changed.wait(), wait)
            except asyncio.TimeoutError:
                pass

    def release(self) -> None:
        """The call is back: its token frees one period from now."""
        self._active -= 1
        self._expiries.append(self._clock() + self.period)
        self._changed.set()

    def _expire(self, now: float) -> None:
        while self._expiries and self._expiries[0] <= now:
            self._expiries.popleft()


@dataclass(frozen=True)
class Permit:
    """A place in flight; ``epoch`` tells whether the limit was cut since it was taken."""

    epoch: int


class AdaptiveConcurrency:
    """The number of calls allowed in flight, adapted to how the provider copes.

    Args:
        initial: calls in flight at the start.
        maximum: the hard cap (``None`` for none).
        adaptive: ``False`` keeps the limit at ``initial`` (pass the cap as ``initial``).

    Attributes:
        peak: the highest limit reached.
        in_flight: calls in flight now; ``max_in_flight`` the most at once.
        cuts: how many times the limit was cut.
    """

    def __init__(self, initial: int, maximum: int | None = None, adaptive: bool = True) -> None:
        self.maximum = maximum
        self.adaptive = adaptive
        self._limit = float(initial if maximum is None else min(initial, maximum))
        self.peak = int(self._limit)
        self.in_flight = 0
        self.max_in_flight = 0
        self.cuts = 0
        self._epoch = 0
        self._slow_start = True
        self._ceiling: float | None = None  # the limit last cut, while it stands
        self._best_latency: float | None = None
        self._changed = asyncio.Event()

    @property
    def limit(self) -> int:
        """The calls allowed in flight now (at least 1)."""
        return max(1, int(self._limit))

    async def acquire(self) -> Permit:
        """Wait until a call may start, and count it in flight."""
        while self.in_flight >= self.limit:
            self._changed.clear()
            await self._changed.wait()
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        return Permit(self._epoch)

    def release(self, permit: Permit, latency: float | None) -> None:
        """The call is done: ``latency`` of its successful attempt (None when it failed, or
        was never sent). Congestion is reported as it happens, with :meth:`congestion`."""
        # grow only when the limit was being used: a run with few calls left must not raise it
        # untested
        busy = self.in_flight * 2 >= self.limit
        self.in_flight -= 1
        if latency is not None and busy and permit.epoch == self._epoch:
            self._grow(latency)
        self._changed.set()

    def congestion(self, permit: Permit) -> None:
        """A congestion signal from a call that holds ``permit``: cut the limit, once per epoch
        (calls started before the last cut report the congestion that caused it)."""
        if not self.adaptive or permit.epoch != self._epoch:
            return
        self._epoch += 1
        self._slow_start = False
        self._ceiling = self._limit
        self._limit = max(1.0, self._limit * _DECREASE)
        self.cuts += 1

    def _grow(self, latency: float) -> None:
        if not self.adaptive:
            return
        best = self._best_latency
        self._best_latency = latency if best is None else min(best, latency)
        if best is not None and latency > max(best * _LATENCY_FACTOR, best + _LATENCY_SLACK):
            return  # the provider slows down: hold
        self._limit = min(self._hard_cap(), self._limit + self._step())
        self.peak = max(self.peak, self.limit)

    def _step(self) -> float:
        """Growth per reply: 1 in slow start (the limit doubles each round trip), else
        1/limit (one place per round trip), slower near the limit last cut."""
        if self._slow_start:
            return 1.0
        step = 1.0 / max(self._limit, 1.0)
        ceiling = self._ceiling
        if ceiling is not None and self._limit >= ceiling + 1.0:
            self._ceiling = ceiling = None  # grown a place past it with no push-back: gone
        if ceiling is not None and self._limit >= ceiling - 1.0:
            step /= _PROBE_ROUND_TRIPS
        return step

    def _hard_cap(self) -> float:
        return float(self.maximum) if self.maximum is not None else float("inf")

    def cap(self, maximum: int) -> None:
        """Lower the hard cap (the rate limit's ``max_calls``, say)."""
        self.maximum = maximum if self.maximum is None else min(self.maximum, maximum)
        self._limit = min(self._limit, float(self.maximum))
        if self.max_in_flight == 0:  # before the first call: the start is capped too
            self.peak = self.limit
