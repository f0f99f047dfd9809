"""The example web service on Ray Serve: replicas that ask the LLM, one scorer for all of them,
and the provider's limits held for the whole deployment.

::

    HTTP ─► Ingress, k replicas ─────────► the LLM provider
            one BlackBoxUQ each:             max_calls_per_min, max_concurrency and the
            the answer and m samples         learned level granted by one keeper actor
            │                                for all k replicas (ClusterLimits)
            └─► Scorer, one replica (on a GPU where the cluster has one):
                @serve.batch over the answer/sample pairs of every replica

``POST /ask`` with ``{"question": "..."}`` and ``GET /health`` answer as the ASGI example does
(:mod:`uqlm_bert.apps._asgi`, whose :class:`~uqlm_bert.apps._asgi.QuestionService`
each ingress replica runs): the answer, its confidence (the answer scored against its own
samples), whether it is flagged, and the sample counts.

- **Limits for the deployment.** Every replica's ``BlackBoxUQ`` takes its limits from one Ray
  actor (:class:`~uqlm_bert.generation._cluster_limits.ClusterLimits`, named ``limits_name``): the
  provider sees at most ``max_calls_per_min`` calls in any ``rate_limit_period`` and at most
  ``max_concurrency`` in flight from all replicas together, and a 429 seen by one replica lowers
  the level for all of them. Set the limits of the whole deployment; do not divide them.
- **One scorer.** The replicas send the pairs of each scoring batch to the ``Scorer``
  deployment, which scores what all of them sent within ``batch_wait_timeout_s`` in one batch
  (``@serve.batch``). Each pair is scored against its own sample only, so a confidence is the
  one scoring the answer alone gives (within the dtype's bound, see docs/bertscore.md). It runs
  on a GPU when the cluster has one (``scorer_gpus``), and holds the only copy of the model.

Run it on this machine (needs the ``serve`` extra: ``pip install "uqlm-bert[serve]"``)::

    export OPENAI_API_KEY=...
    ray start --head --node-ip-address 127.0.0.1 --include-dashboard false
    serve run uqlm_bert.apps:serve_app_builder model=gpt-4o-mini \\
        max_calls_per_min=500 ingress_replicas=3
    curl -s localhost:8000/ask -H 'content-type: application/json' -d '{"question": "..."}'

The arguments are the fields of :class:`ServeAppSettings`; on a cluster, the same import path
and arguments go in a RayService's ``serveConfigV2`` (see "An app on Ray Serve" in
docs/scaling.md). In your own code, :func:`build_serve_app` takes the settings and any LangChain chat
model's factory.

Example:
    >>> settings = ServeAppSettings.from_args({"model": "gpt-4o-mini", "ingress_replicas": "3",
    ...                                        "max_calls_per_min": "600"})
    >>> settings.ingress_replicas, settings.generation().cluster_limits.name
    (3, 'uqlm-bert-serve-limits')
    >>> ServeAppSettings.from_args({"ingress_replica": "3"})
    Traceback (most recent call last):
    ...
    uqlm_bert.ConfigurationError: unknown app argument 'ingress_replica' (did you mean 'ingress_replicas'?); accepted: ...
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from uqlm_bert._checks import check_int, check_names, check_number
from uqlm_bert._exceptions import ConfigurationError
from uqlm_bert._inputs import ScoringInputs
from uqlm_bert.apps._asgi import (
    APP_MAX_QUESTION_CHARS,
    APP_MODEL,
    APP_REQUEST_TIMEOUT_S,
    APP_TIMEOUT_S,
)
from uqlm_bert.bertscore._token_support import TokenSupport
from uqlm_bert.generation._cluster_limits import ClusterLimits
from uqlm_bert.generation._settings import NUM_RESPONSES, GenerationSettings
from uqlm_bert.scorers._base import Pairs, PairwiseScorer

__all__ = [
    "BatchedScorer",
    "Ingress",
    "PairBatches",
    "ServeAppSettings",
    "ServeScorer",
    "serve_app_builder",
    "build_serve_app",
    "request_pairs",
]

logger = logging.getLogger("uqlm_bert")


@dataclass(frozen=True)
class ServeAppSettings:
    """What the Serve app is built with: the ``args`` of ``serve run`` and of a RayService.

    Attributes:
        model: the chat model's name, for ``ChatOpenAI`` (which reads ``OPENAI_API_KEY``, and
            ``OPENAI_BASE_URL`` unless ``base_url`` is given, in each replica).
        base_url: the provider's OpenAI-compatible endpoint; ``None``: OpenAI's, or
            ``OPENAI_BASE_URL``.
        num_responses: samples per question.
        ingress_replicas: replicas that ask the LLM.
        max_calls_per_min, rate_limit_period, max_concurrency: the provider's limits for the
            whole deployment (all replicas together).
        request_timeout: seconds one attempt of an LLM call may take.
        timeout_s: seconds a whole question may take (HTTP 504 past it).
        threshold: flag answers below this (``None``: the scorer's default threshold).
        limits_name, limits_namespace: the keeper actor of the limits and its Ray namespace
            (Serve's own, ``"serve"``, by default); apps that name the same keeper share their
            limits. ``limits_name=None`` leaves each replica its own limits (as the ASGI app's
            processes have): ``k`` replicas then send up to ``k`` times them.
        max_question_chars: longer questions are refused with HTTP 400.
        max_batch_size: the most scoring requests (each one replica's batch of answers) the
            scorer takes in one batch.
        batch_wait_timeout_s: how long the scorer waits for more requests to join a batch.
        scorer_gpus: GPUs of the scorer replica; ``None``: one if the cluster has a GPU, else 0.
        device: where the scorer's model runs (``None``: its GPU if it has one, else the CPU).
        ingress_cpus, scorer_cpus: CPUs each replica reserves.
        max_ongoing_requests: questions one ingress replica takes at once (more wait in Serve's
            queue); about what the provider's limits let through is enough.
    """

    model: str = APP_MODEL
    base_url: str | None = None
    num_responses: int = NUM_RESPONSES
    ingress_replicas: int = 2
    max_calls_per_min: int | None = None
    rate_limit_period: float = 60.0
    max_concurrency: int | None = 256
    request_timeout: float = APP_REQUEST_TIMEOUT_S
    timeout_s: float = APP_TIMEOUT_S
    threshold: float | None = None
    limits_name: str | None = "uqlm-bert-serve-limits"
    limits_namespace: str | None = "serve"
    max_question_chars: int = APP_MAX_QUESTION_CHARS
    max_batch_size: int = 16
    batch_wait_timeout_s: float = 0.1
    scorer_gpus: float | None = None
    device: str | None = None
    ingress_cpus: float = 1.0
    scorer_cpus: float = 1.0
    max_ongoing_requests: int = 256

    def __post_init__(self) -> None:
        for name in (
            "num_responses",
            "ingress_replicas",
            "max_batch_size",
            "max_ongoing_requests",
            "max_question_chars",
        ):
            check_int(name, getattr(self, name), 1)
        for name in ("batch_wait_timeout_s", "ingress_cpus", "scorer_cpus"):
            check_number(name, getattr(self, name))
        check_number("scorer_gpus", self.scorer_gpus, none_ok=True)
        check_number("timeout_s", self.timeout_s, strict=True)
        self.generation()  # the limits and timeouts are checked there

    def generation(self) -> GenerationSettings:
        """The generation settings of every replica's ``BlackBoxUQ``."""
        limits = None
        if self.limits_name is not None:
            limits = ClusterLimits(name=self.limits_name, namespace=self.limits_namespace)
        return GenerationSettings(
            max_calls_per_min=self.max_calls_per_min,
            rate_limit_period=self.rate_limit_period,
            max_concurrency=self.max_concurrency,
            request_timeout=self.request_timeout,
            cluster_limits=limits,
        )

    @classmethod
    def from_args(cls, args: Mapping[str, str]) -> ServeAppSettings:
        """The settings from ``serve run``'s ``key=value`` arguments (or a RayService's
        ``args``): strings turned into each field's type; ``none`` for ``None``.

        Raises:
            ConfigurationError: an unknown argument, or a value not of its field's type.
        """
        hints = typing.get_type_hints(cls)
        names = tuple(f.name for f in dataclasses.fields(cls))
        check_names(dict(args), names, "app argument")
        values: dict[str, Any] = {}
        for name, raw in args.items():
            kinds = [k for k in typing.get_args(hints[name]) if k is not type(None)] or [
                hints[name]
            ]
            text = str(raw).strip()
            if text.lower() in ("none", "") and type(None) in typing.get_args(hints[name]):
                values[name] = None
                continue
            try:
                values[name] = kinds[0](text)
            except ValueError:
                raise ConfigurationError(
                    f"{name} must be a{'n' if kinds[0] is int else ''} {kinds[0].__name__}, "
                    f"got {raw!r}"
                ) from None
        return cls(**values)


class ServeScorer(PairwiseScorer):
    """The ``bert_score`` scorer of an ingress replica: its pairs are scored by the scorer
    deployment (a :class:`BatchedScorer`), with the other replicas' pairs.

    Args:
        handle: the scorer deployment's handle.
        threshold: the default threshold (the ``bert_score`` scorer's, at its defaults).

    ``BlackBoxUQ`` scores in a worker thread, where this waits for the deployment's answer.
    """

    name = "bert_score"

    def __init__(self, handle: Any, threshold: float | None = None) -> None:
        from uqlm_bert.scorers._bertscore import DEFAULT_THRESHOLD, SUPPORT_THRESHOLDS

        self._handle = handle
        self.default_threshold = DEFAULT_THRESHOLD if threshold is None else threshold
        # the deployment's scorer is bert_score at its defaults: the support thresholds hold
        self.support_thresholds = dict(SUPPORT_THRESHOLDS)

    def score_pairs(self, pairs: Pairs) -> np.ndarray:
        """The pairs' scores, from the scorer deployment (with the answers' token supports,
        where the call collects them, from the same pass)."""
        asked = (pairs.group, pairs.responses) if pairs.supports else (None, None)
        response = self._handle.score.remote(pairs.cands, pairs.refs, pairs.prompts, *asked)
        scores, supports = response.result()
        pairs.shared[(self.name, "supports")] = supports
        return np.asarray(scores, dtype=np.float64)

    def token_supports(
        self, pairs: Pairs, group: Sequence[int], inputs: ScoringInputs
    ) -> list[TokenSupport | None] | None:
        """Each answer's token supports, as the deployment computed them with the scores."""
        return pairs.shared.get((self.name, "supports"))


def request_pairs(
    cands: list[str],
    refs: list[str],
    prompts: list[str | None] | None,
    group: list[int] | None = None,
    responses: list[str | None] | None = None,
) -> Pairs:
    """A scoring request of an ingress replica as :class:`PairBatches` takes it: its pairs,
    and, where it sends the response of each pair (``group``, ``responses``), a request for its
    answers' token supports."""
    pairs = Pairs(list(cands), list(refs), prompts=prompts, group=group, responses=responses)
    pairs.supports = group is not None
    return pairs


class PairBatches:
    """The scorer deployment's work, with no Ray in sight: the requests of a batch scored in one
    pass of the ``bert_score`` scorer at its defaults, the model loaded once.

    Args:
        device: where the model runs (``None``: a GPU if there is one, else the CPU).
    """

    def __init__(self, device: str | None = None) -> None:
        from uqlm_bert.scorers._registry import build_scorer

        self._scorer = build_scorer("bert_score", device=device)
        self._scorer.score(["Warm up."], [["Warm up."]])  # the model loads now
        self.batches: list[tuple[int, int, int]] = []  # (requests, answers, pairs) per batch

    @property
    def device(self) -> str:
        """Where the model runs."""
        return str(self._scorer.engine.device)

    def score_batch(
        self, requests: list[Pairs]
    ) -> list[tuple[np.ndarray, list[TokenSupport | None] | None]]:
        """Each request's pair scores, and its answers' token supports where it asks for them,
        from one pass over the pairs of all of them."""
        with_prompts = all(r.prompts is not None for r in requests)
        joined = Pairs(
            [c for r in requests for c in r.cands],
            [x for r in requests for x in r.refs],
            prompts=[p for r in requests for p in r.prompts] if with_prompts else None,  # type: ignore[union-attr]
            supports=any(r.supports for r in requests),
        )
        scores = self._scorer.score_pairs(joined) if joined.cands else np.zeros(0)
        supports = self._supports(joined, requests) if joined.supports and joined.cands else None
        answers = sum(
            len(set(zip(r.prompts or [None] * len(r.cands), r.cands, strict=True)))
            for r in requests
        )
        self.batches.append((len(requests), answers, len(joined.cands)))
        bounds = np.cumsum([0] + [len(r.cands) for r in requests])
        return [
            (scores[a:b], None if supports is None or not r.supports else supports[k])
            for k, (r, a, b) in enumerate(zip(requests, bounds[:-1], bounds[1:], strict=True))
        ]

    def _supports(self, joined: Pairs, requests: list[Pairs]) -> list[list[TokenSupport | None]]:
        """Each request's answers' token supports, from the joined pass: the requests' answers
        numbered one after another (a request that asks for none counts as pairs alone)."""
        group: list[int] = []
        responses: list[str | None] = []
        spans = []
        for r in requests:
            first = len(responses)
            if r.supports and r.group is not None and r.responses is not None:
                group.extend(first + g for g in r.group)
                responses.extend(r.responses)
            else:  # its pairs still need a response each: one per pair, its candidate
                group.extend(range(first, first + len(r.cands)))
                responses.extend(r.cands)
            spans.append((first, len(responses)))
        inputs = ScoringInputs(responses, [[] for _ in responses])
        found = self._scorer.token_supports(joined, group, inputs) or [None] * len(responses)
        return [list(found[a:b]) for a, b in spans]


class BatchedScorer:
    """The scorer deployment: the pairs of every ingress replica, scored in shared batches
    (:class:`PairBatches`).

    Args:
        max_batch_size: the most requests in one batch.
        batch_wait_timeout_s: how long a batch waits for more requests.
        device: where the model runs (``None``: a GPU if the replica has one, else the CPU).

    :meth:`stats` says how full the batches were.
    """

    def __init__(
        self, max_batch_size: int = 16, batch_wait_timeout_s: float = 0.1, device: str | None = None
    ) -> None:
        from ray import serve

        self._work = PairBatches(device)
        self.batches = self._work.batches

        @serve.batch(max_batch_size=max_batch_size, batch_wait_timeout_s=batch_wait_timeout_s)
        async def batched(requests: list[Pairs]) -> list[Any]:
            return await asyncio.to_thread(self._work.score_batch, requests)

        self._batched = batched

    async def score(
        self,
        cands: list[str],
        refs: list[str],
        prompts: list[str | None] | None,
        group: list[int] | None = None,
        responses: list[str | None] | None = None,
    ) -> tuple[np.ndarray, list[TokenSupport | None] | None]:
        """One request's pair scores (it waits for the batch it joins), and its answers' token
        supports where it asks for them (see :func:`request_pairs`)."""
        return await self._batched(request_pairs(cands, refs, prompts, group, responses))

    async def stats(self) -> dict[str, Any]:
        """The batches so far: how many, and their mean requests, answers and pairs."""
        n = len(self.batches)
        mean = [sum(b[k] for b in self.batches) / n if n else 0.0 for k in range(3)]
        return {
            "batches": n,
            "mean_requests": mean[0],
            "mean_answers": mean[1],
            "mean_pairs": mean[2],
            "device": self._work.device,
        }


class Ingress:
    """An ingress replica: ``POST /ask`` and ``GET /health``, one ``BlackBoxUQ`` (with the
    deployment's limits) whose answers the scorer deployment scores.

    Args:
        scorer: the scorer deployment's handle.
        settings: the app's settings.
        llm_factory: makes the chat model in the replica (``None``: ``ChatOpenAI`` with
            ``settings.model`` and ``settings.base_url``).
    """

    def __init__(
        self,
        scorer: Any,
        settings: ServeAppSettings,
        llm_factory: Callable[[], Any] | None = None,
    ) -> None:
        from uqlm_bert import BlackBoxUQ
        from uqlm_bert.apps._asgi import QuestionService

        if llm_factory is None:
            from langchain_openai import ChatOpenAI

            given = {"base_url": settings.base_url} if settings.base_url else {}
            llm = ChatOpenAI(model=settings.model, temperature=0.0, **given)
        else:
            llm = llm_factory()
        self.settings = settings
        self.uq = BlackBoxUQ(
            llm,
            scorers=[ServeScorer(scorer, settings.threshold)],
            generation=settings.generation(),
            show_progress_bars=False,
        )
        self.service = QuestionService(self.uq, settings.num_responses, settings.timeout_s)

    async def __call__(self, request: Any) -> Any:
        """Route a request: ``POST /ask``, ``GET /health``; 404 and 405 otherwise."""
        from starlette.responses import JSONResponse

        from uqlm_bert.apps._asgi import asked_for, read_question

        path = request.url.path.rstrip("/")
        if path.endswith("/health") or path == "health":
            return JSONResponse({"status": "ok", "questions_in_flight": self.service.in_flight})
        if not path.endswith("/ask"):
            return JSONResponse({"error": f"no route {request.url.path}"}, status_code=404)
        if request.method != "POST":
            return JSONResponse({"error": "use POST"}, status_code=405)
        asked, refused = await read_question(request, self.settings.max_question_chars)
        if refused is not None:
            return refused
        status, body = await self.service.answer(asked["question"], **asked_for(asked))
        return JSONResponse(body, status_code=status)

    def __del__(self) -> None:
        uq = getattr(self, "uq", None)
        if uq is not None:
            uq.close()


def build_serve_app(
    settings: ServeAppSettings, llm_factory: Callable[[], Any] | None = None
) -> Any:
    """The Serve application: ``Ingress`` (the HTTP entry) bound to one ``Scorer``.

    Args:
        settings: the app's settings.
        llm_factory: makes the chat model in each ingress replica (it must pickle: a class and
            its arguments, ``functools.partial(ChatOpenAI, model=...)``); ``None``: ``ChatOpenAI``
            with ``settings.model``.

    The scorer asks for ``settings.scorer_gpus`` GPUs; left ``None``, one when the Ray cluster
    this process is connected to has a GPU, else none.

    Example:
        >>> app = build_serve_app(ServeAppSettings(scorer_gpus=0))  # doctest: +SKIP
        >>> handle = serve.run(app, route_prefix="/")  # doctest: +SKIP
    """
    try:
        import ray
        from ray import serve
    except ImportError as exc:
        raise ImportError('the Serve app needs Ray Serve: pip install "uqlm-bert[serve]"') from exc
    gpus = settings.scorer_gpus
    if gpus is None:
        found = ray.cluster_resources().get("GPU", 0) if ray.is_initialized() else 0
        gpus = 1 if found >= 1 else 0
        logger.info("the scorer asks for %s GPU (the cluster has %s)", gpus, found)
    scorer = serve.deployment(
        BatchedScorer,
        name="Scorer",
        num_replicas=1,
        ray_actor_options={"num_cpus": settings.scorer_cpus, "num_gpus": gpus},
        max_ongoing_requests=max(2 * settings.max_batch_size, 2 * settings.ingress_replicas),
    ).bind(settings.max_batch_size, settings.batch_wait_timeout_s, settings.device)
    return serve.deployment(
        Ingress,
        name="Ingress",
        num_replicas=settings.ingress_replicas,
        ray_actor_options={"num_cpus": settings.ingress_cpus},
        max_ongoing_requests=settings.max_ongoing_requests,
    ).bind(scorer, settings, llm_factory)


def serve_app_builder(args: dict[str, str]) -> Any:
    """``serve run uqlm_bert.apps:serve_app_builder key=value ...``: the app from
    :class:`ServeAppSettings`' fields given as strings.

    Example:
        >>> serve_app_builder({"ingress_replicas": "0"})
        Traceback (most recent call last):
        ...
        uqlm_bert.ConfigurationError: ingress_replicas must be an int >= 1, got 0
    """
    return build_serve_app(ServeAppSettings.from_args(args))
