"""The fields of a result: which are not scores, the column each is shown in, and the small
rules every result applies to them (one length, rows taken, failures as text).

Example:
    >>> FIELD_COLUMNS["responses"], FIELD_COLUMNS["errors"]
    ('response', 'error')
    >>> shown_prompt([("system", "Be brief."), ("human", "Capital of Peru?")])
    'Capital of Peru?'
"""

from __future__ import annotations

from typing import Any

import numpy as np

from uqlm_bert._exceptions import InputValidationError

__all__ = [
    "EXTRA_FIELDS",
    "FIELD_COLUMNS",
    "NOT_SCORES",
    "SUPPORTS",
    "column_dtype",
    "common_length",
    "errors_as_text",
    "shown_prompt",
    "take",
]

#: Each data field that is not a score, and the column :meth:`UQResult.to_df` shows it in.
FIELD_COLUMNS = {
    "prompts": "prompt",
    "responses": "response",
    "sampled_responses": "sampled_responses",
    "raw_responses": "raw_response",
    "raw_sampled_responses": "raw_sampled_responses",
    "original_responses": "original_response",
    "best_response_index": "best_response_index",
    "errors": "error",
    "sample_errors": "sample_errors",
}


#: The data field of each answer's token supports (:class:`~uqlm_bert.bertscore.TokenSupport`,
#: read by ``UQResult.words()``, ``sentences()`` and ``refine()``): neither a score nor a column.
SUPPORTS = "supports"

#: Data fields that are not scores.
NOT_SCORES = frozenset([*FIELD_COLUMNS, SUPPORTS])

#: The optional fields, shown where a result has them.
EXTRA_FIELDS = (
    "raw_responses",
    "raw_sampled_responses",
    "original_responses",
    "best_response_index",
)


def shown_prompt(prompt: Any) -> str | None:
    """A prompt as a person reads it: the string, or the text of the last user message of a
    list of chat messages (LangChain messages, ``(role, text)`` pairs or ``{"role", "content"}``
    dicts).

    Example:
        >>> shown_prompt([("system", "Be brief."), ("human", "Capital of Peru?")])
        'Capital of Peru?'
    """
    if prompt is None or isinstance(prompt, str):
        return prompt
    try:
        from langchain_core.messages import convert_to_messages

        messages = convert_to_messages(prompt)
    except Exception:  # noqa: BLE001 - not messages: shown as it is
        return str(prompt)
    chosen = next((m for m in reversed(messages) if m.type == "human"), None)
    if chosen is None:
        chosen = messages[-1] if messages else None
    if chosen is None:
        return ""
    text = chosen.text  # a property (a str) in recent langchain-core, a method before
    return str(text) if isinstance(text, str) else text()


def errors_as_text(values: Any) -> list[Any]:
    """Failures as their messages (None where nothing failed), one level of lists deep."""
    return [
        [None if e is None else str(e) for e in v]
        if isinstance(v, list)
        else (None if v is None else str(v))
        for v in values
    ]


def column_dtype(name: str, scorers: list[str]) -> Any:
    """The dtype of column ``name`` in ``to_df``: float64 for scores, int64 for counts, else
    object (which keeps None as None)."""
    if name in scorers:
        return np.float64
    return np.int64 if name == "num_failed_samples" else object


def common_length(data: dict[str, Any]) -> int:
    """The one length of every field given (0 with none).

    Raises:
        InputValidationError: the fields differ in length.
    """
    lengths = {k: len(v) for k, v in data.items() if v is not None}
    if not lengths:
        return 0
    if len(set(lengths.values())) > 1:
        detail = ", ".join(f"{k}={n}" for k, n in lengths.items())
        raise InputValidationError(f"UQResult fields differ in length: {detail}")
    return next(iter(lengths.values()))


def take(values: Any, rows: list[int]) -> Any:
    """The items of a field at ``rows`` (lists copied, so the new result owns them)."""
    if values is None:
        return None
    if isinstance(values, np.ndarray):
        return values[rows]
    return [list(values[i]) if isinstance(values[i], list) else values[i] for i in rows]
