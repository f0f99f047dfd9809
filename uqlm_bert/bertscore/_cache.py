"""The package's one cache of loaded models and tokenizers.

A model is loaded once per ``(location, layer, device, dtype, remote-code flag)`` and shared by
everything that asks for it: the BERTScore engine, the ``bert_score`` and ``cosine_sim``
scorers, baseline computation. Tokenizers are cached apart from models, so a need for token ids
alone (idf over a file, say) never loads the weights. Each cache keeps its most recently used
entries; :func:`clear_model_cache` forgets them all, and a model's memory is freed once no
scorer the caller still holds uses it.

Example:
    >>> clear_model_cache()
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["LRUCache", "MODELS", "TOKENIZERS", "clear_model_cache"]

T = TypeVar("T")

# one lock for both caches: loading a model reads its tokenizer's cache entry too
_LOCK = threading.RLock()


class LRUCache(Generic[T]):
    """At most ``size`` values, the least recently used dropped first; thread-safe.

    Example:
        >>> cache = LRUCache(1)
        >>> cache.get("a", lambda: 1), cache.get("b", lambda: 2), cache.get("a", lambda: 3)
        (1, 2, 3)
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._values: OrderedDict[Hashable, T] = OrderedDict()

    def get(self, key: Hashable, load: Callable[[], T]) -> T:
        """The value under ``key``, loaded (and kept) on a miss."""
        with _LOCK:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]
            value = load()
            self._values[key] = value
            while len(self._values) > self.size:
                self._values.popitem(last=False)
            return value

    def clear(self) -> None:
        """Forget every value."""
        with _LOCK:
            self._values.clear()


#: Loaded models, by (location, layer, device, dtype, trust_remote_code).
MODELS: LRUCache = LRUCache(4)
#: Loaded tokenizers, by (location, prefix_space, trust_remote_code).
TOKENIZERS: LRUCache = LRUCache(8)


def clear_model_cache() -> None:
    """Forget every cached model and tokenizer.

    A model's memory is freed once nothing else holds it: drop the scorers (and ``BlackBoxUQ``
    objects) that use it too.

    Example:
        >>> clear_model_cache()
    """
    MODELS.clear()
    TOKENIZERS.clear()
