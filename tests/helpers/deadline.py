"""A bound in time for tests that start servers or clusters: fail instead of hanging."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


@contextlib.contextmanager
def deadline(seconds: int, what: str = "the run") -> Iterator[None]:
    """Raise ``TimeoutError`` in the main thread when the block runs past ``seconds``."""

    def expire(signum, frame):
        raise TimeoutError(f"{what} did not finish within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
