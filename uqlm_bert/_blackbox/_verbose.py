"""``verbose=True``: the package's INFO log lines (retries, resumes, loads) on stderr, for the
duration of one call only.

Example:
    >>> import logging
    >>> with verbose_logging(True):
    ...     logging.getLogger("uqlm_bert").level == logging.INFO
    True
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

__all__ = ["verbose_logging"]


@contextlib.contextmanager
def verbose_logging(enabled: bool) -> Iterator[None]:
    """With ``enabled``: the package's INFO log lines on stderr inside the block; else nothing."""
    if not enabled:
        yield
        return
    logger = logging.getLogger("uqlm_bert")
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("uqlm-bert: %(message)s"))
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
