"""Attributes that show an attribute of an attribute: ``scorer.lang`` is
``scorer.settings.lang``, one line each instead of a property each; read-only
(:func:`delegate`), or written by replacing a frozen settings object (:class:`SettingsField`).

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
from typing import Any

__all__ = ["SettingsField", "delegate"]


def delegate(path: str, doc: str) -> property:
    """A read-only property giving ``self.<path>`` (a dotted path), documented by ``doc``."""
    get = attrgetter(path)
    return property(lambda self: get(self), doc=doc)


class SettingsField:
    """A field of a frozen settings object held as ``owner.<holder>``, as an attribute of the
    owner: reading gives the current value, writing replaces the settings object with one that
    has the new value (``replace`` checks it).

    Example:
        >>> from dataclasses import dataclass, replace
        >>> @dataclass(frozen=True)
        ... class Limits:
        ...     cap: int = 4
        ...     def replace(self, **changes):
        ...         return replace(self, **changes)
        >>> class Client:
        ...     cap = SettingsField("limits", "The cap.")
        ...     def __init__(self):
        ...         self.limits = Limits()
        >>> c = Client()
        >>> c.cap = 8
        >>> c.limits
        Limits(cap=8)
    """

    def __init__(self, holder: str, doc: str) -> None:
        self.holder = holder
        self.__doc__ = f"{doc} A setting of ``{holder}``."
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        return self if obj is None else getattr(getattr(obj, self.holder), self.name)

    def __set__(self, obj: Any, value: Any) -> None:
        setattr(obj, self.holder, getattr(obj, self.holder).replace(**{self.name: value}))
