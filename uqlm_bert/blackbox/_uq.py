"""``BlackBoxUQ``: ask an LLM, sample it again, and score the answer against the samples.

For each prompt the LLM gives one answer (at its own temperature) and ``num_responses`` samples
(at ``sampling_temperature``). Each scorer turns (answer, samples) into a confidence; the default,
``bert_score``, is the mean BERTScore F1 (the prompt's tokens and punctuation weigh 0) of the
answer (candidate) against each sample (reference).

Scoring overlaps generation: prompts are scored in batches as they complete, while the event
loop keeps the LLM calls going (see :mod:`uqlm_bert.blackbox._pipeline`).

Example:
    >>> from langchain_core.language_models.fake_chat_models import FakeListChatModel
    >>> uq = BlackBoxUQ(llm=FakeListChatModel(responses=["Paris."]), scorers=["bert_score"],
    ...                 show_progress_bars=False)
    >>> result = uq.generate_and_score_sync(["Capital of France?"], num_responses=2)
    >>> round(float(result.data["bert_score"][0]), 4)
    1.0
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from uqlm_bert._checks import NOT_GIVEN, NotGiven, check_int
from uqlm_bert._exceptions import ConfigurationError
from uqlm_bert._inputs import scoring_lists
from uqlm_bert.bertscore._settings import BERTScoreSettings
from uqlm_bert.blackbox._assembly import (
    Assembly,
    bert_engine,
    generation_metadata,
    sentence_result,
    support_thresholds,
)
from uqlm_bert.blackbox._fields import SettingsField
from uqlm_bert.blackbox._pipeline import generate_and_score
from uqlm_bert.blackbox._pool import scoring_place
from uqlm_bert.blackbox._queue import ScoringQueues
from uqlm_bert.blackbox._uqlm_face import (
    refuse_what_needs_another_model,
    sentence_transformer_setting,
)
from uqlm_bert.blackbox._verbose import verbose_logging
from uqlm_bert.generation._event_loop import EventLoopThread
from uqlm_bert.generation._settings import (
    GenerationSettings,
    checked_generation,
    generation_settings,
)
from uqlm_bert.results._failures import warn_failures
from uqlm_bert.results._result import UQResult
from uqlm_bert.scorers._base import Scorer
from uqlm_bert.scorers._registry import build_scorers, scorer_settings

if TYPE_CHECKING:
    import pandas as pd

    from uqlm_bert.distributed import RayScoring
    from uqlm_bert.generation._generator import ResponseGenerator
    from uqlm_bert.generation._records import GenerationResult
    from uqlm_bert.generation._shared_limits import SharedLimits

__all__ = ["BlackBoxUQ"]

CheckpointArg = "str | os.PathLike[str] | Checkpoint | None"


class BlackBoxUQ:
    """Black-box uncertainty quantification: confidence from agreement between sampled answers.

    The generation arguments (``system_prompt``, ``max_calls_per_min``, ``max_concurrency``,
    ``sampling_temperature``, ``max_retries``, ``request_timeout``, ``retry_base_delay``,
    ``retry_max_delay``, ``rate_limit_period``, ``use_n_param``) default to
    :class:`~uqlm_bert.generation._settings.GenerationSettings`' values, which live there only
    (``NOT_GIVEN`` in the signature: left out); the defaults named below are those.

    Args:
        llm: a LangChain chat model (``BaseChatModel``), e.g. ``ChatOpenAI``. It is never
            modified: samples come from a copy at ``sampling_temperature``, and the client's own
            retries are switched off on the copies so every HTTP call is rate-limited and
            counted here. ``None`` when only scoring answers you already have.
        scorers: scorer names (default ``["bert_score"]``) or :class:`~uqlm_bert.scorers.Scorer`
            instances; an unknown name raises an error listing the known ones.
        device: where the models of the scorers run (``None``: cuda, then mps, then cpu).
        system_prompt: a system message put before each prompt that has none (default: none).
        max_calls_per_min: at most this many HTTP calls, retries included, may arrive at the
            provider in any window of ``rate_limit_period`` seconds; ``None`` for no limit.
        max_concurrency: the most LLM calls in flight at once (a hard cap, 1,000 by default, the
            OpenAI client's connection limit; ``None`` for none). A run starts with all its calls
            in flight within it; on 429s, 5xx and timeouts the number drops to what the provider
            was serving, and it grows again while replies keep coming at a flat latency. The
            level reached is kept for the next run against the same provider and model.
        sampling_temperature: the temperature of the samples (1.0).
        max_retries: retries (5) of a call after transient failures (429, 5xx, timeouts,
            connection errors, malformed replies). 400s and other permanent failures are not
            retried; 401/403 stop the run with :class:`~uqlm_bert.AuthenticationFailedError`.
        request_timeout: seconds one attempt may take before it counts as a timeout (60).
        show_progress_bars: progress bars for generation and scoring (terminal and notebook).
        model_type, num_layers, idf, idf_sents, rescale_with_baseline, baseline_path, lang, batch_size, max_length, dtype, long_texts:
            BERTScore settings (see :class:`~uqlm_bert.BERTScorer`; ``long_texts`` also for
            ``cosine_sim``), built once into one :class:`~uqlm_bert.BERTScoreSettings` on top of
            the scorers' defaults (:data:`~uqlm_bert.bertscore._settings.SCORER_DEFAULTS`: fixed
            idf weights, the fastest safe dtype, long texts read whole in windows, not cut).
        scorer_kwargs: further settings for the scorers (``exact_match_normalize``, ...); a
            setting no chosen scorer accepts is an error.
        retry_base_delay, retry_max_delay: backoff before retry ``k`` is uniform in
            ``[0, min(retry_max_delay, retry_base_delay * 2**k)]`` seconds, and at least the
            server's ``Retry-After`` (1 and 60 seconds).
        rate_limit_period: the window of ``max_calls_per_min`` in seconds (60).
        score_batch_size: at most this many prompts per scoring batch while generating.
        scoring: where ``generate_and_score`` scores: ``"local"`` (this process, by default),
            ``"ray"`` or a :class:`~uqlm_bert.distributed.RayScoring` (a pool of Ray actors,
            which each build these scorers, while generation stays here; see
            :mod:`uqlm_bert.distributed._actor_pool`). :meth:`close` stops the pool, and Ray if it
            was started for it. ``score`` and ``score_sentences`` score in this process.
        generation: all the generation settings as one
            :class:`~uqlm_bert.generation._settings.GenerationSettings`; the generation
            arguments above must then be left out (any of them given beside it, even with its
            default's value, is a :class:`~uqlm_bert.ConfigurationError`).
        bertscore: all the BERTScore settings as one :class:`~uqlm_bert.BERTScoreSettings`,
            passed whole to the ``bert_score`` scorers; the BERTScore arguments above (and
            ``device``) then must be left out. What it leaves unset takes the scorers'
            defaults, as for the arguments: ``bertscore=BERTScoreSettings(num_layers=4)``
            scores as ``num_layers=4`` does.
        use_best: return as each prompt's answer the candidate (original answer or sample) that
            agrees most with the others, scored against them (see
            :mod:`uqlm_bert.scorers._best`); the result says which was chosen
            (``best_response_index``: -1 the original) and keeps the original in
            ``original_responses``. Off by default.
        token_supports: keep, from the scoring pass, how well the samples support each token
            of each answer (``UQResult.supports()``, ``sentences()``; docs/supports.md); off,
            a result holds the confidences alone (a little less time and memory).
        postprocessor: a function applied to every answer and sample before scoring (to strip
            formatting, say); the texts it returns are what is scored.
        return_responses: with a postprocessor, which texts the result holds: ``"all"``
            (the postprocessed ones, and the raw ones in ``raw_responses`` and
            ``raw_sampled_responses``), ``"raw"`` or ``"postprocessed"``.
        verbose: progress bars on, and the package's INFO log lines (retries, resumes) on
            stderr during each call.
        sentence_transformer: the ``cosine_sim`` scorer's model (its name in other libraries);
            the default is the embedded all-MiniLM-L6-v2.
        use_n_param: ask for a prompt's samples in one call with the provider's ``n``
            parameter (the answer stays its own call): ``"auto"`` (default) for clients known to
            accept it (``ChatOpenAI``, ``AzureChatOpenAI``), ``True`` for any client, ``False``
            for one call per sample. Providers bill the prompt once per call, so the samples'
            prompt tokens cost ``1/num_responses`` of one call per sample. A provider that returns
            fewer choices than asked gets the missing samples asked for again.
        nli_model_name, nli_batch_size, structured_response, output_extractor: arguments of
            uqlm's ``BlackBoxUQ`` that need what this package does not have; giving one raises
            :class:`~uqlm_bert.ConfigurationError` saying what to use instead.

    The generation settings are kept as one frozen :attr:`generation` object, read at every
    call: changing one (``uq.sampling_temperature = 0.3``) changes what the next call does and
    what its result reports. The scorers are built once; their settings are read-only.

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
        *,
        system_prompt: str | None | NotGiven = NOT_GIVEN,
        max_calls_per_min: int | None | NotGiven = NOT_GIVEN,
        max_concurrency: int | None | NotGiven = NOT_GIVEN,
        sampling_temperature: float | NotGiven = NOT_GIVEN,
        max_retries: int | NotGiven = NOT_GIVEN,
        request_timeout: float | None | NotGiven = NOT_GIVEN,
        show_progress_bars: bool = True,
        model_type: str | None = None,
        num_layers: int | None = None,
        idf: Any = None,
        idf_sents: Sequence[str] | None = None,
        rescale_with_baseline: bool | None = None,
        baseline_path: str | None = None,
        lang: str | None = None,
        batch_size: int | None = None,
        max_length: int | None = None,
        dtype: str | None = None,
        long_texts: str | None = None,
        scorer_kwargs: dict[str, Any] | None = None,
        retry_base_delay: float | NotGiven = NOT_GIVEN,
        retry_max_delay: float | NotGiven = NOT_GIVEN,
        rate_limit_period: float | NotGiven = NOT_GIVEN,
        score_batch_size: int = 256,
        scoring: str | RayScoring = "local",
        generation: GenerationSettings | None = None,
        bertscore: BERTScoreSettings | None = None,
        use_best: bool = False,
        token_supports: bool = True,
        postprocessor: Callable[[str], str] | None = None,
        return_responses: str = "all",
        verbose: bool = False,
        sentence_transformer: str | None = None,
        nli_model_name: str | None = None,
        nli_batch_size: int | None = None,
        use_n_param: bool | str | NotGiven = NOT_GIVEN,
        structured_response: Any = None,
        output_extractor: Callable[[Any], str] | None = None,
    ) -> None:
        refuse_what_needs_another_model(
            nli_model_name, nli_batch_size, structured_response, output_extractor
        )
        check_int("score_batch_size", score_batch_size, 1)
        self._generation = generation_settings(
            generation,
            sampling_temperature=sampling_temperature,
            system_prompt=system_prompt,
            max_concurrency=max_concurrency,
            max_calls_per_min=max_calls_per_min,
            rate_limit_period=rate_limit_period,
            max_retries=max_retries,
            retry_base_delay=retry_base_delay,
            retry_max_delay=retry_max_delay,
            request_timeout=request_timeout,
            use_n_param=use_n_param,
        )
        self._limits: SharedLimits | None = None  # shared by the calls in flight
        self.llm = llm  # checked once, by the generator it gets
        self.show_progress_bars = show_progress_bars
        self.score_batch_size = score_batch_size
        # the scorers' settings objects, each built once, from the arguments by name and
        # scorer_kwargs beside them, and used as they are (here, and by a pool's actors)
        self.scorers: list[Scorer] = build_scorers(
            scorers,
            built := scorer_settings(
                scorers,
                scorer_kwargs,
                model_type=model_type,
                num_layers=num_layers,
                idf=idf,
                idf_sents=idf_sents,
                rescale_with_baseline=rescale_with_baseline,
                baseline_path=baseline_path,
                lang=lang,
                device=device,
                batch_size=batch_size,
                max_length=max_length,
                dtype=dtype,
                long_texts=long_texts,
                bertscore=bertscore,
                **sentence_transformer_setting(sentence_transformer, scorers),
            ),
        )
        # shared by the calls in flight, as the limits are (docs/black_box.md, "In an async app")
        self._queues = ScoringQueues(scoring_place(scoring, scorers, built))
        weakref.finalize(self, self._queues.close)
        self.use_best = bool(use_best)
        self.token_supports = bool(token_supports)
        self.postprocessor = postprocessor
        self.return_responses = return_responses
        self._assembly()  # checks postprocessor and return_responses
        self.verbose = bool(verbose)
        if self.verbose:
            self.show_progress_bars = True
        self.last_generation: GenerationResult | None = None
        self._runner = EventLoopThread()
        weakref.finalize(self, self._runner.close)

    # -- settings -------------------------------------------------------------------------------

    @property
    def generation(self) -> GenerationSettings:
        """The generation settings, read at every call (assign a new object to change them)."""
        return self._generation

    @generation.setter
    def generation(self, value: GenerationSettings) -> None:
        self._generation = checked_generation(value, "generation")

    @property
    def llm(self) -> Any:
        """The LangChain chat model the answers and samples come from (never modified), or
        None when only scoring; assigning another checks it once."""
        return self._llm

    @llm.setter
    def llm(self, value: Any) -> None:
        self._response_generator: ResponseGenerator | None = None
        if value is not None:
            from uqlm_bert.generation._generator import ResponseGenerator
            from uqlm_bert.generation._shared_limits import SharedLimits

            if self._limits is None:
                self._limits = SharedLimits()
            self._response_generator = ResponseGenerator(value, limits=self._limits)
        self._llm = value

    sampling_temperature = SettingsField("generation", "The temperature of the samples.")
    system_prompt = SettingsField(
        "generation", "The system message put before prompts that have none."
    )
    max_calls_per_min = SettingsField(
        "generation", "The rate limit: calls arriving per rate_limit_period."
    )
    max_concurrency = SettingsField("generation", "The cap on calls in flight.")
    use_n_param = SettingsField("generation", "Whether samples are asked for in one call with n.")
    request_timeout = SettingsField("generation", "Seconds an attempt may take.")
    rate_limit_period = SettingsField("generation", "The window of max_calls_per_min, in seconds.")

    @property
    def bertscore_settings(self) -> BERTScoreSettings | None:
        """The BERTScore settings of the ``bert_score`` scorers (read-only), or None without."""
        engine = bert_engine(self.scorers, build=False)
        return None if engine is None else engine.settings

    async def generate_and_score(
        self,
        prompts: Sequence[Any],
        num_responses: int = 5,
        show_progress_bars: bool | None = None,
        checkpoint: CheckpointArg = None,
    ) -> UQResult:
        """Generate an answer and ``num_responses`` samples per prompt, and score them.

        Prompts are scored in batches as their last call returns, while later prompts are
        still being generated.

        Args:
            prompts: strings or lists of LangChain messages.
            num_responses: samples per prompt.
            show_progress_bars: override the instance's setting for this call.
            checkpoint: a JSONL file recording every answer as it arrives; running again with
                the same file skips what is done. Locked while the run lasts.

        Raises:
            ConfigurationError: no ``llm`` was given.
            AuthenticationFailedError: the provider rejected the credentials.
            ProviderUnreachableError: the provider cannot be reached.
            CheckpointError: the checkpoint file belongs to another run, or is in use.

        Example:
            >>> import asyncio
            >>> from langchain_core.language_models.fake_chat_models import FakeListChatModel
            >>> uq = BlackBoxUQ(FakeListChatModel(responses=["Lima."]), show_progress_bars=False)
            >>> result = asyncio.run(uq.generate_and_score(["Capital of Peru?"], num_responses=2))
            >>> round(result.data["bert_score"][0], 4)
            1.0
        """
        result = await self._generate_and_score(
            prompts, num_responses, show_progress_bars, checkpoint
        )
        warn_failures(result.metadata)
        return result

    def generate_and_score_sync(
        self,
        prompts: Sequence[Any],
        num_responses: int = 5,
        show_progress_bars: bool | None = None,
        checkpoint: CheckpointArg = None,
    ) -> UQResult:
        """:meth:`generate_and_score` for synchronous code: scripts, and notebooks.

        Every call of this ``BlackBoxUQ`` runs on one event loop of its own, in a helper thread
        (also inside Jupyter's running loop), so the LLM client's connections are reused from
        call to call; :meth:`close` stops that thread (it also stops when the object is
        garbage-collected). Blocks until the run is done; Ctrl-C cancels it.

        Example:
            >>> from langchain_core.language_models.fake_chat_models import ParrotFakeChatModel
            >>> uq = BlackBoxUQ(ParrotFakeChatModel(), show_progress_bars=False)
            >>> uq.generate_and_score_sync(["hi"], num_responses=1).data["responses"]
            ['hi']
        """
        result = self._runner.run(
            lambda: self._generate_and_score(prompts, num_responses, show_progress_bars, checkpoint)
        )
        warn_failures(result.metadata)
        return result

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
        generation = await self._generate(prompts, 0, True, show_progress_bars, checkpoint)
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
        generation = await self._generate(
            prompts, num_responses, False, show_progress_bars, checkpoint
        )
        return [list(s) for s in generation.sampled_responses]

    def score_sentences(
        self,
        responses: Sequence[str | None],
        sampled_responses: Sequence[Sequence[str | None]],
        sentences: Sequence[Sequence[str] | None] | None = None,
        show_progress_bars: bool | None = None,
        metric: str | None = None,
        language: str = "en",
        method: str | None = None,
    ) -> pd.DataFrame:
        """Sentence-level confidence (SelfCheckGPT style): how well the samples support each
        sentence of each response, as the sentence table of ``UQResult.sentences()``.

        By default a sentence's ``support`` aggregates the token supports of its words from one
        pass over the whole answers (see :func:`uqlm_bert.scorers._sentences.score_sentences`;
        it ranks the made-up sentences best in our measurements, docs/supports.md);
        ``method="reembed"`` scores each sentence on its own against each sample's sentences,
        as SelfCheckGPT's BERTScore does. With this instance's BERTScore settings either way.

        Args:
            responses: one answer per prompt (``None`` for a failed call).
            sampled_responses: one list of samples per prompt (``None`` samples are skipped).
            sentences: your own split, one list of sentences per response; default: split here
                with :func:`uqlm_bert.scorers._sentences.split_sentences` (no download needed).
            show_progress_bars: override the instance's setting for this call.
            metric: with ``method="reembed"``: ``"f1"``, ``"precision"`` or ``"recall"``;
                naming one without a method means ``"reembed"``.
            language: the texts' language, for sentence splitting.
            method: ``"support"`` (the default) or ``"reembed"``.

        Returns:
            The sentence table, one row per sentence: ``prompt_index`` (the response's
            position), ``sentence_index``, ``start``, ``end``, ``sentence``, ``support``,
            ``flagged`` (below the sentence threshold, for ``"support"`` at the default encoder
            and layer; ``<NA>`` otherwise) and ``method``: the columns of
            ``score(...).sentences()``.

        Example:
            >>> uq = BlackBoxUQ(show_progress_bars=False)
            >>> res = uq.score_sentences(["Paris is in France. It has the Eiffel Tower."],
            ...                          [["Paris is a French city.", "The Eiffel Tower is in Paris."]])
            >>> res[["prompt_index", "sentence"]].values.tolist()
            [[0, 'Paris is in France.'], [0, 'It has the Eiffel Tower.']]
        """
        return sentence_result(
            bert_engine(self.scorers, build=True),
            responses,
            sampled_responses,
            sentences,
            self._show(show_progress_bars),
            metric,
            language,
            method,
            support_thresholds(self.scorers),
        )

    def score(
        self,
        responses: Sequence[str | None],
        sampled_responses: Sequence[Sequence[str | None]],
        show_progress_bars: bool | None = None,
        prompts: Sequence[Any] | None = None,
    ) -> UQResult:
        """Score answers you already have; no LLM is needed.

        ``None`` (or NaN) marks a missing answer or sample: it is skipped, and a response with no
        samples left scores NaN.

        Example:
            >>> uq = BlackBoxUQ(show_progress_bars=False)
            >>> conf = uq.score(["Paris is in France.", "Lima"], [["Paris is in France.", None],
            ...                                                   [None, None]]).data["bert_score"]
            >>> round(conf[0], 4), conf[1]
            (1.0, nan)
        """
        inputs = scoring_lists(responses, sampled_responses, prompts)
        with verbose_logging(self.verbose):
            return self._assembly().score_result(
                self.scorers, inputs, prompts, self._show(show_progress_bars)
            )

    def close(self) -> None:
        """Stop the helper thread of the synchronous face and a pool of Ray actors (a later call
        starts them again).

        Example:
            >>> with BlackBoxUQ(show_progress_bars=False) as uq:
            ...     pass
        """
        self._runner.close()
        self._queues.close()

    def __enter__(self) -> BlackBoxUQ:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ------------------------------------------------------------------------------

    async def _generate_and_score(
        self,
        prompts: Sequence[Any],
        num_responses: int,
        show_progress_bars: bool | None,
        checkpoint: CheckpointArg,
    ) -> UQResult:
        from uqlm_bert.generation._prompts import validate_prompts

        generator = self._generator()
        settings = self.generation  # this call's, whatever later calls change
        assembly = self._assembly()
        with verbose_logging(self.verbose):
            generation, scored, timings = await generate_and_score(
                generator,
                validate_prompts(prompts),  # checked once: the generator takes them as they are
                num_responses,
                self.scorers,
                max_batch=self.score_batch_size,
                show=self._show(show_progress_bars),
                use_best=self.use_best,
                postprocess=assembly.scored_row,
                checkpoint=checkpoint,
                queue=self._queues.of_running_loop(self.score_batch_size),
                settings=settings,
                supports=assembly.token_supports,
            )
        self.last_generation = generation
        return assembly.run_result(
            generation,
            scored,
            self.scorers,
            num_responses=num_responses,
            llm=self.llm,
            settings=settings,
            timings=timings,
            checkpoint=checkpoint,
        )

    async def _generate(
        self,
        prompts: Sequence[Any],
        num_responses: int,
        include_original: bool,
        show_progress_bars: bool | None,
        checkpoint: CheckpointArg,
    ) -> GenerationResult:
        """Generation alone (no scoring), kept as :attr:`last_generation`; failures warned."""
        generation = await self._generator().generate(
            prompts,
            num_responses,
            include_original=include_original,
            checkpoint=checkpoint,
            show_progress_bars=self._show(show_progress_bars),
            settings=self.generation,
        )
        self.last_generation = generation
        warn_failures(generation_metadata(generation))
        return generation

    def _assembly(self) -> Assembly:
        """How this call's texts are scored and shown, as the instance is set now."""
        return Assembly(
            self.postprocessor, self.return_responses, self.use_best, self.token_supports
        )

    def _generator(self) -> ResponseGenerator:
        """The generator of :attr:`llm`, made once with the model (the limits of this object's
        calls in flight inside)."""
        if self._response_generator is None:
            raise ConfigurationError(
                "BlackBoxUQ was created without an LLM: pass llm=<a LangChain chat model> to "
                "generate, or score answers you already have with .score(responses, "
                "sampled_responses)"
            )
        return self._response_generator

    def _show(self, override: bool | None) -> bool:
        return self.show_progress_bars if override is None else bool(override)
