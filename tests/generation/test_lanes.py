"""The limits shared by concurrent calls (uqlm_bert.generation._shared_limits) and the first-come order of
the rate limiter, driven by hand: no network."""

from __future__ import annotations

import asyncio

from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel

from uqlm_bert.generation import _learned_limits as memory
from uqlm_bert.generation import forget_learned_limits
from uqlm_bert.generation._limiters import AdaptiveConcurrency, LearnedLimit, RateLimiter
from uqlm_bert.generation._settings import GenerationSettings
from uqlm_bert.generation._shared_limits import ProviderState, SharedLimits, provider_state


def state() -> ProviderState:
    return ProviderState(("http://x", "t", "m"), AdaptiveConcurrency(None), None)


def test_a_timeout_counts_from_the_send_or_the_providers_last_answer_within_a_bound():
    p = state()
    timeout = 2.0
    a = p.attempt_sent(10.0)
    b = p.attempt_sent(10.5)
    c = p.attempt_sent(11.0)
    assert (a.ahead, b.ahead, c.ahead) == (0, 1, 2)
    assert p.deadline(c, timeout) == 13.0  # nothing answered yet: from its send
    p.attempt_done(answered_at=12.5)  # the provider answers one of them (in any order)
    assert p.deadline(b, timeout) == 14.5 and p.deadline(c, timeout) == 14.5
    p.attempt_done(answered_at=None)  # a failure is no answer
    assert p.deadline(c, timeout) == 14.5
    # a provider that keeps answering others extends a waiting attempt by at most one timeout
    # per attempt that was in flight when it was sent, and one for itself
    for k in range(20):  # calls sent after c, answered while a, b and c wait
        p.attempt_sent(12.0 + k)
        p.attempt_done(answered_at=14.0 + k)
    assert p.deadline(a, timeout) == 10.0 + timeout * 1
    assert p.deadline(b, timeout) == 10.5 + timeout * 2
    assert p.deadline(c, timeout) == 11.0 + timeout * 3
    d = p.attempt_sent(40.0)  # sent after the last answer: from its send
    assert d.ahead == 1 and p.deadline(d, timeout) == 42.0  # one of a, b, c still out


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
