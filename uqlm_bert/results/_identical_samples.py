"""A warning when the samples of most prompts are all the same text although sampled hot.

Sampled at a temperature of 0.7 or more, a model's samples for one prompt differ in wording
even where they agree in substance. When nearly every prompt's samples are character for
character the same, something between the run and the model sampled greedily: a provider that
ignores ``temperature`` (or pins ``top_k=1``), a fixed seed reused for every choice, or a cache
returning one reply. The confidences then measure nothing: an answer agrees with copies of
itself. :func:`warn_if_samples_identical` says so once per run, with what to check.

Example:
    >>> import warnings
    >>> samples = [["Paris.", "Paris."], ["Lima.", "Lima."], ["Oslo.", "Bergen."]] * 2
    >>> identical_share(samples)
    (4, 6)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warned = warn_if_samples_identical(samples, sampling_temperature=1.0)
    >>> warned, len(caught), "4 of 6 prompts" in str(caught[0].message)
    (True, 1, True)
"""

from __future__ import annotations

from collections.abc import Sequence

from uqlm_bert._warn import warn_user

__all__ = [
    "HOT_TEMPERATURE",
    "IdenticalSamplesWarning",
    "MIN_PROMPTS",
    "identical_share",
    "warn_if_identical_share",
    "warn_if_samples_identical",
]

#: From this sampling temperature on, identical samples for most prompts are a warning sign.
HOT_TEMPERATURE = 0.7
#: Fewer prompts with two or more samples than this tell too little to warn about.
MIN_PROMPTS = 5


class IdenticalSamplesWarning(UserWarning):
    """The samples of most prompts are identical although sampled at a high temperature."""


def identical_share(samples: Sequence[Sequence[str | None]]) -> tuple[int, int]:
    """``(identical, judged)``: of the prompts with at least two samples present (``judged``),
    how many have samples that are all the same text (surrounding spaces aside)."""
    identical = judged = 0
    for group in samples:
        present = {s.strip() for s in group if isinstance(s, str)}
        count = sum(isinstance(s, str) for s in group)
        if count < 2:
            continue
        judged += 1
        identical += len(present) == 1
    return identical, judged


def warn_if_samples_identical(
    samples: Sequence[Sequence[str | None]], sampling_temperature: float | None
) -> bool:
    """Warn (once) when more than half the prompts that have two or more samples (at least
    :data:`MIN_PROMPTS` of them) have all their samples identical, at a
    ``sampling_temperature`` of :data:`HOT_TEMPERATURE` or more; return whether it warned."""
    return warn_if_identical_share(*identical_share(samples), sampling_temperature)


def warn_if_identical_share(
    identical: int, judged: int, sampling_temperature: float | None
) -> bool:
    """:func:`warn_if_samples_identical` from the counts of :func:`identical_share` (a run's
    ``metadata["identical_samples"]``)."""
    if sampling_temperature is None or sampling_temperature < HOT_TEMPERATURE:
        return False
    if judged < MIN_PROMPTS or 2 * identical <= judged:
        return False
    warn_user(
        f"the samples of {identical} of {judged} prompts are all identical although sampled at "
        f"temperature {sampling_temperature:g}: the provider seems to ignore the temperature "
        "(or to fix top_k=1 or a seed for every choice, or to return cached replies), and "
        "confidences computed from identical samples say nothing. Check the model's sampling "
        "settings on the server, or use another model or provider.",
        IdenticalSamplesWarning,
    )
    return True
