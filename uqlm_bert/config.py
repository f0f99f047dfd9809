"""Checks shared by the settings objects and the scorer registry: names and values.

An unknown setting is always an error that names it, suggests the closest accepted name and
lists them all; a bad value is an error that names the setting and says what it takes.

Example:
    >>> check_names({"num_layer": 2}, ["num_layers", "idf"], "BERTScore setting")
    Traceback (most recent call last):
    ...
    uqlm_bert.exceptions.ConfigurationError: unknown BERTScore setting 'num_layer' (did you mean 'num_layers'?); accepted: idf, num_layers
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from uqlm_bert.exceptions import ConfigurationError

__all__ = ["check_int", "check_names", "check_number"]


def check_names(
    given: Mapping[str, Any], accepted: Iterable[str], what: str, where: str = ""
) -> None:
    """Raise :class:`ConfigurationError` for the first name in ``given`` not in ``accepted``.

    ``what`` names the kind of name ("BERTScore setting") and ``where`` says where it was given
    (" for scorers rouge_l").

    Example:
        >>> check_names({"batch_size": 8}, ["batch_size"], "setting")
    """
    allowed = sorted(accepted)
    for name in given:
        if name not in allowed:
            close = difflib.get_close_matches(str(name), allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigurationError(
                f"unknown {what} {name!r}{where}{hint}; accepted: {', '.join(allowed) or '(none)'}"
            )


def check_int(name: str, value: Any, minimum: int, *, none_ok: bool = False) -> None:
    """Raise :class:`ConfigurationError` unless ``value`` is an int >= ``minimum`` (or None).

    Example:
        >>> check_int("batch_size", 0, 1)
        Traceback (most recent call last):
        ...
        uqlm_bert.exceptions.ConfigurationError: batch_size must be an int >= 1, got 0
    """
    if value is None and none_ok:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        tail = " or None" if none_ok else ""
        raise ConfigurationError(f"{name} must be an int >= {minimum}{tail}, got {value!r}")


def check_number(
    name: str, value: Any, *, minimum: float = 0.0, strict: bool = False, none_ok: bool = False
) -> None:
    """Raise :class:`ConfigurationError` unless ``value`` is a real number >= (or >) ``minimum``.

    Example:
        >>> check_number("request_timeout", -1, strict=True)
        Traceback (most recent call last):
        ...
        uqlm_bert.exceptions.ConfigurationError: request_timeout must be a number > 0, got -1
    """
    if value is None and none_ok:
        return
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value == value
    if ok:
        ok = value > minimum if strict else value >= minimum
    if not ok:
        sign = ">" if strict else ">="
        tail = " or None" if none_ok else ""
        raise ConfigurationError(f"{name} must be a number {sign} {minimum:g}{tail}, got {value!r}")
