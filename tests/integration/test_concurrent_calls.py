"""One BlackBoxUQ serving many concurrent calls, as in an async app: ChatOpenAI against the
scripted server on 127.0.0.1.

What is checked is what the provider saw (the server's request log, arrival times and in-flight
counters) and what each call got back; the few bounds on time are derived from the server's
latency and from the calls' own measured scoring time, never from a figure of this machine.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from fakes.openai_server import FakeOpenAIServer, answer_text
from uqlm_bert import BERTScoreSettings, GenerationSettings
from uqlm_bert._blackbox import BlackBoxUQ
from uqlm_bert.generation import RetryPolicy
from uqlm_bert.generation._settings import generation_settings
from uqlm_bert.scorers._base import Scorer

langchain_openai = pytest.importorskip("langchain_openai")

pytestmark = pytest.mark.network

BACKLOG = 1024


class NoScore(Scorer):
    """A scorer that does no work: these tests are about the calls."""

    name = "none"

    def score(self, responses, sampled_responses, show_progress_bars=False):
        return [0.0] * len(responses)


def chat(server: FakeOpenAIServer, **kwargs):
    return langchain_openai.ChatOpenAI(
        model="fake-model", base_url=server.base_url, api_key="test-key", temperature=0.0,
        **kwargs,
    )  # fmt: skip


def make_uq(
    server: FakeOpenAIServer, scorers=None, llm=None, bertscore=None, generation=None, **flat
) -> BlackBoxUQ:
    """A ``BlackBoxUQ`` of the server's model; ``flat`` generation settings, or ``generation``
    whole."""
    return BlackBoxUQ(
        llm or chat(server),
        scorers=scorers or [NoScore()],
        show_progress_bars=False,
        bertscore=bertscore,
        generation=generation or generation_settings(None, **flat),
    )


def arrivals(server: FakeOpenAIServer) -> list[float]:
    with server.lock:
        return sorted(r.arrived for r in server.log)


def statuses(server: FakeOpenAIServer) -> list[int]:
    with server.lock:
        return [r.status for r in sorted(server.log, key=lambda r: r.arrived)]


def assert_own_rows(result, prompts: list[str], m: int) -> None:
    """Every row of the call holds its own prompt's answer and samples, and nothing else."""
    assert list(result.data["prompts"]) == prompts
    for prompt, response, samples in zip(
        prompts, result.data["responses"], result.data["sampled_responses"], strict=True
    ):
        assert response == answer_text(prompt, 0.0)
        assert samples == [answer_text(prompt, 1.0)] * m


@pytest.mark.slow
async def test_four_concurrent_calls_share_the_rate_limit_at_the_server():
    limit, period = 20, 5.0
    with FakeOpenAIServer(default_latency=0.05, request_queue_size=256) as s:
        uq = make_uq(s, max_calls_per_min=limit, rate_limit_period=period)
        calls = [[f"call{c}-p{i}" for i in range(10)] for c in range(4)]
        results = await asyncio.gather(*(uq.generate_and_score(p, num_responses=5) for p in calls))
        seen = arrivals(s)
    for prompts, result in zip(calls, results, strict=True):
        assert_own_rows(result, prompts, 5)
    assert len(seen) == 80  # per prompt the answer and its samples with n, 4 x 10 prompts
    # No window of `period` seconds holds more than `limit` arrivals, across the four calls:
    # a call holds its token from before it is sent until one period after its reply.
    for i in range(len(seen) - limit):
        assert seen[i + limit] - seen[i] > period


@pytest.mark.slow
async def test_the_concurrency_cap_holds_across_concurrent_calls():
    cap = 4
    with FakeOpenAIServer(default_latency=0.3, request_queue_size=256) as s:
        uq = make_uq(s, max_concurrency=cap, use_n_param=False)
        calls = [[f"c{c}-p{i}" for i in range(4)] for c in range(4)]
        results = await asyncio.gather(*(uq.generate_and_score(p, num_responses=2) for p in calls))
        peak = s.max_in_flight
    for prompts, result in zip(calls, results, strict=True):
        assert_own_rows(result, prompts, 2)
        assert result.metadata["calls"]["max_in_flight"] <= cap
    assert peak == cap  # the cap, and all of it: 48 calls through 4 places


@pytest.mark.slow
async def test_a_capped_provider_driven_by_four_concurrent_calls_keeps_the_single_call_bounds():
    # the bounds of test_adaptive's capped provider, for one call of the same 360 calls
    n, prompts_per_call, m = 12, 15, 5
    with FakeOpenAIServer(
        default_latency=0.1, request_queue_size=BACKLOG, concurrency_limit=n
    ) as s:
        uq = make_uq(s, use_n_param=False)
        calls = [[f"k{c}-p{i}" for i in range(prompts_per_call)] for c in range(4)]
        results = await asyncio.gather(*(uq.generate_and_score(p, num_responses=m) for p in calls))
        seen = statuses(s)
    stats = [r.metadata["calls"] for r in results]
    calls_in_run = 4 * prompts_per_call * (m + 1)
    assert sum(c["succeeded"] for c in stats) == calls_in_run
    assert (
        sum(c["attempts"] for c in stats)
        == len(seen)
        == calls_in_run + sum(c["retries"] for c in stats)
    )
    assert seen.count(429) == sum(c["rate_limited"] for c in stats)
    assert s.max_in_flight == n
    # no storm: under two times the capacity plus the first window (every call of the run)
    assert seen.count(429) < 2 * n + calls_in_run
    second = seen[len(seen) // 2 :]
    assert second.count(429) < 0.05 * len(second)
    # the provider's level is one for the four calls: each ends near n, not n / 4 or 4 n
    for c in stats:
        assert n - 2 <= c["concurrency_final"] <= 2 * n


@pytest.mark.slow
async def test_a_one_prompt_call_is_not_served_after_a_long_call_on_the_same_object():
    latency, cap, long_prompts = 0.2, 40, 500
    with FakeOpenAIServer(default_latency=latency, request_queue_size=BACKLOG) as s:
        uq = make_uq(s, scorers=["exact_match"], max_concurrency=cap)
        started = time.perf_counter()
        long_call = asyncio.ensure_future(
            uq.generate_and_score([f"long-{i}" for i in range(long_prompts)], num_responses=3)
        )
        await s.until(lambda: len(s.log) >= 4 * cap)  # the long call is well under way
        short_started = time.perf_counter()
        short = await uq.generate_and_score(["the short one"], num_responses=3)
        short_s = time.perf_counter() - short_started
        long_result = await long_call
        long_s = time.perf_counter() - started
    assert_own_rows(short, ["the short one"], 3)
    assert long_result.metadata["failures"]["responses"] == 0
    # served in its turn: within three round trips and the scoring of two batches, where the
    # long call alone takes 1,000 calls / 40 places = 25 round trips
    batches = long_result.metadata["timings"]["scoring_s"] + short.metadata["timings"]["scoring_s"]
    assert short_s < 3 * latency + 2 * batches + 0.5, (short_s, batches)
    assert short_s < long_s / 4


@pytest.mark.slow
async def test_fifty_concurrent_calls_get_their_own_rows_and_the_scores_of_scoring_alone():
    with FakeOpenAIServer(default_latency=0.05, request_queue_size=BACKLOG) as s:
        uq = make_uq(
            s,
            scorers=["bert_score", "exact_match"],
            bertscore=BERTScoreSettings(dtype="float32"),
        )
        calls = [[f"Tell me about item number {c}.", f"And item {c * 7 + 3}?"] for c in range(50)]
        results = await asyncio.gather(*(uq.generate_and_score(p, num_responses=3) for p in calls))
    batches = set()
    for prompts, result in zip(calls, results, strict=True):
        assert_own_rows(result, prompts, 3)
        alone = uq.score(
            result.data["responses"], result.data["sampled_responses"], prompts=prompts
        )
        for name in ("bert_score", "exact_match"):
            assert result.data[name] == pytest.approx(alone.data[name], abs=1e-6)
    # and they were scored together: fewer batches than calls
    queue = next(iter(uq._queues))
    batches = queue.batch_sizes
    assert sum(batches) == 100 and len(batches) < 50


class PoisonScorer(Scorer):
    """Raises on a batch that holds the poisoned answer, scores 1.0 otherwise."""

    name = "poison"

    def score(self, responses, sampled_responses, show_progress_bars=False):
        if any(r is not None and "poison" in r for r in responses):
            raise ValueError("this scorer cannot read a poisoned answer")
        return [1.0] * len(responses)


async def test_a_failure_or_cancellation_of_one_call_never_touches_the_others():
    with FakeOpenAIServer(default_latency=0.2, request_queue_size=BACKLOG) as s:
        s.add_rule("slow", latency=5.0)
        uq = make_uq(s, scorers=[PoisonScorer()])
        calls = {name: [f"{name}-{i}" for i in range(3)] for name in ("a", "b", "c", "d")}
        calls["poison"] = ["poison-0"]
        calls["slow"] = ["slow-0", "slow-1"]
        tasks = {
            name: asyncio.ensure_future(uq.generate_and_score(p, num_responses=2))
            for name, p in calls.items()
        }
        # the slow call's answers are asked for (and take 5 s): it is cancelled in flight
        await s.until(lambda: len([r for r in s.log if "slow-" in r.prompt]) >= 2)
        tasks["slow"].cancel()
        outcome = dict(
            zip(tasks, await asyncio.gather(*tasks.values(), return_exceptions=True), strict=True)
        )
    assert isinstance(outcome["poison"], ValueError)
    assert isinstance(outcome["slow"], asyncio.CancelledError)
    for name in ("a", "b", "c", "d"):
        assert_own_rows(outcome[name], calls[name], 2)
        assert outcome[name].data["poison"] == [1.0] * 3
    assert asyncio.all_tasks() == {asyncio.current_task()}


@pytest.mark.slow
async def test_two_objects_on_one_client_keep_their_own_caps():
    cap = 3
    with FakeOpenAIServer(default_latency=0.3, request_queue_size=256) as s:
        llm = chat(s)
        first, second = (make_uq(s, llm=llm, max_concurrency=cap, use_n_param=False) for _ in "ab")
        results = await asyncio.gather(
            first.generate_and_score([f"x{i}" for i in range(6)], num_responses=2),
            second.generate_and_score([f"y{i}" for i in range(6)], num_responses=2),
        )
        peak = s.max_in_flight
    assert_own_rows(results[0], [f"x{i}" for i in range(6)], 2)
    assert_own_rows(results[1], [f"y{i}" for i in range(6)], 2)
    assert peak == 2 * cap  # each object's cap is its user's setting


@pytest.mark.slow
async def test_two_objects_on_one_provider_share_what_it_refused():
    n = 8
    with FakeOpenAIServer(
        default_latency=0.1, request_queue_size=BACKLOG, concurrency_limit=n
    ) as s:
        llm = chat(s)
        first, second = (make_uq(s, llm=llm, use_n_param=False) for _ in "ab")
        results = await asyncio.gather(
            first.generate_and_score([f"x{i}" for i in range(20)], num_responses=5),
            second.generate_and_score([f"y{i}" for i in range(20)], num_responses=5),
        )
        seen = statuses(s)
    for r in results:
        assert r.metadata["failures"]["samples"] == 0
        # one level for the provider: what the two objects together were served, not 2 n
        assert n - 2 <= r.metadata["calls"]["concurrency_final"] <= 2 * n
    second_half = seen[len(seen) // 2 :]
    assert second_half.count(429) < 0.05 * len(second_half)


@pytest.mark.slow
def test_sync_calls_from_several_threads_share_the_objects_limits():
    cap = 2
    with FakeOpenAIServer(default_latency=0.2, request_queue_size=256) as s:
        uq = make_uq(s, max_concurrency=cap, use_n_param=False)
        results: dict[int, object] = {}

        def call(k: int) -> None:
            results[k] = uq.generate_and_score_sync([f"t{k}-{i}" for i in range(3)], 1)

        threads = [threading.Thread(target=call, args=(k,)) for k in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        peak = s.max_in_flight
        uq.close()
    for k in range(3):
        assert_own_rows(results[k], [f"t{k}-{i}" for i in range(3)], 1)
    assert peak == cap


@pytest.mark.slow
async def test_a_queueing_server_with_a_short_timeout_gets_no_storm_of_timed_out_retries():
    # a server that serves 2 calls at a time and queues the rest (as llama.cpp does), 0.15 s a
    # call: 60 calls take 4.5 s, six times the request timeout (itself five calls' time)
    slots, latency, prompts, timeout = 2, 0.15, [f"q{i}" for i in range(30)], 0.75
    with FakeOpenAIServer(
        default_latency=latency, request_queue_size=BACKLOG, serving_slots=slots
    ) as s:
        retry = RetryPolicy(base_delay=0.05)
        uq = make_uq(s, generation=GenerationSettings(request_timeout=timeout, retry=retry))
        started = time.perf_counter()
        result = await uq.generate_and_score(prompts, num_responses=3)
        took = time.perf_counter() - started
        queued = s.max_queued
    calls = result.metadata["calls"]
    assert_own_rows(result, prompts, 3)  # nothing lost
    assert queued > 10  # the premise: the server held far more than a timeout's worth
    assert calls["retries"] < 0.05 * 60
    # no slower than the queue itself (60 calls, 2 at a time), with the client's overhead
    assert took < 60 / slots * latency * 1.5 + 1.0
