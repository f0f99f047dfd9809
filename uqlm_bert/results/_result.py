"""``UQResult``: the answers, their samples, a confidence per scorer, and what went wrong.

``data`` holds one list per field, all in prompt order: ``prompts``, ``responses``,
``sampled_responses``, one list per scorer (keyed by the scorer's name, e.g. ``bert_score``),
``errors``, ``sample_errors`` and, with the ``bert_score`` scorers, ``supports`` (each answer's
token supports, read by :meth:`UQResult.words`, :meth:`~UQResult.sentences` and
:meth:`~UQResult.refine`). A failed LLM call leaves ``None`` in its slot and a
:class:`~uqlm_bert.generation._records.CallFailure` at the same place in the errors. A field is
named as the column :meth:`UQResult.to_df` shows it in (:data:`FIELD_COLUMNS`): in the plural
where it holds one value per row (``responses``: the column ``response``; ``errors``:
``error``), as uqlm names them.

A result has one shape per level, each keyed by ``prompt_index``, the label of a row (its
prompt's index in the run, kept by :meth:`UQResult.filter`): answers (:meth:`UQResult.to_df`,
indexed by it), words (:meth:`UQResult.words`) and sentences (:meth:`UQResult.sentences`). A
method that takes a row takes its label (``answer(prompt_index)``), or its place by name
(``answer(position=0)``).

Example:
    >>> result = UQResult(
    ...     {"prompts": ["2+2?", "Capital of Peru?"], "responses": ["4", "Lima"],
    ...      "sampled_responses": [["4", "4"], ["Lima", "Cusco"]], "bert_score": [1.0, 0.6]},
    ...     {"scorers": ["bert_score"]},
    ... )
    >>> result.to_df()[["prompt", "bert_score"]].values.tolist()
    [['2+2?', 1.0], ['Capital of Peru?', 0.6]]
    >>> result.filter(0.8).data["prompts"]
    ['2+2?']
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from uqlm_bert._exceptions import ConfigurationError, InputValidationError
from uqlm_bert._warn import warn_user
from uqlm_bert.results._failures import Failures
from uqlm_bert.results._fields import (
    EXTRA_FIELDS,
    FIELD_COLUMNS,
    NOT_SCORES,
    SUPPORTS,
    column_dtype,
    common_length,
    errors_as_text,
    shown_prompt,
    take,
)
from uqlm_bert.results._plotting import ResultPlots

if TYPE_CHECKING:
    from uqlm_bert.evaluation._calibration import ScoreCalibrator

__all__ = ["UQResult"]

#: The thresholds a result has: the answers' (per scorer), and the supports' (per level).
THRESHOLD_LEVELS = ("answer", "word", "sentence")


class UQResult(ResultPlots):
    """Results of a BlackBoxUQ run: ``data``, ``metadata`` and ways to look at them.

    Args:
        data: lists keyed by field (see the module docstring); all the same length.
        metadata: run settings and counts; ``metadata["scorers"]`` names the score fields.
        index: each row's label, its prompt's index in the run (by default 0, 1, ...; kept by
            :meth:`filter`).

    Example:
        >>> r = UQResult({"prompts": ["q"], "responses": [None], "sampled_responses": [[None]],
        ...               "bert_score": [float("nan")]}, {"scorers": ["bert_score"]})
        >>> r.flag(0.5)["flagged"].tolist()
        [True]
    """

    def __init__(
        self,
        data: dict[str, Any],
        metadata: dict[str, Any] | None = None,
        index: Sequence[int] | None = None,
    ) -> None:
        self.data: dict[str, Any] = dict(data)
        if "token_supports" in self.data:  # the field's name in earlier releases
            warn_user(
                'data["token_supports"] is now data["supports"]; the old key is read as it',
                FutureWarning,
            )
            self.data[SUPPORTS] = self.data.pop("token_supports")
        self.metadata: dict[str, Any] = dict(metadata or {})
        self.metadata.setdefault("scorers", [k for k in self.data if k not in NOT_SCORES])
        n = common_length(self.data)
        self._index = list(range(n)) if index is None else list(index)
        if len(self._index) != n:
            raise InputValidationError(f"index has {len(self._index)} items for {n} rows")

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
        return f"UQResult(rows={len(self)}, scorers={self.scorers})"

    def to_df(self) -> pd.DataFrame:
        """One row per prompt, in input order.

        Columns: ``prompt`` (for a prompt given as chat messages, the text of its last user
        message), ``response``, ``sampled_responses``, one per scorer, then, where they apply,
        ``raw_response`` and ``raw_sampled_responses`` (before the postprocessor),
        ``original_response`` and ``best_response_index`` (with ``use_best``: -1 when the
        original answer was kept, else the sample chosen), ``prompt_messages`` (the prompts as
        given, when some are message lists), then ``error`` (why the original response is
        missing, else None), ``sample_errors`` (one entry per sample, None where it arrived)
        and ``num_failed_samples``.

        Example:
            >>> r = UQResult({"prompts": [[("system", "Be brief."), ("human", "2+2?")]],
            ...               "bert_score": [0.9]})
            >>> r.to_df()["prompt"].tolist()
            ['2+2?']
        """
        n = len(self)
        resp_errors = self.data.get("errors") or [None] * n
        sample_errors = self.data.get("sample_errors")
        samples = self.data.get("sampled_responses") or [[] for _ in range(n)]
        if sample_errors is None:
            sample_errors = [[None] * len(s) for s in samples]
        prompts = list(self.data.get("prompts") or [None] * n)
        columns: dict[str, Any] = {
            FIELD_COLUMNS["prompts"]: [shown_prompt(p) for p in prompts],
            FIELD_COLUMNS["responses"]: list(self.data.get("responses") or [None] * n),
            FIELD_COLUMNS["sampled_responses"]: [list(s) for s in samples],
        }
        for name in self.scorers:
            columns[name] = np.asarray(self.data[name], dtype=np.float64)
        for field in EXTRA_FIELDS:
            if self.data.get(field) is not None:
                values = self.data[field]
                columns[FIELD_COLUMNS[field]] = [
                    list(v) if isinstance(v, list) else v for v in values
                ]
        if any(not isinstance(p, str) and p is not None for p in prompts):
            columns["prompt_messages"] = prompts
        columns[FIELD_COLUMNS["errors"]] = [None if e is None else str(e) for e in resp_errors]
        columns[FIELD_COLUMNS["sample_errors"]] = [
            [None if e is None else str(e) for e in errs] for errs in sample_errors
        ]
        columns["num_failed_samples"] = [sum(e is not None for e in errs) for errs in sample_errors]
        index = pd.Index(self._index, name="prompt_index")
        # object columns keep None as None (pandas' string dtype would turn it into NaN)
        return pd.DataFrame(
            {
                k: pd.Series(v, index=index, dtype=column_dtype(k, self.scorers))
                for k, v in columns.items()
            },
            index=index,
        )

    def words(self) -> pd.DataFrame:
        """Where the answers are unsupported: one row per word of every answer, with how well
        the answer's samples support it, from the pass that gave the confidence.

        Columns: ``prompt_index`` (the row's label, as :meth:`to_df`'s index), ``start`` and
        ``end`` (character offsets: ``word == response[start:end]``, in the text that was
        scored), ``word``, ``support`` (0 to 1: the mean over the samples of the word's best
        match in each) and ``counted`` (False for the prompt's own words and punctuation, which
        weigh 0 in the confidence). A word is weakly supported below ``threshold(level="word")``.
        See docs/supports.md.

        Raises:
            ConfigurationError: the result holds no supports (no ``bert_score`` scorer,
                ``use_best``, or ``ScoringSettings(supports=False)``).

        Example:
            >>> from uqlm_bert import BlackBoxUQ
            >>> r = BlackBoxUQ(show_progress_bars=False).score(
            ...     ["Lima is in Peru."], [["Lima is the capital of Peru."]])
            >>> r.words()[["word", "counted"]].values.tolist()[-2:]
            [['Peru', True], ['.', False]]
        """
        from uqlm_bert.results._answers import word_table

        return word_table(self)

    def supports(self) -> pd.DataFrame:
        """:meth:`words`, with the column names of earlier releases (``response_index``,
        ``text``); deprecated: use :meth:`words`."""
        warn_user(
            "UQResult.supports() is now UQResult.words(), whose columns are prompt_index, start, "
            "end, word, support and counted",
            FutureWarning,
        )
        return self.words().rename(columns={"prompt_index": "response_index", "word": "text"})

    def sentences(
        self,
        sentences: Sequence[Sequence[str] | None] | None = None,
        language: str = "en",
        *,
        threshold: float | None = None,
    ) -> pd.DataFrame:
        """Each sentence of every answer, scored from its words' supports (same pass, no model
        call); the lowest are the likely made-up claims.

        Columns: ``prompt_index``, ``sentence_index``, ``start``, ``end`` (``sentence ==
        response[start:end]``), ``sentence``, ``support``, ``flagged`` (support below
        ``threshold``, by default the result's sentence threshold, ``threshold(level=
        "sentence")``; ``<NA>`` where there is none, as for another encoder or layer, or the
        support is NaN) and ``method`` (``"support"``). ``BlackBoxUQ.score_sentences`` gives the
        same table. ``sentences`` gives your own split (one list per row); ``language`` the
        splitter's rules. See docs/supports.md.

        Example:
            >>> from uqlm_bert import BlackBoxUQ
            >>> r = BlackBoxUQ(show_progress_bars=False).score(
            ...     ["Lima is in Peru. It has nine moons."], [["Lima is the capital of Peru."]])
            >>> r.sentences()[["sentence", "flagged"]].values.tolist()
            [['Lima is in Peru.', False], ['It has nine moons.', True]]
        """
        from uqlm_bert.results._answers import sentence_table

        return sentence_table(self, sentences, language, threshold)

    def refine(
        self,
        threshold: float | None = None,
        *,
        sentences: Sequence[Sequence[str] | None] | None = None,
        language: str = "en",
    ) -> pd.DataFrame:
        """Each answer with its unsupported sentences removed: :meth:`to_df` with
        ``refined_response``, ``removed_sentences`` and ``refinement``.

        A sentence goes when its support (:meth:`sentences`) is below ``threshold`` (by default
        the result's sentence threshold, chosen for the scorers' default encoder and layer).
        The kept sentences keep their order and the answer's own characters and white space.
        ``removed_sentences`` lists, per answer, what went and why (``sentence_index``,
        ``start``, ``end``, ``sentence``, ``support``, ``reason``); ``refinement`` says what
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

    def answer(
        self,
        prompt_index: int | None = None,
        threshold: float | None = None,
        *,
        position: int | None = None,
    ) -> Any:
        """One row as an :class:`~uqlm_bert.results.Answer`, named by its label
        (``prompt_index``, as :meth:`to_df`'s index) or by its place (``position=``, 0 to
        ``len(result) - 1``): shown in Jupyter with its weakly supported words marked (below
        ``threshold``, by default ``threshold(level="word")``) and the sentences :meth:`refine`
        removes struck through; ``str()`` gives ``[brackets]`` and ``~~tildes~~``.

        Raises:
            InputValidationError: neither or both of ``prompt_index`` and ``position``, or no
                such row.

        Example:
            >>> r = UQResult({"prompts": ["a", "b"], "responses": ["Lima", "Quito"],
            ...               "bert_score": [0.9, 0.3]}).filter(0.5, keep="below")
            >>> r.answer(1).response, r.answer(position=0).response
            ('Quito', 'Quito')
        """
        from uqlm_bert.results._answers import answer_of

        return answer_of(self, prompt_index, position, threshold)

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
            >>> from uqlm_bert.generation._records import CallFailure
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
        self, threshold: float | None = None, scorer: str | None = None, keep: str = "above"
    ) -> UQResult:
        """The rows on one side of a confidence threshold, as a new result.

        Args:
            threshold: the confidence cut-off; ``None`` is the scorer's default threshold (for
                ``bert_score`` at its default settings,
                :data:`~uqlm_bert.scorers._bertscore.DEFAULT_THRESHOLD`).
            scorer: whose confidence to use (default: the first scorer).
            keep: ``"above"`` keeps rows with confidence >= ``threshold``; ``"below"`` keeps
                the others: confidence < ``threshold`` or NaN (no samples to judge by). The two
                sides together are the whole result.

        Example:
            >>> r = UQResult({"prompts": ["a", "b"], "bert_score": [0.9, 0.2]})
            >>> r.filter(0.5, keep="below").data["prompts"]
            ['b']
        """
        threshold = self.threshold(scorer) if threshold is None else threshold
        low = self._below(threshold, scorer)
        if keep not in ("above", "below"):
            raise InputValidationError(f"keep must be 'above' or 'below', got {keep!r}")
        rows = [i for i, is_low in enumerate(low) if is_low == (keep == "below")]
        data = {k: take(v, rows) for k, v in self.data.items()}
        metadata = copy.deepcopy(self.metadata)
        metadata["filter"] = {
            "threshold": float(threshold),
            "scorer": scorer or self.scorers[0],
            "keep": keep,
        }
        return UQResult(data, metadata, index=[self._index[i] for i in rows])

    def flag(self, threshold: float | None = None, scorer: str | None = None) -> pd.DataFrame:
        """:meth:`to_df` with a ``flagged`` column: confidence below ``threshold``, or NaN.

        ``threshold=None`` is the scorer's default threshold (see :meth:`threshold`).

        Example:
            >>> r = UQResult({"prompts": ["a", "b"], "bert_score": [0.9, 0.2]})
            >>> r.flag(0.5)["flagged"].tolist()
            [False, True]
        """
        threshold = self.threshold(scorer) if threshold is None else threshold
        df = self.to_df()
        df["flagged"] = self._below(threshold, scorer)
        return df

    def threshold(self, scorer: str | None = None, *, level: str = "answer") -> float:
        """A default threshold of this result: of ``scorer``'s confidence (``level="answer"``;
        default: the first scorer), or of the supports (``"word"``: weak words are marked below
        it; ``"sentence"``: sentences below it are flagged and removed by :meth:`refine`).

        Each holds for the settings it was chosen at: the answers' for ``bert_score`` at its
        default settings (:data:`~uqlm_bert.scorers.DEFAULT_THRESHOLD`), the supports' for
        the default encoder and layer (:data:`~uqlm_bert.bertscore.WEAK_SUPPORT`,
        :data:`~uqlm_bert.bertscore.SENTENCE_THRESHOLD`), each chosen on labelled data by the
        rule written at its constant; ``metadata["default_thresholds"]`` and
        ``metadata["support_thresholds"]`` list them.

        Raises:
            ConfigurationError: there is no default for these settings: pass one, chosen on
                your own labelled answers (or sentences) with
                :func:`uqlm_bert.evaluation.choose_threshold`.
            InputValidationError: an unknown ``level``.

        Example:
            >>> r = UQResult({"prompts": ["a"], "bert_score": [0.9]},
            ...              {"scorers": ["bert_score"], "default_thresholds": {"bert_score": 0.72},
            ...               "support_thresholds": {"word": 0.59, "sentence": 0.52}})
            >>> r.threshold(), r.threshold(level="sentence")
            (0.72, 0.52)
        """
        if level not in THRESHOLD_LEVELS:
            raise InputValidationError(
                f"level must be one of {', '.join(THRESHOLD_LEVELS)}, got {level!r}"
            )
        if level != "answer":
            from uqlm_bert.results._answers import support_threshold

            return support_threshold(self, level)
        name, _ = self._scores(scorer)
        value = self.metadata.get("default_thresholds", {}).get(name)
        if value is None:
            raise ConfigurationError(
                f"the scorer {name!r} has no default threshold here (one exists only for "
                "bert_score at its default settings); pass threshold=..., chosen on labelled "
                "answers with uqlm_bert.evaluation.choose_threshold(scores, labels, "
                "flag_when='below')"
            )
        return float(value)

    def to_dict(self) -> dict[str, Any]:
        """The result as plain data: ``{"data": ..., "metadata": ...}``, as uqlm's results give
        it, with the failures as text (ready for ``json.dump``).

        Example:
            >>> UQResult({"prompts": ["q"], "bert_score": [0.5]}).to_dict()["data"]
            {'prompts': ['q'], 'bert_score': [0.5]}
        """
        data: dict[str, Any] = {}
        for key, values in self.data.items():
            if key in ("errors", "sample_errors") and values is not None:
                values = errors_as_text(values)
            elif key == SUPPORTS and values is not None:
                values = [None if s is None else s.to_dict() for s in values]
            elif isinstance(values, np.ndarray):
                values = values.tolist()
            data[key] = list(values) if values is not None else None
        return {"data": data, "metadata": copy.deepcopy(self.metadata)}

    def calibrate(self, calibrator: ScoreCalibrator, scorer: str | None = None) -> UQResult:
        """A new result with each row's probability of being correct, from a fitted calibrator.

        The probability goes into a column ``<scorer>_probability`` (float64, NaN where the
        score is NaN), which is added to ``metadata["scorers"]``: :meth:`to_df` shows it, and
        :meth:`filter`, :meth:`flag` and the plots take it as ``scorer=``, so a pipeline can keep
        the answers whose probability is at least, say, 0.8. ``metadata["calibration"]`` records,
        per probability column, the scorer it came from and the calibrator's method. This result
        is left unchanged; calibrating the same scorer again replaces the column.

        Args:
            calibrator: a fitted :class:`~uqlm_bert.evaluation._calibration.ScoreCalibrator` (fitted on
                this scorer's scores, with the same settings).
            scorer: whose confidence to calibrate (default: the first scorer).

        Raises:
            InputValidationError: no such scorer, or ``calibrator`` is not a calibrator.
            NotFittedError: the calibrator has not been fitted.

        Example:
            >>> from uqlm_bert.evaluation._calibration import ScoreCalibrator
            >>> calibrator = ScoreCalibrator().fit([0.25, 0.5, 0.75], [0, 1, 1])
            >>> r = UQResult({"prompts": ["a", "b", "c"], "bert_score": [0.375, None, 0.9]})
            >>> calibrated = r.calibrate(calibrator)
            >>> calibrated.to_df()["bert_score_probability"].tolist()
            [0.5, nan, 1.0]
            >>> calibrated.filter(0.8, scorer="bert_score_probability").data["prompts"]
            ['c']
        """
        if not callable(getattr(calibrator, "predict", None)):
            raise InputValidationError(
                f"calibrator must be a fitted uqlm_bert.evaluation._calibration.ScoreCalibrator, got "
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
        if column not in metadata["scorers"]:
            metadata["scorers"] = [*metadata["scorers"], column]
        metadata.setdefault("calibration", {})[column] = {
            "scorer": name,
            "method": getattr(calibrator, "method", type(calibrator).__name__),
        }
        return type(self)(data, metadata, index=self._index)

    def _scores(self, scorer: str | None) -> tuple[str, np.ndarray]:
        if not self.scorers:
            raise InputValidationError("this result holds no scores")
        name = self.scorers[0] if scorer is None else scorer
        if name not in self.scorers:
            raise InputValidationError(
                f"no scores for scorer {name!r}; this result has: {', '.join(self.scorers)}"
            )
        return name, np.asarray(self.data[name], dtype=np.float64)

    def _below(self, threshold: float, scorer: str | None) -> list[bool]:
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.floating)):
            raise InputValidationError(f"threshold must be a number, got {threshold!r}")
        if math.isnan(float(threshold)):
            raise InputValidationError("threshold is NaN; give a number such as 0.8")
        _, values = self._scores(scorer)
        return [bool(np.isnan(v) or v < threshold) for v in values]
