"""Checks of single values given as parameters: ints, numbers and setting names.

Every public parameter that takes a count is checked by :func:`check_int`, so one rule holds
everywhere: a bool is not an int (Python says ``True == 1``, but ``max_retries=True`` is never
the count a user meant), a float is not an int, and the message names the parameter, the range
and the value given. An unknown setting is always an error that names it, suggests the closest
accepted name and lists them all. The checks of data (texts, lists of samples, arrays of scores)
are in :mod:`uqlm_bert._inputs`.

Example:
    >>> check_int("max_retries", True, 0)
    Traceback (most recent call last):
    ...
    uqlm_bert.ConfigurationError: max_retries must be an int >= 0, got True
    >>> check_names({"num_layer": 2}, ["num_layers", "idf"], "BERTScore setting")
    Traceback (most recent call last):
    ...
    uqlm_bert.ConfigurationError: unknown BERTScore setting 'num_layer' (did you mean 'num_layers'?); accepted: idf, num_layers
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping
from typing import Any

from uqlm_bert._exceptions import ConfigurationError, UQLMBertError

__all__ = ["NOT_GIVEN", "NotGiven", "check_int", "check_names", "check_number", "given"]


class NotGiven:
    """The type of :data:`NOT_GIVEN`: the default of an argument whose real default lives in a
    settings object, so that a value given explicitly (even the default's own value) can be
    told from one left out, as httpx's ``USE_CLIENT_DEFAULT``.

    Example:
        >>> NOT_GIVEN, bool(NOT_GIVEN)
        (NOT_GIVEN, False)
    """

    _instance: NotGiven | None = None

    def __new__(cls) -> NotGiven:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NOT_GIVEN"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "NOT_GIVEN"


#: An argument left out: its settings object's default applies.
NOT_GIVEN = NotGiven()


def given(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments given explicitly (not :data:`NOT_GIVEN`), in order.

    Example:
        >>> given({"max_retries": 0, "request_timeout": NOT_GIVEN})
        {'max_retries': 0}
    """
    return {k: v for k, v in arguments.items() if v is not NOT_GIVEN}


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


def check_int(
    name: str,
    value: Any,
    minimum: int | None,
    *,
    none_ok: bool = False,
    numpy_ok: bool = False,
    error: type[UQLMBertError] = ConfigurationError,
) -> Any:
    """``value``, after checking that it is an int >= ``minimum`` (or None, with ``none_ok``).

    Args:
        name: the parameter, named in the message.
        value: what was given.
        minimum: the smallest value accepted; None for any int (a seed, say).
        none_ok: accept None (and return it).
        numpy_ok: accept a NumPy integer too, returned as an int: for parameters of functions
            over arrays, where a count often comes out of NumPy. Settings objects keep plain
            ints, which their metadata writes as JSON.
        error: the exception raised.

    Raises:
        ConfigurationError: (or ``error``) ``value`` is a bool, not an int, or below ``minimum``.

    Example:
        >>> check_int("batch_size", 0, 1)
        Traceback (most recent call last):
        ...
        uqlm_bert.ConfigurationError: batch_size must be an int >= 1, got 0
        >>> import numpy as np
        >>> check_int("n_bins", np.int64(4), 1, numpy_ok=True)
        4
    """
    if value is None and none_ok:
        return None
    ok = isinstance(value, int)
    if not ok and numpy_ok and type(value).__module__ == "numpy":
        ok = hasattr(value, "dtype") and value.dtype.kind in "iu" and value.ndim == 0
    if isinstance(value, bool) or not ok or (minimum is not None and value < minimum):
        bound = "" if minimum is None else f" >= {minimum}"
        tail = " or None" if none_ok else ""
        raise error(f"{name} must be an int{bound}{tail}, got {value!r}")
    return int(value)


def check_number(
    name: str,
    value: Any,
    *,
    minimum: float = 0.0,
    strict: bool = False,
    none_ok: bool = False,
    error: type[UQLMBertError] = ConfigurationError,
) -> Any:
    """``value``, after checking that it is a real number >= (or, ``strict``, >) ``minimum``.

    A bool is not a number here, nor is NaN; infinity passes a lower bound (a timeout or a delay
    may be infinite).

    Raises:
        ConfigurationError: (or ``error``) ``value`` is a bool, not a real number, NaN, or out
            of range.

    Example:
        >>> check_number("request_timeout", -1, strict=True)
        Traceback (most recent call last):
        ...
        uqlm_bert.ConfigurationError: request_timeout must be a number > 0, got -1
    """
    if value is None and none_ok:
        return None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value)
    if ok:
        ok = value > minimum if strict else value >= minimum
    if not ok:
        sign = ">" if strict else ">="
        tail = " or None" if none_ok else ""
        raise error(f"{name} must be a number {sign} {minimum:g}{tail}, got {value!r}")
    return value
