"""``BlackBoxUQ``: ask an LLM, sample it again, and score the answer against the samples.

For each prompt the LLM gives one answer (at its own temperature) and ``num_responses`` samples
(at ``sampling_temperature``). Each scorer turns (answer, samples) into a confidence; the default,
``bert_score``, is the mean BERTScore F1 (the prompt's tokens and punctuation weigh 0) of the
answer (candidate) against each sample (reference).

Scoring overlaps generation: prompts are scored in batches as they complete, while the event
loop keeps the LLM calls going (see :mod:`uqlm_bert._blackbox._pipeline`).

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

from uqlm_bert._blackbox._assembly import (
    Assembly,
    bert_engine,
    generation_metadata,
    sentence_result,
    sentence_threshold,
)
from uqlm_bert._blackbox._fields import SettingsField
from uqlm_bert._blackbox._misplaced import refuses_misplaced_settings
from uqlm_bert._blackbox._pipeline import generate_and_score
from uqlm_bert._blackbox._pool import scoring_place
from uqlm_bert._blackbox._queue import ScoringQueues
from uqlm_bert._blackbox._scoring import ScoringSettings
from uqlm_bert._blackbox._uqlm_face import sentence_transformer_setting, uqlm_arguments
from uqlm_bert._blackbox._verbose import verbose_logging
from uqlm_bert._checks import NOT_GIVEN, NotGiven
from uqlm_bert._exceptions import ConfigurationError
from uqlm_bert._inputs import scoring_lists
from uqlm_bert.bertscore._settings import BERTScoreSettings
from uqlm_bert.generation._event_loop import EventLoopThread
from uqlm_bert.generation._settings import (
    NUM_RESPONSES,
    GenerationSettings,
    checked_generation,
    generation_settings,
)
from uqlm_bert.results._failures import warn_failures
from uqlm_bert.results._result import UQResult
from uqlm_bert.scorers._base import Scorer
from uqlm_bert.scorers._registry import ScorerPlan, scorer_items

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

    The first 17 arguments are uqlm's ``BlackBoxUQ``'s, in its order, so code written for uqlm
    runs as it is; the others are keyword-only. Everything else is set through three settings
    objects: ``generation`` (:class:`~uqlm_bert.GenerationSettings`: retries, timeouts, the rate
    window, ...), ``bertscore`` (:class:`~uqlm_bert.BERTScoreSettings`: model, layer, idf,
    dtype, long texts, ...) and ``scoring`` (:class:`~uqlm_bert.ScoringSettings`: where to
    score, batch size, supports). A default lives in its settings object only (``NOT_GIVEN``
    below: left out); a setting given as a flat argument (``dtype="float32"``) raises a
    :class:`~uqlm_bert.ConfigurationError` that names its settings object.

    Args:
        llm: a LangChain chat model (``BaseChatModel``), e.g. ``ChatOpenAI``. It is never
            modified: samples come from a copy at ``sampling_temperature``, and the client's own
            retries are switched off on the copies so every HTTP call is rate-limited and
            counted here. ``None`` when only scoring answers you already have.
        scorers: scorer names (default ``["bert_score"]``) or :class:`~uqlm_bert.scorers.Scorer`
            instances; an unknown name raises an error listing the known ones.
        device: where the scorers' models run (``None``: cuda, then mps, then cpu).
        use_best: return as each prompt's answer the candidate (original answer or sample) that
            agrees most with the others, scored against them; the result says which was chosen
            (``best_response_index``: -1 the original) and keeps the original in
            ``original_responses``. Off by default.
        nli_model_name, nli_batch_size: uqlm's NLI model, which none of these scorers uses:
            accepted, and they change nothing (as in uqlm with these scorers).
        sentence_transformer: the ``cosine_sim`` scorer's model (default: the embedded
            all-MiniLM-L6-v2).
        postprocessor: a function applied to every answer and sample before scoring (to strip
            formatting, say); the texts it returns are what is scored.
        structured_response, output_extractor: uqlm's structured output: refused, with what to
            use instead (the scorers compare texts).
        system_prompt: a system message put before each prompt that has none (default: none).
        max_calls_per_min: at most this many HTTP calls, retries included, may arrive at the
            provider in any window of the generation settings' ``rate_limit_period`` (60 s);
            ``None`` for no limit.
        sampling_temperature: the temperature of the samples (1.0).
        return_responses: with a postprocessor, which texts the result holds: ``"all"`` (the
            postprocessed ones, and the raw ones in ``raw_responses`` and
            ``raw_sampled_responses``), ``"raw"`` or ``"postprocessed"``.
        use_n_param: ask for a prompt's samples in one call with the provider's ``n``
            parameter: ``"auto"`` (default) for clients known to accept it (``ChatOpenAI``,
            ``AzureChatOpenAI``), ``True`` for any client, ``False`` for one call per sample.
        max_length: the most tokens the models read at once (default: the model's window);
            uqlm's default, 2000 (characters for its NLI model), means the default here.
        verbose: progress bars on, and the package's INFO log lines (retries, resumes) on
            stderr during each call.
        max_concurrency: the most LLM calls in flight at once (a hard cap, 1,000 by default, the
            OpenAI client's connection limit; ``None`` for none). Within it the number in
            flight adapts to the provider's push-back, and what is learned is kept for the next
            run against the same provider and model.
        show_progress_bars: progress bars for generation and scoring (terminal and notebook);
            each call can override it.
        scoring: a :class:`~uqlm_bert.ScoringSettings`, or where to score: ``"local"`` (this
            process, by default), ``"ray"`` or a :class:`~uqlm_bert.distributed.RayScoring` (a
            pool of Ray actors; :meth:`close` stops it).
        generation: the generation settings whole, instead of its flat arguments above
            (``system_prompt``, ``max_calls_per_min``, ``max_concurrency``,
            ``sampling_temperature``, ``use_n_param``: giving one beside it is an error).
        bertscore: the BERTScore settings of the ``bert_score`` scorers whole (``device`` and
            ``max_length`` then inside it); what it leaves unset takes the scorers' defaults
            (fixed idf weights, the fastest safe dtype, long texts read whole in windows).

    The generation settings are kept as one frozen :attr:`generation` object, read at every
    call: changing one (``uq.sampling_temperature = 0.3``) changes what the next call does and
    what its result reports. The scorers are built once; their settings are read-only.

    Example:
        >>> from langchain_core.language_models.fake_chat_models import FakeListChatModel
        >>> llm = FakeListChatModel(responses=["Paris is the capital.", "It is Paris."])
        >>> uq = BlackBoxUQ(llm=llm, scorers=["bert_score"], show_progress_bars=False)
        >>> df = uq.generate_and_score_sync(["Capital of France?"], num_responses=3).to_df()
        >>> list(df.columns[:5])
        ['prompt_index', 'prompt', 'response', 'sampled_responses', 'bert_score']
        >>> bool(0.5 < df["bert_score"][0] < 1.0)
        True
    """

    @refuses_misplaced_settings
    def __init__(
        self,
        llm: Any = None,
        scorers: Sequence[str | Scorer] | None = None,
        device: str | None = None,
        use_best: bool = False,
        nli_model_name: str | None = None,
        sentence_transformer: str | None = None,
        postprocessor: Callable[[str], str] | None = None,
        structured_response: Any = None,
        output_extractor: Callable[[Any], str] | None = None,
        system_prompt: str | None | NotGiven = NOT_GIVEN,
        max_calls_per_min: int | None | NotGiven = NOT_GIVEN,
        sampling_temperature: float | NotGiven = NOT_GIVEN,
        return_responses: str = "all",
        use_n_param: bool | str | NotGiven = NOT_GIVEN,
        max_length: int | None = None,
        verbose: bool = False,
        nli_batch_size: int | None = None,
        *,
        max_concurrency: int | None | NotGiven = NOT_GIVEN,
        show_progress_bars: bool = True,
        scoring: str | RayScoring | ScoringSettings = "local",
        generation: GenerationSettings | None = None,
        bertscore: BERTScoreSettings | None = None,
    ) -> None:
        max_length = uqlm_arguments(
            nli_model_name, nli_batch_size, structured_response, output_extractor, max_length
        )
        self._generation = generation_settings(
            generation,
            sampling_temperature=sampling_temperature,
            system_prompt=system_prompt,
            max_concurrency=max_concurrency,
            max_calls_per_min=max_calls_per_min,
            use_n_param=use_n_param,
        )
        self._scoring = ScoringSettings.of(scoring)
        self._limits: SharedLimits | None = None  # shared by the calls in flight
        self.llm = llm  # checked once, by the generator it gets
        self.show_progress_bars = show_progress_bars
        items = scorer_items(scorers)  # the one reading of the scorers, for everything below
        plan = ScorerPlan.of_items(
            items,
            self._scoring.scorer_settings,
            device=device,
            max_length=max_length,
            bertscore=bertscore,
            **sentence_transformer_setting(sentence_transformer, items),
        )
        self.scorers: list[Scorer] = plan.build()
        # shared by the calls in flight, as the limits are (docs/black_box.md, "In an async app")
        self._queues = ScoringQueues(scoring_place(self._scoring.where, plan))
        weakref.finalize(self, self._queues.close)
        self.use_best = bool(use_best)
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
    def scoring(self) -> ScoringSettings:
        """How and where the answers are scored, and what the results keep (read-only)."""
        return self._scoring

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

    @property
    def bertscore_settings(self) -> BERTScoreSettings | None:
        """The BERTScore settings of the ``bert_score`` scorers (read-only), or None without."""
        engine = bert_engine(self.scorers, build=False)
        return None if engine is None else engine.settings

    async def generate_and_score(
        self,
        prompts: Sequence[Any],
        num_responses: int = NUM_RESPONSES,
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
        num_responses: int = NUM_RESPONSES,
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
        num_responses: int = NUM_RESPONSES,
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
        pass over the whole answers (see ``score_sentences``;
        it ranks the made-up sentences best in our measurements, docs/supports.md);
        ``method="reembed"`` scores each sentence on its own against each sample's sentences,
        as SelfCheckGPT's BERTScore does. With this instance's BERTScore settings either way.

        Args:
            responses: one answer per prompt (``None`` for a failed call).
            sampled_responses: one list of samples per prompt (``None`` samples are skipped).
            sentences: your own split, one list of sentences per response; default: split here
                with ``split_sentences`` (no download needed).
            show_progress_bars: override the instance's setting for this call.
            metric: with ``method="reembed"``: ``"f1"``, ``"precision"`` or ``"recall"``;
                naming one without a method means ``"reembed"``.
            language: the texts' language, for sentence splitting.
            method: ``"support"`` (the default) or ``"reembed"``.

        Returns:
            The sentence table, one row per sentence: ``prompt_index`` (the response's
            position), ``start``, ``end``, ``sentence``, ``support``, ``flagged`` (below the
            sentence threshold, for ``"support"`` at the default encoder and layer; ``<NA>``
            otherwise), ``sentence_index`` and ``method``: the columns of
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
            sentence_threshold(self.scorers),
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
                max_batch=self._scoring.batch_size,
                show=self._show(show_progress_bars),
                use_best=self.use_best,
                postprocess=assembly.scored_row,
                checkpoint=checkpoint,
                queue=self._queues.of_running_loop(self._scoring.batch_size),
                settings=settings,
                supports=assembly.supports,
                threshold=assembly.threshold,
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
            self.postprocessor,
            self.return_responses,
            self.use_best,
            self._scoring.supports,
            self._scoring.threshold,
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
