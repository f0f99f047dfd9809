"""Public names of a package imported on first use, so importing the package stays cheap.

Example:
    >>> import types
    >>> getattr_, dir_ = lazy_exports("demo", {"sqrt": "math"})
    >>> getattr_("sqrt")(9.0)
    3.0
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: dict[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module ``__getattr__`` and ``__dir__`` that import ``exports[name]`` on first access.

    Args:
        package: the package's ``__name__``; an imported name is cached in its namespace.
        exports: public name -> the module that defines it.
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace = sys.modules.get(package)
        if namespace is not None:
            setattr(namespace, name, value)
        return value

    def __dir__() -> list[str]:
        namespace = sys.modules.get(package)
        own = set(vars(namespace)) if namespace is not None else set()
        return sorted(own | set(exports))

    return __getattr__, __dir__
