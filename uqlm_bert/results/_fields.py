"""The fields of a result: which are not scores, the column each is shown in, and the small
rules every result applies to them (one length, rows taken, failures as text).

Example:
    >>> FIELD_COLUMNS["responses"], FIELD_COLUMNS["errors"]
    ('response', 'error')
    >>> shown_prompt([("system", "Be brief."), ("human", "Capital of Peru?")])
    'Capital of Peru?'
"""

from __future__ import annotations

import math
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
    "from_plain",
    "plain_data",
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


#: The data field of each answer's token supports (:class:`~uqlm_bert.bertscore._token_support.TokenSupport`,
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
    messages = _messages(prompt)
    if messages is None:  # not messages: shown as it is
        return str(prompt)
    chosen = next((m for m in reversed(messages) if m.type == "human"), None)
    if chosen is None:
        chosen = messages[-1] if messages else None
    if chosen is None:
        return ""
    text = chosen.text  # a property (a str) in recent langchain-core, a method before
    return str(text) if isinstance(text, str) else text()


def plain_data(data: dict[str, Any]) -> dict[str, Any]:
    """A result's data as plain lists, ready for ``json.dump`` (``UQResult.to_dict()``): a
    failed call as its fields (``kind``, ``message``, ...) or its message, a token support as
    its lists, a missing score as None, a prompt given as chat messages as ``{"role",
    "content"}`` dicts. :func:`from_plain` reads it back.

    Example:
        >>> plain_data({"prompts": [[("human", "Hi")]], "bert_score": [float("nan")]})
        {'prompts': [[{'role': 'human', 'content': 'Hi'}]], 'bert_score': [None]}
    """
    out: dict[str, Any] = {}
    for key, values in data.items():
        if values is None:
            out[key] = None
        elif key == "errors":
            out[key] = [_plain_error(e) for e in values]
        elif key == "sample_errors":
            out[key] = [[_plain_error(e) for e in errors] for errors in values]
        elif key == SUPPORTS:
            out[key] = [None if s is None else s.to_dict() for s in values]
        elif key == "prompts":
            out[key] = [_plain_prompt(p) for p in values]
        else:
            out[key] = [_plain_value(v) for v in values]
    return out


def from_plain(data: dict[str, Any]) -> dict[str, Any]:
    """A result's data with the plain forms of :func:`plain_data` read back: token supports as
    :class:`~uqlm_bert.bertscore._token_support.TokenSupport`, failed calls as
    :class:`~uqlm_bert.generation.CallFailure` (a message alone stays text); what is already in
    its own form is kept as it is.

    Raises:
        InputValidationError: a token support that is neither a ``TokenSupport``, its plain
            form nor None.
    """
    out = dict(data)
    if out.get(SUPPORTS) is not None:
        from uqlm_bert.bertscore._token_support import TokenSupport

        supports = []
        for i, s in enumerate(out[SUPPORTS]):
            if isinstance(s, dict):
                s = TokenSupport.from_dict(s)
            elif s is not None and not isinstance(s, TokenSupport):
                raise InputValidationError(
                    f"supports[{i}] is a {type(s).__name__}: give a TokenSupport, its to_dict() "
                    "form or None"
                )
            supports.append(s)
        out[SUPPORTS] = supports
    if out.get("errors") is not None:
        out["errors"] = [_failure(e) for e in out["errors"]]
    if out.get("sample_errors") is not None:
        out["sample_errors"] = [[_failure(e) for e in errors] for errors in out["sample_errors"]]
    return out


def _plain_error(error: Any) -> Any:
    if error is None or isinstance(error, (str, dict)):
        return error
    to_dict = getattr(error, "to_dict", None)
    return to_dict() if callable(to_dict) else str(error)


def _failure(error: Any) -> Any:
    if isinstance(error, dict) and "kind" in error:  # a failed call's fields
        from uqlm_bert.generation._records import CallFailure

        return CallFailure.from_dict(error)
    return error


def _plain_prompt(prompt: Any) -> Any:
    if prompt is None or isinstance(prompt, str):
        return prompt
    messages = _messages(prompt)
    if messages is None:  # not messages: kept as its text
        return str(prompt)
    return [{"role": m.type, "content": m.content} for m in messages]


def _messages(prompt: Any) -> list[Any] | None:
    """The LangChain messages of a prompt given as chat messages, or None where it is not."""
    try:
        from langchain_core.messages import convert_to_messages

        return list(convert_to_messages(prompt))
    except Exception:  # noqa: BLE001 - any failure means: not messages
        return None


def _plain_value(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return [_plain_value(v) for v in value.tolist()]
    if isinstance(value, list):
        return [_plain_value(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def column_dtype(name: str, scores: list[str]) -> Any:
    """The dtype of column ``name`` in ``to_df``: float64 for ``scores``, int64 for the label
    and the counts, else object (which keeps None as None)."""
    if name in scores:
        return np.float64
    return np.int64 if name in ("prompt_index", "num_failed_samples", "samples_drawn") else object


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
