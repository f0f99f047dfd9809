"""Calling a LangChain chat model for one run: limits, timeouts, retries and failures.

An :class:`LLMCaller` lives for one run and is used on that run's event loop. It calls copies of
the caller's model (:func:`~uqlm_bert.generation.clients.derive_llm`), one as the user configured
it (for the original response) and one at the sampling temperature with the response cache off
(for samples), with the client's own retries off, so that every HTTP request goes through this
module's rate limit and retry accounting; an OpenAI-SDK model on the default HTTP client gets a
connection pool of the run's own, closed with the run, so runs on different event loops
(notebooks, repeated ``asyncio.run``) never share one.

Each call takes a place among the calls in flight (:class:`~uqlm_bert.generation.limits.
AdaptiveConcurrency`) and each attempt a token of the rate limit
(:class:`~uqlm_bert.generation.limits.RateLimiter`). A call for samples may ask for several at
once with the provider's ``n`` parameter (:meth:`LLMCaller.samples_per_call` says how many): one
request, one token, one place. Where congestion control stood at the end of the run, and whether
the provider honours ``n``, are kept for the next run against the same provider
(:mod:`uqlm_bert.generation.memory`).

Example:
    >>> import asyncio
    >>> from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
    >>> from uqlm_bert.generation.prompts import to_messages
    >>> async def one_call():
    ...     async with LLMCaller(ParrotFakeChatModel(), GenerationSettings()) as caller:
    ...         permit = await caller.concurrency.acquire()
    ...         return await caller.call(to_messages("echo me"), sample=True, permit=permit)
    >>> asyncio.run(one_call())
    (['echo me'], None)
"""

from __future__ import annotations

import asyncio
import logging
import random
import sys
import time
import warnings
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from uqlm_bert.checks import check_int
from uqlm_bert.exceptions import (
    AuthenticationFailedError,
    GenerationError,
    ProviderUnreachableError,
)
from uqlm_bert.generation import memory
from uqlm_bert.generation.classify import ErrorInfo, MalformedReplyError, classify_exception
from uqlm_bert.generation.clients import (
    accepts_n,
    derive_llm,
    llm_description,
    llm_endpoint,
    llm_temperature,
    message_text,
    provider_key,
    run_http_clients,
    unbind,
)
from uqlm_bert.generation.limits import AdaptiveConcurrency, Permit, RateLimiter
from uqlm_bert.generation.records import CallFailure, CallStats
from uqlm_bert.generation.settings import GenerationSettings
from uqlm_bert.inputs import repair_text

__all__ = [
    "LLMCaller",
    "derive_llm",
    "llm_description",
    "llm_endpoint",
    "llm_temperature",
    "message_text",
]

logger = logging.getLogger("uqlm_bert")

#: Failure kinds that mean the provider is overloaded: the calls in flight are cut.
_CONGESTION = frozenset({"rate_limit", "server", "timeout"})
#: Connections per HTTP pool of a run. The OpenAI client's pool looks at every one of its
#: connections for each request it sends and each reply it reads, so the CPU a call costs grows
#: with the connections in its pool: a run with hundreds of calls in flight spreads them over
#: several pools of its own (measured: one pool of 714 connections took about a third of the
#: client's CPU for 714 calls).
_POOL_CONNECTIONS = 48
#: With no call answered yet, this many connection failures per starting place in flight (three
#: rounds of attempts) show that the provider cannot be reached.
_UNREACHABLE_ROUNDS = 3



async def _within(awaitable: Awaitable[Any], seconds: float | None) -> Any:
    """``await awaitable``, raising ``asyncio.TimeoutError`` after ``seconds`` (no extra task
    where ``asyncio.timeout`` exists)."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(seconds):
            return await awaitable
    return await asyncio.wait_for(awaitable, seconds)  # pragma: no cover - Python 3.10


class LLMCaller:
    """Sends the chat calls of one run, through its limits and its retry loop.

    Use it as an async context manager on the run's event loop; leaving the block closes the
    connection pool made for the run and records what the run learned about the provider.

    Args:
        llm: a LangChain chat model (``BaseChatModel``) or a binding of one; it is not modified.
        settings: the generation settings.
        total_calls: how many calls the run will make at most, one per slot: the calls allowed
            in flight at the start, within the cap.
        first_round: how many calls the run starts with (fewer than ``total_calls`` where
            samples are asked for with ``n``): with none answered, three rounds of them failing
            to connect stop the run.
        rng: random source for backoff jitter.
        sleep: the coroutine function that waits between attempts (``asyncio.sleep``; a test
            may pass a recorder).

    Attributes:
        stats: the run's call counts.
        concurrency: the places in flight.
        rate: the rate limit, or None.
    """

    def __init__(
        self,
        llm: Any,
        settings: GenerationSettings,
        *,
        total_calls: int | None = None,
        first_round: int | None = None,
        rng: random.Random | None = None,
        sleep: Callable[[float], Awaitable[Any]] | None = None,
    ) -> None:
        check_int("total_calls", total_calls, 0, none_ok=True)
        check_int("first_round", first_round, 0, none_ok=True)
        self.settings = settings
        self.stats = CallStats()
        self.endpoint = llm_endpoint(llm)
        self._key = provider_key(llm)
        known = memory.recall(self._key)
        starting = settings.starting_concurrency(
            total_calls if total_calls is not None else settings.max_concurrency or 1
        )
        self.concurrency = AdaptiveConcurrency(
            starting,
            settings.max_concurrency,
            settings.adaptive,
            learned=known.concurrency if known is not None else None,
        )
        self.rate: RateLimiter | None = None
        if settings.max_calls_per_min is not None:
            self.rate = RateLimiter(settings.max_calls_per_min, settings.rate_limit_period)
            self.concurrency.cap(settings.max_calls_per_min)
        self.stats.concurrency_start = self.concurrency.start
        self.stats.learned_start = known is not None and known.concurrency is not None
        pools = -(-self.concurrency.limit // _POOL_CONNECTIONS)
        self._http_clients = run_http_clients(llm, pools)
        no_retry = settings.disable_client_retries
        self._original = [
            derive_llm(llm, disable_client_retries=no_retry, http_client=pool)
            for pool in self._http_clients or [None]
        ]
        self._sampling = [
            derive_llm(
                llm,
                temperature=settings.sampling_temperature,
                disable_client_retries=no_retry,
                disable_cache=True,
                http_client=pool,
            )
            for pool in self._http_clients or [None]
        ]
        self._n_models: dict[int, tuple[Any, dict[str, Any]]] = {}
        self._turn = 0  # the copy (and pool) the next call uses
        use_n = settings.use_n_param
        self._max_choices = 1
        if use_n is True or (use_n == "auto" and accepts_n(llm)):
            self._max_choices = settings.max_samples_per_call
            if known is not None and known.max_choices is not None:
                self._max_choices = min(self._max_choices, known.max_choices)
        first = self.concurrency.limit
        if first_round is not None:
            first = max(1, min(first, first_round))
        self._unreachable_after = _UNREACHABLE_ROUNDS * first
        self._connect_failures = 0
        self._answered = False
        self._rng = rng or random.Random()
        self._sleep = sleep or asyncio.sleep

    async def __aenter__(self) -> LLMCaller:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stats.max_in_flight = self.concurrency.max_in_flight
        self.stats.concurrency_peak = self.concurrency.peak
        self.stats.concurrency_final = self.concurrency.limit
        self.stats.max_choices = self._max_choices
        learned = self.concurrency.learned()
        if learned is not None:
            memory.remember(self._key, concurrency=learned)
        for pool in self._http_clients:
            await pool.aclose()

    @property
    def original_llm(self) -> Any:
        """The copy of the model that answers (as the user configured it)."""
        return self._original[0]

    @property
    def sampling_llm(self) -> Any:
        """The copy of the model that samples (at the sampling temperature, no cache)."""
        return self._sampling[0]

    def samples_per_call(self) -> int:
        """The most samples one call asks for now: 1 without ``n``."""
        return self._max_choices

    def choices_returned(self, asked: int, got: int) -> None:
        """A call asked for ``asked`` choices and the provider returned ``got``: fewer means it
        caps or ignores ``n``; later calls ask for no more than it gave (1: ``n`` is not used)."""
        if got >= asked:
            return
        self.stats.choices_missing += asked - got
        got = max(1, got)
        if got < self._max_choices:
            self._max_choices = got
            memory.remember(self._key, max_choices=got)
            where = self.endpoint or llm_description(self.sampling_llm)["type"]
            if got == 1:
                logger.info(
                    "%s returned 1 choice where %d were asked with n: it ignores n, so its "
                    "samples are asked for one call each from now on (and the missing ones "
                    "again)", where, asked,
                )
            else:
                logger.info(
                    "%s returned %d choices where %d were asked with n: at most %d samples "
                    "are asked per call from now on (and the missing ones again)",
                    where, got, asked, got,
                )

    def n_refused(self) -> None:
        """A call that asked for several samples with ``n`` failed for good where the same
        samples asked one by one were answered: the provider refuses ``n``, which is not used
        with it from now on."""
        if self._max_choices > 1:
            self._max_choices = 1
            memory.remember(self._key, max_choices=1)
            logger.info(
                "%s refused a call that asked for several samples with n, and answered them "
                "asked one by one: its samples are asked for one call each from now on",
                self.endpoint or llm_description(self.sampling_llm)["type"],
            )

    async def call(
        self, messages: Sequence[BaseMessage], *, sample: bool, permit: Permit, n: int = 1
    ) -> tuple[list[str] | None, CallFailure | None]:
        """One call, holding ``permit`` (a place in flight) until it is done: the texts (``n``
        samples asked with the provider's ``n`` parameter; the provider may return fewer), or
        ``None`` and the failure after all retries. An attempt that failed gives its place back
        while it waits to try again.

        Raises:
            AuthenticationFailedError: the provider rejected the credentials (HTTP 401/403).
            ProviderUnreachableError: no call has been answered and the first rounds of calls
                all failed to connect.
            GenerationError: the client cannot run on this event loop (closed, or another's).
        """
        policy = self.settings.retry
        latency = None
        attempts = 0
        held: Permit | None = permit
        try:
            while True:
                attempts += 1
                if self.rate is not None:
                    await self.rate.acquire()
                started = time.monotonic()
                self.stats.attempts += 1
                try:
                    texts = await _within(
                        self._send(messages, sample, n), self.settings.request_timeout
                    )
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - every client error is classified
                    info = self._failed(exc, held)
                else:
                    latency = time.monotonic() - started
                    self._answered = True
                    if n > 1:
                        self.stats.n_calls += 1
                        self.stats.samples_per_call = max(self.stats.samples_per_call, n)
                    for k, text in enumerate(texts):
                        texts[k], repaired = repair_text(text)
                        self.stats.repaired_replies += repaired
                    return texts, None
                finally:
                    if self.rate is not None:
                        self.rate.release()
                if info.retryable and attempts <= policy.max_retries:
                    wait = policy.delay(attempts - 1, info.retry_after, self._rng)
                    logger.info(
                        "LLM call failed (%s), retry %d of %d in %.2f s: %s",
                        info.kind, attempts, policy.max_retries, wait, info.message,
                    )
                    self.stats.retries += 1
                    self.concurrency.release(held, None)
                    held = None
                    await self._sleep(wait)
                    held = await self.concurrency.acquire(priority=True)
                    continue
                failure = CallFailure(info.kind, info.message, attempts, info.status_code)
                logger.info("LLM call failed for good: %s", failure)
                return None, failure
        finally:
            if held is not None:
                self.concurrency.release(held, latency)

    async def _send(self, messages: Sequence[BaseMessage], sample: bool, n: int) -> list[str]:
        """One attempt: the reply's texts, ``n`` or fewer."""
        turn = self._turn = (self._turn + 1) % len(self._sampling)
        if n == 1:
            llm = self._sampling[turn] if sample else self._original[turn]
            return [message_text(await llm.ainvoke(list(messages)))]
        if turn not in self._n_models:
            # streaming merges the choices into one: off for calls that ask for several
            model, kwargs = unbind(self._sampling[turn])
            if "disable_streaming" in getattr(type(model), "model_fields", {}):
                model = model.model_copy(update={"disable_streaming": True})
            self._n_models[turn] = (model, kwargs)
        model, kwargs = self._n_models[turn]
        result = await model.agenerate([list(messages)], n=n, **kwargs)
        choices = result.generations[0][:n] if result.generations else []
        if not choices:
            raise MalformedReplyError("the LLM reply holds no choices")
        return [message_text(choice.message) for choice in choices]

    def _failed(self, exc: BaseException, permit: Permit | None) -> ErrorInfo:
        """Classify a failed attempt, raise what stops the run, and feed back congestion."""
        info = classify_exception(exc)
        if isinstance(exc, asyncio.TimeoutError) and not str(exc):
            message = f"no reply within request_timeout={self.settings.request_timeout} s"
            info = ErrorInfo(kind="timeout", retryable=True, message=message)
        if info.kind == "auth":
            raise AuthenticationFailedError(
                f"the LLM provider rejected the credentials (HTTP {info.status_code}): "
                f"{info.message}. Check the API key and its permissions for this model; "
                "the run was stopped because every call would fail the same way."
            ) from exc
        if info.fatal:
            raise GenerationError(
                f"the LLM client cannot be used on this event loop ({info.message}): its "
                "connections belong to another event loop, one that has closed or runs in "
                "another thread. Create the chat model in the event loop that uses it, or use "
                "BlackBoxUQ.generate_and_score_sync, which keeps one loop for all its calls."
            ) from exc
        if info.kind == "rate_limit":
            self.stats.rate_limited += 1
        if info.kind in _CONGESTION and permit is not None:
            self.concurrency.congestion(permit, info.kind)
        if info.kind == "connection" and not self._answered:
            self._connect_failures += 1
            where = self.endpoint or "the LLM provider"
            if self._connect_failures == 1:
                warnings.warn(
                    f"cannot connect to {where}: {info.message}; retrying",
                    UserWarning,
                    stacklevel=2,
                )
            if self.settings.fail_fast and self._connect_failures >= self._unreachable_after:
                raise ProviderUnreachableError(
                    f"cannot connect to {where}: {self._connect_failures} attempts failed and "
                    f"none was answered (last: {info.message}). Check that the server is "
                    "running and that the base URL and network settings are right."
                ) from exc
        return info


