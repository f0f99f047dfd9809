"""Adaptive concurrency end to end: ChatOpenAI against the scripted server on 127.0.0.1.

The server plays three providers: one that answers 429 to requests beyond a number in flight,
one with no limit, and (with ``max_calls_per_min``) one that counts calls per window. What is
checked is what the server saw (its request log and in-flight counter) and what the run reports
in ``metadata["calls"]``; nothing is timed.
"""

from __future__ import annotations

import pytest

from tests.openai_server import FakeOpenAIServer
from uqlm_bert.black_box import BlackBoxUQ
from uqlm_bert.generation import limits
from uqlm_bert.generation.settings import GenerationSettings
from uqlm_bert.scorers.base import Scorer

langchain_openai = pytest.importorskip("langchain_openai")

pytestmark = pytest.mark.network


class NoScore(Scorer):
    """A scorer that does no work: these tests are about the calls."""

    name = "none"

    def score(self, responses, sampled_responses, show_progress_bars=False):
        return [0.0] * len(responses)


def chat(server: FakeOpenAIServer):
    return langchain_openai.ChatOpenAI(
        model="fake-model", base_url=server.base_url, api_key="test-key", temperature=0.0
    )


async def run(server: FakeOpenAIServer, n_prompts: int, m: int, initial=None, **settings):
    uq = BlackBoxUQ(chat(server), scorers=[NoScore()], show_progress_bars=False, **settings)
    if initial is not None:
        uq.generation = uq.generation.replace(initial_concurrency=initial)
    result = await uq.generate_and_score([f"p{i}" for i in range(n_prompts)], num_responses=m)
    assert result.metadata["failures"]["responses"] == 0
    assert result.metadata["failures"]["samples"] == 0
    return result.metadata["calls"]


async def test_a_provider_capped_at_n_in_flight_is_held_near_n_without_a_429_storm():
    n = 12
    start = GenerationSettings().initial_concurrency
    assert start > n  # the run starts above the provider's capacity and must find it
    with FakeOpenAIServer(default_latency=0.1, request_queue_size=256, concurrency_limit=n) as s:
        calls = await run(s, 60, 5)
        log = sorted(s.log, key=lambda r: r.arrived)
    statuses = [r.status for r in log]
    # every slot was filled, the 429s retried: 360 answers plus one retry per 429
    assert calls["succeeded"] == 360 and calls["attempts"] == len(log) == 360 + calls["retries"]
    assert calls["rate_limited"] == statuses.count(429) == calls["retries"]
    # the provider's capacity was found, and used: the server had n in flight
    assert s.max_in_flight == n and calls["max_in_flight"] >= n and calls["concurrency_peak"] >= n
    # Adapted: the second half of the run, by arrival at the server. The first burst of `start`
    # calls meets 429s beyond n; once cut, the limit stays near n and only an occasional probe
    # above it meets one.
    second = statuses[len(statuses) // 2 :]
    assert second.count(429) < 0.05 * len(second)
    # near n at the end: at most one cut below the capacity, and not far above it (the client
    # counts a call in flight a little longer than the server does)
    assert int(limits._DECREASE * n) <= calls["concurrency_final"] <= 2 * n


async def test_a_provider_with_no_limit_gets_the_cap_in_flight():
    cap = 64
    with FakeOpenAIServer(default_latency=0.5, request_queue_size=256) as s:
        calls = await run(s, 50, 5, max_concurrency=cap)
        assert len(s.log) == 300 and all(r.status == 200 for r in s.log)
    # slow start doubled the calls in flight each round trip until the cap, and held it there
    assert s.max_in_flight == cap
    assert calls["max_in_flight"] == calls["concurrency_peak"] == cap
    assert calls["concurrency_final"] == cap and calls["rate_limited"] == 0


async def test_the_rate_limit_holds_in_every_window_at_the_server_with_adaptive_concurrency():
    limit, period, start = 20, 1.0, 8  # growth, not the start, meets the limit
    with FakeOpenAIServer(default_latency=0.1, request_queue_size=256) as s:
        s.add_rule("p3", status=503, times=1)  # a retry, also counted, and a cut
        calls = await run(
            s,
            10,
            5,
            initial=start,
            max_calls_per_min=limit,
            rate_limit_period=period,
            retry_base_delay=0.0,
        )
        arrivals = sorted(r.arrived for r in s.log)
        peak_at_server = s.max_in_flight
    assert len(arrivals) == 61 == calls["attempts"]
    # No window of `period` seconds holds more than `limit` arrivals: a call holds its token
    # from before it is sent until one period after its reply, which comes after its arrival.
    # (The server stamps arrivals with the clock the limiter reads.) No slack is needed.
    for i in range(len(arrivals) - limit):
        assert arrivals[i + limit] - arrivals[i] > period
    # concurrency adapts within the rate limit, never beyond it
    assert calls["concurrency_peak"] <= limit and calls["max_in_flight"] <= limit
    assert peak_at_server <= limit
