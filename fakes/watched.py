"""What the fakes share for tests that wait on them: a log guarded by ``lock`` whose ``changed``
condition is notified whenever it changes, and the two ways to wait for it to show something."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable


class Watched:
    """Waiting on a fake's log: a subclass sets ``lock`` and ``changed`` (a condition on that
    lock) and notifies ``changed`` whenever its log changes."""

    lock: threading.Lock
    changed: threading.Condition

    def wait_until(self, condition: Callable[[], bool], timeout: float = 30.0) -> None:
        """Return once ``condition()`` holds, checked whenever the log changes (it is called
        holding :attr:`lock`, so it may read the log).

        Raises:
            TimeoutError: it did not hold within ``timeout`` seconds.
        """
        with self.changed:
            if not self.changed.wait_for(condition, timeout):
                raise TimeoutError(
                    f"the {type(self).__name__}'s log did not come to show that in {timeout} s"
                )

    async def until(self, condition: Callable[[], bool], timeout: float = 30.0) -> None:
        """:meth:`wait_until` for a coroutine: the event loop keeps running meanwhile."""
        await asyncio.to_thread(self.wait_until, condition, timeout)
