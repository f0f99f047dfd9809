"""``BlackBoxUQ``: ask an LLM, sample it again, and score the answer against the samples.

For each prompt the LLM gives one answer (at its own temperature) and ``num_responses`` samples
(at ``sampling_temperature``). Each scorer turns (answer, samples) into a confidence; the default,
``bert_score``, is the mean BERTScore F1 of the answer (candidate) against each sample
(reference).

Scoring overlaps generation: a prompt is queued for scoring as soon as its last call returns, and
a worker thread scores whatever has queued up as one batch while the event loop keeps the LLM
calls going. A scorer whose numbers depend on the whole batch (BERTScore with ``idf=True`` and no
``idf_sents``: idf comes from the references it is given) is run once over all prompts at the
end instead, so the result never depends on the order in which calls complete.

Example:
    >>> from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
    >>> uq = BlackBoxUQ(llm=ParrotFakeChatModel(), scorers=["bert_score"],
    ...                 show_progress_bars=False)
    >>> result = uq.generate_and_score_sync(["The sky is blue."], num_responses=2)
    >>> round(float(result.data["bert_score"][0]), 4)
    1.0
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from uqlm_bert.exceptions import ConfigurationError, InputValidationError
from uqlm_bert.generation.checkpoint import Checkpoint
from uqlm_bert.generation.client import llm_description, llm_temperature
from uqlm_bert.generation.generator import ResponseGenerator
from uqlm_bert.generation.prompts import validate_prompts
from uqlm_bert.generation.records import GenerationResult
from uqlm_bert.generation.retry import RetryPolicy
from uqlm_bert.generation.sync import run_sync
from uqlm_bert.result import SentenceUQResult, UQResult
from uqlm_bert.scorers.base import Scorer, build_scorer, check_scoring_lists

__all__ = ["BlackBoxUQ"]

logger = logging.getLogger("uqlm_bert")

CheckpointArg = str | os.PathLike[str] | Checkpoint | None


class BlackBoxUQ:
    """Black-box uncertainty quantification: confidence from agreement between sampled answers.

    Args:
        llm: a LangChain chat model (``BaseChatModel``), e.g. ``ChatOpenAI``. It is never
            modified: samples come from a copy at ``sampling_temperature``, and the client's own
            retries are switched off on the copies so every HTTP call is rate-limited and
            counted here. ``None`` when only scoring answers you already have.
        scorers: scorer names (default ``["bert_score"]``) or :class:`~uqlm_bert.scorers.Scorer`
            instances; an unknown name raises an error listing the known ones.
        device: where the BERTScore model runs (``None``: cuda, then mps, then cpu).
        system_prompt: a system message put before each prompt that has none.
        max_calls_per_min: at most this many HTTP calls, retries included, in any 60-second
            window; ``None`` for no limit.
        max_concurrency: LLM calls in flight at once.
        sampling_temperature: the temperature of the samples.
        max_retries: retries of a call after transient failures (429, 5xx, timeouts,
            connection errors, malformed replies). 400s and other permanent failures are not
            retried; 401/403 stop the run with :class:`~uqlm_bert.AuthenticationFailedError`.
        request_timeout: seconds one attempt may take before it counts as a timeout.
        show_progress_bars: progress bars for generation and scoring (terminal and notebook).
        model_type, num_layers, idf, rescale_with_baseline, baseline_path, lang, batch_size, max_length, dtype: BERTScore settings, passed to :class:`~uqlm_bert.BERTScorer`.
        scorer_kwargs: further keyword arguments for the scorers (``idf_sents``, ...).
        retry_base_delay, retry_max_delay: backoff before retry ``k`` is uniform in
            ``[0, min(retry_max_delay, retry_base_delay * 2**k)]`` seconds, and at least the
            server's ``Retry-After``.
        rate_limit_period: the window of ``max_calls_per_min`` in seconds (60).
        score_batch_size: at most this many prompts per scoring batch while generating.

    Example:
        >>> from langchain_core.language_models.fake_chat_models import FakeListChatModel
        >>> llm = FakeListChatModel(responses=["Paris is the capital.", "It is Paris."])
        >>> uq = BlackBoxUQ(llm=llm, scorers=["bert_score"], show_progress_bars=False)
        >>> df = uq.generate_and_score_sync(["Capital of France?"], num_responses=3).to_df()
        >>> list(df.columns[:4])
        ['prompt', 'response', 'sampled_responses', 'bert_score']
        >>> bool(0.5 < df["bert_score"][0] < 1.0)
        True
    """

    def __init__(
        self,
        llm: Any = None,
        scorers: Sequence[str | Scorer] | None = None,
        device: str | None = None,
        system_prompt: str | None = None,
        max_calls_per_min: int | None = None,
        max_concurrency: int = 16,
        sampling_temperature: float = 1.0,
        max_retries: int = 5,
        request_timeout: float | None = 60.0,
        show_progress_bars: bool = True,
        *,
        model_type: str | None = None,
        num_layers: int | None = None,
        idf: bool = False,
        rescale_with_baseline: bool = False,
        baseline_path: str | None = None,
        lang: str = "en",
        batch_size: int | None = None,
        max_length: int | None = None,
        dtype: str | None = None,
        scorer_kwargs: dict[str, Any] | None = None,
        retry_base_delay: float = 1.0,
        retry_max_delay: float = 60.0,
        rate_limit_period: float = 60.0,
        score_batch_size: int = 256,
    ) -> None:
        if not isinstance(score_batch_size, int) or score_batch_size < 1:
            raise ConfigurationError(
                f"score_batch_size must be a positive integer, got {score_batch_size!r}"
            )
        self.llm = llm
        self.system_prompt = system_prompt
        self.sampling_temperature = sampling_temperature
        self.max_calls_per_min = max_calls_per_min
        self.max_concurrency = max_concurrency
        self.request_timeout = request_timeout
        self.show_progress_bars = show_progress_bars
        self.rate_limit_period = rate_limit_period
        self.score_batch_size = score_batch_size
        self.retry_policy = RetryPolicy(
            max_retries=max_retries, base_delay=retry_base_delay, max_delay=retry_max_delay
        )
        engine_kwargs = {
            "device": device,
            "model_type": model_type,
            "num_layers": num_layers,
            "idf": idf,
            "rescale_with_baseline": rescale_with_baseline,
            "baseline_path": baseline_path,
            "lang": lang,
            "batch_size": batch_size,
            "max_length": max_length,
            "dtype": dtype,
            **(scorer_kwargs or {}),
        }
        self.scorers: list[Scorer] = _build_scorers(scorers, engine_kwargs)
        self._engine_kwargs = engine_kwargs
        self.last_generation: GenerationResult | None = None
        self._generator: ResponseGenerator | None = None
        if llm is not None:
            self._generator = self._make_generator()

    @property
    def scorer_names(self) -> list[str]:
        """The scorers' names: the score fields of every result."""
        return [s.name for s in self.scorers]

    async def generate_and_score(
        self,
        prompts: Sequence[Any],
        num_responses: int = 5,
        show_progress_bars: bool | None = None,
        checkpoint: CheckpointArg = None,
    ) -> UQResult:
        """Generate an answer and ``num_responses`` samples per prompt, and score them.

        Args:
            prompts: strings or lists of LangChain messages.
            num_responses: samples per prompt.
            show_progress_bars: override the instance's setting for this call.
            checkpoint: a JSONL file recording every answer as it arrives; running again with
                the same file skips what is done.

        Raises:
            ConfigurationError: no ``llm`` was given.
            AuthenticationFailedError: the provider rejected the credentials.
            CheckpointError: the checkpoint file belongs to another run.

        Example:
            >>> import asyncio
            >>> from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
            >>> uq = BlackBoxUQ(ParrotFakeChatModel(), show_progress_bars=False)
            >>> result = asyncio.run(uq.generate_and_score(["Hello there."], num_responses=2))
            >>> round(result.data["bert_score"][0], 4)
            1.0
        """
        show = self._show(show_progress_bars)
        generator = self._require_generator()
        items = validate_prompts(prompts)
        started = time.perf_counter()
        pipeline = _ScoringPipeline(self.scorers, len(items), self.score_batch_size, show)
        pipeline.start()
        try:
            generation = await generator.generate(
                items,
                num_responses,
                checkpoint=checkpoint,
                on_prompt_done=pipeline.submit,
                show_progress_bars=show,
            )
            generated = time.perf_counter()
            scores = await pipeline.finish(generation)
        except BaseException:
            await pipeline.abort()
            raise
        finished = time.perf_counter()
        self.last_generation = generation
        timings = {
            "generation_s": generated - started,
            "scoring_s": pipeline.busy_seconds,
            "scoring_after_generation_s": finished - generated,
            "total_s": finished - started,
        }
        return self._result(generation, scores, num_responses, timings, checkpoint)

    def generate_and_score_sync(
        self,
        prompts: Sequence[Any],
        num_responses: int = 5,
        show_progress_bars: bool | None = None,
        checkpoint: CheckpointArg = None,
    ) -> UQResult:
        """:meth:`generate_and_score` for synchronous code: scripts, and notebooks.

        Inside a running event loop (Jupyter) the run happens on its own loop in a helper
        thread; this call blocks until it is done.

        Example:
            >>> from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
            >>> uq = BlackBoxUQ(ParrotFakeChatModel(), show_progress_bars=False)
            >>> uq.generate_and_score_sync(["hi"], num_responses=1).data["responses"]
            ['hi']
        """
        return run_sync(
            lambda: self.generate_and_score(prompts, num_responses, show_progress_bars, checkpoint)
        )

    async def generate_original_responses(
        self,
        prompts: Sequence[Any],
        show_progress_bars: bool | None = None,
        checkpoint: CheckpointArg = None,
    ) -> list[str | None]:
        """One answer per prompt at the model's own temperature (``None`` where a call failed).

        The failures are in ``self.last_generation.response_errors``.

        Example:
            >>> import asyncio
            >>> from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
            >>> uq = BlackBoxUQ(ParrotFakeChatModel(), show_progress_bars=False)
            >>> asyncio.run(uq.generate_original_responses(["a", "b"]))
            ['a', 'b']
        """
        generation = await self._require_generator().generate(
            prompts,
            0,
            checkpoint=checkpoint,
            show_progress_bars=self._show(show_progress_bars),
        )
        self.last_generation = generation
        return list(generation.responses)

    async def generate_candidate_responses(
        self,
        prompts: Sequence[Any],
        num_responses: int = 5,
        show_progress_bars: bool | None = None,
        checkpoint: CheckpointArg = None,
    ) -> list[list[str | None]]:
        """``num_responses`` samples per prompt at ``sampling_temperature``.

        The failures are in ``self.last_generation.sample_errors``.

        Example:
            >>> import asyncio
            >>> from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
            >>> uq = BlackBoxUQ(ParrotFakeChatModel(), show_progress_bars=False)
            >>> asyncio.run(uq.generate_candidate_responses(["a"], num_responses=2))
            [['a', 'a']]
        """
        generation = await self._require_generator().generate(
            prompts,
            num_responses,
            include_original=False,
            checkpoint=checkpoint,
            show_progress_bars=self._show(show_progress_bars),
        )
        self.last_generation = generation
        return [list(s) for s in generation.sampled_responses]

    def score_sentences(
        self,
        responses: Sequence[str | None],
        sampled_responses: Sequence[Sequence[str | None]],
        sentences: Sequence[Sequence[str] | None] | None = None,
        show_progress_bars: bool | None = None,
        metric: str = "f1",
    ) -> SentenceUQResult:
        """Sentence-level confidence (SelfCheckGPT style): how well the samples support each
        sentence of each response.

        A sentence's ``bert_score`` is, for each sample, the best BERTScore (F1 by default) between
        the sentence and the sample's sentences, averaged over the samples. All sentences of all
        responses are scored in one batched engine call, with this instance's BERTScore settings.

        Args:
            responses: one answer per prompt (``None`` for a failed call).
            sampled_responses: one list of samples per prompt (``None`` samples are skipped).
            sentences: your own split, one list of sentences per response; default: split here
                with :func:`uqlm_bert.scorers.sentences.split_sentences` (no download needed).
            show_progress_bars: override the instance's setting for this call.
            metric: ``"f1"``, ``"precision"`` (how much of the sentence a sample covers; the best
                sentence-level detector in our measurements, see docs/scorers.md) or ``"recall"``.

        Returns:
            A result whose ``to_df()`` has one row per sentence: ``response_index``,
            ``sentence_index``, ``sentence`` and ``bert_score``.

        Example:
            >>> uq = BlackBoxUQ(show_progress_bars=False)
            >>> res = uq.score_sentences(["Paris is in France. It has the Eiffel Tower."],
            ...                          [["Paris is a French city.", "The Eiffel Tower is in Paris."]])
            >>> res.to_df()[["response_index", "sentence"]].values.tolist()
            [[0, 'Paris is in France.'], [0, 'It has the Eiffel Tower.']]
        """
        from uqlm_bert.scorers.bert import BERTScoreConsistency
        from uqlm_bert.scorers.sentences import score_sentences

        engine = next(
            (s.engine for s in self.scorers if isinstance(s, BERTScoreConsistency)), None
        )
        if engine is None:
            engine = BERTScoreConsistency(**self._engine_kwargs).engine
        started = time.perf_counter()
        df = score_sentences(
            responses,
            sampled_responses,
            engine,
            sentences=sentences,
            show_progress_bars=self._show(show_progress_bars),
            metric=metric,
        )
        data = {col: df[col].tolist() for col in df.columns}
        metadata = {
            "scorers": ["bert_score"],
            "level": "sentence",
            "metric": metric,
            "num_responses": len(responses),
            "num_sentences": len(df),
            "timings": {"scoring_s": time.perf_counter() - started},
        }
        return SentenceUQResult(data, metadata)

    def score(
        self,
        responses: Sequence[str | None],
        sampled_responses: Sequence[Sequence[str | None]],
        show_progress_bars: bool | None = None,
        prompts: Sequence[Any] | None = None,
    ) -> UQResult:
        """Score answers you already have; no LLM is needed.

        ``None`` marks a missing answer or sample: it is skipped, and a response with no samples
        left scores NaN.

        Example:
            >>> uq = BlackBoxUQ(show_progress_bars=False)
            >>> conf = uq.score(["Paris is in France.", "Lima"], [["Paris is in France.", None],
            ...                                                   [None, None]]).data["bert_score"]
            >>> round(conf[0], 4), conf[1]
            (1.0, nan)
        """
        show = self._show(show_progress_bars)
        responses, samples = _check_scoring_input(responses, sampled_responses, prompts)
        started = time.perf_counter()
        scores = {
            s.name: s.score(responses, samples, show_progress_bars=show) for s in self.scorers
        }
        elapsed = time.perf_counter() - started
        n = len(responses)
        data: dict[str, Any] = {
            "prompts": list(prompts) if prompts is not None else [None] * n,
            "responses": list(responses),
            "sampled_responses": [list(s) for s in samples],
        }
        data.update({name: _as_floats(v) for name, v in scores.items()})
        data["response_errors"] = [None] * n
        data["sample_errors"] = [[None] * len(s) for s in samples]
        metadata = {
            "num_prompts": n,
            "num_responses": max((len(s) for s in samples), default=0),
            "scorers": self.scorer_names,
            "timings": {"scoring_s": elapsed, "total_s": elapsed},
        }
        return UQResult(data, metadata)

    def _result(
        self,
        generation: GenerationResult,
        scores: dict[str, np.ndarray],
        num_responses: int,
        timings: dict[str, float],
        checkpoint: CheckpointArg,
    ) -> UQResult:
        data: dict[str, Any] = {
            "prompts": list(generation.prompts),
            "responses": list(generation.responses),
            "sampled_responses": [list(s) for s in generation.sampled_responses],
        }
        data.update({name: _as_floats(scores[name]) for name in self.scorer_names})
        data["response_errors"] = list(generation.response_errors)
        data["sample_errors"] = [list(e) for e in generation.sample_errors]
        failed_samples = generation.num_failed_samples()
        first = np.asarray(scores[self.scorer_names[0]], dtype=np.float64)
        path = checkpoint.path if isinstance(checkpoint, Checkpoint) else checkpoint
        metadata = {
            "num_prompts": len(generation.prompts),
            "num_responses": num_responses,
            "temperature": llm_temperature(self.llm),
            "sampling_temperature": self.sampling_temperature,
            "scorers": self.scorer_names,
            "llm": llm_description(self.llm),
            "calls": generation.stats.as_dict(),
            "failures": {
                "responses": sum(e is not None for e in generation.response_errors),
                "samples": sum(failed_samples),
                "prompts_with_failures": sum(
                    (e is not None) or k > 0
                    for e, k in zip(generation.response_errors, failed_samples, strict=True)
                ),
                "unscored_prompts": int(np.isnan(first).sum()),
            },
            "timings": timings,
            "checkpoint": None if path is None else os.fspath(path),
        }
        return UQResult(data, metadata)

    def _make_generator(self) -> ResponseGenerator:
        return ResponseGenerator(
            self.llm,
            system_prompt=self.system_prompt,
            sampling_temperature=self.sampling_temperature,
            max_calls_per_min=self.max_calls_per_min,
            rate_limit_period=self.rate_limit_period,
            max_concurrency=self.max_concurrency,
            retry_policy=self.retry_policy,
            request_timeout=self.request_timeout,
        )

    def _require_generator(self) -> ResponseGenerator:
        if self._generator is None:
            raise ConfigurationError(
                "BlackBoxUQ was created without an LLM: pass llm=<a LangChain chat model> to "
                "generate, or score answers you already have with .score(responses, "
                "sampled_responses)"
            )
        return self._generator

    def _show(self, override: bool | None) -> bool:
        return self.show_progress_bars if override is None else bool(override)


class _ScoringPipeline:
    """Scores prompts in batches, in a worker thread, as generation finishes them."""

    def __init__(self, scorers: list[Scorer], n: int, max_batch: int, show: bool) -> None:
        self.overlapped = [s for s in scorers if _batch_invariant(s)]
        self.deferred = [s for s in scorers if not _batch_invariant(s)]
        self.scores = {s.name: np.full(n, np.nan) for s in scorers}
        self.busy_seconds = 0.0
        self._n = n
        self._max_batch = max_batch
        self._show = show
        self._queue: asyncio.Queue[tuple[int, str | None, list[str | None]] | None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._bar: Any = None

    def start(self) -> None:
        if not self.overlapped:
            return
        self._queue = asyncio.Queue()
        self._bar = tqdm(total=self._n, desc="Scoring", unit="prompt", disable=not self._show)
        self._task = asyncio.ensure_future(self._consume())

    def submit(self, index: int, response: str | None, samples: list[str | None]) -> None:
        """Queue a finished prompt; re-raise a scoring failure so that generation stops."""
        if self._task is None or self._queue is None:
            return
        if self._task.done() and not self._task.cancelled() and self._task.exception():
            raise self._task.exception()  # type: ignore[misc]
        self._queue.put_nowait((index, response, samples))

    async def finish(self, generation: GenerationResult) -> dict[str, np.ndarray]:
        if self._task is not None and self._queue is not None:
            self._queue.put_nowait(None)
            try:
                await self._task
            finally:
                self._bar.close()
        if self.deferred:
            await asyncio.to_thread(
                self._score_all, self.deferred, generation.responses, generation.sampled_responses
            )
        return self.scores

    async def abort(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._bar is not None:
            self._bar.close()

    async def _consume(self) -> None:
        assert self._queue is not None
        ended = False
        while not ended:
            item = await self._queue.get()
            if item is None:
                break
            batch = [item]
            while len(batch) < self._max_batch and not self._queue.empty():
                nxt = self._queue.get_nowait()
                if nxt is None:
                    ended = True
                    break
                batch.append(nxt)
            await asyncio.to_thread(self._score_batch, batch)
            self._bar.update(len(batch))

    def _score_batch(self, batch: list[tuple[int, str | None, list[str | None]]]) -> None:
        indices = [i for i, _, _ in batch]
        responses = [r for _, r, _ in batch]
        samples = [s for _, _, s in batch]
        started = time.perf_counter()
        for scorer in self.overlapped:
            values = np.asarray(scorer.score(responses, samples), dtype=np.float64)
            self.scores[scorer.name][indices] = values
        self.busy_seconds += time.perf_counter() - started

    def _score_all(self, scorers: list[Scorer], responses: Any, samples: Any) -> None:
        started = time.perf_counter()
        for scorer in scorers:
            values = scorer.score(list(responses), [list(s) for s in samples], self._show)
            self.scores[scorer.name][:] = np.asarray(values, dtype=np.float64)
        self.busy_seconds += time.perf_counter() - started


def _build_scorers(scorers: Sequence[str | Scorer] | None, kwargs: dict[str, Any]) -> list[Scorer]:
    if scorers is None:
        scorers = ["bert_score"]
    if isinstance(scorers, (str, Scorer)):
        scorers = [scorers]
    if len(scorers) == 0:
        raise ConfigurationError("scorers is empty; give at least one, e.g. ['bert_score']")
    built: list[Scorer] = []
    for item in scorers:
        scorer = item if isinstance(item, Scorer) else build_scorer(item, **kwargs)
        if any(s.name == scorer.name for s in built):
            raise ConfigurationError(f"scorer {scorer.name!r} is listed twice")
        built.append(scorer)
    return built


def _batch_invariant(scorer: Scorer) -> bool:
    """Whether a prompt's score is independent of which other prompts share its batch."""
    return bool(getattr(scorer, "batch_invariant", True))


def _check_scoring_input(
    responses: Any, sampled_responses: Any, prompts: Any
) -> tuple[list[str | None], list[list[str | None]]]:
    responses, samples = check_scoring_lists(responses, sampled_responses)
    if prompts is not None and len(prompts) != len(responses):
        raise InputValidationError(
            f"prompts has {len(prompts)} items but responses has {len(responses)}"
        )
    return responses, samples


def _as_floats(values: Any) -> list[float]:
    return [float(v) for v in np.asarray(values, dtype=np.float64)]
