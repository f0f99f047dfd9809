"""The scorer contract and the registry that maps names in ``scorers=[...]`` to scorers.

A scorer turns each response and its sampled responses into one confidence, higher meaning the
samples agree more with the response. Every scorer is batched across all responses it is given:
it never loops over prompts calling a model once each.

Missing samples (``None``, from failed LLM calls) are skipped; a response with no samples left,
or a missing response, scores NaN.

Example:
    >>> from uqlm_bert.scorers import available_scorers
    >>> "bert_score" in available_scorers()
    True
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from uqlm_bert.exceptions import ConfigurationError, InputValidationError

__all__ = [
    "Scorer",
    "register_scorer",
    "available_scorers",
    "scorer_factory",
    "build_scorer",
    "build_scorers",
    "present_pairs",
    "check_scoring_lists",
    "is_missing",
    "mean_by_group",
]

_REGISTRY: dict[str, Callable[..., Scorer]] = {}


class Scorer(abc.ABC):
    """A black-box confidence scorer over (response, sampled responses).

    Subclasses set ``name`` (the key in ``scorers=[...]`` and the result column) and implement
    :meth:`score`.
    """

    name: str = ""
    #: True when a response's score depends only on its own samples, not on the other responses
    #: scored in the same call; BlackBoxUQ then scores prompts in batches as they complete.
    batch_invariant: bool = True

    @abc.abstractmethod
    def score(
        self,
        responses: Sequence[str | None],
        sampled_responses: Sequence[Sequence[str | None]],
        show_progress_bars: bool = False,
    ) -> np.ndarray:
        """Return one float64 confidence per response (NaN where it cannot be computed)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def register_scorer(name: str, factory: Callable[..., Scorer]) -> None:
    """Make a scorer available under ``name`` in ``scorers=[...]``.

    ``factory`` is called with the keyword arguments the user gave for scorers (BERTScore settings
    such as ``model_type`` or ``device``); it must accept ``**kwargs`` and ignore what it does not
    use.
    """
    if not name or not isinstance(name, str):
        raise ConfigurationError(f"a scorer name must be a non-empty string, got {name!r}")
    _REGISTRY[name] = factory


def available_scorers() -> list[str]:
    """The names accepted in ``scorers=[...]``, sorted."""
    _load_builtin_scorers()
    return sorted(_REGISTRY)


def scorer_factory(name: str) -> Callable[..., Scorer]:
    """The factory registered under ``name``: what :func:`build_scorer` calls with the scorer
    keyword arguments. Ship it to another process (a Ray worker, say) to build the same scorer
    there, registered there or not.

    Raises:
        ConfigurationError: ``name`` is unknown; the message lists the known names.

    Example:
        >>> make = scorer_factory("bert_score")
        >>> make(show_progress_bars=False).name
        'bert_score'
    """
    _load_builtin_scorers()
    if not isinstance(name, str) or name not in _REGISTRY:
        raise ConfigurationError(
            f"unknown scorer {name!r}; known scorers: {', '.join(sorted(_REGISTRY))}"
        )
    return _REGISTRY[name]


def build_scorer(name: str, **kwargs: Any) -> Scorer:
    """Create the scorer registered under ``name``, passing it ``kwargs``.

    Raises:
        ConfigurationError: ``name`` is unknown; the message lists the known names.
    """
    return scorer_factory(name)(**kwargs)


def build_scorers(names: Sequence[str] | None, **kwargs: Any) -> list[Scorer]:
    """Create scorers for ``names`` (default ``["bert_score"]``), each once, in the order given.

    Scorers that share a model (the BERTScore variants) share one loaded engine.
    """
    if names is None:
        names = ["bert_score"]
    if isinstance(names, str):
        names = [names]
    if len(names) == 0:
        raise ConfigurationError("scorers is empty; give at least one, e.g. ['bert_score']")
    seen: list[str] = []
    for n in names:
        if n in seen:
            raise ConfigurationError(f"scorer {n!r} is listed twice")
        seen.append(n)
    return [build_scorer(n, **kwargs) for n in names]


def present_pairs(
    responses: Sequence[str | None], sampled_responses: Sequence[Sequence[str | None]]
) -> tuple[list[int], list[str], list[str]]:
    """Flatten (response, sample) pairs, skipping missing responses and missing samples.

    Returns ``(group, cands, refs)``: for each present pair the index of its response, the
    response, and the sample.

    Raises:
        InputValidationError: lengths differ, or an item is neither a string nor None.
    """
    responses, sampled_responses = check_scoring_lists(responses, sampled_responses)
    group: list[int] = []
    cands: list[str] = []
    refs: list[str] = []
    for i, (resp, samples) in enumerate(zip(responses, sampled_responses, strict=True)):
        if resp is not None and not isinstance(resp, str):
            raise InputValidationError(
                f"responses[{i}] is a {type(resp).__name__}, expected a string or None"
            )
        for j, s in enumerate(samples):
            if s is not None and not isinstance(s, str):
                raise InputValidationError(
                    f"sampled_responses[{i}][{j}] is a {type(s).__name__}, "
                    "expected a string or None"
                )
            if resp is None or s is None:
                continue
            group.append(i)
            cands.append(resp)
            refs.append(s)
    return group, cands, refs


def is_missing(value: object) -> bool:
    """None, a float NaN, or pandas' NA: a failed call's empty slot (pandas turns None into
    these in columns of strings)."""
    if value is None or type(value).__name__ == "NAType":
        return True
    return isinstance(value, float) and value != value


def check_scoring_lists(
    responses: Any, sampled_responses: Any
) -> tuple[list[str | None], list[list[str | None]]]:
    """Positional list copies of one response and one list of samples per prompt.

    Lists, tuples, pandas Series and arrays are accepted; missing values (None, NaN, NA) become
    None, and a missing list of samples becomes an empty list.

    Raises:
        InputValidationError: a string where a list belongs, or lengths that differ.
    """
    for name, value in (("responses", responses), ("sampled_responses", sampled_responses)):
        if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
            raise InputValidationError(
                f"{name} must be a list with one item per prompt, got {type(value).__name__}"
            )
    if len(responses) != len(sampled_responses):
        raise InputValidationError(
            f"responses has {len(responses)} items but sampled_responses has "
            f"{len(sampled_responses)}; give one list of samples per response"
        )
    out_responses = [None if is_missing(r) else r for r in responses]
    out_samples: list[list[str | None]] = []
    for i, samples in enumerate(sampled_responses):
        if is_missing(samples):
            samples = []
        if isinstance(samples, (str, bytes)) or not hasattr(samples, "__len__"):
            raise InputValidationError(
                f"sampled_responses[{i}] must be a list of sampled responses, got "
                f"{type(samples).__name__}"
            )
        out_samples.append([None if is_missing(x) else x for x in samples])
    return out_responses, out_samples


def mean_by_group(values: np.ndarray, group: Sequence[int], n_groups: int) -> np.ndarray:
    """Mean of ``values`` per group index; NaN for groups with no values."""
    values = np.asarray(values, dtype=np.float64)
    g = np.asarray(group, dtype=np.int64)
    sums = np.bincount(g, weights=values, minlength=n_groups) if len(g) else np.zeros(n_groups)
    counts = np.bincount(g, minlength=n_groups) if len(g) else np.zeros(n_groups)
    out = np.full(n_groups, np.nan)
    nz = counts > 0
    out[nz] = sums[nz] / counts[nz]
    return out


_BUILTINS_LOADED = False


def _load_builtin_scorers() -> None:
    """Import the modules that register the built-in scorers (once, lazily)."""
    global _BUILTINS_LOADED
    if _BUILTINS_LOADED:
        return
    _BUILTINS_LOADED = True
    import uqlm_bert.scorers.builtin  # noqa: F401  (registers on import)
