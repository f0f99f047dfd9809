"""Prompts as the user gives them (strings or LangChain message lists) and as the LLM gets them.

Example:
    >>> msgs = to_messages("What is the capital of France?", system_prompt="Answer briefly.")
    >>> [m.type for m in msgs]
    ['system', 'human']
    >>> fingerprint_prompt("hi") == fingerprint_prompt("hi")
    True
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, convert_to_messages

from uqlm_bert._exceptions import InputValidationError

__all__ = ["Prompts", "validate_prompts", "to_messages", "fingerprint_prompt", "fingerprint_run"]


class Prompts(list):
    """A list of prompts that :func:`validate_prompts` checked: passed on as it is, it is not
    checked again (``BlackBoxUQ`` checks a call's prompts once, before its scoring and its
    generation both read them)."""


def validate_prompts(prompts: Any) -> Prompts:
    """Check ``prompts`` and return a shallow copy of it as a list (:class:`Prompts`); a
    :class:`Prompts` is returned as it is, checked already.

    Each prompt is a string or a non-empty list of LangChain messages (or anything
    ``langchain_core.messages.convert_to_messages`` accepts, such as ``("human", "hi")``).

    Raises:
        InputValidationError: ``prompts`` is a single string, empty, or holds an item of another
            type; the message names the index.

    Example:
        >>> checked = validate_prompts(("a", "b"))
        >>> checked, validate_prompts(checked) is checked
        (['a', 'b'], True)
    """
    if isinstance(prompts, Prompts):
        return prompts
    if isinstance(prompts, (str, BaseMessage)):
        raise InputValidationError(
            "prompts must be a list of prompts, not a single prompt; wrap it: [prompt]"
        )
    try:
        items = list(prompts)
    except TypeError as exc:
        raise InputValidationError(
            f"prompts must be a list of strings or message lists, got {type(prompts).__name__}"
        ) from exc
    if not items:
        raise InputValidationError("prompts is empty; give at least one prompt")
    for i, p in enumerate(items):
        if isinstance(p, str):
            continue
        if isinstance(p, (list, tuple)) and p:
            try:
                convert_to_messages(p)
            except Exception as exc:  # noqa: BLE001 - langchain's coercion errors vary by type
                raise InputValidationError(
                    f"prompts[{i}] is a list that is not a list of chat messages: {exc}"
                ) from exc
            continue
        raise InputValidationError(
            f"prompts[{i}] is a {type(p).__name__}; expected a string or a non-empty list of "
            "LangChain messages"
        )
    return Prompts(items)


def to_messages(prompt: str | Sequence[Any], system_prompt: str | None = None) -> list[BaseMessage]:
    """The messages sent to the LLM for one prompt.

    A string becomes one human message. ``system_prompt``, when given, is put first unless the
    prompt already starts with a system message.
    """
    if isinstance(prompt, str):
        messages: list[BaseMessage] = [HumanMessage(content=prompt)]
    else:
        messages = list(convert_to_messages(prompt))
    if system_prompt and not (messages and messages[0].type == "system"):
        messages = [SystemMessage(content=system_prompt), *messages]
    return messages


def fingerprint_prompt(prompt: str | Sequence[Any], system_prompt: str | None = None) -> str:
    """A short stable hash of what the LLM is sent for ``prompt``."""
    payload = [[m.type, _jsonable(m.content)] for m in to_messages(prompt, system_prompt)]
    return _sha256(payload)[:16]


def fingerprint_run(prompt_fingerprints: Sequence[str], settings: dict[str, Any]) -> str:
    """A hash of the prompt list and the settings that change what is generated.

    Example:
        >>> a = fingerprint_run(["x"], {"num_responses": 5})
        >>> a == fingerprint_run(["x"], {"num_responses": 6})
        False
    """
    return _sha256({"prompts": list(prompt_fingerprints), "settings": settings})


def _sha256(obj: Any) -> str:
    blob = json.dumps(obj, sort_keys=True, ensure_ascii=True, default=str).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()


def _jsonable(content: Any) -> Any:
    if isinstance(content, (str, int, float, bool)) or content is None:
        return content
    if isinstance(content, dict):
        return {str(k): _jsonable(v) for k, v in content.items()}
    if isinstance(content, (list, tuple)):
        return [_jsonable(v) for v in content]
    return str(content)
