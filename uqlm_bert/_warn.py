"""Warnings attributed to the user's own line.

A warning from deep inside the package (a text repaired while scoring, a setting that had no
effect) is only useful when it names the line of the user's code that led to it. Counting
``stacklevel`` by hand breaks whenever a call path gains or loses a frame, so every library
warning goes through :func:`warn_user`, which points at the first frame outside the package.
"""

from __future__ import annotations

import asyncio
import functools
import os
import sys
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
# a coroutine run by ``asyncio.run(uq.generate_and_score(...))`` is resumed by the event loop,
# so the frames between it and the user's line are asyncio's
_ASYNCIO_DIR = os.path.dirname(os.path.abspath(asyncio.__file__)) + os.sep


def _skipped(filename: str) -> bool:
    if filename.startswith("<frozen importlib"):  # an import of the package's own
        return True
    path = os.path.abspath(filename)
    return path.startswith(_PACKAGE_DIR) or path.startswith(_ASYNCIO_DIR)


def warn_user(message: str, category: type[Warning] = UserWarning) -> None:
    """Issue ``message`` as a warning attributed to the nearest caller outside ``uqlm_bert``
    (and outside asyncio, which stands between a coroutine and the ``asyncio.run`` line).

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     warn_user("texts repaired")
        >>> str(caught[0].message)
        'texts repaired'
    """
    level = 2  # stacklevel 2 is the caller of this function
    frame = sys._getframe(1)
    while frame is not None and _skipped(frame.f_code.co_filename):
        frame = frame.f_back
        level += 1
    if frame is None:  # called from nothing but package frames (a worker thread): the caller
        level = 2
    warnings.warn(message, category, stacklevel=level)


def options_by_keyword(positional: int, *names: str) -> Callable[[F], F]:
    """A decorator for a function whose options became keyword-only: the function takes
    ``positional`` arguments by position (``self`` counted); more given by position are taken as
    the options ``names``, in order, as earlier releases took them, with a ``FutureWarning`` that
    names the keyword to use.

    Example:
        >>> import warnings
        >>> @options_by_keyword(1, "ax")
        ... def plot(values, *, ax=None):
        ...     return ax
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     plot([1], "axes")
        'axes'
        >>> str(caught[0].message)
        'plot(..., ax) by position is deprecated: pass ax=... by keyword'
    """

    def decorate(function: F) -> F:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            extra = args[positional:]
            if extra:
                if len(extra) > len(names):
                    raise TypeError(
                        f"{function.__name__}() takes {positional} positional argument(s) but "
                        f"{len(args)} were given"
                    )
                given = names[: len(extra)]
                twice = [n for n in given if n in kwargs]
                if twice:
                    raise TypeError(f"{function.__name__}() got {twice[0]!r} twice")
                warn_user(
                    f"{function.__name__.lstrip('_')}(..., {', '.join(given)}) by position is "
                    f"deprecated: pass {'=..., '.join(given)}=... by keyword",
                    FutureWarning,
                )
                kwargs.update(zip(given, extra, strict=True))
            return function(*args[:positional], **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate
