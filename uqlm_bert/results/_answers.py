"""One answer of a result as a person reads it, and the result as an HTML table.

A result of the ``bert_score`` scorers holds, beside each answer, its token supports: which
tokens of the answer its samples support, from the same pass as the confidence. :class:`Answer`
shows one row with its weakly supported words marked and its unsupported sentences struck
through (in Jupyter and in a terminal), or, for a failed call, the error that left it without an
answer; :func:`result_html` shows the whole result in Jupyter. Rows are named by their label,
``prompt_index``, as at every level of a result. The thresholds are the result's (see
:mod:`uqlm_bert.results._levels`).

Example:
    >>> from uqlm_bert import BlackBoxUQ
    >>> result = BlackBoxUQ(show_progress_bars=False).score(
    ...     ["Lima is in Peru. It has nine moons."],
    ...     [["Lima is the capital of Peru.", "Lima, in Peru, is a big city."]])
    >>> str(answer_of(result, 0))
    'Lima is in Peru. ~~It has [nine] [moons].~~'
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from uqlm_bert._exceptions import InputValidationError
from uqlm_bert.results._fields import SUPPORTS, shown_prompt
from uqlm_bert.results._levels import level_threshold
from uqlm_bert.results._render import answer_html, answer_text, terminal_safe

if TYPE_CHECKING:
    from uqlm_bert.bertscore._token_support import TokenSupport

#: A ``UQResult`` (not imported here: the result's methods import this module).
Result = Any

__all__ = ["Answer", "MAX_HTML_ROWS", "answer_of", "result_html"]

#: At most this many rows of a result are shown in its HTML table (the rest are counted).
MAX_HTML_ROWS = 50


@dataclass(frozen=True)
class Answer:
    """One row of a result, as a person reads it: the prompt, the answer with its weakly
    supported words marked and its unsupported sentences struck through, and its confidences;
    for a failed call, the error instead of the answer. Shown so in Jupyter (``_repr_html_``)
    and by ``str()`` (weak words in ``[brackets]``, struck sentences in ``~~tildes~~``);
    :meth:`terminal` colours them instead.

    Attributes:
        prompt_index: the row's label (its prompt's index in the run).
        prompt: the prompt as a person reads it.
        response: the answer (None where the call failed).
        scores: each scorer's confidence.
        words: the answer's rows of ``UQResult.words()``, empty without supports.
        threshold: words below this support are marked (None: no default for these supports,
            and none given: nothing is marked).
        removed: ``(start, end, support)`` of the sentences below the sentence threshold, the
            ones ``UQResult.refine()`` removes (empty without supports or threshold).
        error: why the answer is missing (the failed call), else None.
    """

    prompt_index: int
    prompt: str | None
    response: str | None
    scores: dict[str, float]
    words: pd.DataFrame = field(repr=False)
    threshold: float | None
    removed: tuple[tuple[int, int, float], ...] = ()
    error: str | None = None

    @property
    def weak_words(self) -> list[str]:
        """The counted words whose support is below :attr:`threshold`, in order."""
        flagged = self.words["flagged"].fillna(False).to_numpy(dtype=bool)
        return self.words["word"][flagged].tolist()

    def terminal(self, colour: bool) -> str:
        """The answer for a terminal: weak words red and underlined, or in ``[brackets]``;
        removed sentences struck through, or in ``~~tildes~~``; a missing answer as
        ``(no answer: <the error>)``."""
        if self.response is None:
            return terminal_safe(_no_answer(self.error))
        return answer_text(self.response, self.words, self.threshold, colour, self.removed)

    def __str__(self) -> str:
        return self.terminal(colour=False)

    def _repr_html_(self) -> str:
        scores = ", ".join(f"{html.escape(k)} {_number(v)}" for k, v in self.scores.items())
        body = _response_html(self)
        prompt = html.escape(self.prompt or "")
        return (
            f'<div class="uqlm-answer-view"><div><b>{prompt}</b></div><div>{body}</div>'
            f'<div style="opacity:0.75">{scores}</div></div>'
        )


def answer_of(result: Result, prompt_index: int, threshold: Any = None) -> Answer:
    """``UQResult.answer()``: the row labelled ``prompt_index`` as an :class:`Answer`, its
    words marked below ``threshold`` (default: the result's word threshold).

    Raises:
        InputValidationError: no row has that label.
    """
    return _answer_at(result, _position(result, prompt_index), threshold)


def _answer_at(result: Result, row: int, threshold: Any = None) -> Answer:
    """The row at position ``row`` as an :class:`Answer`."""
    from uqlm_bert.results._levels import score_columns

    supports = result.data.get(SUPPORTS)
    support = supports[row] if supports is not None else None
    word_cut = level_threshold(result, "word", threshold)
    errors = result.data.get("errors") or [None] * len(result)
    return Answer(
        prompt_index=result.index[row],
        prompt=shown_prompt((result.data.get("prompts") or [None] * len(result))[row]),
        response=(result.data.get("responses") or [None] * len(result))[row],
        scores={name: float(np.float64(result.data[name][row])) for name in score_columns(result)},
        words=_words_of(support, word_cut, result.index[row]),
        threshold=word_cut,
        removed=_removed_spans(result, support),
        error=None if errors[row] is None else str(errors[row]),
    )


def _position(result: Result, prompt_index: Any) -> int:
    """The position of the row labelled ``prompt_index``."""
    if isinstance(prompt_index, bool) or not isinstance(prompt_index, (int, np.integer)):
        raise InputValidationError(f"prompt_index must be an int, got {prompt_index!r}")
    labels = list(result.index)
    if prompt_index not in labels:
        shown = ", ".join(map(str, labels[:10])) + (", ..." if len(labels) > 10 else "")
        raise InputValidationError(
            f"no row labelled prompt_index={prompt_index} in this result (its labels: {shown}); "
            "result.index[p] is the label of the row at position p"
        )
    return labels.index(prompt_index)


def _removed_spans(result: Result, support: TokenSupport | None) -> tuple:
    """The ``(start, end, support)`` of an answer's sentences below the default sentence
    threshold (empty without supports, or without a default threshold)."""
    cut = level_threshold(result, "sentence")
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
    with the weakly supported words marked and the unsupported sentences struck through (or,
    for a failed call, its error), and its confidences; at most :data:`MAX_HTML_ROWS` rows,
    every text escaped."""
    from uqlm_bert.results._levels import score_columns

    names = score_columns(result)
    heads = ["prompt_index", "prompt", "response", *names]
    head = "".join(f"<th>{html.escape(h)}</th>" for h in heads)
    rows = []
    for i in range(min(len(result), MAX_HTML_ROWS)):
        answer = _answer_at(result, i)
        cells = [
            str(answer.prompt_index),
            html.escape(answer.prompt or ""),
            _response_html(answer),
            *(_number(answer.scores[name]) for name in names),
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
    word = level_threshold(result, "word")
    sentence = level_threshold(result, "sentence")
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


def _no_answer(error: str | None) -> str:
    return "(no answer)" if error is None else f"(no answer: {error})"


def _response_html(answer: Answer) -> str:
    if answer.response is None:
        return f'<i class="uqlm-failed">{html.escape(_no_answer(answer.error))}</i>'
    return answer_html(answer.response, answer.words, answer.threshold, answer.removed)


def _words_of(support: TokenSupport | None, threshold: float | None, label: int) -> pd.DataFrame:
    """One answer's rows of ``UQResult.words()``."""
    from uqlm_bert.results._levels import flag_words
    from uqlm_bert.results._tables import word_frame

    frame = word_frame([] if support is None else [support])
    frame["prompt_index"] = np.full(len(frame), label, dtype=np.int64)
    return flag_words(frame, threshold)


def _number(value: float) -> str:
    return "NaN" if math.isnan(value) else f"{value:.3f}"
