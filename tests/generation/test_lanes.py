"""The limits shared by concurrent calls (uqlm_bert.generation.lanes) and the first-come order of
the rate limiter, driven by hand: no network."""

from __future__ import annotations

import asyncio

from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel

from uqlm_bert.generation import forget_learned_limits, memory
from uqlm_bert.generation.lanes import ProviderState, SharedLimits, provider_state
from uqlm_bert.generation.limits import AdaptiveConcurrency, LearnedLimit, RateLimiter
from uqlm_bert.generation.settings import GenerationSettings


def state() -> ProviderState:
    return ProviderState(("http://x", "t", "m"), AdaptiveConcurrency(None), None)


def test_a_timeout_counts_from_the_send_or_the_last_answer_to_an_earlier_call():
    p = state()
    a, b, c = p.attempt_sent(), p.attempt_sent(), p.attempt_sent()
    assert p.clock_start(c, sent_at=10.0) == 10.0  # nothing answered yet: from its send
    p.attempt_done(a, answered_at=12.0)  # the provider works through its queue
    assert p.clock_start(b, 10.0) == 12.0 and p.clock_start(c, 10.0) == 12.0
    p.attempt_done(c, answered_at=13.0)  # an answer to a later call does not move b's clock
    assert p.clock_start(b, 10.0) == 12.0
    d = p.attempt_sent()
    assert p.clock_start(d, 14.0) == 14.0  # sent after the last answer
    p.attempt_done(b, answered_at=None)  # a failure is no answer
    assert p.clock_start(d, 11.0) == 13.0


def test_the_answers_kept_stay_few_while_calls_come_and_go():
    p = state()
    for k in range(1000):
        attempt = p.attempt_sent()
        p.attempt_done(attempt, answered_at=float(k))
    assert len(p._answers) <= 1
    late = p.attempt_sent()
    assert p.clock_start(late, 0.0) == 999.0


async def test_the_rate_limiter_serves_waiting_calls_in_the_order_they_asked():
    limiter = RateLimiter(max_calls=1, period=0.01)
    order: list[int] = []

    async def call(k: int) -> None:
        await limiter.acquire()
        order.append(k)
        limiter.release()

    tasks = []
    for k in range(6):
        tasks.append(asyncio.ensure_future(call(k)))
        await asyncio.sleep(0)  # each asks in turn
    await asyncio.wait_for(asyncio.gather(*tasks), 10)
    assert order == list(range(6))


async def test_a_cancelled_wait_for_a_token_takes_none():
    limiter = RateLimiter(max_calls=1, period=60.0)
    await limiter.acquire()
    waiting = asyncio.ensure_future(limiter.acquire())
    await asyncio.sleep(0)
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    assert limiter._waiting == type(limiter._waiting)() and limiter.available() == 0


async def test_calls_on_one_owner_share_a_lane_and_take_places_in_turn():
    forget_learned_limits()
    lanes = SharedLimits()
    settings = GenerationSettings(max_concurrency=2)
    llm = ParrotFakeChatModel()
    lane = lanes.lane(llm, settings)
    assert lanes.lane(llm, settings) is lane
    assert lanes.lane(llm, settings.replace(max_concurrency=3)) is not lane
    provider, clients = lane.enter(llm, settings, calls=10)
    places = [await lane.acquire(provider) for _ in range(2)]
    assert lane.in_flight == 2 and lane.limit == 2
    got: list[str] = []

    async def wait(name: str, priority: bool = False) -> None:
        place = await lane.acquire(provider, priority)
        got.append(name)
        lane.release(provider, place, None)

    first = asyncio.ensure_future(wait("first"))
    await asyncio.sleep(0)
    second = asyncio.ensure_future(wait("second"))
    await asyncio.sleep(0)
    retry = asyncio.ensure_future(wait("retry", priority=True))
    await asyncio.sleep(0)
    lane.release(provider, places.pop(), None)
    lane.release(provider, places.pop(), None)
    await asyncio.wait_for(asyncio.gather(first, second, retry), 5)
    assert got == ["retry", "first", "second"]  # a retry first, then first come first served
    await lane.leave(provider, clients)


async def test_a_provider_state_starts_from_what_earlier_loops_learned_and_is_shared_live():
    forget_learned_limits()
    key = ("http://127.0.0.1:1/v1", "openai-chat", "m")
    memory.remember(key, concurrency=LearnedLimit(7.0, 7.0, 8.0), max_choices=2)
    settings = GenerationSettings()
    p = provider_state(key, settings)
    assert p.concurrency.limit == 7 and p.max_choices == 2
    p.users += 1
    assert provider_state(key, settings) is p  # shared by the calls on this loop
    forget_learned_limits()
    assert provider_state(key, settings) is p  # in use: kept for the calls using it
    p.users -= 1
    fresh = provider_state(key, settings)
    assert fresh is not p and fresh.concurrency.learned() is None
