"""``BlackBoxUQ``'s generation settings as its own attributes: ``uq.sampling_temperature``
reads ``uq.generation.sampling_temperature``, and writing it replaces the frozen settings object
with a checked copy (:class:`SettingsField`)."""

from __future__ import annotations

from typing import Any

__all__ = ["SettingsField"]


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
