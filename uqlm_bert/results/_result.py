"""``UQResult``: the answers, their samples, a confidence per scorer, and what went wrong.

``data`` holds one list per field, all in prompt order: ``prompts``, ``responses``,
``sampled_responses``, one list per scorer (keyed by the scorer's name, e.g. ``bert_score``),
``errors``, ``sample_errors`` and, with the ``bert_score`` scorers, ``supports`` (each answer's
token supports, read by :meth:`UQResult.words`, :meth:`~UQResult.sentences` and
:meth:`~UQResult.refine`). A failed LLM call leaves ``None`` in its slot and a
:class:`~uqlm_bert.generation.CallFailure` at the same place in the errors. A field is named as
the column :meth:`UQResult.to_df` shows it in, in the plural where it holds one value per row
(``responses``: the column ``response``; ``errors``: ``error``), as uqlm names them.

A result has one shape per level, answers (:meth:`UQResult.flag`), sentences
(:meth:`UQResult.sentences`) and words (:meth:`UQResult.words`): tables whose first column is
``prompt_index``, the label of a row (its prompt's index in the run, kept by
:meth:`UQResult.filter`), then for sentences and words ``start`` and ``end`` into the scored
text, with a score column and ``flagged``. Rows are named by their label everywhere
(``answer(prompt_index)``); the label of the row at position ``p`` is ``result.index[p]``. Every
method that applies a threshold takes it the same way, as the keyword ``threshold=``, ``None``
meaning the result's default for that level and scorer (``metadata["thresholds"]``).

Example:
    >>> result = UQResult(
    ...     {"prompts": ["2+2?", "Capital of Peru?"], "responses": ["4", "Lima"],
    ...      "sampled_responses": [["4", "4"], ["Lima", "Cusco"]], "bert_score": [1.0, 0.6]},
    ...     {"scorers": ["bert_score"]},
    ... )
    >>> result.to_df()[["prompt_index", "prompt", "bert_score"]].values.tolist()
    [[0, '2+2?', 1.0], [1, 'Capital of Peru?', 0.6]]
    >>> result.filter(threshold=0.8).data["prompts"]
    ['2+2?']
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from uqlm_bert._exceptions import InputValidationError
from uqlm_bert.results._failures import Failures
from uqlm_bert.results._fields import NOT_SCORES, common_length, from_plain, plain_data, take
from uqlm_bert.results._levels import (
    answer_flags,
    answer_frame,
    answer_table,
    required_threshold,
    score_values,
    sentence_table,
    word_table,
)
from uqlm_bert.results._plotting import ResultPlots

if TYPE_CHECKING:
    from uqlm_bert.evaluation._calibration import ScoreCalibrator

__all__ = ["UQResult"]


class UQResult(ResultPlots):
    """Results of a BlackBoxUQ run: ``data``, ``metadata`` and ways to look at them.

    Args:
        data: lists keyed by field (see the module docstring); all the same length. The plain
            forms of :meth:`to_dict` are read back (token supports and failed calls as dicts).
        metadata: run settings and counts; ``metadata["scorers"]`` names the score fields and
            ``metadata["thresholds"]`` holds each scorer's default thresholds by level.
        index: each row's label, its prompt's index in the run (by default 0, 1, ...; kept by
            :meth:`filter`).

    Example:
        >>> r = UQResult({"prompts": ["q"], "responses": [None], "sampled_responses": [[None]],
        ...               "bert_score": [float("nan")]}, {"scorers": ["bert_score"]})
        >>> r.flag(threshold=0.5)["flagged"].tolist()
        [True]
    """

    def __init__(
        self,
        data: Mapping[str, Any],
        metadata: Mapping[str, Any] | None = None,
        index: Sequence[int] | None = None,
    ) -> None:
        self.data: dict[str, Any] = from_plain(dict(data))
        self.metadata: dict[str, Any] = dict(metadata or {})
        calibrated = set(self.metadata.get("calibration") or {})
        self.metadata.setdefault(
            "scorers", [k for k in self.data if k not in NOT_SCORES and k not in calibrated]
        )
        n = common_length(self.data)
        self._index = list(range(n)) if index is None else [int(i) for i in index]
        if len(self._index) != n:
            raise InputValidationError(f"index has {len(self._index)} items for {n} rows")

    @classmethod
    def from_dict(cls, result: Mapping[str, Any]) -> UQResult:
        """The result :meth:`to_dict` gave (also after a trip through JSON): the same rows,
        labels, scores, supports, failures and thresholds, so every table and view of it is
        the original's.

        Example:
            >>> import json
            >>> r = UQResult({"prompts": ["a", "b"], "bert_score": [0.9, None]}).filter(
            ...     threshold=0.5, keep="below")
            >>> again = UQResult.from_dict(json.loads(json.dumps(r.to_dict())))
            >>> again.index, again.to_df().equals(r.to_df())
            ([1], True)
        """
        if not isinstance(result, Mapping) or "data" not in result:
            raise InputValidationError(
                "from_dict takes what to_dict() gives: a mapping with 'data', 'metadata' and "
                "'index'"
            )
        return cls(result["data"], result.get("metadata"), index=result.get("index"))

    @property
    def scorers(self) -> list[str]:
        """The names of the score fields, in the order the scorers were given."""
        return list(self.metadata["scorers"])

    @property
    def index(self) -> list[int]:
        """Each row's label, ``prompt_index``: its prompt's index in the run (kept by
        :meth:`filter`); the row at position ``p`` is labelled ``index[p]``."""
        return list(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def __repr__(self) -> str:
        failed = self.failures().failed_prompts
        return (
            f"UQResult(rows={len(self)}, scorers={self.scorers}"
            + (f", failed={failed}" if failed else "")
            + ")"
        )

    def to_df(self) -> pd.DataFrame:
        """One row per answer, in the result's order: the answers' table without ``flagged``
        (:meth:`flag` adds it).

        Columns: ``prompt_index`` (the row's label), ``prompt`` (for a prompt given as chat
        messages, the text of its last user message), ``response``, ``sampled_responses``, one
        per scorer and per calibrated probability (:meth:`calibrate`), then, where they apply,
        ``raw_response`` and ``raw_sampled_responses`` (before the postprocessor),
        ``original_response`` and ``best_response_index`` (with ``use_best``: -1 when the
        original answer was kept, else the sample chosen), ``prompt_messages`` (the prompts as
        given, when some are message lists), then ``error`` (why the original response is
        missing, else None), ``sample_errors`` (one entry per sample, None where it arrived),
        ``num_failed_samples`` and, for a generating run, ``samples_drawn`` (the samples that
        arrived: sampling until settled stops a prompt once its answer is settled).

        Example:
            >>> r = UQResult({"prompts": [[("system", "Be brief."), ("human", "2+2?")]],
            ...               "bert_score": [0.9]})
            >>> r.to_df()["prompt"].tolist()
            ['2+2?']
        """
        return answer_frame(self)

    def flag(self, *, threshold: float | None = None, scorer: str | None = None) -> pd.DataFrame:
        """The answers' table: :meth:`to_df` with ``flagged`` right after the scores, True
        where ``scorer``'s confidence is below ``threshold`` or NaN (no sample to judge by).

        Args:
            threshold: the confidence cut-off; None is the scorer's default
                (:meth:`threshold`); ``<NA>`` throughout where it has none.
            scorer: whose confidence (a scorer, or a calibrated probability; default: the
                first scorer).

        Example:
            >>> r = UQResult({"prompts": ["a", "b"], "bert_score": [0.9, 0.2]})
            >>> r.flag(threshold=0.5)["flagged"].tolist()
            [False, True]
        """
        return answer_table(self, threshold, scorer)

    def words(self, *, threshold: float | None = None) -> pd.DataFrame:
        """Where the answers are unsupported: one row per word of every answer, with how well
        the answer's samples support it, from the pass that gave the confidence.

        Columns: ``prompt_index`` (the row's label), ``start`` and ``end`` (character offsets:
        ``word == response[start:end]``, in the text that was scored), ``word``, ``support`` (0
        to 1: the mean over the samples of the word's best match in each), ``flagged`` (a word
        that counts with its support below ``threshold``, by default the result's word
        threshold; ``<NA>`` where there is none, as for another encoder or layer) and
        ``counted`` (False for the prompt's own words and punctuation, which weigh 0 in the
        confidence and are never flagged). See docs/supports.md.

        Raises:
            ConfigurationError: the result holds no supports (no ``bert_score`` scorer,
                ``use_best``, or ``ScoringSettings(supports=False)``).

        Example:
            >>> from uqlm_bert import BlackBoxUQ
            >>> r = BlackBoxUQ(show_progress_bars=False).score(
            ...     ["Lima is in Peru."], [["Lima is the capital of Peru."]])
            >>> r.words()[["word", "flagged", "counted"]].values.tolist()[-2:]
            [['Peru', False, True], ['.', False, False]]
        """
        return word_table(self, threshold)

    def sentences(
        self,
        sentences: Sequence[Sequence[str] | None] | None = None,
        language: str = "en",
        *,
        threshold: float | None = None,
    ) -> pd.DataFrame:
        """Each sentence of every answer, scored from its words' supports (same pass, no model
        call); the lowest are the likely made-up claims.

        Columns: ``prompt_index``, ``start``, ``end`` (``sentence == response[start:end]``),
        ``sentence``, ``support``, ``flagged`` (support below ``threshold``, by default the
        result's sentence threshold; ``<NA>`` where there is none, as for another encoder or
        layer, or where the support is NaN), ``sentence_index`` (its place in the answer) and
        ``method`` (``"support"``). ``BlackBoxUQ.score_sentences`` gives the same table.
        ``sentences`` gives your own split (one list per row); ``language`` the splitter's
        rules. See docs/supports.md.

        Example:
            >>> from uqlm_bert import BlackBoxUQ
            >>> r = BlackBoxUQ(show_progress_bars=False).score(
            ...     ["Lima is in Peru. It has nine moons."], [["Lima is the capital of Peru."]])
            >>> r.sentences()[["sentence", "flagged"]].values.tolist()
            [['Lima is in Peru.', False], ['It has nine moons.', True]]
        """
        return sentence_table(self, sentences, language, threshold)

    def refine(
        self,
        *,
        threshold: float | None = None,
        sentences: Sequence[Sequence[str] | None] | None = None,
        language: str = "en",
    ) -> pd.DataFrame:
        """Each answer with its unsupported sentences removed: :meth:`to_df` with
        ``refined_response``, ``removed_sentences`` and ``refinement``.

        A sentence goes when its support (:meth:`sentences`) is below ``threshold`` (by default
        the result's sentence threshold, chosen for the scorers' default encoder and layer).
        The kept sentences keep their order and the answer's own characters and white space.
        ``removed_sentences`` lists, per answer, what went and why (``start``, ``end``,
        ``sentence``, ``support``, ``sentence_index``, ``reason``); ``refinement`` says what
        happened: ``"unchanged"``, ``"refined"``, ``"all_removed"`` (every sentence went:
        ``refined_response`` is None, never a silent empty string, and a warning says how
        many), ``"no_answer"`` (a failed call: kept as None) or ``"unscored"`` (no sample to
        judge by: kept as it is). The threshold used is in the frame's
        ``attrs["sentence_threshold"]``. See docs/supports.md.

        Raises:
            ConfigurationError: no supports, or no default sentence threshold for these
                settings and none given.

        Example:
            >>> from uqlm_bert import BlackBoxUQ
            >>> r = BlackBoxUQ(show_progress_bars=False).score(
            ...     ["Lima is in Peru. It has nine moons."], [["Lima is the capital of Peru."]])
            >>> refined = r.refine()
            >>> refined["refined_response"].tolist(), refined["refinement"].tolist()
            (['Lima is in Peru.'], ['refined'])
            >>> [s["sentence"] for s in refined["removed_sentences"][0]]
            ['It has nine moons.']
        """
        from uqlm_bert.results._refine import refine_table

        return refine_table(self, threshold, sentences, language)

    def answer(self, prompt_index: int, *, threshold: float | None = None) -> Any:
        """The row labelled ``prompt_index`` (as in every table's first column) as an
        :class:`~uqlm_bert.results.Answer`: shown in Jupyter with its weakly supported words
        marked (below ``threshold``, by default the result's word threshold) and the sentences
        :meth:`refine` removes struck through, or with its error where its call failed;
        ``str()`` gives ``[brackets]`` and ``~~tildes~~``. The row at position ``p`` is
        ``answer(result.index[p])``.

        Raises:
            InputValidationError: no row has that label.

        Example:
            >>> r = UQResult({"prompts": ["a", "b"], "responses": ["Lima", "Quito"],
            ...               "bert_score": [0.9, 0.3]}).filter(threshold=0.5, keep="below")
            >>> r.answer(1).response, r.answer(r.index[0]).response
            ('Quito', 'Quito')
        """
        from uqlm_bert.results._answers import answer_of

        return answer_of(self, prompt_index, threshold)

    def _repr_html_(self) -> str:
        from uqlm_bert.results._answers import result_html

        return result_html(self)

    def failures(self) -> Failures:
        """The failed LLM calls of these rows, counted and grouped by kind.

        Returns:
            A :class:`~uqlm_bert.results.Failures`: the answers and samples that failed, the
            prompts with a failure and those left without a confidence, and per kind how many
            calls, in which rows (their labels, ``prompt_index``) and the first message.

        Example:
            >>> from uqlm_bert.generation import CallFailure
            >>> down = CallFailure("server", "HTTP 503")
            >>> r = UQResult({"prompts": ["a", "b"], "responses": ["x", None],
            ...               "sampled_responses": [["x"], [None]], "bert_score": [1.0, 0.0],
            ...               "errors": [None, down], "sample_errors": [[None], [down]]})
            >>> f = r.failures()
            >>> f.failed_prompts, [(g.kind, g.count, g.prompts) for g in f.groups]
            (1, [('server', 2, (1,))])
        """
        n = len(self)
        response_errors = self.data.get("errors") or [None] * n
        sample_errors = self.data.get("sample_errors") or [[] for _ in range(n)]
        return Failures.of(response_errors, sample_errors, self._index)

    def filter(
        self, *, threshold: float | None = None, scorer: str | None = None, keep: str = "above"
    ) -> UQResult:
        """The rows on one side of a confidence threshold, as a new result (labels kept).

        Args:
            threshold: the confidence cut-off; ``None`` is the scorer's default threshold
                (:meth:`threshold`).
            scorer: whose confidence (a scorer, or a calibrated probability; default: the
                first scorer).
            keep: ``"above"`` keeps rows with confidence >= ``threshold`` (those :meth:`flag`
                does not flag); ``"below"`` keeps the others: confidence < ``threshold`` or
                NaN (no samples to judge by). The two sides together are the whole result.

        Raises:
            ConfigurationError: no threshold given, and no default for this scorer.

        Example:
            >>> r = UQResult({"prompts": ["a", "b"], "bert_score": [0.9, 0.2]})
            >>> r.filter(threshold=0.5, keep="below").data["prompts"]
            ['b']
        """
        if keep not in ("above", "below"):
            raise InputValidationError(f"keep must be 'above' or 'below', got {keep!r}")
        cut = required_threshold(self, "answer", threshold, scorer)
        name, values = score_values(self, scorer)
        low = answer_flags(values, cut)
        rows = [i for i, is_low in enumerate(low.tolist()) if is_low == (keep == "below")]
        data = {k: take(v, rows) for k, v in self.data.items()}
        metadata = copy.deepcopy(self.metadata)
        metadata["filter"] = {"threshold": cut, "scorer": name, "keep": keep}
        return type(self)(data, metadata, index=[self._index[i] for i in rows])

    def threshold(self, scorer: str | None = None, *, level: str = "answer") -> float:
        """The default threshold of this result at ``level``: of ``scorer``'s confidence
        (``"answer"``; default: the first scorer), or of the supports (``"sentence"``:
        sentences below it are flagged and removed by :meth:`refine`; ``"word"``: words below
        it are flagged and marked), as ``metadata["thresholds"]`` holds them per scorer.

        Each holds for the settings it was chosen at (the answers' for ``bert_score`` at its
        default settings, the supports' for the default encoder and layer), by the rule
        written at its constant.

        Raises:
            ConfigurationError: there is no default for these settings: pass one, chosen on
                your own labelled answers (or sentences) with
                :func:`uqlm_bert.evaluation.choose_threshold`.
            InputValidationError: an unknown ``level``.

        Example:
            >>> r = UQResult({"prompts": ["a"], "bert_score": [0.9]},
            ...              {"thresholds": {"bert_score": {"answer": 0.72, "sentence": 0.52,
            ...                                             "word": 0.59}}})
            >>> r.threshold(), r.threshold(level="sentence")
            (0.72, 0.52)
        """
        return required_threshold(self, level, None, scorer)

    def to_dict(self) -> dict[str, Any]:
        """The result as plain data: ``{"data": ..., "metadata": ..., "index": ...}``, ready
        for ``json.dump`` (a missing score as None, a failed call and a token support as their
        fields); :meth:`from_dict` gives the result back, and so does
        ``UQResult(**result.to_dict())``.

        Example:
            >>> UQResult({"prompts": ["q"], "bert_score": [0.5]}).to_dict()["data"]
            {'prompts': ['q'], 'bert_score': [0.5]}
        """
        return {
            "data": plain_data(self.data),
            "metadata": copy.deepcopy(self.metadata),
            "index": list(self._index),
        }

    def calibrate(self, calibrator: ScoreCalibrator, scorer: str | None = None) -> UQResult:
        """A new result with each row's probability of being correct, from a fitted calibrator.

        The probability is a column of the result, ``<scorer>_probability`` (float64, NaN where
        the score is NaN), not a scorer: :meth:`to_df` shows it after the scores, and
        :meth:`flag`, :meth:`filter` and the plots take it as ``scorer=``, so a pipeline can
        keep the answers whose probability is at least, say, 0.8. ``metadata["calibration"]``
        records, per probability column, the scorer it came from and the calibrator's method.
        This result is left unchanged; calibrating the same scorer again replaces the column.

        Args:
            calibrator: a fitted :class:`~uqlm_bert.ScoreCalibrator` (fitted on this scorer's
                scores, with the same settings).
            scorer: whose confidence to calibrate (default: the first scorer).

        Raises:
            InputValidationError: no such scorer, or ``calibrator`` is not a calibrator.
            NotFittedError: the calibrator has not been fitted.

        Example:
            >>> from uqlm_bert import ScoreCalibrator
            >>> calibrator = ScoreCalibrator().fit([0.25, 0.5, 0.75], [0, 1, 1])
            >>> r = UQResult({"prompts": ["a", "b", "c"], "bert_score": [0.375, None, 0.9]})
            >>> calibrated = r.calibrate(calibrator)
            >>> calibrated.to_df()["bert_score_probability"].tolist(), calibrated.scorers
            ([0.5, nan, 1.0], ['bert_score'])
            >>> calibrated.filter(threshold=0.8, scorer="bert_score_probability").data["prompts"]
            ['c']
        """
        if not callable(getattr(calibrator, "predict", None)):
            raise InputValidationError(
                "calibrator must be a fitted uqlm_bert.ScoreCalibrator, got "
                f"{type(calibrator).__name__}"
            )
        name = self.scorers[0] if scorer is None and self.scorers else scorer
        if name not in self.scorers:
            raise InputValidationError(
                f"no scores for scorer {name!r}; this result has: "
                f"{', '.join(self.scorers) or 'none'}"
            )
        scores = np.asarray(self.data[name], dtype=np.float64)  # None becomes NaN
        column = f"{name}_probability"
        data = {k: list(v) if isinstance(v, list) else v for k, v in self.data.items()}
        data[column] = [float(v) for v in calibrator.predict(scores)]
        metadata = copy.deepcopy(self.metadata)
        metadata.setdefault("calibration", {})[column] = {
            "scorer": name,
            "method": getattr(calibrator, "method", type(calibrator).__name__),
        }
        return type(self)(data, metadata, index=self._index)

    def _scores(self, scorer: str | None) -> tuple[str, np.ndarray]:
        return score_values(self, scorer)
