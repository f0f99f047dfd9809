"""The limits of one run: adaptive concurrency (congestion control) and the rate limiter.

These drive :class:`AdaptiveConcurrency` the way the generator does: every place that comes
free is filled again at once, and "a round trip" is the replies of the calls that were in flight
at its start. No network, no clock: latencies are given, the rate limiter gets a fake clock.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque

import pytest

from uqlm_bert.generation import limits
from uqlm_bert.generation.limits import AdaptiveConcurrency, Permit, RateLimiter

DECREASE = limits._DECREASE
PROBE = limits._PROBE_ROUND_TRIPS


class Pipe:
    """Calls in flight, refilled to the limit after every reply, as the generator does."""

    def __init__(self, limit: AdaptiveConcurrency) -> None:
        self.limit = limit
        self.calls: deque[Permit] = deque()

    async def fill(self) -> None:
        while self.limit.in_flight < self.limit.limit:
            self.calls.append(await self.limit.acquire())

    async def reply(self, latency: float | None = 1.0) -> Permit:
        permit = self.calls.popleft()
        self.limit.release(permit, latency)
        await self.fill()
        return permit

    async def round_trip(self, latency: float = 1.0) -> None:
        for _ in range(len(self.calls)):
            await self.reply(latency)


async def pipe(initial: int, maximum: int | None = None, adaptive: bool = True) -> Pipe:
    p = Pipe(AdaptiveConcurrency(initial, maximum, adaptive))
    await p.fill()
    return p


async def test_slow_start_doubles_the_limit_each_round_trip_up_to_the_cap():
    p = await pipe(4, maximum=40)
    seen = []
    for _ in range(5):
        await p.round_trip()
        seen.append(p.limit.limit)
    assert seen == [8, 16, 32, 40, 40]
    assert p.limit.peak == 40 and p.limit.max_in_flight == 40 and p.limit.in_flight == 40


async def test_congestion_cuts_once_per_round_trip_and_ends_slow_start():
    p = await pipe(20)
    before = list(p.calls)
    p.limit.congestion(before[0])
    cut = int(20 * DECREASE)
    assert p.limit.limit == cut and p.limit.cuts == 1
    # the other calls of that round trip were started before the cut: their 429s caused it
    for permit in before[1:]:
        p.limit.congestion(permit)
    assert p.limit.limit == cut and p.limit.cuts == 1
    # their replies neither grow the limit nor start calls beyond it
    for _ in before:
        await p.reply()
    assert p.limit.limit == cut and p.limit.in_flight == cut
    # a call started after the cut that meets congestion cuts again
    p.limit.congestion(p.calls[0])
    assert p.limit.limit == int(20 * DECREASE * DECREASE) and p.limit.cuts == 2


def one_place(delta: float, limit: float, rate: float = 1.0) -> bool:
    """Whether a round trip grew the limit by ``rate`` places: ``rate / limit`` for each of the
    ``floor(limit)`` replies of the round trip."""
    return math.floor(limit) / (limit + rate) * rate - 1e-9 <= delta <= rate + 1e-9


async def test_after_a_cut_the_limit_grows_one_place_per_round_trip():
    p = await pipe(32)
    p.limit.congestion(p.calls[0])
    for _ in range(32):  # the calls of the round trip that was cut
        await p.reply()
    for _ in range(3):
        before = p.limit._limit
        await p.round_trip()
        assert one_place(p.limit._limit - before, before)


async def test_growth_slows_near_the_limit_last_cut_then_resumes_past_it():
    ceiling = 13.0
    p = await pipe(int(ceiling))
    p.limit.congestion(p.calls[0])
    for _ in range(int(ceiling)):
        await p.reply()
    assert p.limit._limit == pytest.approx(ceiling * DECREASE)

    zones = {"below": [], "near": [], "past": []}
    while p.limit._limit < ceiling + 3:
        before = p.limit._limit
        await p.round_trip()
        zone = "below" if before < ceiling - 1 else "near" if before < ceiling + 1 else "past"
        zones[zone].append((before, p.limit._limit - before))
    # far below the point of push-back, a place per round trip
    assert zones["below"] and all(one_place(d, lim) for lim, d in zones["below"][:-1])
    # within a place of it (each side), a place per PROBE round trips: it is probed rarely
    near = zones["near"]
    assert 2 * PROBE - 1 <= len(near) <= 2 * PROBE + 1
    assert all(one_place(d, lim, 1 / PROBE) for lim, d in near[1:-1])
    # past it by a whole place with no push-back, a place per round trip again
    assert all(one_place(d, lim) for lim, d in zones["past"][1:])


async def test_growth_holds_while_latency_rises():
    p = await pipe(8)
    await p.round_trip(latency=1.0)
    assert p.limit.limit == 16
    slow = 2.0 * 1.0 + 0.01  # more than twice the lowest latency, and 0.25 s above it
    await p.round_trip(latency=slow)
    assert p.limit.limit == 16
    await p.round_trip(latency=1.2)  # flat again: growth resumes
    assert p.limit.limit == 32


async def test_no_growth_from_failed_calls_or_an_idle_limit():
    p = await pipe(8)
    await p.round_trip(latency=None)  # failed calls (latency None) say nothing about capacity
    assert p.limit.limit == 8
    # a few calls left in a run: the limit is not raised on replies while most places are idle
    limit = AdaptiveConcurrency(16)
    permits = [await limit.acquire() for _ in range(3)]
    for permit in permits:
        limit.release(permit, 1.0)
    assert limit.limit == 16


async def test_fixed_concurrency_never_adapts():
    p = await pipe(8, maximum=8, adaptive=False)
    await p.round_trip()
    p.limit.congestion(p.calls[0])
    await p.round_trip()
    assert p.limit.limit == 8 and p.limit.cuts == 0


async def test_a_rate_limit_caps_the_limit_and_its_peak_from_the_start():
    limit = AdaptiveConcurrency(16, 256)
    limit.cap(10)
    assert limit.limit == 10 and limit.peak == 10 and limit.maximum == 10
    p = Pipe(limit)
    await p.fill()
    for _ in range(3):
        await p.round_trip()
    assert limit.peak == 10 and limit.max_in_flight == 10


async def test_acquire_waits_for_a_free_place():
    limit = AdaptiveConcurrency(1, adaptive=False)
    first = await limit.acquire()
    waiting = asyncio.ensure_future(limit.acquire())
    await asyncio.sleep(0)
    assert not waiting.done()
    limit.release(first, 1.0)
    await asyncio.wait_for(waiting, 1.0)
    assert limit.in_flight == 1


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_rate_limiter_token_is_held_until_the_reply_plus_one_period():
    clock = FakeClock()
    limiter = RateLimiter(max_calls=2, period=60.0, clock=clock)
    await limiter.acquire()
    await limiter.acquire()
    assert limiter.available() == 0
    clock.now += 30.0  # a slow call: its token is held while it runs...
    limiter.release()
    clock.now += 59.0
    assert limiter.available() == 0  # ...and for one period after its reply
    clock.now += 1.0
    assert limiter.available() == 1
    limiter.release()  # the second call's reply: its token is held for a period too
    assert limiter.available() == 1
    clock.now += 60.0
    assert limiter.available() == 2
