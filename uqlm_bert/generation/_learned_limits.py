"""What runs learned about a provider, kept in the process for the runs that follow.

A run learns two things a provider never states in advance: how many calls it serves in flight
(from its 429s, 5xx and timeouts, :class:`~uqlm_bert.generation._limiters.LearnedLimit`) and how many
choices one call may ask for with ``n`` (from replies with fewer choices than asked). Both are kept
here per provider: its endpoint (base URL) and the model's type and name. The next run against the
same provider (a notebook's next cell, a pipeline's next batch, a new ``BlackBoxUQ`` on the same
client) starts where the last one ended instead of learning it again with a burst of refusals.

The memory is small (the most recently used :data:`MAX_PROVIDERS` providers), shared by every
thread of the process, and emptied with :func:`forget_learned_limits`.

Example:
    >>> key = ("http://127.0.0.1:8000/v1", "openai-chat", "my-model")
    >>> remember(key, max_choices=1)
    >>> recall(key).max_choices
    1
    >>> forget_learned_limits()
    >>> recall(key) is None
    True
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from uqlm_bert.generation._limiters import LearnedLimit

__all__ = [
    "MAX_PROVIDERS",
    "ProviderKey",
    "ProviderMemory",
    "forget_learned_limits",
    "recall",
    "remember",
]

#: Providers remembered at most; the least recently used is forgotten first.
MAX_PROVIDERS = 64

#: (endpoint, model type, model name); the endpoint is None where the model does not say.
ProviderKey = tuple[Any, ...]


@dataclass(frozen=True)
class ProviderMemory:
    """What is known about one provider.

    Attributes:
        concurrency: where congestion control stood at the end of the last run that was pushed
            back (or started from a limit that was); ``None`` while the provider never pushed
            back.
        max_choices: the most choices one call returned when more were asked for with ``n``
            (1: the provider ignores ``n``); ``None`` while no reply fell short.
    """

    concurrency: LearnedLimit | None = None
    max_choices: int | None = None


_lock = threading.Lock()
_memory: OrderedDict[ProviderKey, ProviderMemory] = OrderedDict()


def recall(key: ProviderKey) -> ProviderMemory | None:
    """What is known about the provider ``key``, or None."""
    with _lock:
        found = _memory.get(key)
        if found is not None:
            _memory.move_to_end(key)
        return found


def remember(key: ProviderKey, **changes: Any) -> None:
    """Record what a run learned about the provider ``key`` (fields of :class:`ProviderMemory`;
    the others are kept)."""
    with _lock:
        known = _memory.pop(key, None) or ProviderMemory()
        _memory[key] = dataclasses.replace(known, **changes)
        while len(_memory) > MAX_PROVIDERS:
            _memory.popitem(last=False)


def forget_learned_limits() -> None:
    """Forget everything learned about every provider: the next run of each starts afresh (at
    its calls up to ``max_concurrency``, asking for samples with ``n`` where the client supports
    it).

    Example:
        >>> from uqlm_bert.generation import forget_learned_limits
        >>> forget_learned_limits()
    """
    with _lock:
        _memory.clear()
