"""Warnings attributed to the user's own line.

A warning from deep inside the package (a text repaired while scoring, a setting that had no
effect) is only useful when it names the line of the user's code that led to it. Counting
``stacklevel`` by hand breaks whenever a call path gains or loses a frame, so every library
warning goes through :func:`warn_user`, which points at the first frame outside the package.
"""

from __future__ import annotations

import asyncio
import os
import sys
import warnings

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
