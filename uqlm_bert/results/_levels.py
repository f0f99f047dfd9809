"""A result's three levels as tables of one shape: answers, sentences and words.

Each level is a pandas DataFrame (index 0, 1, ...) that starts with the same columns:
``prompt_index``, the label of the answer a row belongs to (its prompt's index in the run, kept
by ``filter()``), then, for sentences and words, ``start`` and ``end``: character offsets into
the scored text (``sentence == response[start:end]``). Each has its score column(s) and
``flagged``, a nullable boolean: below the level's threshold (the ``threshold=`` given, else the
result's default for that level and scorer, ``metadata["thresholds"]``), ``<NA>`` where there is
no threshold (none given, and no default at the result's settings).

==========  ================  =====================================================================
level       method            columns
==========  ================  =====================================================================
answers     ``flag()``        prompt_index, prompt, response, sampled_responses, one per scorer
                              (and per calibrated probability), flagged, ..., error,
                              sample_errors, num_failed_samples, and for a generating run
                              samples_drawn (``to_df()``: all but flagged)
sentences   ``sentences()``   prompt_index, start, end, sentence, support, flagged,
                              sentence_index, method
words       ``words()``       prompt_index, start, end, word, support, flagged, counted
==========  ================  =====================================================================

An answer whose confidence is NaN (no sample to judge it by) is flagged; a sentence whose
support is NaN (no token of it was scored) is ``<NA>``; a word that does not count (the prompt's
own words, punctuation) is never flagged.

Example:
    >>> from uqlm_bert import UQResult
    >>> r = UQResult({"prompts": ["a", "b"], "bert_score": [0.9, None]},
    ...              {"thresholds": {"bert_score": {"answer": 0.5}}})
    >>> answer_table(r, threshold=None)[["prompt_index", "bert_score", "flagged"]].values.tolist()
    [[0, 0.9, False], [1, nan, True]]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from uqlm_bert._exceptions import ConfigurationError, InputValidationError
from uqlm_bert.results._fields import (
    EXTRA_FIELDS,
    FIELD_COLUMNS,
    SUPPORTS,
    column_dtype,
    shown_prompt,
)
from uqlm_bert.scorers._thresholds import LEVELS, first_threshold

if TYPE_CHECKING:
    from uqlm_bert.bertscore._token_support import TokenSupport

#: A ``UQResult`` (not imported here: the result's methods import this module).
Result = Any

__all__ = [
    "LABEL",
    "answer_flags",
    "answer_table",
    "checked_threshold",
    "flag_words",
    "level_threshold",
    "required_threshold",
    "score_columns",
    "score_values",
    "sentence_table",
    "support_flags",
    "supports_of",
    "with_flags",
    "word_table",
]

#: The first column of every level: the answer's label.
LABEL = "prompt_index"


def checked_threshold(value: Any) -> float:
    """``value`` as a threshold: a number, not NaN.

    Raises:
        InputValidationError: anything else.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InputValidationError(f"threshold must be a number, got {value!r}")
    if math.isnan(float(value)):
        raise InputValidationError("threshold is NaN; give a number such as 0.5")
    return float(value)


def score_columns(result: Result) -> list[str]:
    """The columns of confidences a result can be flagged by: each scorer's, then each
    calibrated probability's (``calibrate()``)."""
    calibrated = [c for c in result.metadata.get("calibration") or {} if c in result.data]
    return [*result.scorers, *(c for c in calibrated if c not in result.scorers)]


def score_values(result: Result, scorer: str | None) -> tuple[str, np.ndarray]:
    """``(name, values)`` of the confidences of ``scorer`` (a scorer or a calibrated probability;
    default: the first scorer), as float64 with NaN where missing.

    Raises:
        InputValidationError: the result holds no scores, or none by that name.
    """
    names = score_columns(result)
    if not names:
        raise InputValidationError("this result holds no scores")
    name = names[0] if scorer is None else scorer
    if name not in names:
        raise InputValidationError(
            f"no scores for scorer {name!r}; this result has: {', '.join(names)}"
        )
    return name, np.asarray(result.data[name], dtype=np.float64)


def level_threshold(
    result: Result, level: str, threshold: Any = None, scorer: str | None = None
) -> float | None:
    """The threshold of ``level`` (``"answer"``, ``"sentence"`` or ``"word"``): ``threshold``
    where given, else the result's default (the answers': ``scorer``'s, by default the first
    scorer's; the sentences' and words': those of the scorer whose supports the result holds),
    else None.

    Raises:
        InputValidationError: an unknown level, or a threshold that is not a number.
    """
    if level not in LEVELS:
        raise InputValidationError(f"level must be one of {', '.join(LEVELS)}, got {level!r}")
    if threshold is not None:
        return checked_threshold(threshold)
    table = result.metadata.get("thresholds") or {}
    if level == "answer":
        name, _ = score_values(result, scorer)
        value = (table.get(name) or {}).get("answer")
        return None if value is None else float(value)
    found = first_threshold(table, level)
    return None if found is None else found[1]


def required_threshold(
    result: Result, level: str, threshold: Any = None, scorer: str | None = None
) -> float:
    """:func:`level_threshold`, where a decision needs one (``filter()``, ``refine()``).

    Raises:
        ConfigurationError: none given, and no default for this result's settings.
    """
    value = level_threshold(result, level, threshold, scorer)
    if value is not None:
        return value
    if level == "answer":
        name, _ = score_values(result, scorer)
        where = (
            f"the scores {name!r} have no default threshold here (one exists only for "
            "bert_score at its default settings)"
        )
        what = "answers"
    else:
        where = (
            f"these supports have no default {level} threshold (the defaults were chosen for "
            "the scorers' default encoder, all-MiniLM-L6-v2, at its default layer)"
        )
        what = f"{level}s"
    raise ConfigurationError(
        f"{where}; pass threshold=..., chosen on your own labelled {what} with "
        "uqlm_bert.evaluation.choose_threshold(scores, labels, flag_when='below')"
    )


def supports_of(result: Result) -> list[TokenSupport | None]:
    """The result's token supports, one per row.

    Raises:
        ConfigurationError: the result holds none, with why and what to do.
    """
    found = result.data.get(SUPPORTS)
    if found is None:
        raise ConfigurationError(
            "this result holds no supports: they come with the bert_score scorers "
            "(bert_score, bert_score_precision or bert_score_recall) of BlackBoxUQ.score or "
            "generate_and_score, and not with use_best=True or "
            "scoring=ScoringSettings(supports=False)"
        )
    return list(found)


def answer_table(result: Result, threshold: Any = None, scorer: str | None = None) -> pd.DataFrame:
    """``flag()``: :func:`answer_frame` with ``flagged`` after the scores: ``scorer``'s
    confidence below ``threshold`` (default: the scorer's), or NaN; ``<NA>`` without a
    threshold."""
    cut = level_threshold(result, "answer", threshold, scorer)
    _, values = score_values(result, scorer)
    frame = answer_frame(result)
    flags: list[Any] = [pd.NA] * len(values) if cut is None else answer_flags(values, cut).tolist()
    at = frame.columns.get_loc(score_columns(result)[-1]) + 1
    frame.insert(at, "flagged", pd.array(flags, dtype="boolean"))
    return frame


def answer_flags(values: np.ndarray, threshold: float) -> np.ndarray:
    """Which answers are flagged: confidence below ``threshold``, or NaN (no samples to judge
    by); ``filter(keep="below")`` keeps exactly these."""
    return np.isnan(values) | (values < threshold)


def answer_frame(result: Result) -> pd.DataFrame:
    """``to_df()``: one row per answer, in the result's order (see the module docstring)."""
    n = len(result)
    data = result.data
    resp_errors = data.get("errors") or [None] * n
    samples = data.get("sampled_responses") or [[] for _ in range(n)]
    sample_errors = data.get("sample_errors")
    if sample_errors is None:
        sample_errors = [[None] * len(s) for s in samples]
    prompts = list(data.get("prompts") or [None] * n)
    columns: dict[str, Any] = {
        LABEL: list(result.index),
        FIELD_COLUMNS["prompts"]: [shown_prompt(p) for p in prompts],
        FIELD_COLUMNS["responses"]: list(data.get("responses") or [None] * n),
        FIELD_COLUMNS["sampled_responses"]: [list(s) for s in samples],
    }
    scores = score_columns(result)
    for name in scores:
        columns[name] = np.asarray(data[name], dtype=np.float64)
    for field in EXTRA_FIELDS:
        if data.get(field) is not None:
            columns[FIELD_COLUMNS[field]] = [
                list(v) if isinstance(v, list) else v for v in data[field]
            ]
    if any(not isinstance(p, str) and p is not None for p in prompts):
        columns["prompt_messages"] = prompts
    columns[FIELD_COLUMNS["errors"]] = [None if e is None else str(e) for e in resp_errors]
    columns[FIELD_COLUMNS["sample_errors"]] = [
        [None if e is None else str(e) for e in errs] for errs in sample_errors
    ]
    columns["num_failed_samples"] = [sum(e is not None for e in errs) for errs in sample_errors]
    if "sampling" in result.metadata:  # a generating run: what each prompt drew
        columns["samples_drawn"] = [sum(x is not None for x in s) for s in samples]
    # object columns keep None as None (pandas' string dtype would turn it into NaN)
    return pd.DataFrame(
        {k: pd.Series(v, dtype=column_dtype(k, scores)) for k, v in columns.items()}
    )


def word_table(result: Result, threshold: Any = None) -> pd.DataFrame:
    """``words()``: one row per word of every answer (the columns of
    :func:`~uqlm_bert.results._tables.word_frame` with ``flagged`` after ``support``),
    ``flagged`` where it counts and its support is below the word threshold."""
    from uqlm_bert.results._tables import word_frame

    cut = level_threshold(result, "word", threshold)
    return flag_words(_relabel(word_frame(supports_of(result)), result), cut)


def flag_words(frame: pd.DataFrame, threshold: float | None) -> pd.DataFrame:
    """A word table with its ``flagged`` column: counted and below ``threshold`` (the one rule
    of a weak word, :func:`~uqlm_bert.bertscore._token_support.is_weak`); ``<NA>`` everywhere
    without a threshold."""
    from uqlm_bert.bertscore._token_support import is_weak

    weak = [pd.NA] * len(frame) if threshold is None else is_weak(frame, threshold).tolist()
    return with_flags(frame, pd.array(weak, dtype="boolean"))


def sentence_table(
    result: Result,
    sentences: Sequence[Sequence[str] | None] | None = None,
    language: str = "en",
    threshold: Any = None,
) -> pd.DataFrame:
    """``sentences()``: one row per sentence of every answer (the columns of
    :func:`~uqlm_bert.results._tables.sentence_frame` with ``flagged`` after ``support``),
    ``flagged`` where its support is below the sentence threshold."""
    from uqlm_bert.results._tables import sentence_frame

    frame = _relabel(sentence_frame(supports_of(result), sentences, language), result)
    cut = level_threshold(result, "sentence", threshold)
    return with_flags(frame, support_flags(frame["support"], cut))


def support_flags(support: Any, threshold: float | None) -> Any:
    """``support < threshold`` as a nullable boolean array: ``<NA>`` where the support is NaN,
    and everywhere without a threshold."""
    values = np.asarray(support, dtype=np.float64)
    flags = [
        pd.NA if threshold is None or math.isnan(v) else bool(v < threshold)
        for v in values.tolist()
    ]
    return pd.array(flags, dtype="boolean")


def with_flags(frame: pd.DataFrame, flags: Any) -> pd.DataFrame:
    """A sentence or word table with its ``flagged`` column, right after ``support``."""
    frame.insert(frame.columns.get_loc("support") + 1, "flagged", flags)
    return frame


def _relabel(frame: pd.DataFrame, result: Result) -> pd.DataFrame:
    """``frame`` with its positional ``prompt_index`` replaced by the result's row labels."""
    labels = np.asarray(result.index, dtype=np.int64)
    frame[LABEL] = labels[frame[LABEL].to_numpy(dtype=np.int64)]
    return frame
