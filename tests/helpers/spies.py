"""Watching a function's calls without changing what it does."""

from __future__ import annotations

from typing import Any

import pytest


def spy(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[tuple[tuple, dict]]:
    """Replace ``owner.name`` (for this test) by a function that records each call's arguments,
    as ``(args, kwargs)``, in the list returned, and then calls the original."""
    real = getattr(owner, name)
    calls: list[tuple[tuple, dict]] = []

    def recorded(*args: Any, **kwargs: Any) -> Any:
        calls.append((args, kwargs))
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, recorded)
    return calls
