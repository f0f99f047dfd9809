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
- :class:`AdaptiveConcurrency` is congestion control for the calls in flight. A run starts with
  as many places as it has calls, up to the hard cap (``maximum``), so a provider that can take
  the whole run gets it in one round trip. The first 429, 5xx or timeout shows that the provider
  was given more than it could serve: the limit drops at once to the calls in flight that it was
  still serving, one place less for each further refusal of the calls sent before the drop, so
  after a burst of refusals the limit is what the provider actually served (no lower than the
  calls in flight when the refused call was sent: a draining run replaces no call that ends).
  From there the limit grows by one place per round trip (one place per four round trips within
  one place of where the provider last pushed back, so a provider with a fixed capacity is
  probed there rarely);
  after a drop on 5xx or timeouts, which may be passing faults rather than a capacity, it first
  doubles each round trip back to half the limit it had. Growth holds while latency is more than
  twice (and 0.25 s above) the lowest seen. A call that must wait to try again gives its place
  back while it waits, and takes the next free one before any new call: retries never exceed the
  limit. What a run learned (:class:`LearnedLimit`) can start the next run where it ended.

Example:
    >>> import asyncio
    >>> async def demo():
    ...     limit = AdaptiveConcurrency(initial=8, maximum=8)
    ...     permits = [await limit.acquire() for _ in range(8)]
    ...     limit.congestion(permits[0], "rate_limit")  # 7 others in flight still served
    ...     limit.congestion(permits[1], "rate_limit")  # refused in the same burst
    ...     return limit.limit
    >>> asyncio.run(demo())
    6
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from uqlm_bert._checks import check_int, check_number

__all__ = ["AdaptiveConcurrency", "LearnedLimit", "Permit", "RateLimiter"]

#: A latency this much above the lowest seen (and this many seconds above it) counts as the
#: provider slowing down: growth stops.
_LATENCY_FACTOR = 2.0
_LATENCY_SLACK = 0.25
#: Within one place of the level last refused, growth is one place per this many round trips.
_PROBE_ROUND_TRIPS = 4
#: Failure kinds after which the limit first grows back fast to half of what it was: a 5xx or a
#: timeout may be a passing fault, a 429 is the provider stating its capacity.
_PASSING = frozenset({"server", "timeout"})


class RateLimiter:
    """At most ``max_calls`` calls per ``period`` seconds, counted where they arrive.

    ``acquire`` before sending a request, ``release`` once its reply or failure is back. Calls
    waiting for a token get one in the order they asked (first come, first served), so calls
    that share one limiter (every call in flight on one ``BlackBoxUQ``) take turns.

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
        check_int("max_calls", max_calls, 1)
        check_number("period", period, strict=True)
        self.max_calls = max_calls
        self.period = period
        self._clock = clock
        self._active = 0
        self._expiries: deque[float] = deque()
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._timer: asyncio.TimerHandle | None = None

    def available(self) -> int:
        """Tokens free now."""
        self._expire(self._clock())
        return self.max_calls - self._active - len(self._expiries)

    def try_acquire(self) -> bool:
        """Take a token now if one is free and no call waits for one; else ``False``."""
        if not self._waiting and self.available() > 0:
            self._active += 1
            return True
        return False

    async def acquire(self) -> None:
        """Wait for a token (after the calls that asked before) and take it."""
        if self.try_acquire():
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(future)
        self._wake_at_next_expiry()
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():  # handed a token while cancelled
                self._active -= 1
                self._hand_over()
            elif future in self._waiting:
                self._waiting.remove(future)
            raise

    def release(self) -> None:
        """The call is back: its token frees one period from now."""
        self._active -= 1
        self._expiries.append(self._clock() + self.period)
        self._hand_over()

    def _hand_over(self) -> None:
        """Give free tokens to the waiting calls, oldest first; wake up again when the next
        token frees."""
        while self._waiting and self.available() > 0:
            future = self._waiting.popleft()
            if not future.done():
                self._active += 1
                future.set_result(None)
        self._wake_at_next_expiry()

    def _wake_at_next_expiry(self) -> None:
        if not self._waiting or self._timer is not None or not self._expiries:
            return
        delay = max(0.0, self._expiries[0] - self._clock())
        self._timer = asyncio.get_running_loop().call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._hand_over()

    def _expire(self, now: float) -> None:
        while self._expiries and self._expiries[0] <= now:
            self._expiries.popleft()


class Permit:
    """A place in flight, taken by :meth:`AdaptiveConcurrency.acquire`.

    Attributes:
        epoch: the number of drops of the limit before the place was taken: a refusal of a call
            taken before the last drop belongs to the burst that caused it.
        others: the other calls in flight when the place was taken: at most what the provider
            was serving when the call reached it, so a refusal of the call puts its capacity
            there or below.
        refused: whether this call's refusal was already counted.
    """

    __slots__ = ("epoch", "others", "refused")

    def __init__(self, epoch: int, others: int) -> None:
        self.epoch = epoch
        self.others = others
        self.refused = False

    def __repr__(self) -> str:
        return f"Permit(epoch={self.epoch}, others={self.others})"


@dataclass(frozen=True)
class LearnedLimit:
    """What congestion control learned about a provider, to start a later run from.

    Attributes:
        limit: the calls allowed in flight at the end.
        threshold: below it, the limit doubles each round trip (after a drop on passing faults).
        ceiling: the level the provider last refused, while it stands (probed slowly).
    """

    limit: float
    threshold: float
    ceiling: float | None


class AdaptiveConcurrency:
    """The number of calls allowed in flight, adapted to how the provider copes.

    Args:
        initial: calls in flight at the start (up to the cap); ``None``: no limit until the
            provider first pushes back, so every call waiting gets a place (within the cap).
        maximum: the hard cap (``None`` for none).
        adaptive: ``False`` keeps the limit at ``initial`` (pass the cap as ``initial``).
        learned: where an earlier run against the same provider ended; the run starts there
            (within ``maximum``) instead of at ``initial``.

    Attributes:
        peak: the highest limit reached.
        start: the limit at the start.
        in_flight: calls in flight now; ``max_in_flight`` the most at once.
        cuts: how many times the limit dropped.
    """

    def __init__(
        self,
        initial: int | None,
        maximum: int | None = None,
        adaptive: bool = True,
        learned: LearnedLimit | None = None,
    ) -> None:
        check_int("initial", initial, 1, none_ok=True)
        check_int("maximum", maximum, 1, none_ok=True)
        self.maximum = maximum
        self.adaptive = adaptive
        self._limit = min(math.inf if initial is None else float(initial), self._hard_cap())
        self._threshold = math.inf  # below it the limit doubles each round trip
        self._ceiling: float | None = None  # the level last refused, while it stands
        self._regrow_to = 0.0  # after the last drop, the limit doubles back up to this
        if learned is not None and adaptive:
            self._limit = min(learned.limit, self._hard_cap())
            self._threshold = learned.threshold
            self._ceiling = learned.ceiling
        self.start = self.limit
        self.peak = self.limit
        self.in_flight = 0
        self.max_in_flight = 0
        self.cuts = 0
        self._epoch = 0
        self._best_latency: float | None = None
        self._waiting: deque[asyncio.Future[Permit]] = deque()
        self._retrying: deque[asyncio.Future[Permit]] = deque()

    @property
    def limit(self) -> float:
        """The calls allowed in flight now: an int of at least 1, or ``math.inf`` while there is
        no limit (no cap, and the provider never pushed back)."""
        return self._limit if self._limit == math.inf else max(1, int(self._limit))

    def learned(self) -> LearnedLimit | None:
        """Where the limit stands, for a later run; ``None`` while the provider never pushed back
        (a later run then starts at its own calls, up to the cap, as this one did)."""
        if not self.adaptive or (self.cuts == 0 and self._threshold == math.inf):
            return None
        return LearnedLimit(self._limit, self._threshold, self._ceiling)

    async def acquire(self, priority: bool = False) -> Permit:
        """Wait until a call may start, and count it in flight.

        ``priority``: a call trying again after a failure; it takes the next free place before
        any new call.
        """
        permit = self.try_acquire(priority)
        if permit is not None:
            return permit
        future: asyncio.Future[Permit] = asyncio.get_running_loop().create_future()
        (self._retrying if priority else self._waiting).append(future)
        try:
            return await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():  # handed a place while cancelled
                self.release(future.result(), None)
            else:
                for line in (self._retrying, self._waiting):
                    if future in line:
                        line.remove(future)
            raise

    def try_acquire(self, priority: bool = False) -> Permit | None:
        """A place now, if one is free and no call waits before this one (retries first, then
        ``priority`` calls); else ``None``."""
        if self.in_flight < self.limit and not self._retrying and (priority or not self._waiting):
            return self._take()
        return None

    def release(self, permit: Permit, latency: float | None) -> None:
        """The call is done, or waits to try again: ``latency`` of its successful attempt (None
        when it failed, or was never sent). Refusals are reported as they happen, with
        :meth:`congestion`."""
        # grow only when the limit was being used: a run with few calls left must not raise it
        # untested
        busy = self.in_flight * 2 >= self.limit
        self.in_flight -= 1
        if latency is not None and busy and permit.epoch == self._epoch:
            self._grow(latency)
        self._hand_over()

    def congestion(self, permit: Permit, kind: str = "rate_limit") -> None:
        """A refusal (429, 5xx or timeout, ``kind`` as classified) of the call holding
        ``permit``: drop the limit to the other calls in flight, the ones the provider was still
        serving; a refusal of a call started before the last drop belongs to a burst already
        answered by a drop, and takes one place more.

        While a run drains (calls that end are not replaced), fewer calls are in flight when the
        refusal is read than when the provider refused: the drop then goes no lower than the
        others in flight when the refused call was sent."""
        if not self.adaptive or permit.refused:
            return
        permit.refused = True
        others = float(self.in_flight - 1)
        if permit.epoch == self._epoch:  # the first refusal since this call started: a drop
            before = self._limit
            if before == math.inf:  # no limit yet: the provider was given what was in flight
                before = float(max(self.in_flight, permit.others + 1))
            self._epoch += 1
            self.cuts += 1
            self._limit = max(1.0, min(before, max(others, float(permit.others))))
            self._regrow_to = before / 2 if kind in _PASSING else 0.0
        else:  # refused in a burst that caused an earlier drop
            self._limit = max(1.0, min(self._limit - 1.0, others))
        self._threshold = max(self._limit, self._regrow_to)
        self._ceiling = self._limit + 1.0

    def cap(self, maximum: int) -> None:
        """Lower the hard cap (the rate limit's ``max_calls``, say)."""
        self.maximum = maximum if self.maximum is None else min(self.maximum, maximum)
        self._limit = min(self._limit, float(self.maximum))
        if self.max_in_flight == 0:  # before the first call: the start is capped too
            self.peak = self.start = self.limit

    def _take(self) -> Permit:
        self.in_flight += 1
        if self.in_flight > self.max_in_flight:
            self.max_in_flight = self.in_flight
        return Permit(self._epoch, self.in_flight - 1)

    def _hand_over(self) -> None:
        """Give free places to waiting calls, retries first."""
        while self.in_flight < self.limit and (self._retrying or self._waiting):
            future = (self._retrying or self._waiting).popleft()
            if not future.done():
                future.set_result(self._take())

    def _grow(self, latency: float) -> None:
        if not self.adaptive:
            return
        best = self._best_latency
        self._best_latency = latency if best is None else min(best, latency)
        if best is not None and latency > max(best * _LATENCY_FACTOR, best + _LATENCY_SLACK):
            return  # the provider slows down: hold
        self._limit = min(self._hard_cap(), self._limit + self._step())
        if self.limit > self.peak:
            self.peak = self.limit

    def _step(self) -> float:
        """Growth per reply: 1 below the threshold (the limit doubles each round trip), else
        1/limit (one place per round trip), slower near the level last refused."""
        if self._limit < self._threshold:
            return 1.0
        step = 1.0 / max(self._limit, 1.0)
        ceiling = self._ceiling
        if ceiling is not None and self._limit >= ceiling + 1.0:
            self._ceiling = ceiling = None  # grown a place past it with no push-back: gone
        if ceiling is not None and self._limit >= ceiling - 1.0:
            step /= _PROBE_ROUND_TRIPS
        return step

    def _hard_cap(self) -> float:
        return float(self.maximum) if self.maximum is not None else math.inf
