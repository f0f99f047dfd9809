"""The example app on Ray Serve (uqlm_bert/apps/_serve.py), on a local Ray started here on
127.0.0.1, against the scripted OpenAI-compatible server, through Serve's HTTP proxy.

Three ingress replicas take 200 concurrent questions under ``max_calls_per_min=60`` per 10 s and
``max_concurrency=8`` for the whole deployment: the server must never see more than 60 calls in
any 10-s window nor more than 8 in flight (limits per replica would let three times as many
through), every question gets its own answer and the confidence that scoring it alone gives, and
the one scorer's batches hold more than one question on average.

The run is bounded by the rate limit: each question makes two calls (the answer, and its samples
in one call with ``n``), 400 calls at 60 per window of about 10.5 s (10 s plus a call's
latency), about 70 s.
"""

from __future__ import annotations

import asyncio
import functools
import re
import socket
import time

import pytest

from fakes.openai_server import FakeOpenAIServer
from tests.helpers.deadline import deadline

serve = pytest.importorskip("ray.serve", reason="the Serve app needs the serve extra")
httpx = pytest.importorskip("httpx")
langchain_openai = pytest.importorskip("langchain_openai")

from uqlm_bert import BlackBoxUQ  # noqa: E402
from uqlm_bert.apps import ServeAppSettings, build_serve_app  # noqa: E402
from uqlm_bert.distributed._session import start_local_ray  # noqa: E402
from uqlm_bert.generation._cluster_limits import ClusterLimits  # noqa: E402
from uqlm_bert.scorers._bertscore import DEFAULT_THRESHOLD  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.network]

# the limit binds: CAP calls of LATENCY s could make 32 a second, the limit allows 24 (and
# three replicas that did not share it, 72)
LIMIT, PERIOD, CAP = 120, 5.0, 8
REQUESTS, REPLICAS, M = 200, 3, 3
LATENCY = 0.25
#: the dtype's documented bound on how far a prompt's confidence moves with the company it is
#: scored in ("Batch invariance" in docs/bertscore.md)
COMPANY_BOUND = 1e-3
FACTS = ["Paris", "a violin", "the year 1969", "copper", "the Nile", "Jupiter", "oxygen"]


def answer(prompt: str, temperature: float | None) -> str:
    """The server's text: the answer (temperature 0) names its question and a fact; the samples
    (temperature 1) agree with it for two questions in three, and name another fact for the
    third, so the confidences differ from question to question."""
    i = int(re.search(r"#(\d+)", prompt).group(1))
    fact = FACTS[i % len(FACTS)]
    if temperature != 0.0 and i % 3 == 0:
        fact = FACTS[(i + 1) % len(FACTS)]
    return f"For question {i}, it is {fact}."


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def serve_on_loopback():
    """A private Ray (2 CPUs, 127.0.0.1 only, no dashboard) with Serve's proxy on a free port of
    127.0.0.1; both stopped after; the test is bounded in time."""
    ray = pytest.importorskip("ray")
    assert not ray.is_initialized(), "another test left Ray running"
    try:
        with deadline(420, "the Serve test"):
            start_local_ray(num_cpus=2, namespace="uqlm-bert-serve-test")
            port = free_port()
            serve.start(http_options={"host": "127.0.0.1", "port": port})
            yield port
    finally:
        try:
            serve.shutdown()
        finally:
            ray.shutdown()


def asked(k: int, question: str) -> dict:
    return {"question": question, **({"words": True, "refine": True} if k % 2 == 0 else {})}


async def ask_all(port: int, questions: list[str]) -> list[httpx.Response]:
    limits = httpx.Limits(max_connections=len(questions) + 8)
    async with httpx.AsyncClient(limits=limits, timeout=300) as client:
        posts = (  # every other question asks where its answer is unsupported, too
            client.post(f"http://127.0.0.1:{port}/ask", json=asked(k, q))
            for k, q in enumerate(questions)
        )
        return await asyncio.wait_for(asyncio.gather(*posts), 300)


@pytest.mark.slow
def test_three_replicas_share_the_limits_and_one_scorer(serve_on_loopback):
    port = serve_on_loopback
    questions = [f"Question #{i}: what is fact {i}?" for i in range(REQUESTS)]
    settings = ServeAppSettings(
        num_responses=M,
        ingress_replicas=REPLICAS,
        max_calls_per_min=LIMIT,
        rate_limit_period=PERIOD,
        max_concurrency=CAP,
        timeout_s=280.0,
        limits_name="uqlm-bert-serve-test",
        max_batch_size=16,
        batch_wait_timeout_s=0.1,
        scorer_gpus=0,
        ingress_cpus=0.25,
        scorer_cpus=1.0,
        max_ongoing_requests=REQUESTS,
    )
    with FakeOpenAIServer(default_latency=LATENCY, answer=answer, request_queue_size=512) as server:
        llm_factory = functools.partial(
            langchain_openai.ChatOpenAI,
            model="fake-model",
            base_url=server.base_url,
            api_key="test-key",
            temperature=0.0,
        )
        serve.run(build_serve_app(settings, llm_factory), route_prefix="/")
        started = time.monotonic()
        replies = asyncio.run(ask_all(port, questions))
        elapsed = time.monotonic() - started
        most, peak, calls = server.most_in_window(PERIOD), server.max_in_flight, len(server.log)
        health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=30).json()
    stats = serve.get_deployment_handle("Scorer", "default").stats.remote().result()
    keeper = ClusterLimits(name=settings.limits_name, namespace="serve").snapshot()
    print(
        f"\n{REQUESTS} questions on {REPLICAS} replicas in {elapsed:.1f} s: {calls} calls, at "
        f"most {most} in a {PERIOD:g}-s window and {peak} in flight; {stats['batches']} scorer "
        f"batches, mean {stats['mean_answers']:.2f} questions, {stats['mean_requests']:.2f} "
        f"requests and {stats['mean_pairs']:.1f} pairs per batch"
    )

    bodies = [r.json() for r in replies]
    assert [r.status_code for r in replies] == [200] * REQUESTS, bodies[:3]
    # each question made two calls: its answer, and its samples in one call with n
    assert calls == 2 * REQUESTS
    # the limits of the whole deployment, not of each replica (three times as many)
    assert most <= LIMIT, most
    assert peak <= CAP, peak
    # the keeper granted every place the server saw in flight, and has them all back
    (held,) = keeper.values()
    assert peak <= held["max_in_flight"] <= CAP and held["in_flight"] == 0, held
    # each reply holds its own question's answer, and the confidence of that answer scored
    # against its own samples alone
    alone = BlackBoxUQ(show_progress_bars=False).score(
        [answer(q, 0.0) for q in questions],
        [[answer(q, 1.0)] * M for q in questions],
        prompts=questions,
    )
    for q, body, expected in zip(questions, bodies, alone.data["bert_score"], strict=True):
        assert body["question"] == q
        assert body["answer"] == answer(q, 0.0)
        assert body["samples"] == M and body["failed_samples"] == 0 and body["error"] is None
        assert body["confidence"] == pytest.approx(expected, abs=COMPANY_BOUND)
        assert body["flagged"] is (body["confidence"] < DEFAULT_THRESHOLD)
    # the questions that asked for them get their answer's words and refined answer, from the
    # scorer deployment's pass, batched with questions that did not ask
    refined, words = alone.refine(), alone.words()
    for k, body in enumerate(bodies):
        if k % 2:
            assert "words" not in body and "refined_answer" not in body
            continue
        mine = words[(words["prompt_index"] == k) & words["counted"]]
        assert [w["word"] for w in body["words"]] == mine["word"].tolist()
        assert [w["support"] for w in body["words"]] == pytest.approx(
            mine["support"].tolist(), abs=COMPANY_BOUND + 1e-4
        )
        assert body["refinement"] == refined["refinement"][k]
        assert body["refined_answer"] == refined["refined_response"][k]
    # the confidences differ from question to question: a reply holding another's would show
    assert len({round(b["confidence"], 2) for b in bodies}) > 1
    # under load the scorer's batches hold the questions of several requests and replicas
    assert stats["mean_answers"] > 1, stats
    assert health == {"status": "ok", "questions_in_flight": 0}
