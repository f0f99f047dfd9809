"""One long-lived event loop in a helper thread: the synchronous face's runner.

LLM clients keep connection pools, and a pool belongs to the event loop it first ran on. A fresh
loop per synchronous call (``asyncio.run``) leaves the client's pool tied to a closed loop, and
the next call fails. :class:`EventLoopThread` runs every call of one owner (a ``BlackBoxUQ``) on
the same loop, in a daemon thread, whether the caller is a plain script or code already inside a
running loop (Jupyter). Ctrl-C while waiting cancels the work on the loop, waits for it to unwind
and re-raises. :meth:`EventLoopThread.close` stops the loop and the thread.

Example:
    >>> import asyncio
    >>> async def answer():
    ...     await asyncio.sleep(0)
    ...     return 42
    >>> runner = EventLoopThread()
    >>> runner.run(answer), runner.run(answer)
    (42, 42)
    >>> runner.close()
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

from uqlm_bert._exceptions import ConfigurationError

__all__ = ["EventLoopThread"]

T = TypeVar("T")


class EventLoopThread:
    """An event loop running in a daemon thread, started on first use.

    Args:
        name: the thread's name.
    """

    def __init__(self, name: str = "uqlm-bert-loop") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        """Whether the loop's thread is running."""
        return self._thread is not None and self._thread.is_alive()

    def run(self, make_coro: Callable[[], Awaitable[T]]) -> T:
        """Run the coroutine ``make_coro()`` on the loop and return its result.

        ``make_coro`` is a zero-argument callable, so the coroutine is created on the loop.

        Raises:
            ConfigurationError: called from the loop's own thread (it would wait on itself).
        """
        loop = self._start()
        if threading.current_thread() is self._thread:
            raise ConfigurationError(
                "a synchronous method was called from inside its own event loop; await the "
                "async method instead"
            )

        async def main() -> T:
            return await make_coro()

        future = asyncio.run_coroutine_threadsafe(main(), loop)
        try:
            return future.result()
        except KeyboardInterrupt:
            future.cancel()
            try:
                future.result()
            except (concurrent.futures.CancelledError, Exception):  # noqa: BLE001 - unwinding
                pass
            raise

    def close(self) -> None:
        """Stop the loop and its thread (a later :meth:`run` starts a new one)."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        if thread.is_alive():
            loop.call_soon_threadsafe(loop.stop)
            if threading.current_thread() is not thread:
                thread.join(timeout=10)

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is not None and self._thread is not None and self._thread.is_alive():
                return self._loop
            loop = asyncio.new_event_loop()
            ready = threading.Event()
            thread = threading.Thread(
                target=_serve, args=(loop, ready), name=self._name, daemon=True
            )
            thread.start()
            ready.wait()
            self._loop, self._thread = loop, thread
            return loop


def _serve(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
    asyncio.set_event_loop(loop)
    loop.call_soon(ready.set)
    try:
        loop.run_forever()
    finally:
        try:
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            loop.close()
