"""Refined answers: each answer with its unsupported sentences removed.

A sentence is unsupported when its support (the aggregate of its tokens' supports from the
confidence's own pass, ``UQResult.sentences()``) is below the sentence threshold (by default
:data:`~uqlm_bert.bertscore._token_support.SENTENCE_THRESHOLD`, for the scorers' default encoder and
layer).
:func:`refine_text` removes such sentences from one answer and keeps everything else as the
answer has it: the kept sentences in their order, character for character, the text before the
first sentence and after the last, and between two kept sentences one of the answer's own
separators (where sentences between them went, the one of those separators with the most line
breaks, so a paragraph break survives the removal of the sentence before it). :func:`refine_table`
does it for every answer of a result: ``UQResult.refine()``.

An answer all of whose sentences are unsupported is not turned into an empty string: its
``refined_response`` is None and its ``refinement`` says ``"all_removed"``. Failed and missing
answers stay as they are (``"no_answer"``), as do answers with no sample to judge them by
(``"unscored"``).

Example:
    >>> text = "Lima is in Peru.\\n\\nIt has nine moons. It is a city."
    >>> spans = [(0, 16), (18, 36), (37, 48)]
    >>> refine_text(text, spans, [0.9, 0.2, 0.8], 0.5)
    ('Lima is in Peru.\\n\\nIt is a city.', [1])
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from uqlm_bert._warn import warn_user
from uqlm_bert.results._levels import required_threshold, supports_of

__all__ = ["REFINEMENTS", "refine_table", "refine_text"]

#: The values of a refined table's ``refinement`` column, and what each says.
REFINEMENTS = {
    "unchanged": "every sentence is supported: the answer is kept whole",
    "refined": "the unsupported sentences were removed",
    "all_removed": "every sentence is unsupported: nothing is left (refined_response is None)",
    "no_answer": "the answer is missing (its call failed): nothing to refine",
    "unscored": "no sample to judge the answer by: kept as it is",
}


def refine_text(
    text: str, spans: Sequence[tuple[int, int]], supports: Sequence[float], threshold: float
) -> tuple[str | None, list[int]]:
    """``text`` without its sentences whose support is below ``threshold``, and which went.

    Args:
        text: the answer.
        spans: its sentences' ``(start, end)`` character offsets, in order, not overlapping.
        supports: each sentence's support (NaN, a sentence with no scored token, is kept).
        threshold: sentences below it are removed.

    Returns:
        ``(refined, removed)``: the refined text (None when every sentence is removed; ``text``
        itself when none is) and the positions of the removed sentences in ``spans``.

    Example:
        >>> refine_text("A b. C d. E f.", [(0, 4), (5, 9), (10, 14)], [0.9, 0.1, 0.9], 0.5)
        ('A b. E f.', [1])
        >>> refine_text("A b.", [(0, 4)], [0.1], 0.5)
        (None, [0])
    """
    removed = [k for k, v in enumerate(supports) if not math.isnan(v) and v < threshold]
    if not removed:
        return text, []
    kept = [k for k in range(len(spans)) if k not in set(removed)]
    if not kept:
        return None, removed
    out = [text[: spans[0][0]]]
    previous = None
    for k in kept:
        if previous is not None:
            gaps = [text[spans[j - 1][1] : spans[j][0]] for j in range(previous + 1, k + 1)]
            out.append(_separator(gaps))
        out.append(text[spans[k][0] : spans[k][1]])
        previous = k
    out.append(text[spans[-1][1] :])
    return "".join(out), removed


def _separator(gaps: list[str]) -> str:
    """What stands between two kept sentences when the sentences between them go: the gap of
    the answer with the most line breaks (the last of equals); all of them, in order, when one
    holds more than white space (text outside any sentence is never dropped)."""
    if any(gap.strip() for gap in gaps):
        return "".join(gaps)
    return max(reversed(gaps), key=lambda gap: gap.count("\n"))


def refine_table(
    result: Any,
    threshold: float | None = None,
    sentences: Sequence[Sequence[str] | None] | None = None,
    language: str = "en",
) -> pd.DataFrame:
    """``UQResult.refine()``: the answers table (``to_df()``) with, per answer,
    ``refined_response``, ``removed_sentences`` (one dict per sentence removed: ``start``,
    ``end``, ``sentence``, ``support``, ``sentence_index`` and the ``reason``) and
    ``refinement`` (see :data:`REFINEMENTS`). The offsets index the text that was scored, which
    is the ``response`` shown unless a postprocessor's raw texts are shown instead.

    Raises:
        ConfigurationError: the result holds no supports, or (``threshold`` None) has no default
            sentence threshold for its settings.
        InputValidationError: a bad threshold or sentence split.
    """
    from uqlm_bert.results._tables import sentence_frame

    cut = required_threshold(result, "sentence", threshold)
    supports = supports_of(result)
    frame = result.to_df()
    table = sentence_frame(supports, sentences, language)
    by_row = {k: g for k, g in table.groupby("prompt_index", sort=False)}
    responses = result.data.get("responses") or [None] * len(result)
    refined: list[str | None] = []
    removed: list[list[dict[str, Any]]] = []
    status: list[str] = []
    for i, (response, support) in enumerate(zip(responses, supports, strict=True)):
        if response is None:
            refined.append(None), removed.append([]), status.append("no_answer")
            continue
        rows = by_row.get(i)
        if support is None or rows is None:
            refined.append(response), removed.append([]), status.append("unscored")
            continue
        spans = list(zip(rows["start"].tolist(), rows["end"].tolist(), strict=True))
        values = rows["support"].to_numpy(dtype=np.float64)
        text, gone = refine_text(support.text, spans, values, cut)
        refined.append(text)
        removed.append([_removed(rows.iloc[k], cut) for k in gone])
        status.append("unchanged" if not gone else "all_removed" if text is None else "refined")
    frame["refined_response"] = pd.Series(refined, index=frame.index, dtype=object)
    frame["removed_sentences"] = pd.Series(removed, index=frame.index, dtype=object)
    frame["refinement"] = pd.Series(status, index=frame.index, dtype=object)
    frame.attrs["sentence_threshold"] = cut
    emptied = status.count("all_removed")
    if emptied:
        warn_user(
            f"{emptied} answer(s) had every sentence below the sentence threshold {cut:g}: "
            "their refined_response is None (refinement 'all_removed'), not an empty string",
            UserWarning,
        )
    return frame


def _removed(row: Any, cut: float) -> dict[str, Any]:
    """A removed sentence as plain data, with why it went."""
    support = float(row["support"])
    return {
        "start": int(row["start"]),
        "end": int(row["end"]),
        "sentence": str(row["sentence"]),
        "support": round(support, 4),
        "sentence_index": int(row["sentence_index"]),
        "reason": f"support {support:.3f} below the sentence threshold {cut:g}",
    }
