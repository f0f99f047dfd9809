"""Where a result's answers are unsupported: its word and sentence tables, one answer as a view,
and the result as an HTML table, all read from each answer's token supports.

A result of the ``bert_score`` scorers holds, beside each answer, its token supports
(:class:`~uqlm_bert.bertscore.TokenSupport`, under ``data["supports"]``): which tokens of the
answer its samples support, from the same pass as the confidence. The functions here turn them
into what users look at: :func:`word_table` and :func:`sentence_table` (the tables of
``UQResult.words()`` and ``sentences()``, keyed by ``prompt_index``, the result's own row labels,
as ``to_df()``'s index), :class:`Answer` (one row, shown with its weak words marked and its
unsupported sentences struck through, in Jupyter and in a terminal) and :func:`result_html` (the
result in Jupyter). The support thresholds come from the result (:func:`support_threshold`):
they hold for the scorers' default encoder and layer only.

Example:
    >>> from uqlm_bert import BlackBoxUQ
    >>> result = BlackBoxUQ(show_progress_bars=False).score(
    ...     ["Lima is in Peru. It has nine moons."],
    ...     [["Lima is the capital of Peru.", "Lima, in Peru, is a big city."]])
    >>> word_table(result)["word"].tolist()[:4]
    ['Lima', 'is', 'in', 'Peru']
    >>> sentence_table(result)["sentence"].tolist()
    ['Lima is in Peru.', 'It has nine moons.']
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from uqlm_bert._exceptions import ConfigurationError, InputValidationError
from uqlm_bert.results._fields import SUPPORTS, shown_prompt
from uqlm_bert.results._render import answer_html, answer_text

if TYPE_CHECKING:
    from uqlm_bert.bertscore._token_support import TokenSupport

#: A ``UQResult`` (not imported here: the result's methods import this module).
Result = Any

__all__ = [
    "Answer",
    "LEVELS",
    "MAX_HTML_ROWS",
    "answer_of",
    "result_html",
    "sentence_table",
    "support_threshold",
    "supports_of",
    "word_table",
]

#: At most this many rows of a result are shown in its HTML table (the rest are counted).
MAX_HTML_ROWS = 50
#: The levels a support threshold is given for: words (marked) and sentences (flagged).
LEVELS = ("word", "sentence")


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


def support_threshold(result: Result, level: str, given: float | None = None) -> float:
    """The support threshold of ``level`` (``"word"`` or ``"sentence"``): ``given``, else the
    default the result's scorer has for its settings.

    Raises:
        InputValidationError: ``level`` is unknown, or ``given`` is not a number.
        ConfigurationError: nothing given, and no default for these supports: they come from
            another encoder or layer than the one the defaults were chosen for.

    Example:
        >>> from uqlm_bert.results import UQResult
        >>> r = UQResult({"prompts": ["q"]}, {"support_thresholds": {"word": 0.59, "sentence": 0.52}})
        >>> support_threshold(r, "sentence"), support_threshold(r, "word", 0.4)
        (0.52, 0.4)
    """
    if level not in LEVELS:
        raise InputValidationError(f"level must be one of {', '.join(LEVELS)}, got {level!r}")
    if given is not None:
        if isinstance(given, bool) or not isinstance(given, (int, float, np.floating)):
            raise InputValidationError(f"threshold must be a number, got {given!r}")
        if math.isnan(float(given)):
            raise InputValidationError("threshold is NaN; give a number such as 0.5")
        return float(given)
    found = (result.metadata.get("support_thresholds") or {}).get(level)
    if found is None:
        raise ConfigurationError(
            f"these supports have no default {level} threshold: the defaults were chosen for the "
            "scorers' default encoder (all-MiniLM-L6-v2) at its default layer, and this result "
            f"was scored otherwise; pass threshold=..., chosen on your own labelled {level}s "
            "with uqlm_bert.evaluation.choose_threshold(supports, labels, flag_when='below')"
        )
    return float(found)


def word_table(result: Result) -> pd.DataFrame:
    """``UQResult.words()``: one row per word of every answer (see
    :func:`~uqlm_bert.results._tables.word_frame`), ``prompt_index`` the row's label."""
    from uqlm_bert.results._tables import word_frame

    return _relabel(word_frame(supports_of(result)), result)


def sentence_table(
    result: Result,
    sentences: Any = None,
    language: str = "en",
    threshold: float | None = None,
) -> pd.DataFrame:
    """``UQResult.sentences()``: one row per sentence of every answer (see
    :func:`~uqlm_bert.results._tables.sentence_frame`), ``prompt_index`` the row's label, with
    ``flagged`` (support below the sentence threshold: ``threshold``, else the result's default;
    ``<NA>`` where there is neither) before ``method``."""
    from uqlm_bert.results._tables import sentence_frame

    frame = _relabel(sentence_frame(supports_of(result), sentences, language), result)
    return with_flags(frame, _optional_threshold(result, "sentence", threshold))


def with_flags(frame: pd.DataFrame, threshold: float | None) -> pd.DataFrame:
    """A sentence table with its ``flagged`` column: support below ``threshold`` (a nullable
    boolean: ``<NA>`` everywhere when ``threshold`` is None, and where the support is NaN)."""
    support = frame["support"].to_numpy(dtype=np.float64)
    if threshold is None:
        flags = pd.array([pd.NA] * len(frame), dtype="boolean")
    else:
        flags = pd.array(
            [pd.NA if math.isnan(v) else bool(v < threshold) for v in support], dtype="boolean"
        )
    frame.insert(frame.columns.get_loc("method"), "flagged", flags)
    return frame


def _relabel(frame: pd.DataFrame, result: Result) -> pd.DataFrame:
    """``frame`` with its positional ``prompt_index`` replaced by the result's row labels."""
    labels = np.asarray(result.index, dtype=np.int64)
    frame["prompt_index"] = labels[frame["prompt_index"].to_numpy(dtype=np.int64)]
    return frame


def _optional_threshold(result: Result, level: str, given: float | None) -> float | None:
    """:func:`support_threshold`, or None where the result has no default and none is given."""
    try:
        return support_threshold(result, level, given)
    except ConfigurationError:
        return None


@dataclass(frozen=True)
class Answer:
    """One row of a result, as a person reads it: the prompt, the answer with its weakly
    supported words marked and its unsupported sentences struck through, and its confidences.
    Shown so in Jupyter (``_repr_html_``) and by ``str()`` (weak words in ``[brackets]``, struck
    sentences in ``~~tildes~~``); :meth:`terminal` colours them instead.

    Attributes:
        prompt_index: the row's label (its prompt's index in the run).
        prompt: the prompt as a person reads it.
        response: the answer (None where the call failed).
        scores: each scorer's confidence.
        words: the answer's word rows (``UQResult.words()``'s), empty without supports.
        threshold: words below this support are marked (None: no default for these supports,
            and none given: nothing is marked).
        removed: ``(start, end, support)`` of the sentences below the sentence threshold, the
            ones ``UQResult.refine()`` removes (empty without supports or threshold).
    """

    prompt_index: int
    prompt: str | None
    response: str | None
    scores: dict[str, float]
    words: pd.DataFrame = field(repr=False)
    threshold: float | None
    removed: tuple[tuple[int, int, float], ...] = ()

    @property
    def weak_words(self) -> list[str]:
        """The counted words whose support is below :attr:`threshold`, in order."""
        from uqlm_bert.bertscore._token_support import is_weak

        if self.threshold is None:
            return []
        return self.words["word"][is_weak(self.words, self.threshold)].tolist()

    def terminal(self, colour: bool) -> str:
        """The answer for a terminal: weak words red and underlined, or in ``[brackets]``;
        removed sentences struck through, or in ``~~tildes~~``."""
        if self.response is None:
            return ""
        return answer_text(self.response, self.words, self.threshold, colour, self.removed)

    def __str__(self) -> str:
        return self.terminal(colour=False)

    def _repr_html_(self) -> str:
        scores = ", ".join(f"{html.escape(k)} {_number(v)}" for k, v in self.scores.items())
        body = _response_html(self.response, self.words, self.threshold, self.removed)
        prompt = html.escape(self.prompt or "")
        return (
            f'<div class="uqlm-answer-view"><div><b>{prompt}</b></div><div>{body}</div>'
            f'<div style="opacity:0.75">{scores}</div></div>'
        )


def answer_of(
    result: Result,
    prompt_index: int | None = None,
    position: int | None = None,
    threshold: float | None = None,
) -> Answer:
    """``UQResult.answer()``: the row labelled ``prompt_index``, or the row at ``position``
    (0 to ``len(result) - 1``; negative from the end), as an :class:`Answer`.

    Raises:
        InputValidationError: neither or both given, or no such row.
    """
    row = _row(result, prompt_index, position)
    supports = result.data.get(SUPPORTS)
    support = supports[row] if supports is not None else None
    words = _words_of(support)
    word_cut = _optional_threshold(result, "word", threshold)
    return Answer(
        prompt_index=result.index[row],
        prompt=shown_prompt((result.data.get("prompts") or [None] * len(result))[row]),
        response=(result.data.get("responses") or [None] * len(result))[row],
        scores={name: float(result.data[name][row]) for name in result.scorers},
        words=words,
        threshold=word_cut,
        removed=_removed_spans(result, support),
    )


def _row(result: Result, prompt_index: int | None, position: int | None) -> int:
    """The position of the row named by its label or its position (exactly one given)."""
    if (prompt_index is None) == (position is None):
        raise InputValidationError(
            "name the row either by its label, answer(prompt_index), or by its position, "
            "answer(position=...)"
        )
    n = len(result)
    if position is not None:
        if isinstance(position, bool) or not isinstance(position, (int, np.integer)):
            raise InputValidationError(f"position must be an int, got {position!r}")
        if not -n <= position < n:
            raise InputValidationError(f"position must be from 0 to {n - 1}, got {position}")
        return int(position) % n
    if isinstance(prompt_index, bool) or not isinstance(prompt_index, (int, np.integer)):
        raise InputValidationError(f"prompt_index must be an int, got {prompt_index!r}")
    labels = list(result.index)
    if prompt_index not in labels:
        shown = ", ".join(map(str, labels[:10])) + (", ..." if n > 10 else "")
        raise InputValidationError(
            f"no row labelled prompt_index={prompt_index} in this result (its labels: {shown}); "
            "to take a row by its place, use answer(position=...)"
        )
    return labels.index(prompt_index)


def _removed_spans(result: Result, support: TokenSupport | None) -> tuple:
    """The ``(start, end, support)`` of an answer's sentences below the default sentence
    threshold (empty without supports, or without a default threshold)."""
    cut = _optional_threshold(result, "sentence", None)
    if support is None or cut is None:
        return ()
    from uqlm_bert.results._tables import sentence_frame

    frame = sentence_frame([support])
    low = frame[frame["support"] < cut]
    return tuple(
        (int(a), int(b), float(v))
        for a, b, v in zip(low["start"], low["end"], low["support"], strict=True)
    )


def result_html(result: Result) -> str:
    """The result as an HTML table (Jupyter's view of a ``UQResult``): each prompt, its answer
    with the weakly supported words marked and the unsupported sentences struck through, and
    its confidences; at most :data:`MAX_HTML_ROWS` rows, every text escaped."""
    heads = ["prompt_index", "prompt", "response", *result.scorers]
    head = "".join(f"<th>{html.escape(h)}</th>" for h in heads)
    rows = []
    for i in range(min(len(result), MAX_HTML_ROWS)):
        answer = answer_of(result, position=i)
        cells = [
            str(answer.prompt_index),
            html.escape(answer.prompt or ""),
            _response_html(answer.response, answer.words, answer.threshold, answer.removed),
            *(_number(answer.scores[name]) for name in result.scorers),
        ]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    more = len(result) - MAX_HTML_ROWS
    tail = f"<p>{more} more rows: <code>to_df()</code> has them all.</p>" if more > 0 else ""
    return (
        f'<div class="uqlm-result"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>{tail}{_legend(result)}</div>"
    )


def _legend(result: Result) -> str:
    """What the marks of :func:`result_html` mean, or why there are none."""
    if result.data.get(SUPPORTS) is None:
        return ""
    word = _optional_threshold(result, "word", None)
    sentence = _optional_threshold(result, "sentence", None)
    if word is None or sentence is None:
        return (
            "<p>No marks: these supports come from another encoder or layer than the default "
            "thresholds were chosen for; <code>answer(i, threshold=...)</code> marks words "
            "below a threshold of yours, <code>words()</code> has every word's support.</p>"
        )
    return (
        f"<p>Marked: words the samples support below {word:g}; struck through: sentences "
        f"below {sentence:g}, which <code>refine()</code> removes (<code>words()</code> and "
        "<code>sentences()</code> have every support).</p>"
    )


def _response_html(
    response: str | None, words: pd.DataFrame, threshold: float | None, removed: tuple = ()
) -> str:
    if response is None:
        return "<i>(no answer)</i>"
    return answer_html(response, words, threshold, removed)


def _words_of(support: TokenSupport | None) -> pd.DataFrame:
    from uqlm_bert.results._tables import word_frame

    return word_frame([] if support is None else [support])


def _number(value: float) -> str:
    return "NaN" if math.isnan(value) else f"{value:.3f}"
