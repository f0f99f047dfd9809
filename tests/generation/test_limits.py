"""The limits of one run: adaptive concurrency (congestion control) and the rate limiter.

These drive :class:`AdaptiveConcurrency` the way the generator does: every place that comes
free is filled again at once, and "a round trip" is the replies of the calls that were in flight
at its start. No network, no clock: latencies are given, the rate limiter gets a fake clock.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque

from uqlm_bert.generation import _limiters as limits
from uqlm_bert.generation._limiters import AdaptiveConcurrency, Permit, RateLimiter

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

    def refuse(self, permit: Permit, kind: str = "rate_limit") -> None:
        """The provider refuses the call holding ``permit``: it reports congestion and gives its
        place back while it waits to try again."""
        self.calls.remove(permit)
        self.limit.congestion(permit, kind)
        self.limit.release(permit, None)

    async def round_trip(self, latency: float = 1.0) -> None:
        for _ in range(len(self.calls)):
            await self.reply(latency)


async def pipe(initial: int, maximum: int | None = None, adaptive: bool = True, **kw) -> Pipe:
    p = Pipe(AdaptiveConcurrency(initial, maximum, adaptive, **kw))
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


async def test_a_burst_of_refusals_drops_the_limit_to_what_the_provider_served():
    served, window = 12, 40
    p = await pipe(window)
    burst = list(p.calls)[served:]  # the provider serves 12 and refuses the rest at once
    for permit in burst:
        p.refuse(permit)
    assert p.limit.limit == served and p.limit.cuts == 1 and p.limit.in_flight == served
    # a call refused again while it is retried counts once
    p.limit.congestion(burst[0])
    assert p.limit.limit == served
    # the served calls' replies came from before the drop: they do not grow the limit
    for _ in range(served):
        await p.reply()
    assert p.limit.limit == served and p.limit.in_flight == served
    # a call started after the drop that is refused drops it again, to the others in flight
    p.refuse(p.calls[0])
    assert p.limit.limit == served - 1 and p.limit.cuts == 2


async def test_a_refusal_read_while_the_run_drains_drops_to_what_was_in_flight_when_it_was_sent():
    capacity = 12
    limit = AdaptiveConcurrency(capacity + 1)
    calls = [await limit.acquire() for _ in range(capacity + 1)]  # a probe: one above capacity
    probe = calls[-1]
    assert probe.others == capacity
    # the run is draining: four calls end and nothing takes their places, before the probe's
    # 429 is read
    for permit in calls[:4]:
        limit.release(permit, None)
    limit.congestion(probe, "rate_limit")
    limit.release(probe, None)
    # the provider refused one call above the 12 in flight when the probe was sent: 12, not the
    # 8 still in flight when its refusal was read
    assert limit.limit == capacity and limit.in_flight == capacity - 4


def one_place(delta: float, limit: float, rate: float = 1.0) -> bool:
    """Whether a round trip grew the limit by ``rate`` places: ``rate / limit`` for each of the
    ``floor(limit)`` replies of the round trip."""
    return math.floor(limit) / (limit + rate) * rate - 1e-9 <= delta <= rate + 1e-9


async def test_after_a_drop_growth_is_slow_near_the_level_refused_then_a_place_per_round_trip():
    refused_at = 13
    p = await pipe(refused_at)
    p.refuse(p.calls[-1])  # the 13th call is refused: the provider served 12
    for _ in range(refused_at - 1):  # the replies of the round trip that was cut
        await p.reply()
    assert p.limit._limit == refused_at - 1

    zones = {"near": [], "past": []}
    while p.limit._limit < refused_at + 4:
        before = p.limit._limit
        await p.round_trip()
        zones["near" if before < refused_at + 1 else "past"].append(
            (before, p.limit._limit - before)
        )
    # within a place of the level refused (each side), a place per PROBE round trips: a provider
    # with a fixed capacity is probed there rarely
    near = zones["near"]
    assert 2 * PROBE - 1 <= len(near) <= 2 * PROBE + 1
    assert all(one_place(d, lim, 1 / PROBE) for lim, d in near[1:-1])
    # past it by a whole place with no push-back, a place per round trip
    assert zones["past"] and all(one_place(d, lim) for lim, d in zones["past"][1:])


async def test_after_passing_faults_the_limit_doubles_back_to_half_of_what_it_was():
    p = await pipe(64)
    for permit in list(p.calls)[4:]:  # 5xx for all but 4 calls in flight
        p.refuse(permit, "server")
    assert p.limit.limit == 4
    for _ in range(4):
        await p.reply()
    seen = []
    for _ in range(3):
        await p.round_trip()
        seen.append(p.limit.limit)
    assert seen == [8, 16, 32]  # doubling up to half of 64
    await p.round_trip()  # then a place per round trip
    assert one_place(p.limit._limit - 32, 32)


async def test_a_429_means_no_fast_regrowth():
    p = await pipe(64)
    for permit in list(p.calls)[4:]:
        p.refuse(permit, "rate_limit")
    for _ in range(4):
        await p.reply()
    for _ in range(3):
        await p.round_trip()
    assert p.limit.limit <= 5


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
    p.refuse(p.calls[0])
    await p.fill()
    await p.round_trip()
    assert p.limit.limit == 8 and p.limit.cuts == 0 and p.limit.learned() is None


async def test_a_rate_limit_caps_the_limit_and_its_peak_from_the_start():
    limit = AdaptiveConcurrency(256, 256)
    limit.cap(10)
    assert limit.limit == 10 and limit.peak == 10 and limit.start == 10 and limit.maximum == 10
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


async def test_a_retry_takes_the_next_free_place_before_any_new_call():
    limit = AdaptiveConcurrency(1, adaptive=False)
    first = await limit.acquire()
    new_call = asyncio.ensure_future(limit.acquire())
    await asyncio.sleep(0)
    retry = asyncio.ensure_future(limit.acquire(priority=True))
    await asyncio.sleep(0)
    limit.release(first, 1.0)
    await asyncio.sleep(0)
    assert retry.done() and not new_call.done()
    limit.release(retry.result(), 1.0)
    await asyncio.wait_for(new_call, 1.0)


async def test_a_cancelled_wait_leaves_no_place_taken():
    limit = AdaptiveConcurrency(1, adaptive=False)
    first = await limit.acquire()
    waiting = [asyncio.ensure_future(limit.acquire()) for _ in range(2)]
    await asyncio.sleep(0)
    waiting[0].cancel()
    limit.release(first, 1.0)  # handed to the second waiter: the first was cancelled
    await asyncio.wait_for(waiting[1], 1.0)
    assert limit.in_flight == 1
    # handed a place, then cancelled before it could run: the place comes back
    late = asyncio.ensure_future(limit.acquire())
    await asyncio.sleep(0)
    limit.release(waiting[1].result(), 1.0)
    late.cancel()
    await asyncio.gather(late, return_exceptions=True)
    assert limit.in_flight == 0


async def test_a_run_starts_where_a_learned_limit_ended_within_the_cap():
    p = await pipe(40)
    for permit in list(p.calls)[12:]:
        p.refuse(permit)
    learned = p.limit.learned()
    assert learned is not None and learned.limit == 12
    again = AdaptiveConcurrency(700, 1000, learned=learned)
    assert again.limit == again.start == 12
    # growth goes on as it was: slowly near the level refused, no doubling
    q = Pipe(again)
    await q.fill()
    await q.round_trip()
    assert 12 < again._limit <= 12 + 1 / PROBE + 1e-9
    assert AdaptiveConcurrency(700, 8, learned=learned).limit == 8  # the cap still holds
    # a provider that never pushed back teaches nothing
    assert AdaptiveConcurrency(40).learned() is None


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
