"""Answers shown with their weakly supported words marked: as HTML (Jupyter) and as text (a
terminal, with colour or plain brackets).

A word is marked when it counts in the confidence (the prompt's own words and punctuation do
not) and its support is below the threshold (by default
:data:`~uqlm_bert.bertscore._token_support.WEAK_SUPPORT`). Everything else of the answer is shown as it
is, character for character: the marks are put around ``text[start:end]`` of the word rows
(:func:`~uqlm_bert.results._tables.word_frame`), and in HTML every character of the answer
is escaped, so an answer holding markup or ``<script>`` shows as text and runs nothing. In HTML
a weak word is both highlighted and underlined, so the marks read without colour too; in a
terminal it is red and underlined where colour is on, and in ``[brackets]`` otherwise, and
control characters of the answer (escape sequences a model could emit) are shown as ``\\x..``
instead of being sent to the terminal.

Example:
    >>> import pandas as pd
    >>> words = pd.DataFrame({"start": [0, 5, 8, 11, 15], "end": [4, 7, 10, 15, 16],
    ...                       "support": [0.9, 0.8, 0.8, 0.3, 0.1],
    ...                       "counted": [True, True, True, True, False]})
    >>> answer_text("Lima is in Peru.", words, threshold=0.5, colour=False)
    'Lima is in [Peru].'
    >>> answer_html("Lima is in <b>Peru</b>", words.iloc[:0], threshold=0.5)
    '<span class="uqlm-answer">Lima is in &lt;b&gt;Peru&lt;/b&gt;</span>'
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from uqlm_bert.bertscore._token_support import is_weak

__all__ = [
    "HTML_STYLE",
    "STRUCK_STYLE",
    "answer_html",
    "answer_text",
    "terminal_safe",
    "weak_spans",
]

#: The inline style of a weak word in HTML: a background for colour, and an underline that
#: still shows without it (printed in black and white, or for readers who cannot tell colours
#: apart).
HTML_STYLE = (
    "background-color:#ffd7d7;color:inherit;text-decoration:underline wavy #b00000;"
    "text-underline-offset:2px"
)

#: The inline style of a sentence ``refine()`` removes: struck through and greyed.
STRUCK_STYLE = "color:#707070;text-decoration:line-through"

# the bidirectional overrides and isolates: they reorder what follows them on screen
_BIDI_CONTROLS = frozenset([*range(0x202A, 0x202F), *range(0x2066, 0x206A)])
_RED_UNDERLINED = "\x1b[4;31m"
_STRUCK = "\x1b[9m"
_RESET = "\x1b[0m"


def weak_spans(words: Any, threshold: float) -> list[tuple[int, int, float]]:
    """``(start, end, support)`` of the weak words of one answer (the one rule,
    :func:`~uqlm_bert.bertscore._token_support.is_weak`), in order and not overlapping.

    Args:
        words: one answer's word rows: a DataFrame (or mapping of arrays) with ``start``,
            ``end``, ``support`` and ``counted``.
        threshold: words below it are weak.

    Example:
        >>> weak_spans({"start": [0, 3], "end": [2, 5], "support": [0.2, 0.9],
        ...             "counted": [True, True]}, 0.5)
        [(0, 2, 0.2)]
    """
    start = np.asarray(words["start"], dtype=np.int64)
    end = np.asarray(words["end"], dtype=np.int64)
    support = np.asarray(words["support"], dtype=np.float64)
    weak = is_weak(words, threshold)
    out: list[tuple[int, int, float]] = []
    last = 0
    for s, e, v in zip(start[weak], end[weak], support[weak], strict=True):
        if s >= last and e > s:
            out.append((int(s), int(e), float(v)))
            last = int(e)
    return out


def _pieces(
    text: str, weak: Sequence[tuple[int, int, float]], struck: Sequence[tuple[int, int, float]]
) -> list[tuple[str, tuple[int, int, float] | None, tuple[int, int, float] | None]]:
    """``text`` cut where a weak word or a struck span starts or ends: each piece with the weak
    word and the struck span it lies in (None for none), in order; joined, the pieces are
    ``text``."""
    cuts = sorted({0, len(text), *(x for a, b, _ in (*weak, *struck) for x in (a, b))})
    pieces = []
    for a, b in zip(cuts, cuts[1:], strict=False):
        if b <= a:
            continue
        in_weak = next((w for w in weak if w[0] <= a and b <= w[1]), None)
        in_struck = next((t for t in struck if t[0] <= a and b <= t[1]), None)
        pieces.append((text[a:b], in_weak, in_struck))
    return pieces


def answer_html(
    text: str,
    words: Any,
    threshold: float | None,
    struck: Sequence[tuple[int, int, float]] = (),
) -> str:
    """One answer as an HTML fragment: its weak words in ``<mark>`` (with their support in the
    ``title``; none marked when ``threshold`` is None), and the ``struck`` spans
    (``(start, end, support)``: the sentences ``refine()`` removes) in ``<del>``; every
    character of ``text`` escaped.

    Example:
        >>> words = {"start": [0], "end": [4], "support": [0.25], "counted": [True]}
        >>> answer_html("Lima & co", words, 0.5)  # doctest: +ELLIPSIS
        '<span class="uqlm-answer"><mark class="uqlm-weak" title="support 0.25" style="...">Lima</mark> &amp; co</span>'
        >>> answer_html("A. B.", words, None, struck=[(3, 5, 0.1)])  # doctest: +ELLIPSIS
        '<span class="uqlm-answer">A. <del class="uqlm-removed" title="sentence support 0.10" ...>B.</del></span>'
    """
    weak = [] if threshold is None else weak_spans(words, threshold)
    parts: list[str] = []
    for piece, in_weak, in_struck in _pieces(text, weak, struck):
        out = html.escape(piece)
        if in_weak is not None:
            out = (
                f'<mark class="uqlm-weak" title="support {in_weak[2]:.2f}" '
                f'style="{HTML_STYLE}">{out}</mark>'
            )
        if in_struck is not None:
            out = (
                f'<del class="uqlm-removed" title="sentence support {in_struck[2]:.2f}" '
                f'style="{STRUCK_STYLE}">{out}</del>'
            )
        parts.append(out)
    # a mark or strike cut in pieces reads as one: adjacent closing and opening tags go
    joined = "".join(parts)
    joined = re.sub(r'</mark><mark class="uqlm-weak" title="[^"]*" style="[^"]*">', "", joined)
    joined = re.sub(r'</del><del class="uqlm-removed" title="[^"]*" style="[^"]*">', "", joined)
    return f'<span class="uqlm-answer">{joined}</span>'


def answer_text(
    text: str,
    words: Any,
    threshold: float | None,
    colour: bool,
    struck: Sequence[tuple[int, int, float]] = (),
) -> str:
    """One answer for a terminal: its weak words red and underlined (``colour``) or in
    ``[brackets]``, the ``struck`` spans struck through or in ``~~tildes~~``, and its control
    characters made visible (:func:`terminal_safe`).

    Example:
        >>> words = {"start": [4], "end": [9], "support": [0.1], "counted": [True]}
        >>> answer_text("The moons\\x1b[2J.", words, 0.5, colour=False)
        'The [moons]\\\\x1b[2J.'
        >>> answer_text("A. B.", words, None, colour=False, struck=[(3, 5, 0.1)])
        'A. ~~B.~~'
    """
    weak = [] if threshold is None else weak_spans(words, threshold)
    pieces = _pieces(text, weak, struck)
    if colour:
        out = []
        for piece, in_weak, in_struck in pieces:
            style = (_STRUCK if in_struck else "") + (_RED_UNDERLINED if in_weak else "")
            out.append(f"{style}{terminal_safe(piece)}{_RESET}" if style else terminal_safe(piece))
        return "".join(out)
    out, word, sentence = [], None, None
    for piece, in_weak, in_struck in pieces:
        if word is not None and in_weak != word:
            out.append("]")
            word = None
        if sentence is not None and in_struck != sentence:
            out.append("]" if word is not None else "")
            out.append("~~")
            word, sentence = None, None
        if in_struck is not None and sentence is None:
            out.append("~~")
            sentence = in_struck
        if in_weak is not None and word is None:
            out.append("[")
            word = in_weak
        out.append(terminal_safe(piece))
    return "".join(out) + ("]" if word is not None else "") + ("~~" if sentence is not None else "")


def terminal_safe(text: str) -> str:
    """``text`` with its control characters (but newlines and tabs) and the bidirectional
    overrides written as ``\\xNN`` / ``\\uNNNN`` escapes, so that what a model wrote cannot
    move the cursor, recolour a terminal or reorder the line.

    Example:
        >>> terminal_safe("ok\\x1b[31m red\\u202e")
        'ok\\\\x1b[31m red\\\\u202e'
    """
    out = []
    for ch in text:
        code = ord(ch)
        if ch in "\n\t" or not (code < 32 or 127 <= code < 160 or code in _BIDI_CONTROLS):
            out.append(ch)
        else:
            out.append(ch.encode("unicode_escape").decode("ascii"))
    return "".join(out)
