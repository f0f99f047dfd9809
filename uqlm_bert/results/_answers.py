"""Where a result's answers are unsupported: its word and sentence tables, one answer as a view,
and the result as an HTML table, all read from each answer's token supports.

A result of the ``bert_score`` scorers holds, beside each answer, its token supports
(:class:`~uqlm_bert.bertscore._token_support.TokenSupport`, under ``data["token_supports"]``): which
tokens of the answer its samples support, from the same pass as the confidence. The functions
here turn them into what users look at: :func:`word_table` and :func:`sentence_table` (the
tables of ``UQResult.supports()`` and ``sentences()``, their ``response_index`` the result's
own row labels, as ``to_df()``'s index), :class:`Answer` (one row, shown with its weak words
marked in Jupyter and in a terminal) and :func:`result_html` (the result in Jupyter).

Example:
    >>> from uqlm_bert import BlackBoxUQ
    >>> result = BlackBoxUQ(show_progress_bars=False).score(
    ...     ["Lima is in Peru. It has nine moons."],
    ...     [["Lima is the capital of Peru.", "Lima, in Peru, is a big city."]])
    >>> word_table(result)["text"].tolist()[:4]
    ['Lima', 'is', 'in', 'Peru']
    >>> sentence_table(result)["sentence"].tolist()
    ['Lima is in Peru.', 'It has nine moons.']
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from uqlm_bert._exceptions import ConfigurationError, InputValidationError
from uqlm_bert.results._fields import shown_prompt
from uqlm_bert.results._render import answer_html, answer_text

if TYPE_CHECKING:
    from uqlm_bert.bertscore._token_support import TokenSupport

#: A ``UQResult`` (not imported here: the result's methods import this module).
Result = Any

__all__ = ["Answer", "MAX_HTML_ROWS", "answer_of", "result_html", "sentence_table", "word_table"]

#: At most this many rows of a result are shown in its HTML table (the rest are counted).
MAX_HTML_ROWS = 50


def token_supports(result: Result) -> list[TokenSupport | None]:
    """The result's token supports, one per row.

    Raises:
        ConfigurationError: the result holds none, with why and what to do.
    """
    found = result.data.get("token_supports")
    if found is None:
        raise ConfigurationError(
            "this result holds no token supports: they come with the bert_score scorers "
            "(bert_score, bert_score_precision or bert_score_recall) of BlackBoxUQ.score or "
            "generate_and_score, and not with use_best=True or token_supports=False"
        )
    return list(found)


def word_table(result: Result) -> pd.DataFrame:
    """``UQResult.supports()``: one row per word of every answer (see
    :func:`~uqlm_bert.results._tables.word_frame`), ``response_index`` the row's label."""
    from uqlm_bert.results._tables import word_frame

    return _relabel(word_frame(token_supports(result)), result)


def sentence_table(
    result: Result,
    sentences: Any = None,
    language: str = "en",
) -> pd.DataFrame:
    """``UQResult.sentences()``: one row per sentence of every answer (see
    :func:`~uqlm_bert.results._tables.sentence_frame`), ``response_index`` the row's label."""
    from uqlm_bert.results._tables import sentence_frame

    return _relabel(sentence_frame(token_supports(result), sentences, language), result)


def _relabel(frame: pd.DataFrame, result: Result) -> pd.DataFrame:
    """``frame`` with its positional ``response_index`` replaced by the result's row labels."""
    labels = list(result.index)
    frame["response_index"] = [labels[i] for i in frame["response_index"]]
    return frame


@dataclass(frozen=True)
class Answer:
    """One row of a result, as a person reads it: the prompt, the answer with its weakly
    supported words marked, and its confidences. Shown marked in Jupyter (``_repr_html_``) and
    with ``[brackets]`` by ``str()``; :meth:`terminal` colours them instead.

    Attributes:
        index: the row's label (its prompt's index).
        prompt: the prompt as a person reads it.
        response: the answer (None where the call failed).
        scores: each scorer's confidence.
        words: the answer's word rows (``UQResult.supports()``'s), empty without supports.
        threshold: words below this support are marked.
    """

    index: int
    prompt: str | None
    response: str | None
    scores: dict[str, float]
    words: pd.DataFrame = field(repr=False)
    threshold: float

    @property
    def weak_words(self) -> list[str]:
        """The counted words whose support is below :attr:`threshold`, in order."""
        weak = self.words[self.words["counted"] & (self.words["support"] < self.threshold)]
        return weak["text"].tolist()

    def terminal(self, colour: bool) -> str:
        """The answer for a terminal: weak words red and underlined, or in ``[brackets]``."""
        return (
            ""
            if self.response is None
            else answer_text(self.response, self.words, self.threshold, colour)
        )

    def __str__(self) -> str:
        return self.terminal(colour=False)

    def _repr_html_(self) -> str:
        scores = ", ".join(f"{html.escape(k)} {_number(v)}" for k, v in self.scores.items())
        body = _response_html(self.response, self.words, self.threshold)
        prompt = html.escape(self.prompt or "")
        return (
            f'<div class="uqlm-answer-view"><div><b>{prompt}</b></div><div>{body}</div>'
            f'<div style="opacity:0.75">{scores}</div></div>'
        )


def answer_of(result: Result, row: int, threshold: float | None = None) -> Answer:
    """``UQResult.answer(row)``: row ``row`` (a position, 0 to ``len(result) - 1``) as an
    :class:`Answer`.

    Raises:
        InputValidationError: no such row.
    """
    if isinstance(row, bool) or not isinstance(row, int) or not -len(result) <= row < len(result):
        raise InputValidationError(
            f"row must be a position from 0 to {len(result) - 1}, got {row!r}"
        )
    row = row % len(result)
    supports = result.data.get("token_supports")
    words = _words_of(supports[row] if supports is not None else None)
    return Answer(
        index=result.index[row],
        prompt=shown_prompt((result.data.get("prompts") or [None] * len(result))[row]),
        response=(result.data.get("responses") or [None] * len(result))[row],
        scores={name: float(result.data[name][row]) for name in result.scorers},
        words=words,
        threshold=_threshold(threshold),
    )


def result_html(result: Result, threshold: float | None = None) -> str:
    """The result as an HTML table (Jupyter's view of a ``UQResult``): each prompt, its answer
    with the weakly supported words marked, and its confidences; at most
    :data:`MAX_HTML_ROWS` rows, every text escaped."""
    cut = _threshold(threshold)
    heads = ["", "prompt", "response", *result.scorers]
    head = "".join(f"<th>{html.escape(h)}</th>" for h in heads)
    rows = []
    for i in range(min(len(result), MAX_HTML_ROWS)):
        answer = answer_of(result, i, cut)
        cells = [
            str(answer.index),
            html.escape(answer.prompt or ""),
            _response_html(answer.response, answer.words, cut),
            *(_number(answer.scores[name]) for name in result.scorers),
        ]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    more = len(result) - MAX_HTML_ROWS
    tail = f"<p>{more} more rows: <code>to_df()</code> has them all.</p>" if more > 0 else ""
    note = (
        f"<p>Marked: words the samples support below {cut:g} (<code>supports()</code> "
        "has every word's support).</p>"
        if result.data.get("token_supports") is not None
        else ""
    )
    return (
        f'<div class="uqlm-result"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>{tail}{note}</div>"
    )


def _response_html(response: str | None, words: pd.DataFrame, threshold: float) -> str:
    if response is None:
        return "<i>(no answer)</i>"
    return answer_html(response, words, threshold)


def _words_of(support: TokenSupport | None) -> pd.DataFrame:
    if support is None:
        return pd.DataFrame({"start": [], "end": [], "text": [], "support": [], "counted": []})
    from uqlm_bert.results._tables import word_frame

    return word_frame([support])


def _threshold(threshold: float | None) -> float:
    if threshold is None:
        from uqlm_bert.bertscore._token_support import WEAK_SUPPORT

        return WEAK_SUPPORT
    return float(threshold)


def _number(value: float) -> str:
    return "NaN" if math.isnan(value) else f"{value:.3f}"
