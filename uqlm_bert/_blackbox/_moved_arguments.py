"""``BlackBoxUQ``'s flat arguments of earlier releases that moved into its settings objects.

``BlackBoxUQ(num_layers=4)`` is now ``BlackBoxUQ(bertscore=BERTScoreSettings(num_layers=4))``,
``max_retries=2`` is ``generation=GenerationSettings(retry=RetryPolicy(max_retries=2))``, and so
on (:data:`MOVED`). The old spellings still work, for now: :func:`accepts_moved_arguments` takes
them off the call, warns once for each with a ``FutureWarning`` naming the new spelling, and
passes their settings object instead, with the flat arguments of the same object that the call
gave (``system_prompt``, ``max_calls_per_min``, ``max_concurrency``, ``sampling_temperature``
and ``use_n_param`` for generation, ``scoring`` for where to score) folded into it; the moved
BERTScore arguments go, as before, to every scorer that takes them. They do not stand in the
signature.

Example:
    >>> import warnings
    >>> from uqlm_bert import BlackBoxUQ
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     uq = BlackBoxUQ(scorers=["exact_match"], max_retries=2, show_progress_bars=False)
    >>> uq.generation.retry.max_retries, str(caught[0].message)
    (2, 'BlackBoxUQ(max_retries=...) is now generation=GenerationSettings(retry=RetryPolicy(max_retries=...))')
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from uqlm_bert._checks import NOT_GIVEN
from uqlm_bert._exceptions import ConfigurationError
from uqlm_bert._warn import warn_user

__all__ = ["MOVED", "accepts_moved_arguments"]

_BERTSCORE = "model_type num_layers idf idf_sents rescale_with_baseline baseline_path lang batch_size dtype long_texts"
_RETRY = {
    "max_retries": "max_retries",
    "retry_base_delay": "base_delay",
    "retry_max_delay": "max_delay",
}

#: Each moved argument: ``(the BlackBoxUQ argument taking its object, the new spelling)``.
MOVED: dict[str, tuple[str, str]] = {
    **{name: ("bertscore", f"BERTScoreSettings({name}=...)") for name in _BERTSCORE.split()},
    **{
        name: ("generation", f"GenerationSettings(retry=RetryPolicy({field}=...))")
        for name, field in _RETRY.items()
    },
    "request_timeout": ("generation", "GenerationSettings(request_timeout=...)"),
    "rate_limit_period": ("generation", "GenerationSettings(rate_limit_period=...)"),
    "score_batch_size": ("scoring", "ScoringSettings(batch_size=...)"),
    "token_supports": ("scoring", "ScoringSettings(supports=...)"),
    "scorer_kwargs": ("scoring", "ScoringSettings(scorer_settings=...)"),
}

#: The flat arguments of the signature that belong to the same object, folded in with them.
_FOLDED = {
    "generation": (
        "system_prompt",
        "max_calls_per_min",
        "max_concurrency",
        "sampling_temperature",
        "use_n_param",
    ),
    "scoring": ("scoring",),
}


def accepts_moved_arguments(init: Callable[..., None]) -> Callable[..., None]:
    """``init`` (``BlackBoxUQ.__init__``) taking the moved arguments too (see the module's
    doc); its own signature is what ``inspect.signature`` shows.

    Raises:
        ConfigurationError: a moved argument beside the settings object that now holds it (as
            ``num_layers=4`` with ``bertscore=...``).
    """

    @functools.wraps(init)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> None:
        moved = {name: kwargs.pop(name) for name in list(kwargs) if name in MOVED}
        for name in moved:
            group, spelling = MOVED[name]
            warn_user(f"BlackBoxUQ({name}=...) is now {group}={spelling}", FutureWarning)
        flat_bertscore = {k: v for k, v in moved.items() if MOVED[k][0] == "bertscore"}
        if flat_bertscore and kwargs.get("bertscore") is not None:
            _refuse("bertscore", flat_bertscore)
        for group in ("generation", "scoring"):
            mine = {k: v for k, v in moved.items() if MOVED[k][0] == group}
            if group == "scoring":
                mine.update(flat_bertscore)
            if mine:
                kwargs[group] = _settings_object(group, mine, kwargs)
        init(self, *args, **kwargs)

    return wrapper


def _refuse(group: str, moved: dict[str, Any]) -> None:
    """Refuse moved arguments given beside the settings object of ``group``."""
    kind = {"bertscore": "BERTScoreSettings", "generation": "GenerationSettings"}.get(
        group, "ScoringSettings"
    )
    raise ConfigurationError(
        f"give the {group} settings either as {group}={kind}(...) or as separate arguments, "
        f"not both (given beside it: {', '.join(sorted(moved))})"
    )


def _settings_object(group: str, moved: dict[str, Any], kwargs: dict[str, Any]) -> Any:
    """The settings object of ``group`` from its moved arguments and the flat arguments of the
    call that belong to it (taken off ``kwargs``). The moved BERTScore arguments travel as the
    scorers' flat settings, as they did: each reaches every scorer that takes it (``long_texts``
    the ``cosine_sim`` scorer too), and the BERTScore scorers' object is built from them once."""
    given = kwargs.get(group)
    if given is not None and not (group == "scoring" and not _is_scoring_settings(given)):
        _refuse(group, moved)
    folded = {name: kwargs.pop(name) for name in _FOLDED[group] if name in kwargs}
    if group == "generation":
        from uqlm_bert.generation._settings import generation_settings

        flat = {k: v for k, v in folded.items() if v is not NOT_GIVEN}
        return generation_settings(None, **flat, **moved)
    from uqlm_bert._blackbox._scoring import ScoringSettings

    fields = {"score_batch_size": "batch_size", "token_supports": "supports"}
    values = {fields[k]: v for k, v in moved.items() if k in fields and v is not None}
    scorer_settings = dict(moved.get("scorer_kwargs") or {})
    flat = {k: v for k, v in moved.items() if MOVED[k][0] == "bertscore" and v is not None}
    twice = sorted(set(flat) & set(scorer_settings))
    if twice:
        raise ConfigurationError(
            f"{', '.join(twice)} given both as an argument and in scorer_kwargs; give it once"
        )
    return ScoringSettings(
        where=folded.get("scoring", "local"), scorer_settings={**scorer_settings, **flat}, **values
    )


def _is_scoring_settings(value: Any) -> bool:
    from uqlm_bert._blackbox._scoring import ScoringSettings

    return isinstance(value, ScoringSettings)
