"""Calling a LangChain chat model for one run: limits, timeouts, retries and failures.

An :class:`LLMCaller` lives for one run and is used on that run's event loop. The caller's model
is never modified: :func:`derive_llm` makes the copies that are called, one as the user
configured it (for the original response) and one at the sampling temperature with the response
cache off (for samples). On both copies the client's own retries are switched off where the
model exposes them (``max_retries``; the ``openai`` SDK client inside ``ChatOpenAI``), so that
every HTTP request goes through this module's rate limit and retry accounting; and an OpenAI-SDK
model on the default HTTP client gets a connection pool of the run's own, closed with the run,
so runs on different event loops (notebooks, repeated ``asyncio.run``) never share one.

Each call takes a place among the calls in flight (:class:`~uqlm_bert.generation.limits.
AdaptiveConcurrency`) and each attempt a token of the rate limit
(:class:`~uqlm_bert.generation.limits.RateLimiter`).

Example:
    >>> import asyncio
    >>> from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
    >>> from uqlm_bert.generation.prompts import to_messages
    >>> async def one_call():
    ...     async with LLMCaller(ParrotFakeChatModel(), GenerationSettings()) as caller:
    ...         permit = await caller.concurrency.acquire()
    ...         return await caller.call(to_messages("echo me"), sample=True, permit=permit)
    >>> asyncio.run(one_call())
    ('echo me', None)
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import warnings
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableBinding
from pydantic import BaseModel

from uqlm_bert.exceptions import (
    AuthenticationFailedError,
    GenerationError,
    ProviderUnreachableError,
)
from uqlm_bert.generation.classify import ErrorInfo, MalformedReplyError, classify_exception
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
#: With no call answered yet, this many connection failures per starting place in flight (three
#: rounds of attempts) show that the provider cannot be reached.
_UNREACHABLE_ROUNDS = 3


class LLMCaller:
    """Sends single chat calls for one run, through its limits and its retry loop.

    Use it as an async context manager on the run's event loop; leaving the block closes the
    connection pool made for the run.

    Args:
        llm: a LangChain chat model (``BaseChatModel``) or a binding of one; it is not modified.
        settings: the generation settings.
        total_calls: how many calls the run will make at most (to size the fail-fast check).
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
        rng: random.Random | None = None,
        sleep: Callable[[float], Awaitable[Any]] | None = None,
    ) -> None:
        self.settings = settings
        self.stats = CallStats()
        self.concurrency = AdaptiveConcurrency(
            settings.starting_concurrency, settings.max_concurrency, settings.adaptive
        )
        self.rate: RateLimiter | None = None
        if settings.max_calls_per_min is not None:
            self.rate = RateLimiter(settings.max_calls_per_min, settings.rate_limit_period)
            self.concurrency.cap(settings.max_calls_per_min)
        self.endpoint = llm_endpoint(llm)
        self._http_client = _run_http_client(llm)
        no_retry = settings.disable_client_retries
        self.original_llm = derive_llm(
            llm, disable_client_retries=no_retry, http_client=self._http_client
        )
        self.sampling_llm = derive_llm(
            llm,
            temperature=settings.sampling_temperature,
            disable_client_retries=no_retry,
            disable_cache=True,
            http_client=self._http_client,
        )
        starting = settings.starting_concurrency
        if total_calls is not None:
            starting = max(1, min(starting, total_calls))
        self._unreachable_after = _UNREACHABLE_ROUNDS * starting
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
        if self._http_client is not None:
            await self._http_client.aclose()

    async def call(
        self, messages: Sequence[BaseMessage], *, sample: bool, permit: Permit
    ) -> tuple[str | None, CallFailure | None]:
        """One slot, holding ``permit`` (a place in flight) until it is done: the text, or
        ``None`` and the failure after all retries.

        Raises:
            AuthenticationFailedError: the provider rejected the credentials (HTTP 401/403).
            ProviderUnreachableError: no call has been answered and the first rounds of calls
                all failed to connect.
            GenerationError: the client cannot run on this event loop (closed, or another's).
        """
        llm = self.sampling_llm if sample else self.original_llm
        policy = self.settings.retry
        latency = None
        attempts = 0
        try:
            while True:
                attempts += 1
                if self.rate is not None:
                    await self.rate.acquire()
                started = time.monotonic()
                self.stats.attempts += 1
                try:
                    reply = await asyncio.wait_for(
                        llm.ainvoke(list(messages)), timeout=self.settings.request_timeout
                    )
                    text = message_text(reply)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - every client error is classified
                    info = self._failed(exc, permit)
                else:
                    latency = time.monotonic() - started
                    self._answered = True
                    self.stats.succeeded += 1
                    text, repaired = repair_text(text)
                    self.stats.repaired_replies += repaired
                    return text, None
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
                    await self._sleep(wait)
                    continue
                failure = CallFailure(info.kind, info.message, attempts, info.status_code)
                self.stats.failed += 1
                self.stats.failures_by_kind[info.kind] += 1
                logger.info("LLM call failed for good: %s", failure)
                return None, failure
        finally:
            self.concurrency.release(permit, latency)

    def _failed(self, exc: BaseException, permit: Permit) -> ErrorInfo:
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
        if info.kind in _CONGESTION:
            self.concurrency.congestion(permit)
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


def derive_llm(
    llm: Any,
    *,
    temperature: float | None = None,
    disable_client_retries: bool = True,
    disable_cache: bool = False,
    http_client: Any = None,
) -> Any:
    """A copy of ``llm`` with the given temperature; ``llm`` itself is left exactly as it was.

    Pydantic chat models are copied with ``model_copy`` (shallow: the copy shares the HTTP
    connection pool). A model without a ``temperature`` field gets it as a call argument through
    ``.bind(temperature=...)``. A ``RunnableBinding`` is copied around a copy of what it binds.

    Example:
        >>> from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
        >>> llm = ParrotFakeChatModel()
        >>> derive_llm(llm, temperature=1.0) is llm
        False
    """
    if isinstance(llm, RunnableBinding):
        bound = derive_llm(
            llm.bound,
            temperature=temperature,
            disable_client_retries=disable_client_retries,
            disable_cache=disable_cache,
            http_client=http_client,
        )
        kwargs = dict(llm.kwargs)
        if temperature is not None and "temperature" in kwargs:
            kwargs["temperature"] = temperature
        return llm.model_copy(update={"bound": bound, "kwargs": kwargs})
    if not isinstance(llm, BaseModel):
        return llm.bind(temperature=temperature) if temperature is not None else llm
    fields = type(llm).model_fields
    update: dict[str, Any] = {}
    if temperature is not None and "temperature" in fields:
        update["temperature"] = temperature
    if disable_cache and "cache" in fields:
        update["cache"] = False
    update.update(_client_update(llm, fields, disable_client_retries, http_client))
    copy = llm.model_copy(update=update, deep=False)
    if temperature is not None and "temperature" not in fields:
        return copy.bind(temperature=temperature)
    return copy


def message_text(reply: Any) -> str:
    """The text of a chat model's reply (an ``AIMessage`` or a string).

    Raises:
        MalformedReplyError: the reply carries no text at all.

    Example:
        >>> from langchain_core.messages import AIMessage
        >>> message_text(AIMessage(content=[{"type": "text", "text": "Paris"}]))
        'Paris'
    """
    content = getattr(reply, "content", reply)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            block if isinstance(block, str) else block.get("text", "")
            for block in content
            if isinstance(block, str) or (isinstance(block, dict) and block.get("type") == "text")
        ]
        if parts or not content:
            return "".join(str(p) for p in parts)
    raise MalformedReplyError(
        f"the LLM reply has no text content (got {type(content).__name__}: {str(content)[:100]})"
    )


def llm_temperature(llm: Any) -> float | None:
    """The temperature the caller's model is configured with, where it says.

    Example:
        >>> from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
        >>> llm_temperature(ParrotFakeChatModel()) is None
        True
    """
    if isinstance(llm, RunnableBinding):
        if "temperature" in llm.kwargs:
            return llm.kwargs["temperature"]
        return llm_temperature(llm.bound)
    value = getattr(llm, "temperature", None)
    return float(value) if isinstance(value, (int, float)) else None


def llm_description(llm: Any) -> dict[str, Any]:
    """The model's type and name, for metadata and checkpoint fingerprints.

    Example:
        >>> from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
        >>> llm_description(ParrotFakeChatModel())["type"]
        'parrot-fake-chat-model'
    """
    model = _unbound(llm)
    kind = getattr(model, "_llm_type", None)
    return {
        "type": kind if isinstance(kind, str) else type(model).__name__,
        "model": _first_text(model, ("model_name", "model", "model_id", "deployment_name")),
    }


def llm_endpoint(llm: Any) -> str | None:
    """The base URL the model talks to, where it says (for messages about connection failures).

    Example:
        >>> from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
        >>> llm_endpoint(ParrotFakeChatModel()) is None
        True
    """
    model = _unbound(llm)
    found = _first_text(
        model, ("openai_api_base", "base_url", "api_base", "endpoint", "azure_endpoint")
    )
    url = getattr(getattr(model, "root_async_client", None), "base_url", None)
    return found or (str(url) if url else None)


def _unbound(llm: Any) -> Any:
    """The chat model inside any ``RunnableBinding`` layers."""
    while isinstance(llm, RunnableBinding):
        llm = llm.bound
    return llm


def _first_text(obj: Any, attrs: Sequence[str]) -> str | None:
    """The first of ``attrs`` that ``obj`` holds as a non-empty string."""
    for attr in attrs:
        value = getattr(obj, attr, None)
        if isinstance(value, str) and value:
            return value
    return None


def _run_http_client(llm: Any) -> Any:
    """A connection pool of the run's own for an OpenAI-SDK model on the default HTTP client.

    langchain-openai shares one default pool per base URL across the whole process; a pool is
    bound to the event loop it first ran on, so a second loop (a new ``asyncio.run``, a notebook
    next to a script) would fail on it. A model given its own ``http_async_client`` keeps it.
    """
    llm = _unbound(llm)
    root = getattr(llm, "root_async_client", None)
    if root is None or getattr(llm, "http_async_client", None) is not None:
        return None
    if not type(root).__module__.startswith("openai") or not hasattr(root, "with_options"):
        return None
    import openai

    return openai.DefaultAsyncHttpxClient()


def _client_update(
    llm: BaseModel, fields: dict[str, Any], disable_retries: bool, http_client: Any
) -> dict[str, Any]:
    """Field updates that switch off the client's own retries on a copy of ``llm`` and give its
    async client the run's connection pool."""
    update: dict[str, Any] = {}
    if disable_retries and "max_retries" in fields:
        update["max_retries"] = 0
    # ChatOpenAI and its relatives build an SDK client at construction time with max_retries
    # baked in; the copy gets a sibling client with retries off (and, for the async one, the
    # run's pool).
    for root_name, leaf_name, pool in (
        ("root_async_client", "async_client", http_client),
        ("root_client", "client", None),
    ):
        root = getattr(llm, root_name, None)
        if root is None or not hasattr(root, "with_options") or root_name not in fields:
            continue
        options: dict[str, Any] = {}
        if disable_retries:
            options["max_retries"] = 0
        if pool is not None:
            options["http_client"] = pool
        if not options:
            continue
        new_root = root.with_options(**options)
        update[root_name] = new_root
        leaf = getattr(llm, leaf_name, None)
        old_leaf = getattr(getattr(root, "chat", None), "completions", None)
        if leaf is not None and leaf is old_leaf and leaf_name in fields:
            update[leaf_name] = new_root.chat.completions
    return update
