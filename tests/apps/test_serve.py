"""The Serve app's parts without a cluster (uqlm_bert/apps/_serve.py): an ingress replica
answering requests with a stand-in for the scorer deployment's handle that scores in this
process, the scorer's split of a joined batch, and the app's arguments. The app on a real Serve
is tested in test_serve_app.py.
"""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult

pytest.importorskip("starlette", reason="the ingress answers with Starlette responses")

from starlette.requests import Request  # noqa: E402

from uqlm_bert import (
    BlackBoxUQ,  # noqa: E402
    ConfigurationError,  # noqa: E402
)
from uqlm_bert.apps._asgi import BAD_BODY  # noqa: E402
from uqlm_bert.apps._serve import (  # noqa: E402
    Ingress,
    PairBatches,
    ServeAppSettings,
    request_pairs,
    serve_app_builder,
)
from uqlm_bert.scorers._base import Pairs  # noqa: E402
from uqlm_bert.scorers._registry import build_scorer  # noqa: E402

ANSWER = "Paris is the capital of France."
#: the dtype's bound on how far a confidence moves with the company it is scored in
COMPANY_BOUND = 1e-3


class LocalScorerHandle:
    """Stands for the scorer deployment's handle: ``score.remote(...).result()`` scores the
    request here, as the deployment's own work does (:class:`PairBatches`), alone in its
    batch."""

    def __init__(self) -> None:
        self.work = PairBatches()
        self.requests = 0
        self.score = self

    def remote(self, *request: Any) -> Any:
        self.requests += 1
        (answer,) = self.work.score_batch([request_pairs(*request)])
        return SimpleNamespace(result=lambda: answer)


def request(method: str, path: str, body: Any = None) -> Request:
    data = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "root_path": "",
        "scheme": "http",
        "query_string": b"",
        "server": ("127.0.0.1", 8000),
        "headers": [(b"content-type", b"application/json")],
    }
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": data, "more_body": False}

    return Request(scope, receive)


async def call(ingress: Ingress, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    response = await ingress(request(method, path, body))
    return response.status_code, json.loads(response.body)


async def test_an_ingress_replica_answers_as_the_asgi_app_with_the_scorers_numbers():
    handle = LocalScorerHandle()
    settings = ServeAppSettings(num_responses=2, limits_name=None, max_question_chars=40)
    ingress = Ingress(handle, settings, lambda: FakeListChatModel(responses=[ANSWER]))
    question = "What is the capital of France?"
    status, body = await call(ingress, "POST", "/ask", {"question": question})
    expected = BlackBoxUQ(show_progress_bars=False).score(
        [ANSWER], [[ANSWER, ANSWER]], prompts=[question]
    )
    assert status == 200 and handle.requests == 1
    assert sorted(body) == sorted(
        ["question", "answer", "confidence", "flagged", "threshold", "scorer", "samples",
         "failed_samples", "error"]
    )  # fmt: skip
    assert (body["question"], body["answer"], body["samples"], body["error"]) == (
        question,
        ANSWER,
        2,
        None,
    )
    assert body["confidence"] == pytest.approx(expected.data["bert_score"][0], abs=COMPANY_BOUND)
    assert body["flagged"] is (body["confidence"] < body["threshold"])
    assert await call(ingress, "POST", "/ask", {"question": " "}) == (400, {"error": BAD_BODY})
    assert await call(ingress, "POST", "/ask", b"not json") == (400, {"error": BAD_BODY})
    status, body = await call(ingress, "POST", "/ask", {"question": "x" * 41})
    assert status == 400 and "longer than 40" in body["error"]
    assert await call(ingress, "GET", "/health") == (
        200,
        {"status": "ok", "questions_in_flight": 0},
    )
    assert (await call(ingress, "GET", "/ask"))[0] == 405
    assert (await call(ingress, "GET", "/nowhere"))[0] == 404
    ingress.uq.close()


@pytest.mark.slow
def test_the_scorer_gives_each_request_of_a_joined_batch_its_own_scores_and_supports():
    work = PairBatches()  # the deployment's work, without Serve's batching
    scorer = build_scorer("bert_score")
    requests = [
        request_pairs(["Lima is in Peru."] * 2, ["Lima, Peru.", "It is Quito."], ["Where?"] * 2,
                      [0, 0], ["Lima is in Peru."]),
        request_pairs(["Bern."], ["Bern is the capital."], ["Capital?"]),
        request_pairs(["Oslo.", "Rome."], ["Oslo.", "Paris."], ["A?", "B?"], [0, 1],
                      ["Oslo.", "Rome."]),
    ]  # fmt: skip
    joined = work.score_batch(requests)
    alone = [scorer.score_pairs(Pairs(r.cands, r.refs, prompts=r.prompts)) for r in requests]
    assert [len(scores) for scores, _ in joined] == [2, 1, 2]
    for (got, _), expected in zip(joined, alone, strict=True):
        np.testing.assert_allclose(got, expected, rtol=0, atol=COMPANY_BOUND)
    # the token supports of the answers of the requests that asked, as scoring them alone gives
    assert joined[1][1] is None
    for k in (0, 2):
        r = requests[k]
        samples = [
            [x for x, g in zip(r.refs, r.group, strict=True) if g == i]
            for i in range(len(r.responses))
        ]
        expected = BlackBoxUQ(show_progress_bars=False).score(
            r.responses,
            samples,
            prompts=[r.prompts[r.group.index(i)] for i in range(len(r.responses))],
        )
        for got, want in zip(joined[k][1], expected.data["supports"], strict=True):
            assert got.text == want.text
            np.testing.assert_allclose(got.support, want.support, atol=COMPANY_BOUND)
    # one batch of three requests, holding four answers and five pairs
    assert work.batches == [(3, 4, 5)]


def test_an_ingress_replica_gives_words_and_refined_answers_on_request():
    handle = LocalScorerHandle()
    settings = ServeAppSettings(num_responses=2, limits_name=None)
    told = "Paris is the capital of France. It has nine moons."
    ingress = Ingress(handle, settings, lambda: TwoVoices(answer=told, sample=ANSWER))
    question = "What is the capital of France?"
    status, body = await_call(ingress, {"question": question, "words": True, "refine": True})
    assert status == 200 and body["answer"] == told
    alone = BlackBoxUQ(show_progress_bars=False).score([told], [[ANSWER] * 2], prompts=[question])
    words = alone.words()
    assert [w["word"] for w in body["words"]] == words[words["counted"]]["word"].tolist()
    for word in body["words"]:
        assert told[word["start"] : word["end"]] == word["word"]
    assert body["refinement"] == "refined"
    assert body["refined_answer"] == "Paris is the capital of France."
    assert [s["sentence"] for s in body["removed_sentences"]] == ["It has nine moons."]
    ingress.uq.close()


class TwoVoices(BaseChatModel):
    """Answers ``answer`` at temperature 0 and ``sample`` at any other (the samples)."""

    answer: str
    sample: str
    temperature: float = 0.0

    @property
    def _llm_type(self) -> str:
        return "two-voices"

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        text = self.answer if not self.temperature else self.sample
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])


def await_call(ingress: Ingress, body: Any) -> tuple[int, Any]:
    return asyncio.run(call(ingress, "POST", "/ask", body))


def test_the_apps_arguments_are_typed_and_checked():
    s = ServeAppSettings.from_args(
        {"ingress_replicas": "3", "max_calls_per_min": "600", "rate_limit_period": "10",
         "scorer_gpus": "none", "limits_name": "none", "threshold": "0.7"}
    )  # fmt: skip
    assert (s.ingress_replicas, s.max_calls_per_min, s.rate_limit_period) == (3, 600, 10.0)
    assert s.scorer_gpus is None and s.limits_name is None and s.threshold == 0.7
    assert s.generation().cluster_limits is None  # each replica its own limits
    shared = ServeAppSettings(limits_name="my-app").generation().cluster_limits
    assert (shared.name, shared.namespace) == ("my-app", "serve")
    with pytest.raises(ConfigurationError, match="max_calls_per_min must be an int, got 'many'"):
        ServeAppSettings.from_args({"max_calls_per_min": "many"})
    with pytest.raises(ConfigurationError, match="rate_limit_period must be a number > 0"):
        serve_app_builder({"rate_limit_period": "0"})
