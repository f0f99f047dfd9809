"""Waiting in tests for something to happen, never for a set time.

Where a test double can say that something happened, wait on it: the scripted server's and the
scripted chat model's ``until`` wake on each request or call. What follows is for state that
signals nothing a test can wait on (a file another task or process writes, a pool's counters
moved by a scoring thread): it is checked every few milliseconds and returned from as soon as it
holds, within a bound, so that a broken run fails instead of hanging.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

#: The most a test waits for any one thing before it fails.
GUARD_S = 30.0
#: How often a condition that signals nothing is checked.
CHECK_S = 0.005


async def until(condition: Callable[[], object], timeout: float = GUARD_S) -> None:
    """Return as soon as ``condition()`` is true, the event loop running meanwhile.

    Raises:
        TimeoutError: it was not true within ``timeout`` seconds.
    """

    async def check() -> None:
        while not condition():
            await asyncio.sleep(CHECK_S)

    await asyncio.wait_for(check(), timeout)


async def settle(turns: int = 20) -> None:
    """Let this event loop's tasks run as far as they can without time passing for them: what
    has not happened after this would not happen without a clock moving or an event."""
    for _ in range(turns):
        await asyncio.sleep(0)


def wait_for(condition: Callable[[], object], timeout: float, what: str) -> None:
    """Block until ``condition()`` is true (another process's doing, say).

    Raises:
        AssertionError: it was not true within ``timeout`` seconds; the message names ``what``.
    """
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(CHECK_S * 10)
