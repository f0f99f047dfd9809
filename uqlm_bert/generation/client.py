"""Calling a LangChain chat model: rate limit, bounded concurrency, timeouts and retries.

The caller's model is never modified. :func:`derive_llm` makes the copies that are called: one as
the user configured it (for the original response) and one at the sampling temperature with the
response cache off (for samples). On both copies the client's own retries are switched off where
the model exposes them (``max_retries`` field; the ``openai`` SDK client inside ``ChatOpenAI``),
so that every HTTP request goes through this module's rate limiter and retry accounting.

Example:
    >>> import asyncio
    >>> from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
    >>> from uqlm_bert.generation.prompts import to_messages
    >>> caller = LLMCaller(ParrotFakeChatModel(), max_concurrency=2)
    >>> text, failure = asyncio.run(caller.call(to_messages("echo me"), sample=True))
    >>> text, failure
    ('echo me', None)
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from asyncio_throttle import Throttler
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableBinding
from pydantic import BaseModel

from uqlm_bert.exceptions import AuthenticationFailedError, ConfigurationError
from uqlm_bert.generation.errors import ErrorInfo, MalformedReplyError, classify_exception
from uqlm_bert.generation.records import CallFailure, CallStats
from uqlm_bert.generation.retry import RetryPolicy

__all__ = ["LLMCaller", "derive_llm", "message_text", "llm_temperature", "llm_description"]

logger = logging.getLogger("uqlm_bert")


class LLMCaller:
    """Sends single chat calls through a rate limiter, a concurrency bound and a retry loop.

    Args:
        llm: a LangChain chat model (``BaseChatModel``) or a binding of one; it is not modified.
        sampling_temperature: the temperature of sampled responses.
        max_calls_per_min: at most this many HTTP calls (retries included) start in any window
            of ``rate_limit_period`` seconds; ``None`` for no limit.
        rate_limit_period: the window of the rate limit, in seconds.
        max_concurrency: at most this many calls in flight at once.
        retry_policy: retries for transient failures.
        request_timeout: seconds one attempt may take before it is abandoned and counted as a
            timeout; ``None`` leaves timing to the client.
        disable_client_retries: switch off the client's own retries on the copies (recommended:
            otherwise a client retry is an HTTP call the rate limit does not see).
        rng: random source for backoff jitter.
        sleep: the coroutine function that waits between attempts (``asyncio.sleep``; a test
            may pass a recorder).

    Example:
        >>> from langchain_core.language_models.fake_chat_models import FakeListChatModel
        >>> caller = LLMCaller(FakeListChatModel(responses=["yes"]), max_calls_per_min=100)
        >>> caller.stats.attempts
        0
    """

    def __init__(
        self,
        llm: Any,
        *,
        sampling_temperature: float = 1.0,
        max_calls_per_min: int | None = None,
        rate_limit_period: float = 60.0,
        max_concurrency: int = 16,
        retry_policy: RetryPolicy | None = None,
        request_timeout: float | None = 60.0,
        disable_client_retries: bool = True,
        rng: random.Random | None = None,
        sleep: Callable[[float], Awaitable[Any]] | None = None,
    ) -> None:
        _check_settings(max_calls_per_min, rate_limit_period, max_concurrency, request_timeout)
        self.original_llm = derive_llm(llm, disable_client_retries=disable_client_retries)
        self.sampling_llm = derive_llm(
            llm,
            temperature=sampling_temperature,
            disable_client_retries=disable_client_retries,
            disable_cache=True,
        )
        self.retry_policy = retry_policy or RetryPolicy()
        self.request_timeout = request_timeout
        self.max_concurrency = max_concurrency
        self.stats = CallStats()
        self._rng = rng or random.Random()
        self._sleep = sleep or asyncio.sleep
        self._semaphore: asyncio.Semaphore | None = None
        self._throttler: Throttler | None = None
        if max_calls_per_min is not None:
            poll = max(0.005, min(0.05, rate_limit_period / 200.0))
            self._throttler = Throttler(
                rate_limit=max_calls_per_min, period=rate_limit_period, retry_interval=poll
            )

    async def call(
        self, messages: Sequence[BaseMessage], *, sample: bool
    ) -> tuple[str | None, CallFailure | None]:
        """One slot: the text, or ``None`` and the failure after all retries.

        Raises:
            AuthenticationFailedError: the provider rejected the credentials (HTTP 401/403).
        """
        llm = self.sampling_llm if sample else self.original_llm
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.max_concurrency)
        attempts = 0
        while True:
            attempts += 1
            try:
                async with self._semaphore:
                    if self._throttler is not None:
                        await self._throttler.acquire()
                    self.stats.attempts += 1
                    reply = await asyncio.wait_for(
                        llm.ainvoke(list(messages)), timeout=self.request_timeout
                    )
                text = message_text(reply)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - every client error is classified below
                info = classify_exception(exc)
                if isinstance(exc, asyncio.TimeoutError) and not str(exc):
                    message = f"no reply within request_timeout={self.request_timeout} s"
                    info = ErrorInfo(kind="timeout", retryable=True, message=message)
                if info.fatal:
                    raise AuthenticationFailedError(
                        f"the LLM provider rejected the credentials (HTTP {info.status_code}): "
                        f"{info.message}. Check the API key and its permissions for this model; "
                        "the run was stopped because every call would fail the same way."
                    ) from exc
                if info.retryable and attempts <= self.retry_policy.max_retries:
                    wait = self.retry_policy.delay(attempts - 1, info.retry_after, self._rng)
                    logger.info(
                        "LLM call failed (%s), retry %d of %d in %.2f s: %s",
                        info.kind,
                        attempts,
                        self.retry_policy.max_retries,
                        wait,
                        info.message,
                    )
                    self.stats.retries += 1
                    await self._sleep(wait)
                    continue
                failure = CallFailure(info.kind, info.message, attempts, info.status_code)
                self.stats.failed += 1
                self.stats.failures_by_kind[info.kind] += 1
                logger.warning("LLM call failed for good: %s", failure)
                return None, failure
            self.stats.succeeded += 1
            return text, None


def derive_llm(
    llm: Any,
    *,
    temperature: float | None = None,
    disable_client_retries: bool = True,
    disable_cache: bool = False,
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
    if disable_client_retries:
        update.update(_no_retry_update(llm, fields))
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
    if isinstance(llm, RunnableBinding):
        return llm_description(llm.bound)
    name = None
    for attr in ("model_name", "model", "model_id", "deployment_name"):
        value = getattr(llm, attr, None)
        if isinstance(value, str) and value:
            name = value
            break
    kind = getattr(llm, "_llm_type", None)
    return {"type": kind if isinstance(kind, str) else type(llm).__name__, "model": name}


def _no_retry_update(llm: BaseModel, fields: dict[str, Any]) -> dict[str, Any]:
    """Field updates that switch off the client's own retries on a copy of ``llm``."""
    update: dict[str, Any] = {}
    if "max_retries" in fields:
        update["max_retries"] = 0
    # ChatOpenAI and its relatives build an SDK client at construction time with max_retries
    # baked in; the copy gets a sibling client with retries off that shares the connection pool.
    for root_name, leaf_name in (("root_async_client", "async_client"), ("root_client", "client")):
        root = getattr(llm, root_name, None)
        if root is None or not hasattr(root, "with_options") or root_name not in fields:
            continue
        new_root = root.with_options(max_retries=0)
        update[root_name] = new_root
        leaf = getattr(llm, leaf_name, None)
        old_leaf = getattr(getattr(root, "chat", None), "completions", None)
        if leaf is not None and leaf is old_leaf and leaf_name in fields:
            update[leaf_name] = new_root.chat.completions
    return update


def _check_settings(
    max_calls_per_min: int | None,
    rate_limit_period: float,
    max_concurrency: int,
    request_timeout: float | None,
) -> None:
    if max_calls_per_min is not None and (
        not isinstance(max_calls_per_min, int) or max_calls_per_min < 1
    ):
        raise ConfigurationError(
            f"max_calls_per_min must be a positive integer or None, got {max_calls_per_min!r}"
        )
    if not isinstance(rate_limit_period, (int, float)) or rate_limit_period <= 0:
        raise ConfigurationError(
            f"rate_limit_period must be a positive number of seconds, got {rate_limit_period!r}"
        )
    if not isinstance(max_concurrency, int) or max_concurrency < 1:
        raise ConfigurationError(
            f"max_concurrency must be a positive integer, got {max_concurrency!r}"
        )
    if request_timeout is not None and (
        not isinstance(request_timeout, (int, float)) or request_timeout <= 0
    ):
        raise ConfigurationError(
            f"request_timeout must be a positive number of seconds or None, got {request_timeout!r}"
        )
