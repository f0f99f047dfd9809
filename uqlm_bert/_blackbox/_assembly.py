"""From a run's texts and scores to its result: what the scorers see, and what the result shows.

``BlackBoxUQ``'s ``postprocessor`` turns each answer and sample into the text that is scored;
``return_responses`` says which texts the result holds; with ``use_best`` the answer it shows is
the candidate that agrees most with the others. :class:`Assembly` holds those three, as they are
at a call, and builds what every result holds from them: the texts, the scores, the failures,
and the metadata that says how it was scored, the scorers' thresholds included
(``metadata["thresholds"]``). :func:`sentence_result` gives the sentence table of
``BlackBoxUQ.score_sentences``.

Example:
    >>> from uqlm_bert._inputs import ScoringInputs
    >>> assembly = Assembly(postprocessor=str.upper, return_responses="all")
    >>> raw = ScoringInputs(["paris"], [["lyon", None]])
    >>> processed = assembly.scored_texts(raw)
    >>> processed.responses, processed.samples
    (['PARIS'], [['LYON', None]])
    >>> sorted(assembly.fields(raw, processed, best=None))
    ['raw_responses', 'raw_sampled_responses', 'responses', 'sampled_responses']
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from uqlm_bert._blackbox._pipeline import Scored, score_rows
from uqlm_bert._exceptions import ConfigurationError
from uqlm_bert._inputs import ScoringInputs
from uqlm_bert.results._failures import Failures
from uqlm_bert.results._fields import SUPPORTS
from uqlm_bert.results._identical_samples import identical_share
from uqlm_bert.results._result import UQResult
from uqlm_bert.scorers._base import Scorer
from uqlm_bert.scorers._best import ORIGINAL
from uqlm_bert.scorers._thresholds import first_threshold, thresholds_of

if TYPE_CHECKING:
    from uqlm_bert.bertscore._engine import BERTScorer
    from uqlm_bert.generation._records import GenerationResult
    from uqlm_bert.generation._settings import GenerationSettings

__all__ = ["Assembly", "RETURN_RESPONSES", "bert_engine", "generation_metadata"]
__all__ += ["sampling_metadata", "sentence_result", "sentence_threshold"]

#: The values of ``return_responses``.
RETURN_RESPONSES = ("all", "raw", "postprocessed")


@dataclass(frozen=True)
class Assembly:
    """How a call's texts are scored and shown (checked at construction).

    Attributes:
        postprocessor: a function from text to text applied to every answer and sample before
            scoring, or None.
        return_responses: with a postprocessor, the texts a result holds: ``"all"`` (the
            postprocessed ones, and the raw ones in ``raw_responses`` and
            ``raw_sampled_responses``), ``"raw"`` or ``"postprocessed"``.
        use_best: the answer shown is the candidate chosen by the scorers (see
            :mod:`uqlm_bert.scorers._best`); the original is kept in ``original_responses``.
        supports: each answer's token supports are collected in the scoring pass and
            kept in the result (``words()``, ``sentences()``, ``refine()``).
        threshold: the first scorer's answer threshold, instead of its default
            (``ScoringSettings(threshold=...)``), in the result's table of thresholds.
    """

    postprocessor: Callable[[str], str] | None = None
    return_responses: str = "all"
    use_best: bool = False
    supports: bool = True
    threshold: float | None = None

    def __post_init__(self) -> None:
        if self.return_responses not in RETURN_RESPONSES:
            raise ConfigurationError(
                f"return_responses must be one of {', '.join(RETURN_RESPONSES)}, got "
                f"{self.return_responses!r}"
            )
        if self.postprocessor is not None and not callable(self.postprocessor):
            raise ConfigurationError(
                f"postprocessor must be a function from text to text, got "
                f"{type(self.postprocessor).__name__}"
            )

    def scored_texts(self, raw: ScoringInputs) -> ScoringInputs:
        """The texts the scorers see: the answers as given, or as ``postprocessor`` returns them.

        Raises:
            ConfigurationError: the postprocessor failed on a text or returned no string (the
                message names the text's place).
        """
        if self.postprocessor is None:
            return raw
        rows = [
            self.scored_row(i, r, s)
            for i, (r, s) in enumerate(zip(raw.responses, raw.samples, strict=True))
        ]
        return ScoringInputs([r for r, _ in rows], [s for _, s in rows], raw.prompts)

    def scored_row(
        self, index: int, response: str | None, samples: Sequence[str | None], start: int = 0
    ) -> tuple[str | None, list[str | None]]:
        """What the scorers see of prompt ``index``'s texts (see :meth:`scored_texts`): the
        scoring pipeline's hook, run once per text as the prompt (or a round of its samples)
        completes; ``samples`` are the prompt's from slot ``start`` on.

        Raises:
            ConfigurationError: the postprocessor failed on a text or returned no string (the
                message names the text's place).
        """
        fn = self.postprocessor
        if fn is None:
            return response, list(samples)

        def apply(text: str | None, where: str) -> str | None:
            if text is None:
                return None
            try:
                out = fn(text)
            except Exception as exc:
                raise ConfigurationError(f"postprocessor failed on {where}: {exc!r}") from exc
            if not isinstance(out, str):
                raise ConfigurationError(
                    f"postprocessor returned a {type(out).__name__} for {where}; it must "
                    "return a string"
                )
            return out

        return apply(response, f"responses[{index}]"), [
            apply(x, f"sampled_responses[{index}][{j}]") for j, x in enumerate(samples, start)
        ]

    def fields(
        self, raw: ScoringInputs, processed: ScoringInputs, best: list[int] | None
    ) -> dict[str, Any]:
        """The answer fields of a result: what was generated, postprocessed and chosen."""
        postprocessed = self.postprocessor is not None
        shown = raw if postprocessed and self.return_responses == "raw" else processed
        fields: dict[str, Any] = {
            "responses": list(shown.responses),
            "sampled_responses": [list(s) for s in shown.samples],
        }
        if postprocessed and self.return_responses == "all":
            fields["raw_responses"] = list(raw.responses)
            fields["raw_sampled_responses"] = [list(s) for s in raw.samples]
        if best is not None:
            fields["original_responses"] = fields["responses"]
            fields["responses"] = [
                orig if k == ORIGINAL else shown.samples[i][k]
                for i, (k, orig) in enumerate(zip(best, shown.responses, strict=True))
            ]
            fields["best_response_index"] = list(best)
        return fields

    def result(
        self,
        prompts: list[Any],
        raw: ScoringInputs,
        processed: ScoringInputs,
        scored: Scored,
        scorers: Sequence[Scorer],
        metadata: dict[str, Any],
        errors: tuple[Sequence[Any], Sequence[Sequence[Any]]] | None = None,
    ) -> UQResult:
        """A result: prompts, answer fields, one float list per scorer, the failures beside each
        answer and sample (``errors``: none by default), and ``metadata`` with how it was
        scored."""
        data: dict[str, Any] = {"prompts": prompts}
        data.update(self.fields(raw, processed, scored.best))
        data.update(
            {
                name: [float(v) for v in np.asarray(values, dtype=np.float64)]
                for name, values in scored.scores.items()
            }
        )
        if errors is None:
            errors = ([None] * len(raw), [[None] * len(s) for s in raw.samples])
        data["errors"] = list(errors[0])
        data["sample_errors"] = [list(e) for e in errors[1]]
        if scored.supports is not None:
            data[SUPPORTS] = list(scored.supports)
        return UQResult(data, {**metadata, **self.metadata(scorers)})

    def score_result(
        self,
        scorers: Sequence[Scorer],
        inputs: ScoringInputs,
        prompts: Sequence[Any] | None,
        show: bool,
    ) -> UQResult:
        """The result of scoring answers one already has (``BlackBoxUQ.score``): ``inputs``
        postprocessed once and scored, with how long that took."""
        started = time.perf_counter()
        processed = self.scored_texts(inputs)
        scored = score_rows(list(scorers), processed, self.use_best, show, self.supports)
        elapsed = time.perf_counter() - started
        n = len(inputs)
        metadata = {
            "num_prompts": n,
            "num_responses": max((len(s) for s in inputs.samples), default=0),
            "timings": {"scoring_s": elapsed, "total_s": elapsed},
        }
        shown = list(prompts) if prompts is not None else [None] * n
        return self.result(shown, inputs, processed, scored, scorers, metadata)

    def run_result(
        self,
        generation: GenerationResult,
        scored: Scored,
        scorers: Sequence[Scorer],
        *,
        num_responses: int,
        llm: Any,
        settings: GenerationSettings,
        timings: dict[str, float],
        checkpoint: Any = None,
    ) -> UQResult:
        """The result of a generating run: :meth:`result`, with what the run says of itself
        (the LLM and its settings, the calls, the failures, the timings, the checkpoint), and
        the texts the scorers saw (``scored.texts``, postprocessed once, as they were
        scored)."""
        from uqlm_bert.generation._clients import llm_description, llm_temperature

        raw = ScoringInputs(
            list(generation.responses), [list(s) for s in generation.sampled_responses]
        )
        first = np.asarray(next(iter(scored.scores.values())), dtype=np.float64)
        path = getattr(checkpoint, "path", checkpoint)
        metadata = {
            "num_prompts": len(generation.prompts),
            "num_responses": num_responses,
            "temperature": llm_temperature(llm),
            "sampling_temperature": settings.sampling_temperature,
            "llm": llm_description(llm),
            "generation": settings.describe(),
            **generation_metadata(generation),
            "sampling": sampling_metadata(generation, num_responses),
            "timings": timings,
            "checkpoint": None if path is None else os.fspath(path),
        }
        metadata["failures"]["unscored_prompts"] = int(np.isnan(first).sum())
        errors = (generation.response_errors, generation.sample_errors)
        identical, judged = identical_share(raw.samples)
        metadata["identical_samples"] = {"prompts": identical, "judged": judged}
        processed = scored.texts if scored.texts is not None else self.scored_texts(raw)
        return self.result(
            list(generation.prompts), raw, processed, scored, scorers, metadata, errors
        )

    def metadata(self, scorers: Sequence[Scorer]) -> dict[str, Any]:
        """What every result says about how it was scored."""
        meta: dict[str, Any] = {
            "scorers": [s.name for s in scorers],
            "thresholds": thresholds_of(scorers, self.threshold),
        }
        dtypes = {s.name: s.model_dtype for s in scorers if hasattr(s, "model_dtype")}
        if dtypes:  # the dtype each model ran in ("auto" resolves by device and model)
            meta["model_dtypes"] = dtypes
        if self.use_best:
            meta["use_best"] = True
        if self.postprocessor is not None:
            meta["postprocessor"] = getattr(
                self.postprocessor, "__name__", repr(self.postprocessor)
            )
            meta["return_responses"] = self.return_responses
        return meta


def generation_metadata(generation: GenerationResult) -> dict[str, Any]:
    """What a run's metadata says of its calls: ``calls`` (the call counts) and ``failures``
    (the failed slots, see :class:`~uqlm_bert.results._failures.Failures`); the one place both
    are built, for a result and for the warnings of generation alone."""
    failures = Failures.of(generation.response_errors, generation.sample_errors)
    return {"calls": generation.stats.as_dict(), "failures": failures.as_metadata()}


def sampling_metadata(generation: GenerationResult, num_responses: int) -> dict[str, Any]:
    """How a run sampled, and what it cost against a fixed run: the rule (``"fixed"``, or
    ``"until_settled"`` with its scorer, threshold and constants), ``samples_drawn`` (samples
    that arrived) against ``samples_fixed`` (every prompt's ``num_responses``), and ``calls``
    (HTTP calls made, retries included) against ``calls_fixed`` (the calls of a fixed run in
    which none fails: per prompt its answer and its samples, in calls of as many as ``n`` was
    seen to take).

    Example:
        >>> from uqlm_bert.generation._records import GenerationResult
        >>> g = GenerationResult.empty(["q"], 3)
        >>> g.sampled_responses = [["a", None]]
        >>> g.stats.attempts = 3
        >>> sampling_metadata(g, 3)
        {'rule': 'fixed', 'samples_drawn': 1, 'samples_fixed': 3, 'calls': 3, 'calls_fixed': 4}
    """
    rule = generation.run.get("sampling", "fixed")
    stats = generation.stats
    per_call = stats.max_choices if stats.n_calls else 1
    n = len(generation.prompts)
    return {
        **({"rule": rule} if isinstance(rule, str) else rule),
        "samples_drawn": sum(s is not None for row in generation.sampled_responses for s in row),
        "samples_fixed": n * num_responses,
        "calls": stats.attempts,
        "calls_fixed": n * (1 + -(-num_responses // max(per_call, 1))),
    }


def sentence_threshold(scorers: Sequence[Scorer]) -> float | None:
    """The sentence threshold of ``BlackBoxUQ.score_sentences``: that of the ``bert_score``
    scorers among ``scorers`` (None for another encoder or layer than it was chosen for), the
    default where there is none (:func:`bert_engine` builds one at the defaults)."""
    from uqlm_bert.scorers._bertscore import SUPPORT_THRESHOLDS, BERTScoreConsistency

    if not any(isinstance(s, BERTScoreConsistency) for s in scorers):
        return SUPPORT_THRESHOLDS["sentence"]
    found = first_threshold(thresholds_of(scorers), "sentence")
    return None if found is None else found[1]


def bert_engine(scorers: Sequence[Scorer], build: bool) -> BERTScorer | None:
    """The engine of a ``bert_score`` scorer among ``scorers``, else (``build``) a new one with
    the scorers' default BERTScore settings (none of the BERTScore settings was accepted then).

    Example:
        >>> from uqlm_bert.scorers._lexical import ExactMatchScorer
        >>> bert_engine([ExactMatchScorer()], build=False) is None
        True
    """
    from uqlm_bert.scorers._bertscore import BERTScoreConsistency

    for scorer in scorers:
        if isinstance(scorer, BERTScoreConsistency):
            return scorer.engine
    if not build:
        return None
    from uqlm_bert.bertscore._engine import BERTScorer
    from uqlm_bert.bertscore._settings import BERTScoreSettings

    return BERTScorer.from_settings(BERTScoreSettings.for_scorers())


def sentence_result(
    engine: BERTScorer,
    responses: Sequence[str | None],
    sampled_responses: Sequence[Sequence[str | None]],
    sentences: Sequence[Sequence[str] | None] | None,
    show: bool,
    metric: str | None,
    language: str,
    method: str | None = None,
    threshold: float | None = None,
) -> pd.DataFrame:
    """The sentence table of ``BlackBoxUQ.score_sentences``: with ``engine``, the columns of
    ``UQResult.sentences()``; ``flagged`` by the sentence ``threshold`` for the ``"support"``
    method (``<NA>`` without one, and for ``"reembed"``, whose scores are of another kind)."""
    from uqlm_bert.results._levels import support_flags, with_flags
    from uqlm_bert.scorers._sentences import score_sentences

    table = score_sentences(
        responses,
        sampled_responses,
        engine,
        sentences=sentences,
        show_progress_bars=show,
        metric=metric,
        language=language,
        method=method,
    )
    support = method in (None, "support") and metric in (None, "precision")
    cut = threshold if support else None
    table = with_flags(table, support_flags(table["support"], cut))
    table.attrs.update(
        {"method": "support" if support else "reembed", "metric": metric, "threshold": cut}
    )
    return table
