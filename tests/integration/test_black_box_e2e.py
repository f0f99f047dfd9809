"""End to end through langchain-openai's ChatOpenAI against a scripted server on 127.0.0.1.

The server (fakes/openai_server.py) injects latency, 429s with Retry-After, 503s, hung calls,
400s, 401s and malformed replies, and logs every request with its arrival time.
"""

from __future__ import annotations

import asyncio
import json
import math

import pytest

from fakes.openai_server import FakeOpenAIServer, answer_text
from tests.helpers.retries import fast
from tests.helpers.scorers import LengthRatio
from tests.helpers.waiting import until
from uqlm_bert import AuthenticationFailedError, GenerationSettings
from uqlm_bert._blackbox import BlackBoxUQ
from uqlm_bert.results._identical_samples import IdenticalSamplesWarning

langchain_openai = pytest.importorskip("langchain_openai")

pytestmark = pytest.mark.network


#: the scripted server's options in this module (the ``server`` fixture reads them)
SERVER_OPTIONS = {"default_latency": 0.005}


def chat(server: FakeOpenAIServer, **kwargs):
    params = {"temperature": 0.0, "max_retries": 3, **kwargs}
    return langchain_openai.ChatOpenAI(
        model="fake-model", base_url=server.base_url, api_key="test-key", **params
    )


def statuses(server: FakeOpenAIServer, text: str) -> list[int]:
    return [r.status for r in server.requests_for(text)]


@pytest.mark.slow
async def test_alignment_retries_and_failure_accounting(server):
    server.add_rule("p-429", status=429, times=1, retry_after_ms="50")
    server.add_rule("p-503", status=503, times=2)
    server.add_rule("p-400", status=400, temperature=0.0)
    server.add_rule("p-hang", hang=True, temperature=1.0)
    server.add_rule("p-json", malformed="json", times=1, temperature=1.0)
    server.add_rule("p-shape", malformed="shape", temperature=0.0)
    server.add_rule("p-down", status=503, temperature=1.0)
    llm = chat(server)
    before = llm.model_dump()
    prompts = [
        "p-ok-0",
        "p-429",
        "p-ok-1",
        "p-503",
        "p-400",
        "p-hang",
        "p-json",
        "p-shape",
        "p-down",
        "p-ok-2",
    ]
    uq = BlackBoxUQ(
        llm,
        scorers=[LengthRatio()],
        show_progress_bars=False,
        # one call per sample: the server's log is counted per sample
        **fast(max_retries=2, request_timeout=0.5, max_concurrency=6, use_n_param=False),
    )
    with pytest.warns(RuntimeWarning) as caught:
        result = await uq.generate_and_score(prompts, num_responses=2)
    df = result.to_df()
    # one warning per kind of failure (the scripted server answers every sample of a prompt
    # alike whatever the temperature, which the identical-samples warning says too)
    failures = [w for w in caught if issubclass(w.category, RuntimeWarning)]
    assert [w for w in caught if w not in failures] == [
        w for w in caught if issubclass(w.category, IdenticalSamplesWarning)
    ]
    assert sorted(str(w.message).split("; e.g.")[0] for w in failures) == [
        "1 LLM call(s) failed for good (bad_request",
        "1 LLM call(s) failed for good (malformed",
        "2 LLM call(s) failed for good (server",
        "2 LLM call(s) failed for good (timeout",
    ]

    # every text sits in its own prompt's slot
    for i, p in enumerate(prompts):
        response = df["response"][i]
        assert response is None or response == answer_text(p, 0.0)
        for s in df["sampled_responses"][i]:
            assert s is None or s == answer_text(p, 1.0)
    errors = dict(zip(prompts, df["error"], strict=True))
    assert errors["p-400"].startswith("bad_request after 1 attempt")
    assert errors["p-shape"].startswith("malformed after 3 attempts")  # retried, as it may pass
    assert {p for p, e in errors.items() if e is not None} == {"p-400", "p-shape"}
    sample_errors = dict(zip(prompts, df["sample_errors"], strict=True))
    assert all(e.startswith("timeout after 3 attempts") for e in sample_errors["p-hang"])
    assert all(e.startswith("server after 3 attempts") for e in sample_errors["p-down"])
    assert df["num_failed_samples"].tolist() == [0, 0, 0, 0, 0, 2, 0, 0, 2, 0]
    scores = dict(zip(prompts, df["length_ratio"], strict=True))
    for p in ("p-400", "p-hang", "p-shape", "p-down"):
        assert math.isnan(scores[p])
    # responses at temperature 0.0 vs samples at 1.0 differ by one character in length
    for p in ("p-ok-0", "p-429", "p-503", "p-json"):
        expected = len(answer_text(p, 0.0)) / len(answer_text(p, 1.0))
        assert scores[p] == pytest.approx(expected)

    # what the server saw: our retries only (the client's own retries are off)
    assert statuses(server, "p-ok-0") == [200, 200, 200]
    assert sorted(statuses(server, "p-429")) == [200, 200, 200, 429]
    assert sorted(statuses(server, "p-503")) == [200, 200, 200, 503, 503]
    assert sorted(statuses(server, "p-400")) == [200, 200, 400]
    assert len(server.requests_for("p-hang")) == 1 + 2 * 3
    assert len(server.requests_for("p-json")) == 3 + 1
    assert sorted(statuses(server, "p-shape")) == [200] * 5
    assert sorted(statuses(server, "p-down")) == [200] + [503] * 6
    calls = result.metadata["calls"]
    assert calls["attempts"] == len(server.log) == 3 * 10 + 1 + 2 + 4 + 1 + 2 + 4
    assert calls["retries"] == 1 + 2 + 4 + 1 + 2 + 4
    assert calls["failed"] == 6 and calls["succeeded"] == 24
    assert calls["failures_by_kind"] == {
        "bad_request": 1,
        "malformed": 1,
        "server": 2,
        "timeout": 2,
    }
    assert result.metadata["failures"]["prompts_with_failures"] == 4

    # the caller's ChatOpenAI is as it was
    assert llm.model_dump() == before
    assert llm.temperature == 0.0 and llm.max_retries == 3
    assert llm.root_async_client.max_retries == 3
    assert asyncio.all_tasks() == {asyncio.current_task()}


@pytest.mark.parametrize(("header", "wait"), [("retry_after", 1.0), ("retry_after_ms", 0.3)])
async def test_retry_after_is_honoured(server, header, wait):
    value = "1" if header == "retry_after" else "300"
    server.add_rule("slow down", status=429, times=1, **{header: value})
    uq = BlackBoxUQ(chat(server), scorers=[LengthRatio()], show_progress_bars=False, **fast())
    result = await uq.generate_and_score(["slow down"], num_responses=1)
    assert result.data["responses"] == [answer_text("slow down", 0.0)]
    log = server.requests_for("slow down")
    limited = next(r for r in log if r.status == 429)
    retried = max(log, key=lambda r: r.arrived)
    assert len(log) == 3 and retried.arrived - limited.arrived >= wait


@pytest.mark.slow
async def test_rate_limit_holds_in_every_window_retries_included(server):
    server.add_rule("r1", status=503, times=1)
    limit, period = 5, 1.0
    uq = BlackBoxUQ(
        chat(server),
        scorers=[LengthRatio()],
        show_progress_bars=False,
        **fast(
            max_calls_per_min=limit,
            rate_limit_period=period,
            max_concurrency=8,
            use_n_param=False,
        ),
    )
    await uq.generate_and_score([f"r{i}" for i in range(4)], num_responses=2)
    arrivals = sorted(r.arrived for r in server.log)
    assert len(arrivals) == 4 * 3 + 1
    # No window of `period` seconds holds more than `limit` requests. The limiter counts a
    # call when it sends it; the server stamps it on arrival, which can lag by a connection
    # set-up, so the windows are checked with 100 ms slack. Without the limiter all 13 requests
    # would arrive within a few tens of milliseconds.
    for i in range(len(arrivals) - limit):
        assert arrivals[i + limit] - arrivals[i] > period - 0.1
    assert arrivals[-1] - arrivals[0] >= 2 * period - 0.1


async def test_concurrency_is_bounded(server):
    server.default_latency = 0.05
    uq = BlackBoxUQ(
        chat(server), scorers=[LengthRatio()], max_concurrency=3, show_progress_bars=False
    )
    await uq.generate_and_score([f"c{i}" for i in range(8)], num_responses=2)
    # per prompt the answer, and its two samples in one call with n
    assert server.max_in_flight == 3 and len(server.log) == 16
    assert sorted(r.n for r in server.log) == [1] * 8 + [2] * 8


async def test_auth_failure_stops_the_run(server):
    server.add_rule("", status=401)
    llm = chat(server)
    before = llm.model_dump()
    uq = BlackBoxUQ(llm, scorers=[LengthRatio()], max_concurrency=2, show_progress_bars=False)
    with pytest.raises(AuthenticationFailedError, match="HTTP 401"):
        await uq.generate_and_score([f"a{i}" for i in range(20)], num_responses=3)
    assert len(server.log) <= 2  # the workers in flight, then nothing more
    assert asyncio.all_tasks() == {asyncio.current_task()}
    assert llm.model_dump() == before


async def test_cancellation_leaves_no_tasks_running(server):
    server.add_rule("stuck", hang=True)
    uq = BlackBoxUQ(
        chat(server),
        scorers=[LengthRatio()],
        generation=GenerationSettings(max_concurrency=4, request_timeout=30),
        show_progress_bars=False,
    )
    prompts = [f"n{i}" for i in range(6)] + ["stuck"] + [f"m{i}" for i in range(6)]
    task = asyncio.ensure_future(uq.generate_and_score(prompts, num_responses=2))
    await server.until(lambda: len(server.log) >= 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_resume_from_a_checkpoint_gives_the_same_result(tmp_path):
    prompts = [f"k{i}" for i in range(8)]
    path = tmp_path / "run.jsonl"

    def columns(result):
        df = result.to_df()
        return df[["prompt", "response", "sampled_responses", "length_ratio", "error"]].to_dict(
            "list"
        )

    with FakeOpenAIServer() as clean_server:
        uq = BlackBoxUQ(chat(clean_server), scorers=[LengthRatio()], show_progress_bars=False)
        clean = await uq.generate_and_score(prompts, num_responses=2)

    with FakeOpenAIServer(default_latency=0.02) as first_server:
        uq = BlackBoxUQ(
            chat(first_server),
            scorers=[LengthRatio()],
            max_concurrency=2,
            show_progress_bars=False,
        )
        task = asyncio.ensure_future(uq.generate_and_score(prompts, 2, checkpoint=path))
        await until(lambda: path.exists() and len(path.read_text().splitlines()) >= 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    done = {(r["i"], r["slot"]) for r in map(json.loads, path.read_text().splitlines()[1:])}
    assert 9 <= len(done) < 24

    with FakeOpenAIServer() as second_server:
        uq = BlackBoxUQ(chat(second_server), scorers=[LengthRatio()], show_progress_bars=False)
        resumed = await uq.generate_and_score(prompts, 2, checkpoint=path)
        # per prompt one call for its answer if missing, one for its missing samples with n
        asked = {(r.prompt, r.temperature): r.n for r in second_server.log}
        assert len(asked) == len(second_server.log)
        for i, p in enumerate(prompts):
            missing = [s for s in (0, 1) if (i, s) not in done]
            assert ((p, 0.0) in asked) == ((i, -1) not in done)
            assert asked.get((p, 1.0), 0) == len(missing)
    assert columns(resumed) == columns(clean)
    assert resumed.metadata["calls"]["from_checkpoint"] == len(done)
    assert resumed.metadata["checkpoint"] == str(path)


async def test_sync_face_inside_a_running_loop(server):
    uq = BlackBoxUQ(chat(server), scorers=[LengthRatio()], show_progress_bars=False)
    result = uq.generate_and_score_sync(["nb0", "nb1"], num_responses=2)
    assert result.data["responses"] == [answer_text("nb0", 0.0), answer_text("nb1", 0.0)]
    assert len(server.log) == 4  # per prompt the answer, and its samples in one call


async def test_bert_score_through_chatopenai(server):
    server.add_rule("q-unanswered", status=400, temperature=1.0)
    uq = BlackBoxUQ(chat(server), scorers=["bert_score"], show_progress_bars=False)
    prompts = ["What is the boiling point of water?", "q-unanswered", "Who wrote Hamlet?"]
    with pytest.warns(RuntimeWarning, match=r"^2 LLM call\(s\) failed for good \(bad_request"):
        result = await uq.generate_and_score(prompts, num_responses=2)
    got = result.data["bert_score"]
    assert math.isnan(got[1])
    # generation knows the prompts (their tokens weigh 0): scoring them given is the same
    direct = uq.score(result.data["responses"], result.data["sampled_responses"], prompts=prompts)
    assert [got[0], got[2]] == pytest.approx(
        [direct.data["bert_score"][0], direct.data["bert_score"][2]], abs=1e-6
    )
    assert 0.5 < got[0] < 1.0 and 0.5 < got[2] < 1.0


# -- the provider's n parameter ---------------------------------------------------------------


async def test_samples_come_in_one_call_with_n_and_faults_stay_in_their_slots(server):
    server.add_rule("n-429", status=429, times=1, temperature=1.0, retry_after_ms="20")
    server.add_rule("n-hang", hang=True, temperature=1.0)
    server.add_rule("n-400", status=400, temperature=1.0)
    prompts = ["n-ok-0", "n-429", "n-hang", "n-400", "n-ok-1"]
    uq = BlackBoxUQ(
        chat(server), scorers=[LengthRatio()], show_progress_bars=False,
        **fast(max_retries=1, request_timeout=0.5),
    )  # fmt: skip
    with pytest.warns(RuntimeWarning):
        result = await uq.generate_and_score(prompts, num_responses=3)
    samples = dict(zip(prompts, result.data["sampled_responses"], strict=True))
    errors = dict(zip(prompts, result.data["sample_errors"], strict=True))
    for p in ("n-ok-0", "n-429", "n-ok-1"):
        assert samples[p] == [answer_text(p, 1.0)] * 3 and errors[p] == [None] * 3
    assert samples["n-hang"] == [None] * 3
    assert [e.kind for e in errors["n-hang"]] == ["timeout"] * 3
    assert [e.kind for e in errors["n-400"]] == ["bad_request"] * 3
    # the answers are their own calls at the model's temperature, the samples one call with n
    # (retried whole); the refused one asked once more one sample per call, refused the same way
    asked = sorted((r.prompt, r.temperature, r.n, r.status) for r in server.log)
    assert [a for a in asked if a[1] == 0.0] == [(p, 0.0, 1, 200) for p in sorted(prompts)]
    assert [a for a in asked if a[0] == "n-429"][1:] == [
        ("n-429", 1.0, 3, 200),
        ("n-429", 1.0, 3, 429),
    ]
    assert [a[2:] for a in asked if a[0] == "n-400" and a[1] == 1.0] == [(1, 400)] * 3 + [(3, 400)]
    calls = result.metadata["calls"]
    assert calls["samples_per_call"] == 3 and calls["max_choices"] == 128
    assert calls["succeeded"] == 5 + 3 * 3 and calls["failed"] == 6


async def test_a_server_that_ignores_n_still_gives_every_prompt_all_its_samples():
    with FakeOpenAIServer(default_latency=0.02, ignore_n=True) as server:
        llm = chat(server)
        uq = BlackBoxUQ(llm, scorers=[LengthRatio()], show_progress_bars=False)
        prompts = [f"i{i}" for i in range(6)]
        result = await uq.generate_and_score(prompts, num_responses=5)
        assert result.data["sampled_responses"] == [[answer_text(p, 1.0)] * 5 for p in prompts]
        calls = result.metadata["calls"]
        # the first window asked with n and got one choice each: the rest one call per sample,
        # and n is dropped for this server
        assert calls["n_calls"] == 6 and calls["choices_missing"] == 6 * 4
        assert calls["max_choices"] == 1 and calls["failed"] == 0
        assert len(server.log) == 6 + 6 + 6 * 4
        # the next call (a new BlackBoxUQ on the same client) knows: no n at all
        with server.lock:
            server.log.clear()
        again = await BlackBoxUQ(
            llm, scorers=[LengthRatio()], show_progress_bars=False
        ).generate_and_score(prompts, num_responses=5)
        assert again.metadata["calls"]["n_calls"] == 0 and len(server.log) == 6 * 6
        assert all(r.n == 1 for r in server.log)


async def test_more_samples_than_the_server_allows_per_call_are_split():
    with FakeOpenAIServer(max_n=4) as server:
        uq = BlackBoxUQ(
            chat(server),
            scorers=[LengthRatio()],
            generation=GenerationSettings(max_samples_per_call=4),
            show_progress_bars=False,
        )
        result = await uq.generate_and_score(["s0", "s1"], num_responses=9)
        assert result.data["sampled_responses"] == [[answer_text(p, 1.0)] * 9 for p in ("s0", "s1")]
        sizes = sorted(r.n for r in server.log if r.temperature == 1.0)
        assert sizes == [1, 1, 4, 4, 4, 4] and all(r.status == 200 for r in server.log)
