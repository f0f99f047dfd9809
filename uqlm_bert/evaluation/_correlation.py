"""Correlation between a score and graded labels: Pearson, Spearman, and tie-aware ranks.

Use these when labels are graded rather than binary, for instance the mean hallucination degree
of a passage's sentences: a good confidence correlates negatively with it, a good hallucination
score positively. Missing values follow ``nan_policy`` (see :mod:`uqlm_bert._inputs`).

Example:
    >>> from uqlm_bert.evaluation import pearson, spearman
    >>> pearson([1, 2, 3, 4], [2, 4, 6, 8])
    1.0
    >>> spearman([1, 2, 3, 4], [1, 4, 9, 100])
    1.0
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from uqlm_bert._inputs import NanPolicy, check_not_constant, paired_arrays

__all__ = ["pearson", "rankdata", "spearman"]

ArrayLike = Sequence[float] | np.ndarray


def pearson(scores: ArrayLike, labels: ArrayLike, *, nan_policy: NanPolicy = "omit") -> float:
    """Pearson's product-moment correlation between ``scores`` and ``labels``.

    ``r = sum((x - mean x)(y - mean y)) / sqrt(sum((x - mean x)^2) * sum((y - mean y)^2))``,
    the same number as ``scipy.stats.pearsonr(scores, labels).statistic``.

    Args:
        scores, labels: one number per item each.
        nan_policy: ``"omit"`` (drop NaN items, with a warning) or ``"raise"``.

    Returns:
        r in [-1, 1].

    Raises:
        InputValidationError: lengths differ, fewer than 2 items, or either input is constant
            (the correlation is undefined).

    Example:
        >>> round(pearson([0.9, 0.7, 0.4], [0.0, 0.5, 1.0]), 4)
        -0.9934
    """
    x, y = paired_arrays(scores, labels, nan_policy, min_items=2)
    return _pearson(x, y)


def spearman(scores: ArrayLike, labels: ArrayLike, *, nan_policy: NanPolicy = "omit") -> float:
    """Spearman's rank correlation: Pearson's r between the ranks of ``scores`` and ``labels``.

    Tied values get the average of the ranks they span (see :func:`rankdata`), so the result
    equals ``scipy.stats.spearmanr(scores, labels).statistic`` also with ties. The arguments
    and errors are those of :func:`pearson`; the result, rho, is in [-1, 1].

    Example:
        >>> spearman([0.9, 0.7, 0.4, 0.2], [0.0, 0.5, 0.5, 1.0])
        -0.9486832980505138
    """
    x, y = paired_arrays(scores, labels, nan_policy, min_items=2)
    check_not_constant(x, "scores")
    check_not_constant(y, "labels")
    return _pearson(rankdata(x), rankdata(y))


def rankdata(values: ArrayLike) -> np.ndarray:
    """Ranks 1..n of ``values`` (smallest first); tied values share the mean of their ranks.

    Example:
        >>> rankdata([10, 20, 20, 5]).tolist()
        [2.0, 3.5, 3.5, 1.0]
    """
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return v.copy()
    order = np.argsort(v, kind="mergesort")
    sorted_v = v[order]
    starts = np.concatenate(([True], sorted_v[1:] != sorted_v[:-1]))
    group = np.cumsum(starts) - 1
    first = np.flatnonzero(starts)
    ends = np.concatenate((first[1:], [v.size]))
    mean_rank = (first + 1 + ends) / 2.0
    ranks = np.empty(v.size, dtype=np.float64)
    ranks[order] = mean_rank[group]
    return ranks


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson's r of two equal-length float arrays, neither constant (checked here)."""
    check_not_constant(x, "scores")
    check_not_constant(y, "labels")
    dx = x - x.mean()
    dy = y - y.mean()
    r = float(np.dot(dx, dy) / np.sqrt(np.dot(dx, dx) * np.dot(dy, dy)))
    return min(1.0, max(-1.0, r))
