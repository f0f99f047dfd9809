"""The keeper of limits held for a whole cluster: it grants the calls of every process.

One :class:`GrantKeeper` runs as a Ray actor (:mod:`uqlm_bert.generation._cluster_limits` starts it and
talks to it); the processes that share its limits (the replicas of a Ray Serve deployment, say)
are its clients. Per provider it holds what a lane holds in one process
(:mod:`uqlm_bert.generation._shared_limits`), with the same classes and so the same rules:

- the rate limit, a :class:`~uqlm_bert.generation._limiters.RateLimiter`: a client takes a token
  before each attempt and gives it back once the attempt is over; the token frees one
  ``rate_limit_period`` after it is given back;
- the cap on calls in flight (``max_concurrency``, and ``max_calls_per_min`` where lower) and the
  provider's level, both :class:`~uqlm_bert.generation._limiters.AdaptiveConcurrency`: a place is
  taken for each call and given back when it ends or waits to try again; a refusal reported by
  any client lowers the level for all of them.

**Why the window holds across processes.** A token is held at the keeper from before the
attempt is sent until after its reply is back, and then for one period: the keeper grants before
the call arrives at the provider and hears of the release after the reply, so each call holds its
token over the whole period after its arrival. At the end of any window of one period, every
call that arrived in it still holds its token, so no window holds more than ``max_calls``
arrivals. Only the keeper's clock is read, so the clients' clocks need not agree.

**Sessions.** A client opens a session and says what it holds through it; a session silent for
``lease_s`` seconds (the process died, or its event loop stalled) is closed by the keeper, which
takes back its places (as calls that ended) and its tokens (as attempts that ended then). A client
told that its session is gone opens a new one.

**A keeper that replaces a lost one** (``replaces_lost``) knows nothing of what the lost one
granted, so it grants nothing for its first ``max(lease_s, rate_limit_period)`` seconds: the
calls the lost keeper granted end in that time (their runs stop once they cannot reach a
keeper, see :mod:`~uqlm_bert.generation._cluster_limits`), and no window of one period holds arrivals
granted by both.

A request for grants waits at most :data:`POLL_S` seconds for the first one and then takes, at
once, as many more as are free (up to what the client asked for): a client with many calls
waiting gets them in one round trip, and a client hears from the keeper at least every few
seconds, which is how it tells a slow keeper from a busy limit.

Example:
    >>> import asyncio
    >>> async def two_clients_one_cap():
    ...     keeper = GrantKeeper()
    ...     numbers = LimitNumbers(max_concurrency=2, max_calls_per_min=None,
    ...                            rate_limit_period=60.0, adaptive=True, initial_concurrency=None)
    ...     a = await keeper.open("provider", numbers)
    ...     b = await keeper.open("provider", numbers)
    ...     first = await keeper.places(a.session, want=5, retries=0)
    ...     second = await keeper.places(b.session, want=1, retries=0, poll_s=0.05)
    ...     await keeper.stop()
    ...     return len(first.places), len(second.places)
    >>> asyncio.run(two_clients_one_cap())
    (2, 0)
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from uqlm_bert._exceptions import ConfigurationError
from uqlm_bert.generation._limiters import AdaptiveConcurrency, LearnedLimit, Permit, RateLimiter

__all__ = ["POLL_S", "GrantKeeper", "LimitNumbers", "Opened", "Reply", "Standing"]

logger = logging.getLogger("uqlm_bert")

#: The longest a request for grants waits at the keeper before it is answered with none.
POLL_S = 2.0

#: One place at the keeper: its permit in the cap and in the provider's level (either None where
#: the limit is not held).
_Place = tuple[Permit | None, Permit | None]


@dataclass(frozen=True)
class LimitNumbers:
    """The limit settings a keeper holds for one provider, as ``GenerationSettings`` has them.

    Every client of one provider must bring the same numbers: the keeper holds one set.
    """

    max_concurrency: int | None
    max_calls_per_min: int | None
    rate_limit_period: float
    adaptive: bool
    initial_concurrency: int | None

    @classmethod
    def of(cls, settings: Any) -> LimitNumbers:
        """The numbers of a ``GenerationSettings``."""
        return cls(
            settings.max_concurrency,
            settings.max_calls_per_min,
            float(settings.rate_limit_period),
            settings.adaptive,
            settings.initial_concurrency,
        )

    @property
    def cap(self) -> int | None:
        """The most calls in flight: ``max_concurrency`` and ``max_calls_per_min``, the lower
        (``None`` for none)."""
        caps = [c for c in (self.max_concurrency, self.max_calls_per_min) if c]
        return min(caps) if caps else None

    def enforcers(
        self, clock: Callable[[], float] = time.monotonic
    ) -> tuple[AdaptiveConcurrency | None, RateLimiter | None]:
        """What holds these numbers: the cap on calls in flight and the rate limit (each
        ``None`` where not set), as a lane in one process and the keeper for a cluster use them.

        Example:
            >>> capped, rate = LimitNumbers(8, 60, 60.0, True, None).enforcers()
            >>> capped.maximum, rate.max_calls
            (8, 60)
        """
        cap = self.cap
        capped = AdaptiveConcurrency(cap, cap, adaptive=False) if cap else None
        rate = None
        if self.max_calls_per_min is not None:
            rate = RateLimiter(self.max_calls_per_min, self.rate_limit_period, clock)
        return capped, rate


@dataclass(frozen=True)
class Standing:
    """Where a provider's level stands at the keeper, sent with every answer.

    Attributes:
        limit: the calls the level allows in flight (``math.inf`` while it sets none).
        learned: what congestion control learned, as a run in one process keeps it.
    """

    limit: float = math.inf
    learned: LearnedLimit | None = None


@dataclass(frozen=True)
class Opened:
    """A session opened: its id, the keeper's lease, and the provider's standing."""

    session: int
    lease_s: float
    standing: Standing


@dataclass(frozen=True)
class Reply:
    """A keeper's answer.

    Attributes:
        places: the ids of the places granted.
        tokens: the rate limit's tokens granted.
        standing: the provider's standing (None where the session is not known).
        known: ``False`` when the keeper does not know the session (closed after ``lease_s``
            of silence, or opened with a keeper that was lost): the client opens a new one.
    """

    places: tuple[int, ...] = ()
    tokens: int = 0
    standing: Standing | None = None
    known: bool = True


class _Provider:
    """One provider's limits at the keeper."""

    def __init__(self, numbers: LimitNumbers, clock: Callable[[], float], opens_at: float):
        self.capped, self.rate = numbers.enforcers(clock)
        self.level = AdaptiveConcurrency(numbers.initial_concurrency) if numbers.adaptive else None
        self.opens_at = opens_at
        self.in_flight = 0
        self.max_in_flight = 0

    async def place(self, priority: bool) -> _Place:
        """Wait for a place in the cap, then in the level (as a lane does)."""
        capped = await self.capped.acquire(priority) if self.capped is not None else None
        try:
            level = await self.level.acquire(priority) if self.level is not None else None
        except BaseException:
            if capped is not None:
                self.capped.release(capped, None)
            raise
        return self._count((capped, level))

    def try_place(self, priority: bool) -> _Place | None:
        """A place now, if the cap and the level have one free and nobody waits; else None."""
        capped = None
        if self.capped is not None:
            capped = self.capped.try_acquire(priority)
            if capped is None:
                return None
        level = None
        if self.level is not None:
            level = self.level.try_acquire(priority)
            if level is None:
                if capped is not None:
                    self.capped.release(capped, None)
                return None
        return self._count((capped, level))

    def _count(self, place: _Place) -> _Place:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        return place

    def release_place(self, place: _Place, latency: float | None) -> None:
        capped, level = place
        self.in_flight -= 1
        if level is not None:
            assert self.level is not None
            self.level.release(level, latency)
        if capped is not None:
            assert self.capped is not None
            self.capped.release(capped, None)

    def standing(self) -> Standing:
        if self.level is None:
            return Standing()
        return Standing(self.level.limit, self.level.learned())


@dataclass
class _Session:
    key: Hashable
    provider: _Provider
    seen: float
    places: dict[int, _Place] = field(default_factory=dict)
    tokens: int = 0


class GrantKeeper:
    """Grants places in flight and rate-limit tokens to the clients of a cluster, per provider.

    Args:
        lease_s: a session silent this long is closed, and what it held taken back.
        replaces_lost: this keeper replaces one that was lost: it grants nothing for its first
            ``max(lease_s, rate_limit_period)`` seconds (see the module's docstring).
        clock: a monotonic clock (tests may pass their own).

    Every method is a coroutine, so that the keeper runs as an async Ray actor: requests that
    wait do not hold up the others.
    """

    def __init__(
        self,
        lease_s: float = 30.0,
        replaces_lost: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.lease_s = float(lease_s)
        self.replaces_lost = replaces_lost
        self._clock = clock
        self._started = clock()
        self._providers: dict[Hashable, tuple[LimitNumbers, _Provider]] = {}
        self._sessions: dict[int, _Session] = {}
        self._ids = itertools.count(1)
        self._reaper: asyncio.Task[None] | None = None

    # -- sessions ---------------------------------------------------------------------------

    async def open(self, key: Hashable, numbers: LimitNumbers) -> Opened:
        """Open a session for provider ``key`` under the limit settings ``numbers``.

        Raises:
            ConfigurationError: the keeper holds other numbers for this provider.
        """
        found = self._providers.get(key)
        if found is None:
            opens_at = -math.inf
            if self.replaces_lost:
                opens_at = self._started + max(self.lease_s, numbers.rate_limit_period)
            found = self._providers[key] = (numbers, _Provider(numbers, self._clock, opens_at))
        elif found[0] != numbers:
            raise ConfigurationError(
                f"the cluster's limits for {key!r} are held with {found[0]} and this process asks "
                f"for {numbers}: every process sharing them must use the same "
                "max_concurrency, max_calls_per_min, rate_limit_period, adaptive and "
                "initial_concurrency. To change them, give the limits another name "
                "(ClusterLimits(name=...)) or stop the old keeper (ClusterLimits.stop())."
            )
        if self._reaper is None:
            self._reaper = asyncio.get_running_loop().create_task(self._reap())
        session = next(self._ids)
        self._sessions[session] = _Session(key, found[1], self._clock())
        return Opened(session, self.lease_s, found[1].standing())

    async def heartbeat(self, session: int) -> Reply:
        """Keep a session open; where the provider's level stands."""
        s = self._touch(session)
        return Reply(known=False) if s is None else Reply(standing=s.provider.standing())

    async def close(self, session: int) -> None:
        """Close a session; what it still holds is taken back."""
        s = self._sessions.pop(session, None)
        if s is not None:
            self._take_back(s)

    # -- grants -----------------------------------------------------------------------------

    async def places(self, session: int, want: int, retries: int, poll_s: float = POLL_S) -> Reply:
        """Up to ``want`` places in flight, the first ``retries`` of them for calls trying again
        (they go before new calls); waits at most ``poll_s`` for the first."""
        s = self._touch(session)
        if s is None:
            return Reply(known=False)
        provider = s.provider
        got: list[_Place] = []
        if await self._open_now(provider, poll_s):
            try:
                got.append(await asyncio.wait_for(provider.place(retries > 0), poll_s))
            except asyncio.TimeoutError:
                pass
        while got and len(got) < want:
            more = provider.try_place(len(got) < retries)
            if more is None:
                break
            got.append(more)
        if self._sessions.get(session) is not s:  # closed while it waited
            for place in got:
                provider.release_place(place, None)
            return Reply(known=False)
        s.seen = self._clock()
        ids = []
        for place in got:
            ids.append(next(self._ids))
            s.places[ids[-1]] = place
        return Reply(places=tuple(ids), standing=provider.standing())

    async def tokens(self, session: int, want: int, poll_s: float = POLL_S) -> Reply:
        """Up to ``want`` tokens of the rate limit; waits at most ``poll_s`` for the first."""
        s = self._touch(session)
        if s is None:
            return Reply(known=False)
        rate = s.provider.rate
        got = 0
        if rate is None:
            got = want
        elif await self._open_now(s.provider, poll_s):
            try:
                await asyncio.wait_for(rate.acquire(), poll_s)
                got = 1
            except asyncio.TimeoutError:
                pass
            while got and got < want and rate.try_acquire():
                got += 1
        if self._sessions.get(session) is not s:
            for _ in range(got if rate is not None else 0):
                rate.release()  # type: ignore[union-attr]
            return Reply(known=False)
        s.seen = self._clock()
        if rate is not None:
            s.tokens += got
        return Reply(tokens=got, standing=s.provider.standing())

    async def report(self, session: int, events: tuple[tuple[Any, ...], ...]) -> Reply:
        """What a client's calls did, in order: ``("release", place, latency)`` (the call is
        done, or waits to try again; latency None where it failed), ``("congestion", place,
        kind)`` (a 429, 5xx or timeout, ``kind`` as classified) and ``("token",)`` (an attempt
        is over)."""
        s = self._touch(session)
        if s is None:
            return Reply(known=False)
        provider = s.provider
        for event in events:
            if event[0] == "token":
                if s.tokens > 0 and provider.rate is not None:
                    s.tokens -= 1
                    provider.rate.release()
            elif event[0] == "release":
                place = s.places.pop(event[1], None)
                if place is not None:
                    provider.release_place(place, event[2])
            elif event[0] == "congestion":
                place = s.places.get(event[1])
                if place is not None and place[1] is not None:
                    assert provider.level is not None
                    provider.level.congestion(place[1], event[2])
        return Reply(standing=provider.standing())

    # -- for operators and tests ------------------------------------------------------------

    async def snapshot(self) -> dict[Any, dict[str, Any]]:
        """Per provider: calls in flight now and at most, the level, its drops, the sessions
        open, and the tokens free now."""
        out = {}
        for key, (numbers, p) in self._providers.items():
            out[key] = {
                "numbers": numbers,
                "in_flight": p.in_flight,
                "max_in_flight": p.max_in_flight,
                "limit": p.standing().limit,
                "cuts": p.level.cuts if p.level is not None else 0,
                "sessions": sum(s.provider is p for s in self._sessions.values()),
                "tokens_free": p.rate.available() if p.rate is not None else None,
            }
        return out

    async def stop(self) -> None:
        """Stop the background task that closes silent sessions."""
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
            self._reaper = None

    # -- internals --------------------------------------------------------------------------

    def _touch(self, session: int) -> _Session | None:
        s = self._sessions.get(session)
        if s is not None:
            s.seen = self._clock()
        return s

    async def _open_now(self, provider: _Provider, poll_s: float) -> bool:
        """Whether grants may be made (a replacement waits out its first seconds)."""
        wait = provider.opens_at - self._clock()
        if wait <= 0:
            return True
        await asyncio.sleep(min(wait, poll_s))
        return provider.opens_at <= self._clock()

    def _take_back(self, s: _Session) -> None:
        for place in s.places.values():
            s.provider.release_place(place, None)
        if s.provider.rate is not None:
            for _ in range(s.tokens):
                s.provider.rate.release()
        s.places.clear()
        s.tokens = 0

    async def _reap(self) -> None:
        """Close the sessions silent for ``lease_s``, taking back what they held."""
        while True:
            await asyncio.sleep(min(1.0, self.lease_s / 4))
            now = self._clock()
            for session, s in list(self._sessions.items()):
                if now - s.seen > self.lease_s:
                    del self._sessions[session]
                    if s.places or s.tokens:
                        logger.warning(
                            "a client of the cluster's limits for %r was silent for %.0f s: its "
                            "session is closed and its %d places in flight and %d tokens are "
                            "taken back",
                            s.key,
                            now - s.seen,
                            len(s.places),
                            s.tokens,
                        )
                    self._take_back(s)
