"""Read-only attributes that show an attribute of an attribute: ``scorer.lang`` is
``scorer.settings.lang``, one line each instead of a property each.

Example:
    >>> class Box:
    ...     size = delegate("inner.real", "The inner number's real part.")
    ...     def __init__(self, inner):
    ...         self.inner = inner
    >>> Box(3 + 4j).size, Box.size.__doc__
    (3.0, "The inner number's real part.")
"""

from __future__ import annotations

from operator import attrgetter

__all__ = ["delegate"]


def delegate(path: str, doc: str) -> property:
    """A read-only property giving ``self.<path>`` (a dotted path), documented by ``doc``."""
    get = attrgetter(path)
    return property(lambda self: get(self), doc=doc)
