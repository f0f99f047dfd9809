"""Adaptive concurrency end to end: ChatOpenAI against the scripted server on 127.0.0.1.

The server plays three providers: one that answers 429 to requests beyond a number in flight,
one with no limit, and (with ``max_calls_per_min``) one that counts calls per window. What is
checked is what the server saw (its request log and in-flight counter) and what the run reports
in ``metadata["calls"]``; nothing is timed.
"""

from __future__ import annotations

import pytest

from fakes.openai_server import FakeOpenAIServer, answer_text
from uqlm_bert._blackbox import BlackBoxUQ
from uqlm_bert.generation._settings import generation_settings
from uqlm_bert.scorers._base import Scorer

langchain_openai = pytest.importorskip("langchain_openai")

pytestmark = pytest.mark.network

BACKLOG = 1024  # the listen backlog: a run's first window opens hundreds of connections at once


class NoScore(Scorer):
    """A scorer that does no work: these tests are about the calls."""

    name = "none"

    def score(self, responses, sampled_responses, show_progress_bars=False):
        return [0.0] * len(responses)


def chat(server: FakeOpenAIServer):
    return langchain_openai.ChatOpenAI(
        model="fake-model", base_url=server.base_url, api_key="test-key", temperature=0.0
    )


async def run(server: FakeOpenAIServer, n_prompts: int, m: int, initial=None, llm=None, **settings):
    uq = BlackBoxUQ(
        llm or chat(server),
        scorers=[NoScore()],
        show_progress_bars=False,
        generation=generation_settings(None, **settings),
    )
    if initial is not None:
        uq.generation = uq.generation.replace(initial_concurrency=initial)
    result = await uq.generate_and_score([f"p{i}" for i in range(n_prompts)], num_responses=m)
    assert result.metadata["failures"]["responses"] == 0
    assert result.metadata["failures"]["samples"] == 0
    assert all(len(s) == m and None not in s for s in result.data["sampled_responses"])
    return result.metadata["calls"]


def statuses(server: FakeOpenAIServer) -> list[int]:
    with server.lock:
        return [r.status for r in sorted(server.log, key=lambda r: r.arrived)]


@pytest.mark.slow
async def test_a_provider_capped_at_n_in_flight_is_held_near_n_without_a_429_storm():
    n, prompts, m = 12, 60, 5
    calls_in_run = prompts * (m + 1)  # one per sample: the most calls, the hardest case
    with FakeOpenAIServer(
        default_latency=0.1, request_queue_size=BACKLOG, concurrency_limit=n
    ) as s:
        calls = await run(s, prompts, m, use_n_param=False)
        seen = statuses(s)
    # the run started allowing every call in flight, far above the provider's capacity
    assert calls["concurrency_start"] == calls_in_run and not calls["learned_start"]
    # every slot was filled, the 429s retried: 360 answers plus one retry per 429
    assert calls["succeeded"] == calls_in_run
    assert calls["attempts"] == len(seen) == calls_in_run + calls["retries"]
    assert calls["rate_limited"] == seen.count(429) == calls["retries"]
    # the provider's capacity was found, and used: the server had n in flight
    assert s.max_in_flight == n and calls["max_in_flight"] >= n
    # no storm: the first window's refusals, then few. The whole run's 429s stay below two
    # times the capacity plus the first window (whose calls beyond n were refused at once) ...
    assert seen.count(429) < 2 * n + calls["concurrency_start"]
    # ... and in the second half of the run, by arrival at the server, under 5%
    second = seen[len(seen) // 2 :]
    assert second.count(429) < 0.05 * len(second)
    # near n at the end: what the provider served, and not far above it (the client counts a
    # call in flight a little longer than the server does)
    assert n - 2 <= calls["concurrency_final"] <= 2 * n


@pytest.mark.slow
async def test_a_limit_learned_from_429s_carries_to_the_next_call_on_the_same_client():
    n = 12
    with FakeOpenAIServer(
        default_latency=0.1, request_queue_size=BACKLOG, concurrency_limit=n
    ) as s:
        llm = chat(s)
        first = await run(s, 25, 5, llm=llm, use_n_param=False)
        refused_first = statuses(s).count(429)
        with s.lock:
            s.log.clear()
        # the next call (a notebook's next cell: a new BlackBoxUQ on the same client) starts
        # where the first ended, not with every call in flight again
        second = await run(s, 25, 5, llm=llm, use_n_param=False)
        refused_second = statuses(s).count(429)
    assert first["rate_limited"] > 0
    assert second["learned_start"] and not first["learned_start"]
    assert second["concurrency_start"] == first["concurrency_final"]
    assert n - 2 <= second["concurrency_start"] <= 2 * n
    # so the second call meets no burst, only the rare probe above the capacity: fewer refusals
    # than the first call's burst, and fewer than the capacity
    assert refused_second < min(n, refused_first)
    assert s.max_in_flight == n


@pytest.mark.slow
async def test_a_provider_with_no_limit_gets_the_whole_run_in_flight_within_the_cap():
    cap = 64

    def answer_once(s: FakeOpenAIServer, in_flight: int):
        """Replies that wait until ``in_flight`` calls were at the server at once (the server's
        wait gives up after 30 s, and the calls then fail)."""

        def answer(prompt: str, temperature: float | None) -> str:
            s.wait_until(lambda: s.max_in_flight >= in_flight)
            return answer_text(prompt, temperature)

        return answer

    with FakeOpenAIServer(request_queue_size=BACKLOG) as s:
        s.answer = answer_once(s, cap)
        capped = await run(s, 50, 5, max_concurrency=cap, use_n_param=False)
        assert len(s.log) == 300 and all(r.status == 200 for r in s.log)
        peak_capped = s.max_in_flight
        with s.lock:
            s.log.clear()
            s.max_in_flight = 0
            s.answer = answer_once(s, 300)
        whole = await run(s, 50, 5, max_concurrency=None, use_n_param=False)
        assert all(r.status == 200 for r in s.log)
        peak_whole = s.max_in_flight
    # the cap from the first call on, and held there
    assert peak_capped == cap
    assert capped["max_in_flight"] == capped["concurrency_start"] == capped["concurrency_peak"]
    assert capped["concurrency_start"] == capped["concurrency_final"] == cap
    # no cap: every call of the run in flight at once (the first window is the whole run)
    assert whole["concurrency_start"] == whole["max_in_flight"] == peak_whole == 300
    assert capped["rate_limited"] == whole["rate_limited"] == 0


@pytest.mark.slow
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
            use_n_param=False,
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


async def test_with_n_a_call_for_several_samples_is_one_request_for_the_rate_limit():
    limit, period = 6, 0.5
    with FakeOpenAIServer(default_latency=0.05, request_queue_size=256) as s:
        calls = await run(s, 8, 5, max_calls_per_min=limit, rate_limit_period=period)
        arrivals = sorted(r.arrived for r in s.log)
        asked = sorted(r.n for r in s.log)
    # one answer call and one call for the 5 samples per prompt, each one request
    assert asked == [1] * 8 + [5] * 8 and calls["attempts"] == len(arrivals) == 16
    assert calls["n_calls"] == 8 and calls["succeeded"] == 8 * 6
    for i in range(len(arrivals) - limit):
        assert arrivals[i + limit] - arrivals[i] > period
