"""A small web service that answers questions through your LLM, with how far to trust each answer.

``POST /ask`` with ``{"question": "..."}`` asks the LLM for an answer and ``num_responses``
samples, scores the answer against them, and replies with the answer, its confidence and
whether it is flagged (confidence below the threshold, or none)::

    {"question": "Who wrote 'Solaris'?", "answer": "Stanislaw Lem wrote it.",
     "confidence": 0.91, "flagged": false, "threshold": 0.72, "scorer": "bert_score",
     "samples": 5, "failed_samples": 0, "error": null}

With ``"words": true`` in the body the reply also says where the answer is unsupported: a
``words`` list with each counted word of the answer (the question's own words and punctuation
are left out), its character offsets into ``answer``, its support (0 to 1: how well the samples
support it) and ``weak`` (support below the word threshold; the one serialised form of word
supports, as the command's ``--words`` column gives it)::

    "words": [{"start": 0, "end": 9, "word": "Stanislaw", "support": 0.93, "weak": false}, ...]

With ``"refine": true`` it also gives the answer without its unsupported sentences
(``UQResult.refine()``): ``refined_answer`` (None when every sentence went), ``removed_sentences``
(each with its offsets into ``answer``, its support and why it went) and ``refinement``
(``"unchanged"``, ``"refined"``, ``"all_removed"``, ...).

``GET /health`` says whether the service is up and how many questions it is answering.

The process holds **one** :class:`~uqlm_bert.BlackBoxUQ`, created when the app starts (its
scoring model loaded then, so the first question does not wait for it) and closed when it stops,
through the ASGI lifespan. Every request in flight calls the same object, so its
``max_calls_per_min``, ``max_concurrency`` and the concurrency level learned from the
provider's push-back hold for the whole process, and the prompts of concurrent requests are
scored together (see "In an async app" in docs/black_box.md).

Timeouts and cancellation:

- ``request_timeout`` (:data:`APP_DEFAULTS`, unless given) bounds each attempt of each LLM call; a call that
  times out is retried like any transient failure;
- ``timeout_s`` (60 s) bounds a whole request: past it the request's work is cancelled and the
  client gets HTTP 504;
- a client that disconnects cancels its own request's work (its LLM calls and its rows), and no
  other request's.

Statuses: 200 with the answer (``confidence`` is ``null`` and ``flagged`` true when no sample
arrived); 400 for a body that is not a JSON object with a non-empty ``"question"`` string (or one
longer than ``max_question_chars``); 502 when the LLM gave no answer (``error`` says why); 504 on
the overall timeout.

Run it (needs the ``app`` extra: ``pip install "uqlm-bert[app]"``, which brings Starlette,
uvicorn and langchain-openai)::

    export OPENAI_API_KEY=...                 # and OPENAI_BASE_URL for another provider
    export UQLM_BERT_APP_MODEL=gpt-4o-mini UQLM_BERT_APP_MAX_CALLS_PER_MIN=500
    uvicorn --factory uqlm_bert.apps:create_asgi_app_from_env --host 127.0.0.1 --port 8000
    curl -s localhost:8000/ask -H 'content-type: application/json' -d '{"question": "..."}'

or ``python -m uqlm_bert.apps --port 8000`` (the same, through ``uvicorn.run``).
Any ASGI server does (hypercorn, granian, ...), as long as it runs the lifespan. Run **one**
worker process: each process holds its own ``BlackBoxUQ``, and so its own limits and its own
scoring model. To serve from several processes or machines under one set of limits, use the app
on Ray Serve (:mod:`uqlm_bert.apps._serve`): its replicas share ``max_calls_per_min``,
``max_concurrency`` and the learned level through one keeper, and one scorer deployment scores
the answers of all of them.
The environment variables are listed in :data:`ENVIRONMENT`. In your own code, build the app with
:func:`create_asgi_app` from any LangChain chat model.

Example:
    >>> from langchain_core.language_models.fake_chat_models import FakeListChatModel
    >>> from starlette.testclient import TestClient
    >>> app = create_asgi_app(FakeListChatModel(responses=["It is blue."]), num_responses=2)
    >>> with TestClient(app) as client:      # runs the lifespan: start, requests, stop
    ...     reply = client.post("/ask", json={"question": "What colour is the sky?"}).json()
    ...     empty = client.post("/ask", json={"question": ""})
    >>> reply["answer"], round(reply["confidence"], 4), reply["flagged"]
    ('It is blue.', 1.0, False)
    >>> empty.status_code, empty.json()["error"]
    (400, 'the body must be a JSON object with a non-empty "question" string')
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import logging
import math
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

from uqlm_bert._checks import check_int
from uqlm_bert._exceptions import ConfigurationError, UQLMBertError
from uqlm_bert.generation._settings import NUM_RESPONSES
from uqlm_bert.scorers._thresholds import thresholds_of

__all__ = [
    "APP_MAX_QUESTION_CHARS",
    "APP_MODEL",
    "APP_REQUEST_TIMEOUT_S",
    "APP_TIMEOUT_S",
    "ENVIRONMENT",
    "QuestionService",
    "answer_words",
    "asked_for",
    "refined_answer",
    "create_asgi_app",
    "create_asgi_app_from_env",
    "read_question",
    "until_disconnect",
]

logger = logging.getLogger("uqlm_bert")

#: HTTP status of a request whose client went away before its answer (nginx's convention).
CLIENT_CLOSED = 499

#: The web services' own defaults, for the ASGI app and the app on Ray Serve alike (the
#: library's, such as the samples per question, come from the library).
APP_TIMEOUT_S = 60.0  # seconds a whole question may take
APP_REQUEST_TIMEOUT_S = 20.0  # seconds one attempt of one LLM call may take
APP_MAX_QUESTION_CHARS = 4000  # longer questions are refused
APP_MODEL = "gpt-4o-mini"  # the chat model a service started from settings alone asks

#: The environment variables :func:`create_asgi_app_from_env` reads: name, what it sets, its type.
ENVIRONMENT: dict[str, tuple[str, type]] = {
    "UQLM_BERT_APP_MODEL": (f"the chat model's name, for ChatOpenAI ({APP_MODEL})", str),
    "UQLM_BERT_APP_NUM_RESPONSES": (f"samples per question ({NUM_RESPONSES})", int),
    "UQLM_BERT_APP_TIMEOUT_S": (f"seconds a whole request may take ({APP_TIMEOUT_S:g})", float),
    "UQLM_BERT_APP_REQUEST_TIMEOUT_S": (
        f"seconds one attempt of an LLM call may take ({APP_REQUEST_TIMEOUT_S:g})",
        float,
    ),
    "UQLM_BERT_APP_MAX_CALLS_PER_MIN": ("LLM calls per rate_limit_period, for the process", int),
    "UQLM_BERT_APP_RATE_LIMIT_PERIOD": (
        "the window of the rate limit, in seconds (the generation settings')",
        float,
    ),
    "UQLM_BERT_APP_MAX_CONCURRENCY": ("LLM calls in flight at most, for the process", int),
    "UQLM_BERT_APP_DEVICE": ("where the scoring model runs: cpu, cuda, mps", str),
    "UQLM_BERT_APP_THRESHOLD": (
        "flag answers whose confidence is below this (the scorer's default threshold)",
        float,
    ),
}
_SETTING_OF = {
    "UQLM_BERT_APP_NUM_RESPONSES": "num_responses",
    "UQLM_BERT_APP_TIMEOUT_S": "timeout_s",
    "UQLM_BERT_APP_REQUEST_TIMEOUT_S": "request_timeout",
    "UQLM_BERT_APP_MAX_CALLS_PER_MIN": "max_calls_per_min",
    "UQLM_BERT_APP_RATE_LIMIT_PERIOD": "rate_limit_period",
    "UQLM_BERT_APP_MAX_CONCURRENCY": "max_concurrency",
    "UQLM_BERT_APP_DEVICE": "device",
    "UQLM_BERT_APP_THRESHOLD": "threshold",
}
BAD_BODY = 'the body must be a JSON object with a non-empty "question" string'


class QuestionService:
    """The app's work, without the web framework: one shared ``BlackBoxUQ`` answering questions.

    Answers are flagged at the threshold ``uq``'s results flag at (and sampling until settled
    settles against): ``uq``'s ``ScoringSettings(threshold=...)``, else its first scorer's
    default.

    Args:
        uq: the process's ``BlackBoxUQ`` (with an LLM), shared by every request.
        num_responses: samples per question.
        timeout_s: seconds a whole question may take (``None``: no limit of its own).

    Example:
        >>> import asyncio
        >>> from langchain_core.language_models.fake_chat_models import FakeListChatModel
        >>> from uqlm_bert import BlackBoxUQ
        >>> uq = BlackBoxUQ(FakeListChatModel(responses=["It is wet."]), show_progress_bars=False)
        >>> service = QuestionService(uq, num_responses=2)
        >>> status, body = asyncio.run(service.answer("Is rain wet?"))
        >>> status, body["answer"], body["flagged"]
        (200, 'It is wet.', False)
    """

    def __init__(
        self,
        uq: Any,
        num_responses: int = NUM_RESPONSES,
        timeout_s: float | None = APP_TIMEOUT_S,
    ) -> None:
        check_int("num_responses", num_responses, 1)
        if uq.llm is None:
            raise ConfigurationError("the service needs a BlackBoxUQ with an llm")
        if timeout_s is not None and not timeout_s > 0:
            raise ConfigurationError(f"timeout_s must be positive or None, got {timeout_s!r}")
        first = uq.scorers[0]
        threshold = thresholds_of(uq.scorers, uq.scoring.threshold)[first.name]["answer"]
        if threshold is None:
            raise ConfigurationError(
                f"the scorer {first.name!r} has no default threshold at these settings: pass "
                "threshold=... (ScoringSettings(threshold=...)), chosen on labelled answers "
                "with uqlm_bert.evaluation.choose_threshold"
            )
        self.uq = uq
        self.num_responses = num_responses
        self.timeout_s = timeout_s
        self.scorer = first.name
        self.threshold = threshold
        self.in_flight = 0

    async def answer(
        self, question: str, words: bool = False, refine: bool = False
    ) -> tuple[int, dict[str, Any]]:
        """``(HTTP status, JSON body)`` for one question, with its ``words`` and its refined
        answer where asked for (see the module docstring); cancelling it cancels its LLM
        calls."""
        self.in_flight += 1
        try:
            result = await asyncio.wait_for(
                self.uq.generate_and_score(
                    [question], num_responses=self.num_responses, show_progress_bars=False
                ),
                self.timeout_s,
            )
        except asyncio.TimeoutError:
            return 504, self._body(question, error=f"no answer within {self.timeout_s:g} s")
        except UQLMBertError as exc:  # the provider refused the credentials, or is unreachable
            logger.warning("question failed: %s", exc)
            return 502, self._body(question, error=str(exc))
        finally:
            self.in_flight -= 1
        row = result.flag(threshold=self.threshold).iloc[0]
        confidence = float(row[self.scorer])
        samples = len(row["sampled_responses"])
        body = self._body(
            question,
            answer=row["response"],
            confidence=None if math.isnan(confidence) else confidence,
            flagged=bool(row["flagged"]),
            samples=samples - int(row["num_failed_samples"]),
            failed_samples=int(row["num_failed_samples"]),
            error=row["error"],
        )
        if words:
            body["words"] = answer_words(result)
        if refine:
            body.update(refined_answer(result))
        return (200 if row["response"] is not None else 502), body

    def _body(self, question: str, **fields: Any) -> dict[str, Any]:
        body = {"question": question, "answer": None, "confidence": None, "flagged": True,
                "threshold": self.threshold, "scorer": self.scorer, "samples": 0,
                "failed_samples": 0, "error": None}  # fmt: skip
        body.update(fields)
        return body


async def read_question(request: Any, max_chars: int) -> tuple[dict[str, Any], Any]:
    """The body of a ``POST /ask`` request, or the HTTP 400 reply that refuses it (not a JSON
    object with a non-empty ``"question"`` string, or a question longer than ``max_chars``):
    ``(body, None)`` or ``({}, reply)``."""
    from starlette.responses import JSONResponse

    try:
        payload = await request.json()
    except ValueError:
        payload = None
    question = payload.get("question") if isinstance(payload, dict) else None
    if not isinstance(question, str) or not question.strip():
        return {}, JSONResponse({"error": BAD_BODY}, status_code=400)
    if len(question) > max_chars:
        error = f"the question is longer than {max_chars} characters"
        return {}, JSONResponse({"error": error}, status_code=400)
    return payload, None


def asked_for(body: Mapping[str, Any]) -> dict[str, bool]:
    """What a ``POST /ask`` body asks for beside the answer, as :meth:`QuestionService.answer`
    takes it (``words``, ``refine``).

    Example:
        >>> asked_for({"question": "q", "words": True})
        {'words': True, 'refine': False}
    """
    return {"words": body.get("words") is True, "refine": body.get("refine") is True}


def answer_words(result: Any) -> list[dict[str, Any]] | None:
    """The counted words of a one-question result's answer with their supports (``"words"`` of
    the reply, in the one serialised form of ``uqlm-bert score --words``), or
    None where the scorers gave none (no ``bert_score`` scorer) or the answer is missing.

    Example:
        >>> from uqlm_bert import BlackBoxUQ
        >>> r = BlackBoxUQ(show_progress_bars=False).score(["Lima, Peru."], [["Lima is in Peru."]])
        >>> [(w["word"], w["weak"]) for w in answer_words(r)]
        [('Lima', False), ('Peru', False)]
    """
    from uqlm_bert.results._fields import SUPPORTS
    from uqlm_bert.results._tables import word_records

    if result.data.get(SUPPORTS) is None or result.data["responses"][0] is None:
        return None
    return word_records(result.words())


def refined_answer(result: Any) -> dict[str, Any]:
    """``refined_answer``, ``removed_sentences`` and ``refinement`` of a one-question result
    (``UQResult.refine()``; None each where the scorers gave no supports)."""
    from uqlm_bert.results._fields import SUPPORTS

    if result.data.get(SUPPORTS) is None:
        return {"refined_answer": None, "removed_sentences": None, "refinement": None}
    row = result.refine().iloc[0]
    return {
        "refined_answer": row["refined_response"],
        "removed_sentences": row["removed_sentences"],
        "refinement": row["refinement"],
    }


async def _client_gone(receive: Callable[[], Awaitable[Mapping[str, Any]]]) -> None:
    """Returns when the client disconnects (the ASGI ``http.disconnect`` message)."""
    while True:
        message = await receive()
        if message.get("type") == "http.disconnect":
            return


async def until_disconnect(
    work: Awaitable[Any], receive: Callable[[], Awaitable[Mapping[str, Any]]]
) -> tuple[bool, Any]:
    """``(True, what work returned)``, or ``(False, None)`` if the client disconnected first, in
    which case ``work`` was cancelled (its LLM calls with it); cancelling this cancels both.

    Call it once the request's body has been read: ``receive`` then only says when the client
    goes away.
    """
    job = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_client_gone(receive))
    try:
        await asyncio.wait({job, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (job, gone):
            task.cancel()
        # let the cancelled work finish unwinding (its calls cancelled) before answering
        await asyncio.gather(job, gone, return_exceptions=True)
    if job.cancelled():
        return False, None
    return True, job.result()  # its exception, if it failed


def create_asgi_app(
    llm: Any,
    *,
    num_responses: int = NUM_RESPONSES,
    timeout_s: float | None = APP_TIMEOUT_S,
    threshold: float | None = None,
    max_question_chars: int = APP_MAX_QUESTION_CHARS,
    warm_up: bool = True,
    **settings: Any,
) -> Any:
    """The Starlette app: ``POST /ask`` and ``GET /health``, one ``BlackBoxUQ`` per process.

    Args:
        llm: a LangChain chat model (``ChatOpenAI``, ...); never modified.
        num_responses: samples per question.
        timeout_s: seconds a whole request may take before it is cancelled with HTTP 504
            (``None``: no limit beyond the calls' own timeouts and retries).
        threshold: flag answers below this (default: the scorer's default threshold).
        max_question_chars: longer questions are refused with HTTP 400.
        warm_up: load the scoring model at startup, so the first request does not wait for it.
        **settings: the settings of the one ``BlackBoxUQ`` every request shares: its
            arguments (``scorers``, ``device``, ``max_calls_per_min``, ``max_concurrency``,
            ``generation=``, ...) and, when no ``generation`` is given, any field of
            :class:`~uqlm_bert.GenerationSettings` (``request_timeout``, by default
            :data:`APP_REQUEST_TIMEOUT_S`; ``rate_limit_period``, ...); progress bars are off.

    The ``BlackBoxUQ`` is made when the app starts (the ASGI lifespan: uvicorn and the other
    servers run it, and so does ``starlette.testclient.TestClient`` used as a context manager)
    and closed when it stops; while running it is ``app.state.service.uq``.

    Example:
        >>> from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
        >>> from starlette.testclient import TestClient
        >>> app = create_asgi_app(ParrotFakeChatModel(), num_responses=2, max_concurrency=8)
        >>> with TestClient(app) as client:
        ...     print(client.get("/health").json(), app.state.service.uq.max_concurrency)
        {'status': 'ok', 'questions_in_flight': 0} 8
    """
    check_int("num_responses", num_responses, 1)
    check_int("max_question_chars", max_question_chars, 1)
    try:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response
        from starlette.routing import Route
    except ImportError as exc:
        raise ImportError('the app needs Starlette: pip install "uqlm-bert[app]"') from exc
    from uqlm_bert import BlackBoxUQ, ScoringSettings

    settings = {**_with_generation(settings), "show_progress_bars": False}
    if threshold is not None:  # what the answers are flagged at, and sampling settles against
        scoring = ScoringSettings.of(settings.get("scoring", "local"))
        settings["scoring"] = dataclasses.replace(scoring, threshold=threshold)

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        uq = BlackBoxUQ(llm, **settings)
        try:
            app.state.service = QuestionService(uq, num_responses, timeout_s)
            if warm_up:  # the model loads in a thread: the loop stays free meanwhile
                await asyncio.to_thread(uq.score, ["Warm up."], [["Warm up."]])
            logger.info("question service ready: %s", uq.generation.describe())
            yield
        finally:
            uq.close()

    async def ask(request: Request) -> Response:
        body, refused = await read_question(request, max_question_chars)
        if refused is not None:
            return refused
        service: QuestionService = request.app.state.service
        answered, got = await until_disconnect(
            service.answer(body["question"], **asked_for(body)), request.receive
        )
        if not answered:
            return Response(status_code=CLIENT_CLOSED)
        status, reply = got
        return JSONResponse(reply, status_code=status)

    async def health(request: Request) -> Response:
        service: QuestionService = request.app.state.service
        return JSONResponse({"status": "ok", "questions_in_flight": service.in_flight})

    routes = [Route("/ask", ask, methods=["POST"]), Route("/health", health, methods=["GET"])]
    return Starlette(routes=routes, lifespan=lifespan)


def _with_generation(settings: dict[str, Any]) -> dict[str, Any]:
    """``create_asgi_app``'s settings with the generation ones in one ``generation`` object
    (the app's request timeout unless given), checked now rather than at startup."""
    from uqlm_bert.generation._settings import (
        RETRY_ARGUMENTS,
        GenerationSettings,
        generation_settings,
    )

    if settings.get("generation") is not None:
        return dict(settings)
    accepted = {*GenerationSettings.accepted(), *RETRY_ARGUMENTS}
    flat = {k: v for k, v in settings.items() if k in accepted}
    rest = {k: v for k, v in settings.items() if k not in accepted}
    flat.setdefault("request_timeout", APP_REQUEST_TIMEOUT_S)
    return {**rest, "generation": generation_settings(None, **flat)}


def create_asgi_app_from_env(environ: Mapping[str, str] | None = None) -> Any:
    """:func:`create_asgi_app` with a ``ChatOpenAI`` and the settings of :data:`ENVIRONMENT`.

    ``ChatOpenAI`` reads ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` itself. A value that is
    not of its variable's type raises :class:`~uqlm_bert.ConfigurationError` naming it.

    Example:
        >>> env = {"OPENAI_API_KEY": "sk-...", "UQLM_BERT_APP_NUM_RESPONSES": "three"}
        >>> create_asgi_app_from_env(env)
        Traceback (most recent call last):
        ...
        uqlm_bert.ConfigurationError: UQLM_BERT_APP_NUM_RESPONSES must be an int (samples per question (5)), got 'three'
    """
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for name, (meaning, kind) in ENVIRONMENT.items():
        raw = environ.get(name, "").strip()
        if raw:
            try:
                values[name] = kind(raw)
            except ValueError:
                raise ConfigurationError(
                    f"{name} must be a{'n' if kind is int else ''} {kind.__name__} ({meaning}), "
                    f"got {raw!r}"
                ) from None
    from langchain_openai import ChatOpenAI

    client = {
        k: environ[v]
        for k, v in (("api_key", "OPENAI_API_KEY"), ("base_url", "OPENAI_BASE_URL"))
        if environ.get(v)
    }
    model = values.pop("UQLM_BERT_APP_MODEL", APP_MODEL)
    llm = ChatOpenAI(model=model, temperature=0.0, **client)
    return create_asgi_app(llm, **{_SETTING_OF[name]: value for name, value in values.items()})


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m uqlm_bert.apps``: serve :func:`create_asgi_app_from_env` with uvicorn."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (8000)")
    args = parser.parse_args(argv)
    try:
        import uvicorn
    except ImportError:
        parser.error('uvicorn is not installed: pip install "uqlm-bert[app]"')
    uvicorn.run(create_asgi_app_from_env(), host=args.host, port=args.port, workers=1)
    return 0
