"""Calling a LangChain chat model for one run: limits, timeouts, retries and failures.

An :class:`LLMCaller` lives for one run and is used on that run's event loop. It takes its
limits from a lane (:mod:`uqlm_bert.generation._shared_limits`) shared with the other calls of the same
owner running at the same time: the rate limit, the cap on calls in flight, the provider's
congestion control and the copies of the caller's model it sends through (one as the user
configured it, for answers, and one at the sampling temperature with the response cache off,
for samples; the client's own retries off, so that every HTTP request goes through this
module's rate limit and retry accounting; an OpenAI-SDK model on the default HTTP client gets
connection pools of the calls' own, closed when the last call using them ends, so calls on
different event loops (notebooks, repeated ``asyncio.run``) never share one).

Each call takes a place in flight and each attempt a token of the rate limit. A call for samples
may ask for several at once with the provider's ``n`` parameter (:meth:`LLMCaller.
samples_per_call` says how many): one request, one token, one place. An attempt times out
``request_timeout`` seconds after it was sent, or after the provider's last answer, whichever is
later (a server that queues calls is working through its queue), within a bound
(:mod:`uqlm_bert.generation._shared_limits`). Where
congestion control stands, and whether the provider honours ``n``, are kept for later runs
against the same provider (:mod:`uqlm_bert.generation._learned_limits`).

Example:
    >>> import asyncio
    >>> from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
    >>> from uqlm_bert.generation._prompts import to_messages
    >>> async def one_call():
    ...     async with LLMCaller(ParrotFakeChatModel(), GenerationSettings()) as caller:
    ...         permit = await caller.acquire()
    ...         return await caller.call(to_messages("echo me"), sample=True, permit=permit)
    >>> asyncio.run(one_call())
    (['echo me'], None)
"""

from __future__ import annotations

import asyncio
import logging
import random
import sys
import warnings
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from uqlm_bert._checks import check_int
from uqlm_bert._exceptions import (
    AuthenticationFailedError,
    GenerationError,
    ProviderUnreachableError,
)
from uqlm_bert._inputs import repair_text
from uqlm_bert.generation import _learned_limits as memory
from uqlm_bert.generation._clients import (
    accepts_n,
    llm_description,
    llm_endpoint,
    message_text,
)
from uqlm_bert.generation._error_kinds import ErrorInfo, MalformedReplyError, classify_exception
from uqlm_bert.generation._records import CallFailure, CallStats
from uqlm_bert.generation._settings import GenerationSettings
from uqlm_bert.generation._shared_limits import Attempt, Place, SharedLimits

__all__ = ["LLMCaller"]

logger = logging.getLogger("uqlm_bert")

#: Failure kinds that mean the provider is overloaded: the calls in flight are cut.
_CONGESTION = frozenset({"rate_limit", "server", "timeout"})
#: With no call answered yet, this many connection failures per starting place in flight (three
#: rounds of attempts) show that the provider cannot be reached.
_UNREACHABLE_ROUNDS = 3


class LLMCaller:
    """Sends the chat calls of one run, through its limits and its retry loop.

    Use it as an async context manager on the run's event loop; leaving the block gives the
    run's share of the lane back (the last call out closes the connection pools) and records
    what the run learned about the provider.

    Args:
        llm: a LangChain chat model (``BaseChatModel``) or a binding of one; it is not modified.
        settings: the generation settings.
        total_calls: how many calls the run will make at most, one per slot: the calls it may
            have in flight at the start, within the limits.
        first_round: how many calls the run starts with (fewer than ``total_calls`` where
            samples are asked for with ``n``): with none answered, three rounds of them failing
            to connect stop the run.
        rng: random source for backoff jitter.
        sleep: the coroutine function that waits between attempts (``asyncio.sleep``; a test
            may pass a recorder).
        limits: the lanes this run shares with other runs of the same owner (a ``BlackBoxUQ``);
            ``None``: limits of the run's own.

    Attributes:
        stats: the run's call counts.
        lane: the limits the run shares (rate limit, cap, the provider's level).
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
        limits: SharedLimits | None = None,
    ) -> None:
        check_int("total_calls", total_calls, 0, none_ok=True)
        check_int("first_round", first_round, 0, none_ok=True)
        self.settings = settings
        self.stats = CallStats()
        self.endpoint = llm_endpoint(llm)
        self._llm = llm
        self._limits = limits or SharedLimits()
        self._calls = total_calls if total_calls is not None else settings.max_concurrency or 1
        self._first_round = first_round
        use_n = settings.use_n_param
        self._max_choices = 1
        if use_n is True or (use_n == "auto" and accepts_n(llm)):
            self._max_choices = settings.max_samples_per_call
        self._unreachable_after = _UNREACHABLE_ROUNDS
        self._connect_failures = 0
        self._answered = False
        self._rng = rng or random.Random()
        self._sleep = sleep or asyncio.sleep

    async def __aenter__(self) -> LLMCaller:
        """Take the run's lane (on the running event loop) and its share of it."""
        self.lane = self._limits.lane(self._llm, self.settings)
        self.provider, self._clients = self.lane.enter(self._llm, self.settings, self._calls)
        stats = self.stats
        stats.concurrency_start = stats.concurrency_peak = self._level()
        stats.learned_start = self.provider.concurrency.learned() is not None
        first = stats.concurrency_start
        if self._first_round is not None:
            first = max(1, min(first, self._first_round))
        self._unreachable_after = _UNREACHABLE_ROUNDS * first
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stats.concurrency_final = self._level()
        self.stats.max_choices = self.samples_per_call()
        await self.lane.leave(self.provider, self._clients)

    def _level(self) -> int:
        """The calls this run may have in flight now: the lane's limit, up to the run's calls."""
        return int(min(self.lane.limit, max(1, self._calls)))

    # -- places in flight ------------------------------------------------------------------

    async def acquire(self, priority: bool = False) -> Place:
        """Wait for a place in flight (``priority``: a call trying again takes the next free
        place before any new call)."""
        place = await self.lane.acquire(self.provider, priority)
        stats = self.stats
        stats.max_in_flight = max(stats.max_in_flight, self.lane.in_flight)
        stats.concurrency_peak = max(stats.concurrency_peak, self._level())
        return place

    def release(self, place: Place, latency: float | None) -> None:
        """Give a place back: the call is done (``latency`` of its successful attempt), or was
        never sent (None)."""
        self.lane.release(self.provider, place, latency)

    # -- what the provider accepts ---------------------------------------------------------

    def samples_per_call(self) -> int:
        """The most samples one call asks for now: 1 without ``n``."""
        known = self.provider.max_choices
        return self._max_choices if known is None else min(self._max_choices, known)

    def _where(self) -> str:
        return self.endpoint or llm_description(self._llm)["type"]

    def choices_returned(self, asked: int, got: int) -> None:
        """A call asked for ``asked`` choices and the provider returned ``got``: fewer means it
        caps or ignores ``n``; later calls ask for no more than it gave (1: ``n`` is not used)."""
        if got >= asked:
            return
        self.stats.choices_missing += asked - got
        got = max(1, got)
        if got < self.samples_per_call():
            self._learn_choices(got)
            if got == 1:
                logger.info(
                    "%s returned 1 choice where %d were asked with n: it ignores n, so its "
                    "samples are asked for one call each from now on (and the missing ones "
                    "again)",
                    self._where(),
                    asked,
                )
            else:
                logger.info(
                    "%s returned %d choices where %d were asked with n: at most %d samples "
                    "are asked per call from now on (and the missing ones again)",
                    self._where(),
                    got,
                    asked,
                    got,
                )

    def n_refused(self) -> None:
        """A call that asked for several samples with ``n`` failed for good where the same
        samples asked one by one were answered: the provider refuses ``n``, which is not used
        with it from now on."""
        if self.samples_per_call() > 1:
            self._learn_choices(1)
            logger.info(
                "%s refused a call that asked for several samples with n, and answered them "
                "asked one by one: its samples are asked for one call each from now on",
                self._where(),
            )

    def _learn_choices(self, most: int) -> None:
        self.provider.max_choices = most
        memory.remember(self.provider.key, max_choices=most)

    # -- one call --------------------------------------------------------------------------

    async def call(
        self, messages: Sequence[BaseMessage], *, sample: bool, permit: Place, n: int = 1
    ) -> tuple[list[str] | None, CallFailure | None]:
        """One call, holding ``permit`` (a place in flight, from :meth:`acquire`) until it is
        done: the texts (``n`` samples asked with the provider's ``n`` parameter; the provider
        may return fewer), or ``None`` and the failure after all retries. An attempt that
        failed gives its place back while it waits to try again.

        Raises:
            AuthenticationFailedError: the provider rejected the credentials (HTTP 401/403).
            ProviderUnreachableError: no call has been answered and the first rounds of calls
                all failed to connect.
            GenerationError: the client cannot run on this event loop (closed, or another's).
        """
        policy = self.settings.retry
        rate = self.lane.rate
        latency = None
        attempts = 0
        held: Place | None = permit
        try:
            while True:
                attempts += 1
                if rate is not None:
                    await rate.acquire()
                loop = asyncio.get_running_loop()
                attempt = self.provider.attempt_sent(loop.time())
                answered_at = None
                self.stats.attempts += 1
                try:
                    texts = await self._within(self._send(messages, sample, n), attempt)
                    answered_at = loop.time()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - every client error is classified
                    info = self._failed(exc, held)
                else:
                    latency = answered_at - attempt.sent
                    self._answered = True
                    if n > 1:
                        self.stats.n_calls += 1
                        self.stats.samples_per_call = max(self.stats.samples_per_call, n)
                    for k, text in enumerate(texts):
                        texts[k], repaired = repair_text(text)
                        self.stats.repaired_replies += repaired
                    return texts, None
                finally:
                    self.provider.attempt_done(answered_at)
                    if rate is not None:
                        rate.release()
                if info.retryable and attempts <= policy.max_retries:
                    wait = policy.delay(attempts - 1, info.retry_after, self._rng)
                    logger.info(
                        "LLM call failed (%s), retry %d of %d in %.2f s: %s",
                        info.kind,
                        attempts,
                        policy.max_retries,
                        wait,
                        info.message,
                    )
                    self.stats.retries += 1
                    self.release(held, None)
                    held = None
                    await self._sleep(wait)
                    held = await self.acquire(priority=True)
                    continue
                failure = CallFailure(info.kind, info.message, attempts, info.status_code)
                logger.info("LLM call failed for good: %s", failure)
                return None, failure
        finally:
            if held is not None:
                self.release(held, latency)

    async def _within(self, awaitable: Awaitable[Any], attempt: Attempt) -> Any:
        """``await awaitable``, raising ``asyncio.TimeoutError`` at the attempt's deadline
        (:meth:`~uqlm_bert.generation._shared_limits.ProviderState.deadline`: ``request_timeout`` after
        it was sent or after the provider's last answer, whichever is later, within a bound)."""
        timeout = self.settings.request_timeout
        if timeout is None:
            return await awaitable
        loop = asyncio.get_running_loop()
        if sys.version_info < (3, 11):  # pragma: no cover - Python 3.10: a task and a wait loop
            task = asyncio.ensure_future(awaitable)
            try:
                while True:
                    deadline = self.provider.deadline(attempt, timeout)
                    if deadline <= loop.time():
                        raise asyncio.TimeoutError
                    done, _ = await asyncio.wait({task}, timeout=deadline - loop.time())
                    if done:
                        return task.result()
            finally:
                task.cancel()
        handle: asyncio.TimerHandle | None = None
        async with asyncio.timeout(None) as deadline:

            def check() -> None:
                nonlocal handle
                due = self.provider.deadline(attempt, timeout)
                if due <= loop.time():
                    deadline.reschedule(loop.time())
                else:
                    handle = loop.call_at(due, check)

            handle = loop.call_at(attempt.sent + timeout, check)
            try:
                return await awaitable
            finally:
                handle.cancel()

    async def _send(self, messages: Sequence[BaseMessage], sample: bool, n: int) -> list[str]:
        """One attempt: the reply's texts, ``n`` or fewer."""
        clients = self._clients
        turn = clients.checkout()
        try:
            if n == 1:
                llm = clients.sampling[turn] if sample else clients.original[turn]
                return [message_text(await llm.ainvoke(list(messages)))]
            model, kwargs = clients.n_model(turn)
            result = await model.agenerate([list(messages)], n=n, **kwargs)
        finally:
            clients.checkin(turn)
        choices = result.generations[0][:n] if result.generations else []
        if not choices:
            raise MalformedReplyError("the LLM reply holds no choices")
        return [message_text(choice.message) for choice in choices]

    def _failed(self, exc: BaseException, permit: Place | None) -> ErrorInfo:
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
        if info.kind in _CONGESTION and permit is not None and permit.provider is not None:
            self.provider.concurrency.congestion(permit.provider, info.kind)
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
