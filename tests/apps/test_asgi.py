"""The example web service (uqlm_bert/apps/_asgi.py), driven in process through an ASGI
client with concurrent requests, against the scripted OpenAI-compatible server on 127.0.0.1.

Every request of the app calls one shared ``BlackBoxUQ``, so the limits set on it hold for the
process: the server must see no more than ``max_calls_per_min`` calls in any window of
``rate_limit_period`` seconds, and no more than ``max_concurrency`` in flight, whatever the
number of requests in flight. Each reply carries its own question's answer (the server's answers
name the prompt) with the confidence that scoring it alone gives, and its flag. A request past its
timeout, or whose client disconnects, cancels its own work and no other request's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from fakes.openai_server import FakeOpenAIServer, answer_text

pytest.importorskip("starlette", reason="the example app needs the app extra (Starlette)")
httpx = pytest.importorskip("httpx")
langchain_openai = pytest.importorskip("langchain_openai")

from tests.helpers.retries import NO_WAIT  # noqa: E402
from uqlm_bert import BlackBoxUQ  # noqa: E402
from uqlm_bert.apps import create_asgi_app, create_asgi_app_from_env  # noqa: E402
from uqlm_bert.apps._asgi import CLIENT_CLOSED  # noqa: E402
from uqlm_bert.scorers._bertscore import DEFAULT_THRESHOLD  # noqa: E402

pytestmark = pytest.mark.network

#: the dtype's documented bound on how far a prompt's confidence moves with the company it is
#: scored in ("Batch invariance" in docs/bertscore.md)
COMPANY_BOUND = 1e-3
#: the server never answers a prompt holding this (no other question does)
HUNG = "Never answered"


def chat(server: FakeOpenAIServer) -> Any:
    return langchain_openai.ChatOpenAI(
        model="fake-model", base_url=server.base_url, api_key="test-key", temperature=0.0
    )


@contextlib.asynccontextmanager
async def running(app: Any) -> AsyncIterator[None]:
    """The app between its ASGI lifespan's startup and shutdown, as a server runs it (httpx's
    ASGITransport sends requests only)."""
    inbox: asyncio.Queue = asyncio.Queue()
    outbox: asyncio.Queue = asyncio.Queue()
    scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": {}}
    task = asyncio.ensure_future(app(scope, inbox.get, outbox.put))
    await inbox.put({"type": "lifespan.startup"})
    started = await asyncio.wait_for(outbox.get(), 120)
    assert started["type"] == "lifespan.startup.complete", started
    try:
        yield
    finally:
        await inbox.put({"type": "lifespan.shutdown"})
        stopped = await asyncio.wait_for(outbox.get(), 30)
        assert stopped["type"] == "lifespan.shutdown.complete", stopped
        await asyncio.wait_for(task, 10)


@contextlib.asynccontextmanager
async def client_of(app: Any) -> AsyncIterator[Any]:
    async with running(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
            yield client


async def ask_all(client: Any, questions: list[str]) -> list[Any]:
    """The questions as concurrent requests, bounded in time."""
    posts = (client.post("/ask", json={"question": q}) for q in questions)
    return await asyncio.wait_for(asyncio.gather(*posts), 60)


def check_replies(questions: list[str], replies: list[Any], num_responses: int) -> None:
    """Each reply holds its own question's answer, with the confidence of scoring that answer
    against its samples alone (within the dtype's bound), in [0, 1], and its flag."""
    bodies = [r.json() for r in replies]
    assert [r.status_code for r in replies] == [200] * len(questions), bodies
    samples = [answer_text(q, 1.0) for q in questions]  # samples at sampling_temperature
    alone = BlackBoxUQ(show_progress_bars=False).score(
        [answer_text(q, 0.0) for q in questions],
        [[s] * num_responses for s in samples],
        prompts=questions,
    )
    for q, body, expected in zip(questions, bodies, alone.data["bert_score"], strict=True):
        assert body["question"] == q
        assert body["answer"] == answer_text(q, 0.0)  # names the question: its own row
        assert body["samples"] == num_responses and body["failed_samples"] == 0
        assert body["error"] is None and body["scorer"] == "bert_score"
        assert 0.0 <= body["confidence"] <= 1.0
        assert body["confidence"] == pytest.approx(expected, abs=COMPANY_BOUND)
        assert body["threshold"] == DEFAULT_THRESHOLD
        assert body["flagged"] is (body["confidence"] < DEFAULT_THRESHOLD)


@pytest.mark.slow
async def test_the_rate_limit_holds_for_the_process_across_concurrent_requests():
    limit, period, m = 20, 5.0, 3
    questions = [f"Question {i}: who painted fresco number {i}?" for i in range(6)]
    with FakeOpenAIServer(default_latency=0.05, request_queue_size=256) as server:
        # one call per sample: each request makes 1 + m = 4 calls, 24 in all, more than the
        # limit allows in one window (with n, 2 calls per request would stay under it)
        app = create_asgi_app(
            chat(server),
            num_responses=m,
            max_calls_per_min=limit,
            rate_limit_period=period,
            use_n_param=False,
            **NO_WAIT,
        )
        async with client_of(app) as client:
            replies = await ask_all(client, questions)
        arrivals = sorted(r.arrived for r in server.log)
    assert len(arrivals) == len(questions) * (1 + m)
    # No window of `period` seconds holds more than `limit` arrivals: a call holds its token
    # from before it is sent until one period after its reply, and the server stamps arrivals
    # with the clock the limiter reads. Limits per call would let all 24 arrive at once.
    crowded = [
        (i, arrivals[i + limit] - arrivals[i])
        for i in range(len(arrivals) - limit)
        if arrivals[i + limit] - arrivals[i] <= period
    ]
    assert not crowded, f"more than {limit} calls within {period} s: {crowded}"
    check_replies(questions, replies, m)


@pytest.mark.slow
async def test_the_concurrency_cap_holds_for_the_process_across_concurrent_requests():
    cap, m = 4, 3
    questions = [f"Question {i}: where does river {i} rise?" for i in range(6)]
    with FakeOpenAIServer(default_latency=0.3, request_queue_size=256) as server:
        app = create_asgi_app(
            chat(server), num_responses=m, max_concurrency=cap, use_n_param=False, **NO_WAIT
        )
        async with client_of(app) as client:
            replies = await ask_all(client, questions)
        calls, peak = len(server.log), server.max_in_flight
    assert calls == len(questions) * (1 + m)
    # the cap of the one BlackBoxUQ holds for all six requests together: a cap per call would
    # let 24 calls in flight at once
    assert 2 <= peak <= cap, peak
    check_replies(questions, replies, m)


async def test_with_n_each_request_makes_two_calls_and_gets_its_own_answer():
    m = 2
    questions = [f"Question {i}: what is compound {i} made of?" for i in range(8)]
    with FakeOpenAIServer(default_latency=0.05, request_queue_size=256) as server:
        app = create_asgi_app(chat(server), num_responses=m, **NO_WAIT)
        async with client_of(app) as client:
            replies = await ask_all(client, questions)
            health = (await client.get("/health")).json()
        asked = sorted(r.n for r in server.log)
    # per question the answer, and its samples in one call with n
    assert asked == [1] * len(questions) + [m] * len(questions)
    assert health == {"status": "ok", "questions_in_flight": 0}
    check_replies(questions, replies, m)


async def test_a_request_past_its_timeout_gets_504_and_gives_its_places_back():
    with FakeOpenAIServer(request_queue_size=64) as server:
        server.add_rule(HUNG, hang=True)  # never answered (until the server stops)
        # two places in flight: the stuck question's two calls take both until cancelled
        app = create_asgi_app(
            chat(server), num_responses=2, max_concurrency=2, timeout_s=1.0, **NO_WAIT
        )
        async with client_of(app) as client:
            started = time.monotonic()
            stuck = await asyncio.wait_for(client.post("/ask", json={"question": HUNG}), 20)
            waited = time.monotonic() - started
            after = await ask_all(client, ["Question after the timeout"])
            health = (await client.get("/health")).json()
    assert stuck.status_code == 504, stuck.text
    body = stuck.json()
    assert body["question"] == HUNG and body["answer"] is None and body["flagged"] is True
    assert "no answer within 1 s" in body["error"]
    assert 1.0 <= waited < 10.0  # the hang lasts 30 s: the request's timeout ended it
    # its calls were cancelled and their places given back: the next question gets both
    check_replies(["Question after the timeout"], after, 2)
    assert health["questions_in_flight"] == 0


async def test_a_client_that_disconnects_cancels_its_own_work_only():
    with FakeOpenAIServer(default_latency=0.2, request_queue_size=64) as server:
        server.add_rule(HUNG, hang=True)
        # four places: the stuck question's two calls and one other question's; if the stuck
        # calls kept theirs after the disconnect, the two questions asked after it could not
        # both run, and would time out
        app = create_asgi_app(
            chat(server), num_responses=2, max_concurrency=4, timeout_s=5.0, **NO_WAIT
        )
        async with client_of(app) as client:
            gone = asyncio.Event()
            sent: list[dict[str, Any]] = []
            body = json.dumps({"question": HUNG}).encode()
            messages = [{"type": "http.request", "body": body, "more_body": False}]

            async def receive() -> dict[str, Any]:
                if messages:
                    return messages.pop(0)
                await gone.wait()
                return {"type": "http.disconnect"}

            async def send(message: dict[str, Any]) -> None:
                sent.append(message)

            scope = {
                "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                "method": "POST", "scheme": "http", "path": "/ask", "raw_path": b"/ask",
                "query_string": b"", "root_path": "", "server": ("app", 80),
                "client": ("127.0.0.1", 50000),
                "headers": [(b"host", b"app"), (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())],
            }  # fmt: skip
            stuck = asyncio.ensure_future(app(scope, receive, send))
            other = await ask_all(client, ["Question beside the hung one"])
            assert not stuck.done(), sent
            gone.set()  # the client of the stuck question goes away
            disconnected = time.monotonic()
            await asyncio.wait_for(stuck, 10)  # the hang lasts 30 s: the disconnect ended it
            ended = time.monotonic() - disconnected
            after = await ask_all(client, ["Question one after", "Question two after"])
    assert ended < 5.0
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == CLIENT_CLOSED
    check_replies(["Question beside the hung one"], other, 2)
    check_replies(["Question one after", "Question two after"], after, 2)


async def test_bad_requests_are_refused_before_any_call():
    with FakeOpenAIServer() as server:
        app = create_asgi_app(chat(server), num_responses=2, max_question_chars=50)
        async with client_of(app) as client:
            not_json = await client.post(
                "/ask", content=b"{question", headers={"content-type": "application/json"}
            )
            no_question = await client.post("/ask", json={"q": "hello"})
            blank = await client.post("/ask", json={"question": "   "})
            not_text = await client.post("/ask", json={"question": 42})
            too_long = await client.post("/ask", json={"question": "x" * 51})
            wrong_method = await client.get("/ask")
        calls = len(server.log)
    for reply in (not_json, no_question, blank, not_text):
        assert reply.status_code == 400 and "question" in reply.json()["error"]
    assert too_long.status_code == 400 and "50 characters" in too_long.json()["error"]
    assert wrong_method.status_code == 405
    assert calls == 0


async def test_the_app_from_the_environment(monkeypatch):
    with FakeOpenAIServer(default_latency=0.05) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("UQLM_BERT_APP_MODEL", "model-from-env")
        monkeypatch.setenv("UQLM_BERT_APP_NUM_RESPONSES", "2")
        monkeypatch.setenv("UQLM_BERT_APP_MAX_CONCURRENCY", "3")
        monkeypatch.setenv("UQLM_BERT_APP_TIMEOUT_S", "30")
        app = create_asgi_app_from_env()
        async with client_of(app) as client:
            replies = await ask_all(client, ["Question from the environment"])
            uq = app.state.service.uq
            settings = (
                uq.max_concurrency,
                uq.generation.request_timeout,
                app.state.service.timeout_s,
            )
        models = {r.body["model"] for r in server.log}
    assert settings == (3, 20.0, 30.0)
    assert models == {"model-from-env"}
    check_replies(["Question from the environment"], replies, 2)


async def test_asked_for_words_a_reply_says_where_its_answer_is_unsupported():
    """``"words": true`` adds each counted word of the answer with its offsets and support, the
    same as the result's own word table; ``"refine": true`` the answer without its unsupported
    sentences; without them the reply has neither."""
    from uqlm_bert.bertscore._token_support import WEAK_SUPPORT

    questions = ["Who wrote <Solaris>?", "Capital & river of Peru?"]
    with FakeOpenAIServer() as server:
        app = create_asgi_app(chat(server), num_responses=2)
        async with client_of(app) as client:
            asked = await asyncio.wait_for(
                asyncio.gather(
                    *(
                        client.post("/ask", json={"question": q, "words": True, "refine": True})
                        for q in questions
                    )
                ),
                60,
            )
            plain = await client.post("/ask", json={"question": questions[0]})
    assert not {"words", "refined_answer", "warnings"} & set(plain.json())
    for q, reply in zip(questions, asked, strict=True):
        body = reply.json()
        assert reply.status_code == 200 and body["question"] == q
        alone = BlackBoxUQ(show_progress_bars=False).score(
            [body["answer"]], [[answer_text(q, 1.0)] * 2], prompts=[q]
        )
        words = alone.words()
        words = words[words["counted"]]
        assert [w["word"] for w in body["words"]] == words["word"].tolist()
        for word in body["words"]:
            assert body["answer"][word["start"] : word["end"]] == word["word"]
            assert word["weak"] == (word["support"] < WEAK_SUPPORT)
        assert [w["support"] for w in body["words"]] == pytest.approx(
            words["support"].tolist(), abs=COMPANY_BOUND + 1e-4
        )
        assert body["refinement"] in ("unchanged", "refined", "all_removed")
        for removed in body["removed_sentences"]:
            assert body["answer"][removed["start"] : removed["end"]] == removed["sentence"]
            assert removed["sentence"] not in (body["refined_answer"] or "")


async def test_the_command_and_the_app_serialise_an_answer_s_words_alike(tmp_path, monkeypatch):
    """One serialised form of word supports: for the same question, answered and sampled by the
    same server, the command's ``words`` column and the app's ``"words"`` are the same."""
    from uqlm_bert.cli import main
    from uqlm_bert.io._reading import read_table

    question = "Capital & river of Peru?"
    monkeypatch.setenv("UQLM_BERT_TEST_KEY", "test-key")
    prompts = tmp_path / "prompts.txt"
    prompts.write_text(question + "\n", encoding="utf-8")
    out = tmp_path / "scored.jsonl"
    with FakeOpenAIServer() as server:
        app = create_asgi_app(chat(server), num_responses=2)
        async with client_of(app) as client:
            reply = await asyncio.wait_for(
                client.post("/ask", json={"question": question, "words": True}), 60
            )
        argv = ["generate-and-score", str(prompts), "-o", str(out), "--model", "fake-model",
                "--base-url", server.base_url, "--api-key-env", "UQLM_BERT_TEST_KEY", "-m", "2",
                "--temperature", "0.0", "-q", "--words"]  # fmt: skip
        assert await asyncio.to_thread(main, argv) == 0
    table = read_table(str(out))
    assert table["response"][0] == reply.json()["answer"]
    assert table["words"][0] == reply.json()["words"]


async def test_the_app_samples_each_question_until_settled_against_its_threshold():
    from uqlm_bert.generation._rounds import FIRST_ROUND

    questions = [f"Question {i}: who built bridge number {i}?" for i in range(3)]
    with FakeOpenAIServer() as server:
        app = create_asgi_app(chat(server), num_responses=8, threshold=0.5, **NO_WAIT)
        async with client_of(app) as client:
            assert app.state.service.uq.scoring.threshold == 0.5  # flags and sampling alike
            replies = await ask_all(client, questions)
        calls = len(server.log)
    bodies = [r.json() for r in replies]
    # an answer and samples that say the same thing: clearly above 0.5 after the first round
    assert [b["samples"] for b in bodies] == [FIRST_ROUND] * len(questions)
    assert all(b["threshold"] == 0.5 and b["flagged"] is False for b in bodies)
    assert calls == 2 * len(questions)  # per question its answer and one round, with n


async def test_the_service_flags_at_the_threshold_its_blackboxuq_flags_at():
    from uqlm_bert import ScoringSettings
    from uqlm_bert.apps._asgi import QuestionService

    with FakeOpenAIServer() as server:
        uq = BlackBoxUQ(chat(server), scoring=ScoringSettings(threshold=0.99))
        service = QuestionService(uq, num_responses=2)
        status, body = await service.answer("Who built the bridge?")
        result = await uq.generate_and_score(["Who built the bridge?"], num_responses=2)
    assert status == 200 and body["threshold"] == 0.99
    assert result.metadata["thresholds"][body["scorer"]]["answer"] == 0.99
    # the same texts (the server answers a prompt alike): the reply's flag is the result's
    assert body["confidence"] == pytest.approx(float(result.data[body["scorer"]][0]))
    assert body["flagged"] == bool(result.flag()["flagged"][0])
    assert body["flagged"] is (body["confidence"] < 0.99)
