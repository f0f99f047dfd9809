"""Running a coroutine to completion from synchronous code, inside or outside an event loop.

In a plain script there is no running loop and :func:`run_sync` uses ``asyncio.run``. In Jupyter
(or any code already inside a running loop) it cannot block that loop's thread on itself, so the
coroutine runs on a fresh loop in a helper thread while the caller waits; Ctrl-C while waiting
cancels the coroutine there and waits for it to unwind before re-raising.

Example:
    >>> import asyncio
    >>> async def answer():
    ...     await asyncio.sleep(0)
    ...     return 42
    >>> run_sync(answer)
    42
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

__all__ = ["run_sync"]

T = TypeVar("T")


def run_sync(make_coro: Callable[[], Awaitable[T]]) -> T:
    """Run the coroutine ``make_coro()`` and return its result, from any synchronous context.

    ``make_coro`` is a zero-argument callable (so the coroutine is created on the loop that runs
    it).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_as_coroutine(make_coro))
    return _run_in_thread(make_coro)


async def _as_coroutine(make_coro: Callable[[], Awaitable[T]]) -> T:
    return await make_coro()


def _run_in_thread(make_coro: Callable[[], Awaitable[T]]) -> T:
    state: dict[str, Any] = {}
    ready = threading.Event()

    def target() -> None:
        loop = asyncio.new_event_loop()
        try:
            task = loop.create_task(_as_coroutine(make_coro))
            state["loop"], state["task"] = loop, task
            ready.set()
            state["result"] = loop.run_until_complete(task)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            state["error"] = exc
        finally:
            ready.set()
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
            finally:
                loop.close()

    thread = threading.Thread(target=target, name="uqlm-bert-sync", daemon=True)
    thread.start()
    try:
        while thread.is_alive():
            thread.join(timeout=0.1)
    except KeyboardInterrupt:
        ready.wait()
        loop, task = state.get("loop"), state.get("task")
        if loop is not None and task is not None:
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:  # the loop already finished and closed
                pass
        thread.join()
        raise
    if "error" in state:
        raise state["error"]
    return state["result"]
