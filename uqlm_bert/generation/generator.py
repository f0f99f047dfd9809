"""Generating the original response and the sampled responses for every prompt.

Each prompt has one original-response slot (at the model's own temperature) and
``num_responses`` sample slots (at the sampling temperature). The slots are queued prompt by
prompt and served by ``max_concurrency`` workers, so prompts finish roughly in input order and
can be scored while later ones are still being generated. A failed call fills only its own slot,
with the failure beside it.

Example:
    >>> import asyncio
    >>> from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
    >>> gen = ResponseGenerator(ParrotFakeChatModel())
    >>> result = asyncio.run(gen.generate(["hello", "world"], num_responses=2,
    ...                                   show_progress_bars=False))
    >>> result.responses, result.sampled_responses
    (['hello', 'world'], [['hello', 'hello'], ['world', 'world']])
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import warnings
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from tqdm.auto import tqdm

from uqlm_bert.exceptions import CheckpointError, ConfigurationError, InputValidationError
from uqlm_bert.generation.checkpoint import ORIGINAL_SLOT, Checkpoint
from uqlm_bert.generation.client import LLMCaller, llm_description, llm_temperature
from uqlm_bert.generation.prompts import (
    fingerprint_prompt,
    fingerprint_run,
    to_messages,
    validate_prompts,
)
from uqlm_bert.generation.records import CallFailure, GenerationResult
from uqlm_bert.generation.retry import RetryPolicy

__all__ = ["ResponseGenerator"]

logger = logging.getLogger("uqlm_bert")


class ResponseGenerator:
    """Asks a LangChain chat model for an answer and ``num_responses`` samples per prompt.

    Args:
        llm: a LangChain chat model; never modified (see
            :func:`~uqlm_bert.generation.client.derive_llm`).
        system_prompt: a system message put before each prompt that has none.
        sampling_temperature: the temperature of the samples; the original response uses the
            model's own temperature.
        max_calls_per_min: at most this many HTTP calls, retries included, in any window of
            ``rate_limit_period`` seconds; ``None`` for no limit.
        rate_limit_period: the rate limit's window in seconds (60).
        max_concurrency: calls in flight at once, waits before a retry included.
        retry_policy: retries for transient failures (429, 5xx, timeouts, connection errors).
        request_timeout: seconds an attempt may take before it counts as a timeout.
        disable_client_retries: switch off the client's own retries, so the rate limit and the
            retry counts see every HTTP call.
        rng: random source for backoff jitter.

    Example:
        >>> from langchain_core.language_models.fake_chat_models import FakeListChatModel
        >>> gen = ResponseGenerator(FakeListChatModel(responses=["42"]), max_concurrency=4)
        >>> gen.max_concurrency
        4
    """

    def __init__(
        self,
        llm: Any,
        *,
        system_prompt: str | None = None,
        sampling_temperature: float = 1.0,
        max_calls_per_min: int | None = None,
        rate_limit_period: float = 60.0,
        max_concurrency: int = 16,
        retry_policy: RetryPolicy | None = None,
        request_timeout: float | None = 60.0,
        disable_client_retries: bool = True,
        rng: random.Random | None = None,
    ) -> None:
        if llm is None:
            raise ConfigurationError(
                "no LLM to generate with: pass a LangChain chat model as llm=..., or score "
                "responses you already have with .score(responses, sampled_responses)"
            )
        if not hasattr(llm, "ainvoke"):
            raise ConfigurationError(
                f"llm must be a LangChain chat model (with .ainvoke), got {type(llm).__name__}"
            )
        if not isinstance(sampling_temperature, (int, float)) or sampling_temperature < 0:
            raise ConfigurationError(
                f"sampling_temperature must be a number >= 0, got {sampling_temperature!r}"
            )
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise ConfigurationError(
                f"system_prompt must be a string or None, got {type(system_prompt).__name__}"
            )
        self.llm = llm
        self.system_prompt = system_prompt
        self.sampling_temperature = float(sampling_temperature)
        self.max_calls_per_min = max_calls_per_min
        self.rate_limit_period = rate_limit_period
        self.max_concurrency = max_concurrency
        self.retry_policy = retry_policy or RetryPolicy()
        self.request_timeout = request_timeout
        self.disable_client_retries = disable_client_retries
        self._rng = rng
        # Built now so that bad settings fail at construction, not at the first call.
        self._new_caller()

    async def generate(
        self,
        prompts: Sequence[Any],
        num_responses: int = 5,
        *,
        include_original: bool = True,
        checkpoint: str | os.PathLike[str] | Checkpoint | None = None,
        on_prompt_done: Callable[[int, str | None, list[str | None]], None] | None = None,
        show_progress_bars: bool = True,
    ) -> GenerationResult:
        """Fill every slot of every prompt; return texts, failures and call counts.

        Args:
            prompts: strings or lists of LangChain messages.
            num_responses: samples per prompt (``0`` with ``include_original`` for answers only).
            include_original: also ask for the original response of each prompt.
            checkpoint: a JSONL file path (or :class:`Checkpoint`) to record answers in and
                resume from.
            on_prompt_done: called with ``(index, response, samples)`` as soon as all of a
                prompt's slots are filled (at once for prompts the checkpoint completes). An
                exception it raises stops the run.
            show_progress_bars: show a progress bar over prompts.

        Raises:
            InputValidationError: bad prompts or ``num_responses``.
            AuthenticationFailedError: the provider rejected the credentials; the run stops.
            CheckpointError: the checkpoint belongs to another run or is damaged.
        """
        items = validate_prompts(prompts)
        if (
            not isinstance(num_responses, int)
            or isinstance(num_responses, bool)
            or (num_responses < (0 if include_original else 1))
        ):
            raise InputValidationError(
                f"num_responses must be a positive integer, got {num_responses!r}"
            )
        messages = [to_messages(p, self.system_prompt) for p in items]
        slots = ([ORIGINAL_SLOT] if include_original else []) + list(range(num_responses))
        result = GenerationResult.empty(items, num_responses)
        caller = self._new_caller()
        result.stats = caller.stats

        ckpt = _as_checkpoint(checkpoint)
        done: dict[tuple[int, int], tuple[str | None, CallFailure | None]] = {}
        if ckpt is not None:
            fps = [fingerprint_prompt(p, self.system_prompt) for p in items]
            settings = self._settings(num_responses, include_original)
            done = ckpt.open(fingerprint_run(fps, settings), fps, settings)
        try:
            jobs, remaining = _plan(len(items), slots, done, result)
            bar = tqdm(
                total=len(items),
                desc="Generating",
                unit="prompt",
                disable=not show_progress_bars,
                leave=True,
            )
            with bar:
                for i, left in enumerate(remaining):
                    if left == 0:
                        bar.update(1)
                        if on_prompt_done is not None:
                            on_prompt_done(
                                i, result.responses[i], list(result.sampled_responses[i])
                            )
                await self._run_workers(
                    caller, messages, jobs, remaining, result, ckpt, bar, on_prompt_done
                )
        finally:
            if ckpt is not None:
                ckpt.close()
        _warn_failures(result, len(slots))
        return result

    async def _run_workers(
        self,
        caller: LLMCaller,
        messages: list[list[Any]],
        jobs: deque[tuple[int, int]],
        remaining: list[int],
        result: GenerationResult,
        ckpt: Checkpoint | None,
        bar: Any,
        on_prompt_done: Callable[[int, str | None, list[str | None]], None] | None,
    ) -> None:
        async def worker() -> None:
            while jobs:
                i, slot = jobs.popleft()
                text, failure = await caller.call(messages[i], sample=slot != ORIGINAL_SLOT)
                _fill(result, i, slot, text, failure)
                if ckpt is not None:
                    ckpt.write(i, slot, text, failure)
                remaining[i] -= 1
                if remaining[i] == 0:
                    bar.update(1)
                    if on_prompt_done is not None:
                        on_prompt_done(i, result.responses[i], list(result.sampled_responses[i]))

        tasks = [
            asyncio.ensure_future(worker()) for _ in range(min(self.max_concurrency, len(jobs)))
        ]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            # A fatal error in one worker (or cancellation of the run) stops all of them, and
            # none is left running when this returns.
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    def _new_caller(self) -> LLMCaller:
        return LLMCaller(
            self.llm,
            sampling_temperature=self.sampling_temperature,
            max_calls_per_min=self.max_calls_per_min,
            rate_limit_period=self.rate_limit_period,
            max_concurrency=self.max_concurrency,
            retry_policy=self.retry_policy,
            request_timeout=self.request_timeout,
            disable_client_retries=self.disable_client_retries,
            rng=self._rng,
        )

    def _settings(self, num_responses: int, include_original: bool) -> dict[str, Any]:
        return {
            "num_responses": num_responses,
            "include_original": include_original,
            "sampling_temperature": self.sampling_temperature,
            "temperature": llm_temperature(self.llm),
            "system_prompt": self.system_prompt,
            "llm": llm_description(self.llm),
        }


def _as_checkpoint(checkpoint: Any) -> Checkpoint | None:
    if checkpoint is None or isinstance(checkpoint, Checkpoint):
        return checkpoint
    if isinstance(checkpoint, (str, os.PathLike)):
        return Checkpoint(checkpoint)
    raise ConfigurationError(
        f"checkpoint must be a file path or None, got {type(checkpoint).__name__}"
    )


def _plan(
    n: int,
    slots: list[int],
    done: dict[tuple[int, int], tuple[str | None, CallFailure | None]],
    result: GenerationResult,
) -> tuple[deque[tuple[int, int]], list[int]]:
    """Fill slots the checkpoint completes; queue the rest, prompt by prompt."""
    valid = set(slots)
    for index, slot in done:
        if slot not in valid:
            raise CheckpointError(
                f"the checkpoint holds slot {slot} of prompt {index}, which this run does not have"
            )
    jobs: deque[tuple[int, int]] = deque()
    remaining = [0] * n
    for i in range(n):
        for slot in slots:
            got = done.get((i, slot))
            if got is not None and (
                got[0] is not None or (got[1] is not None and not got[1].transient)
            ):
                _fill(result, i, slot, got[0], got[1])
                result.stats.from_checkpoint += 1
            else:
                jobs.append((i, slot))
                remaining[i] += 1
    return jobs, remaining


def _fill(
    result: GenerationResult, i: int, slot: int, text: str | None, failure: CallFailure | None
) -> None:
    if slot == ORIGINAL_SLOT:
        result.responses[i] = text
        result.response_errors[i] = failure
    else:
        result.sampled_responses[i][slot] = text
        result.sample_errors[i][slot] = failure


def _warn_failures(result: GenerationResult, slots_per_prompt: int) -> None:
    failed = sum(e is not None for e in result.response_errors) + sum(result.num_failed_samples())
    if failed:
        total = slots_per_prompt * len(result.prompts)
        warnings.warn(
            f"{failed} of {total} LLM calls failed for good; their slots hold None and the "
            "reasons are in the result's error columns (to_df()['error'], "
            "to_df()['sample_errors'])",
            RuntimeWarning,
            stacklevel=3,
        )
