"""Generating the original response and the sampled responses for every prompt.

Each prompt has one original-response slot (at the model's own temperature) and
``num_responses`` sample slots (at the sampling temperature). The answer is one call; the samples
are one call each, or, where the provider's ``n`` parameter is used, one call for all of them
(several where there are more than ``max_samples_per_call``). The calls are queued prompt by
prompt and started as places in flight come free (a run starts with all of them in flight, up to
the cap; their number then adapts to the provider, see :mod:`uqlm_bert.generation._limiters`), so
prompts finish roughly in input order and can be scored while later ones are still being
generated. A failed call fills only its own slots, with the failure beside each. Samples a
provider did not return (it ignores or caps ``n``) are asked for again, so every prompt gets all
the samples it asks for.

Given a judge (:mod:`uqlm_bert.generation._rounds`), a prompt draws its samples in rounds: the
first round with the answer, and each later one only if the judge, asked once the round is in,
says so; a prompt's lists of samples then hold the slots it drew, no more.

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
import os
import random
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tqdm.auto import tqdm

from uqlm_bert._checks import check_int
from uqlm_bert._exceptions import CheckpointError, ConfigurationError, InputValidationError
from uqlm_bert.generation._caller import LLMCaller
from uqlm_bert.generation._checkpoint import ORIGINAL_SLOT, Checkpoint
from uqlm_bert.generation._clients import accepts_n, llm_description, llm_temperature
from uqlm_bert.generation._prompts import fingerprint_prompt, to_messages, validate_prompts
from uqlm_bert.generation._records import CallFailure, GenerationResult
from uqlm_bert.generation._rounds import RoundJudge, round_ends
from uqlm_bert.generation._settings import NUM_RESPONSES, GenerationSettings, checked_generation
from uqlm_bert.generation._shared_limits import SharedLimits

__all__ = ["ResponseGenerator"]

OnPromptDone = Callable[[int, str | None, list[str | None]], None]


class ResponseGenerator:
    """Asks a LangChain chat model for an answer and ``num_responses`` samples per prompt.

    Args:
        llm: a LangChain chat model; never modified (see
            :func:`~uqlm_bert.generation._clients.derive_llm`).
        settings: how to sample (temperatures, concurrency, rate limit, retries, timeout);
            read at every :meth:`generate` call.
        rng: random source for backoff jitter.
        sleep: what waits between attempts (``asyncio.sleep``; tests may pass a recorder).
        limits: the limits shared by the calls in flight (a ``BlackBoxUQ`` passes its own);
            ``None``: this generator's own, shared by its :meth:`generate` calls running at
            the same time (see :mod:`uqlm_bert.generation._shared_limits`).

    Example:
        >>> from langchain_core.language_models.fake_chat_models import FakeListChatModel
        >>> gen = ResponseGenerator(FakeListChatModel(responses=["42"]),
        ...                         GenerationSettings(max_concurrency=4))
        >>> gen.settings.max_concurrency
        4
    """

    def __init__(
        self,
        llm: Any,
        settings: GenerationSettings | None = None,
        *,
        rng: random.Random | None = None,
        sleep: Callable[[float], Awaitable[Any]] | None = None,
        limits: SharedLimits | None = None,
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
        self.llm = llm
        self.settings = (
            GenerationSettings() if settings is None else checked_generation(settings, "settings")
        )
        self._rng = rng
        self._sleep = sleep
        self.limits = limits if limits is not None else SharedLimits()

    async def generate(
        self,
        prompts: Sequence[Any],
        num_responses: int = NUM_RESPONSES,
        *,
        include_original: bool = True,
        checkpoint: str | os.PathLike[str] | Checkpoint | None = None,
        on_prompt_done: OnPromptDone | None = None,
        show_progress_bars: bool = True,
        settings: GenerationSettings | None = None,
        judge: RoundJudge | None = None,
    ) -> GenerationResult:
        """Fill every slot of every prompt; return texts, failures and call counts.

        Args:
            prompts: strings or lists of LangChain messages.
            num_responses: samples per prompt (``0`` with ``include_original`` for answers only).
            include_original: also ask for the original response of each prompt.
            checkpoint: a JSONL file path (or :class:`Checkpoint`) to record answers in and
                resume from; locked against other processes while the run lasts.
            on_prompt_done: called with ``(index, response, samples)`` as soon as all of a
                prompt's slots are filled (at once for prompts the checkpoint completes). An
                exception it raises stops the run.
            show_progress_bars: show a progress bar over the answers and samples.
            settings: this run's settings, checked already (default: :attr:`settings`).
            judge: draw each prompt's samples in rounds (:func:`round_ends`), asking ``judge``
                after each round but the last whether the prompt draws the next; with
                ``include_original`` only. ``None``: every prompt draws ``num_responses``.

        Raises:
            InputValidationError: bad prompts or ``num_responses``.
            AuthenticationFailedError: the provider rejected the credentials; the run stops.
            ProviderUnreachableError: the provider cannot be reached; the run stops.
            CheckpointError: the checkpoint belongs to another run, is damaged, or is in use.
        """
        items = validate_prompts(prompts)
        check_int(
            "num_responses", num_responses, 0 if include_original else 1, error=InputValidationError
        )
        settings = self.settings if settings is None else settings
        messages = [to_messages(p, settings.system_prompt) for p in items]
        if judge is not None and not (include_original and num_responses):
            judge = None  # nothing to judge the samples against
        ends = round_ends(num_responses) if judge is not None else [num_responses]
        result = GenerationResult.empty(items, num_responses)

        result.run = self._fingerprint_settings(num_responses, include_original, settings, judge)
        ckpt = _as_checkpoint(checkpoint)
        done: dict[tuple[int, int], tuple[str | None, CallFailure | None]] = {}
        if ckpt is not None:
            fps = [fingerprint_prompt(p, settings.system_prompt) for p in items]
            done = ckpt.open(fps, result.run)
        try:
            plan = _Plan.of(len(items), include_original, ends, done, ckpt, result)
            async with LLMCaller(
                self.llm,
                settings,
                total_calls=sum(plan.remaining),
                first_round=_first_round(plan.jobs, settings.use_n_param, self.llm),
                rng=self._rng,
                sleep=self._sleep,
                limits=self.limits,
            ) as caller:
                result.stats = caller.stats
                caller.stats.from_checkpoint = plan.from_checkpoint
                with tqdm(
                    total=sum(plan.drawn) + len(items) * include_original,
                    initial=plan.from_checkpoint,
                    desc="Generating",
                    unit="response",
                    disable=not show_progress_bars,
                ) as bar:
                    run = _Run(caller, messages, plan, result, ckpt, bar, on_prompt_done, judge)
                    for i, left in enumerate(plan.remaining):
                        if left == 0:
                            run.round_done(i)
                    await run.dispatch(plan.jobs)
        finally:
            if ckpt is not None:
                ckpt.close()
        if judge is not None:
            result.keep_drawn(plan.drawn)
        return result

    def save_checkpoint(
        self,
        result: GenerationResult,
        checkpoint: str | os.PathLike[str] | Checkpoint,
        num_responses: int,
        *,
        include_original: bool = True,
    ) -> None:
        """Write the slots of a finished run as a new checkpoint file, as if the run had used it.

        A later :meth:`generate` with the same prompts and settings and this checkpoint makes
        no call for the slots it holds: this keeps the answers of a run whose output could not
        be written. The file must not exist yet, or be empty.

        Raises:
            ConfigurationError: ``num_responses`` is not a count (a bool, say).
            CheckpointError: the file holds something already, or cannot be written.
        """
        check_int("num_responses", num_responses, 0)
        ckpt = checkpoint if isinstance(checkpoint, Checkpoint) else None
        if ckpt is None:  # one fsync at the end, not one per record
            ckpt = Checkpoint(checkpoint, fsync=False)
        prompts = result.prompts
        fps = [fingerprint_prompt(p, self.settings.system_prompt) for p in prompts]
        run = result.run or self._fingerprint_settings(
            num_responses, include_original, self.settings
        )
        done = ckpt.open(fps, run)
        try:
            if done:
                raise CheckpointError(
                    f"{str(ckpt.path)!r} already holds answers; give the path of a new file"
                )
            for i in range(len(prompts)):
                if include_original:
                    ckpt.write(i, ORIGINAL_SLOT, result.responses[i], result.response_errors[i])
                drawn = len(result.sampled_responses[i])
                for slot in range(drawn):
                    ckpt.write(
                        i, slot, result.sampled_responses[i][slot], result.sample_errors[i][slot]
                    )
                if drawn < num_responses:  # the prompt stopped early: so it resumes
                    ckpt.write_stop(i, drawn)
        finally:
            ckpt.close()

    def _fingerprint_settings(
        self,
        num_responses: int,
        include_original: bool,
        settings: GenerationSettings,
        judge: RoundJudge | None = None,
    ) -> dict[str, Any]:
        """The settings that change what is generated (a checkpoint must match them)."""
        return {
            "num_responses": num_responses,
            "include_original": include_original,
            "sampling_temperature": settings.sampling_temperature,
            "temperature": llm_temperature(self.llm),
            "system_prompt": settings.system_prompt,
            "llm": llm_description(self.llm),
            "sampling": "fixed" if judge is None else judge.describe(),
        }


#: One call to make: a prompt's index, the slots it fills (``(ORIGINAL_SLOT,)`` for the answer;
#: sample slots, one or several with ``n``), and whether it asks one by one for samples that a
#: call with ``n`` was refused (a success then shows that the provider refuses ``n``).
_Job = tuple[int, tuple[int, ...], bool]


class _Run:
    """The calls of one run: starts them as places in flight free up, records every slot, and
    between a prompt's rounds asks the judge whether it draws the next."""

    def __init__(
        self,
        caller: LLMCaller,
        messages: list[list[Any]],
        plan: _Plan,
        result: GenerationResult,
        ckpt: Checkpoint | None,
        bar: Any,
        on_prompt_done: OnPromptDone | None,
        judge: RoundJudge | None,
    ) -> None:
        self.caller = caller
        self.messages = messages
        self.plan = plan
        self.result = result
        self.ckpt = ckpt
        self.bar = bar
        self.on_prompt_done = on_prompt_done
        self.judge = judge
        self.errors: list[BaseException] = []
        self.queue: deque[_Job] = deque()
        self.tasks: set[asyncio.Task[None]] = set()
        self._changed = asyncio.Event()

    def round_done(self, i: int) -> None:
        """Prompt ``i``'s slots asked for so far are filled: the judge decides on another round
        (in a task of its own: other prompts go on meanwhile), or the prompt is done."""
        if self.judge is None or not self.plan.may_go_on(i):
            self.prompt_done(i)
        else:
            self._start(self._judged(i))

    def prompt_done(self, i: int) -> None:
        if self.on_prompt_done is not None:
            drawn = self.plan.drawn[i]
            samples = self.result.sampled_responses[i][:drawn]
            self.on_prompt_done(i, self.result.responses[i], list(samples))

    async def _judged(self, i: int) -> None:
        assert self.judge is not None
        drawn = self.plan.drawn[i]
        go_on = await self.judge(
            i, self.result.responses[i], list(self.result.sampled_responses[i][:drawn])
        )
        if not go_on:
            self.plan.stopped.add(i)
            if self.ckpt is not None:
                self.ckpt.write_stop(i, drawn)
            self.prompt_done(i)
            return
        slots = self.plan.next_round(i)
        self.bar.total += len(slots)
        self.bar.refresh()
        self.queue.append((i, slots, False))

    def _start(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(self._guarded(work))
        self.tasks.add(task)

        def finished(task: asyncio.Task[None]) -> None:
            self.tasks.discard(task)
            self._changed.set()

        task.add_done_callback(finished)

    async def _guarded(self, work: Awaitable[None]) -> None:
        try:
            await work
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            self.errors.append(exc)

    async def dispatch(self, jobs: list[_Job]) -> None:
        """Make every call, the calls for samples a reply fell short of, and the calls of the
        rounds the judge asks for, until none is left."""
        self.queue.extend(jobs)
        try:
            while not self.errors:
                if not self.queue:
                    if not self.tasks:
                        break
                    self._changed.clear()
                    await self._changed.wait()
                    continue
                job = self._next_job()
                permit = await self.caller.acquire()
                if self.errors:  # a call stopped the run: start nothing more
                    self.caller.release(permit, None)
                    break
                self._start(self._call(job, permit))
                # One call started per turn of the event loop, not a whole window in one turn:
                # replies (a first 429 above all) are read between starts, so a provider that
                # refuses the first window's early calls lowers the limit before the rest go out.
                await asyncio.sleep(0)
            if self.errors:
                raise self.errors[0]
        except BaseException:
            # A fatal error in one call (or cancellation of the run) stops all of them, and none
            # is left running when this returns.
            for t in self.tasks:
                t.cancel()
            await asyncio.gather(*list(self.tasks), return_exceptions=True)
            raise

    def _next_job(self) -> _Job:
        """The next call: a group of samples is cut to what one call may ask for now."""
        i, slots, fallback = self.queue.popleft()
        most = self.caller.samples_per_call()
        if slots[0] != ORIGINAL_SLOT and len(slots) > most:
            self.queue.appendleft((i, slots[most:], fallback))
            slots = slots[:most]
        return i, slots, fallback

    async def _call(self, job: _Job, permit: Any) -> None:
        i, slots, fallback = job
        n = len(slots)
        texts, failure = await self.caller.call(
            self.messages[i], sample=slots[0] != ORIGINAL_SLOT, permit=permit, n=n
        )
        if texts is None:
            assert failure is not None
            if n > 1 and not failure.transient:
                # a provider may refuse n itself: ask for these samples one by one
                self.queue.extendleft((i, (s,), True) for s in reversed(slots))
                self._changed.set()
                return
            for slot in slots:
                self._record(i, slot, None, failure)
            return
        if fallback:
            self.caller.n_refused()
        for slot, text in zip(slots, texts, strict=False):  # texts may be fewer
            self._record(i, slot, text, None)
        if len(texts) < n:  # the provider caps or ignores n: ask for the rest again
            self.caller.choices_returned(n, len(texts))
            self.queue.appendleft((i, slots[len(texts) :], False))
            self._changed.set()

    def _record(self, i: int, slot: int, text: str | None, failure: CallFailure | None) -> None:
        stats = self.caller.stats
        if failure is None:
            stats.succeeded += 1
        else:
            stats.failed += 1
            stats.failures_by_kind[failure.kind] += 1
        _fill(self.result, i, slot, text, failure)
        if self.ckpt is not None:
            self.ckpt.write(i, slot, text, failure)
        self.bar.update(1)
        self.plan.remaining[i] -= 1
        if self.plan.remaining[i] == 0:
            self.round_done(i)


def _first_round(jobs: list[_Job], use_n: Any, llm: Any) -> int:
    """How many calls the run starts with: one per slot, or where samples are asked for with
    ``n``, one per job (a job's samples rarely exceed what one call may ask for)."""
    if use_n is True or (use_n == "auto" and accepts_n(llm)):
        return len(jobs)
    return sum(len(slots) for _, slots, _ in jobs)


def _as_checkpoint(checkpoint: Any) -> Checkpoint | None:
    if checkpoint is None or isinstance(checkpoint, Checkpoint):
        return checkpoint
    if isinstance(checkpoint, (str, os.PathLike)):
        return Checkpoint(checkpoint)
    raise ConfigurationError(
        f"checkpoint must be a file path or None, got {type(checkpoint).__name__}"
    )


@dataclass
class _Plan:
    """What a run asks for: the calls it starts with, and per prompt the samples it has asked
    for (``drawn``), how many of its slots asked for are still to come (``remaining``), its
    rounds (``ends``, the samples drawn at the end of each) and whether it has stopped.
    """

    jobs: list[_Job]
    remaining: list[int]
    drawn: list[int]
    ends: list[int]
    stopped: set[int]
    from_checkpoint: int

    @classmethod
    def of(
        cls,
        n: int,
        include_original: bool,
        ends: list[int],
        done: dict[tuple[int, int], tuple[str | None, CallFailure | None]],
        ckpt: Checkpoint | None,
        result: GenerationResult,
    ) -> _Plan:
        """Fill the slots the checkpoint completes; per prompt, queue a call for the rest of
        its answer and one for the rest of the samples of the round it is in: its first round,
        or the last round the checkpoint shows begun (or every round, where it stopped)."""
        m = ends[-1]
        valid = set(range(m)) | ({ORIGINAL_SLOT} if include_original else set())
        for index, slot in done:
            if slot not in valid:
                raise CheckpointError(
                    f"the checkpoint holds slot {slot} of prompt {index}, which this run does "
                    "not have"
                )
        stops = ckpt.stops if ckpt is not None else {}
        plan = cls([], [0] * n, [0] * n, ends, set(), 0)
        for i in range(n):
            begun = [s for s in range(m) if (i, s) in done]
            drawn = stops.get(i, next(e for e in ends if e > max(begun, default=-1)))
            if i in stops:
                plan.stopped.add(i)
            slots = ([ORIGINAL_SLOT] if include_original else []) + list(range(drawn))
            missing = []
            for slot in slots:
                got = done.get((i, slot))
                if got is not None and (
                    got[0] is not None or (got[1] is not None and not got[1].transient)
                ):
                    _fill(result, i, slot, got[0], got[1])
                    plan.from_checkpoint += 1
                else:
                    missing.append(slot)
            plan.drawn[i], plan.remaining[i] = drawn, len(missing)
            if missing and missing[0] == ORIGINAL_SLOT:
                plan.jobs.append((i, (ORIGINAL_SLOT,), False))
                missing = missing[1:]
            if missing:
                plan.jobs.append((i, tuple(missing), False))
        return plan

    def may_go_on(self, i: int) -> bool:
        """Whether prompt ``i`` may draw another round (it has not stopped nor drawn all)."""
        return i not in self.stopped and self.drawn[i] < self.ends[-1]

    def next_round(self, i: int) -> tuple[int, ...]:
        """Prompt ``i``'s next round: its sample slots, now asked for."""
        first = self.drawn[i]
        last = next(e for e in self.ends if e > first)
        self.drawn[i] = last
        self.remaining[i] = last - first
        return tuple(range(first, last))


def _fill(
    result: GenerationResult, i: int, slot: int, text: str | None, failure: CallFailure | None
) -> None:
    if slot == ORIGINAL_SLOT:
        result.responses[i] = text
        result.response_errors[i] = failure
    else:
        result.sampled_responses[i][slot] = text
        result.sample_errors[i][slot] = failure
