"""Settings given to ``BlackBoxUQ`` as flat arguments: refused, with where each one goes.

``BlackBoxUQ`` takes uqlm's arguments and the few set every day; every other setting lives in
one of its three settings objects. :data:`SETTINGS_PLACES` is the one table of where each
setting goes, read from the settings objects' own fields; a keyword outside the signature that
the table names (``BlackBoxUQ(dtype="float32")``) raises a
:class:`~uqlm_bert.ConfigurationError` that names its place, and any other unknown keyword the
usual ``TypeError``.

Example:
    >>> SETTINGS_PLACES["dtype"]
    'bertscore=BERTScoreSettings(dtype=...)'
    >>> SETTINGS_PLACES["max_retries"]
    'generation=GenerationSettings(retry=RetryPolicy(max_retries=...))'
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from typing import Any

from uqlm_bert._blackbox._scoring import ScoringSettings
from uqlm_bert._exceptions import ConfigurationError
from uqlm_bert.bertscore._settings import BERTScoreSettings
from uqlm_bert.generation._backoff import RetryPolicy
from uqlm_bert.generation._settings import GenerationSettings

__all__ = ["SETTINGS_PLACES", "refuses_misplaced_settings"]


def _places() -> dict[str, str]:
    places: dict[str, list[str]] = {}
    for cls, spelling in (
        (BERTScoreSettings, "bertscore=BERTScoreSettings({}=...)"),
        (GenerationSettings, "generation=GenerationSettings({}=...)"),
        (RetryPolicy, "generation=GenerationSettings(retry=RetryPolicy({}=...))"),
        (ScoringSettings, "scoring=ScoringSettings({}=...)"),
    ):
        for f in dataclasses.fields(cls):
            places.setdefault(f.name, []).append(spelling.format(f.name))
    return {name: " or ".join(where) for name, where in sorted(places.items())}


#: Each setting of the settings objects -> where it is given to ``BlackBoxUQ``.
SETTINGS_PLACES: dict[str, str] = _places()


def refuses_misplaced_settings(init: Callable[..., None]) -> Callable[..., None]:
    """``init`` (``BlackBoxUQ.__init__``), refusing a setting given as a keyword it does not
    take, with its place from :data:`SETTINGS_PLACES`; its signature is what
    ``inspect.signature`` shows.

    Raises:
        ConfigurationError: a keyword outside the signature that names a setting.
    """
    own = set(inspect.signature(init).parameters)

    @functools.wraps(init)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> None:
        misplaced = [name for name in kwargs if name not in own and name in SETTINGS_PLACES]
        if misplaced:
            places = "; ".join(f"{name}: {SETTINGS_PLACES[name]}" for name in misplaced)
            raise ConfigurationError(
                f"BlackBoxUQ takes {', '.join(misplaced)} in its settings objects, not as "
                f"separate arguments: {places}"
            )
        init(self, *args, **kwargs)

    return wrapper
