"""What a confidence buys a filtering pipeline: keep the most confident answers, drop the rest.

:func:`accuracy_vs_fraction_kept` gives the curve a pipeline operates on (for each threshold,
how many answers are kept and how good they are); :func:`prr` condenses the whole curve into one
number between "random filtering" (0) and "perfect filtering" (1).

``labels`` here are the quality of each answer, higher = better: 1/0 for correct/incorrect, or a
graded quality such as a ROUGE or judge score. Missing values follow ``nan_policy`` (see
:mod:`uqlm_bert._inputs`).

Example:
    >>> from uqlm_bert.evaluation import prr
    >>> round(prr([0.9, 0.8, 0.1], [1, 0, 1]), 6)
    0.25
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from uqlm_bert._inputs import NanPolicy, check_not_constant, paired_arrays

__all__ = ["accuracy_vs_fraction_kept", "prr", "rejection_curve"]

ArrayLike = Sequence[float] | np.ndarray


def prr(scores: ArrayLike, labels: ArrayLike, *, nan_policy: NanPolicy = "omit") -> float:
    """Prediction-rejection ratio of a confidence against answer quality.

    Order the n answers by decreasing confidence and let ``Q(k)`` be the mean quality of the
    first k (the answers kept when the n - k least confident are rejected), for k = 1..n.
    Answers with tied confidence are taken in random order and ``Q(k)`` is its expected value,
    so ties are neither rewarded nor punished. The area under this curve is
    ``A = (1/n) * sum_k Q(k)`` (see :func:`rejection_curve`). Then::

        PRR = (A(confidence) - A(random)) / (A(oracle) - A(random))

    where the oracle orders answers by their true quality (``A(oracle) = A(labels)``) and random
    ordering keeps the mean quality at every k (``A(random) = mean(labels)``). PRR is 1 for a
    confidence that orders answers as well as the oracle, 0 for one no better than chance, and
    negative for one worse than chance. It is unchanged by any increasing transform of the
    confidence and by any positive affine transform of the labels.

    Args:
        scores: one confidence per answer; higher = keep first.
        labels: one quality per answer; higher = better (1/0 correctness or graded).
        nan_policy: ``"omit"`` (drop NaN items, with a warning) or ``"raise"``.

    Returns:
        PRR, at most 1.

    Raises:
        InputValidationError: lengths differ, fewer than 2 items, or all labels are equal (no
            ordering can help, so the ratio is undefined).

    Example:
        >>> prr([0.2, 0.9, 0.5], [0, 1, 1])
        1.0
    """
    s, q = paired_arrays(scores, labels, nan_policy, min_items=2)
    check_not_constant(q, "labels")
    area = _area(s, q)
    oracle = _area(q, q)
    chance = float(q.mean())
    return (area - chance) / (oracle - chance)


def rejection_curve(
    scores: ArrayLike, labels: ArrayLike, *, nan_policy: NanPolicy = "omit"
) -> np.ndarray:
    """``Q(k)`` for k = 1..n: expected mean quality of the k most confident answers.

    Answers with tied confidence are taken in random order; ``Q(k)`` is the expectation over
    that order (within a tied group every answer counts as the group's mean quality).

    Example:
        >>> rejection_curve([0.9, 0.8, 0.8], [1, 1, 0]).tolist()
        [1.0, 0.75, 0.6666666666666666]
    """
    s, q = paired_arrays(scores, labels, nan_policy)
    return _expected_running_mean(s, q)


def accuracy_vs_fraction_kept(
    scores: ArrayLike, labels: ArrayLike, *, nan_policy: NanPolicy = "omit"
) -> pd.DataFrame:
    """The operating points of "keep an answer when its confidence >= threshold".

    One row per distinct confidence value, from the highest down: keeping every answer whose
    confidence is at least ``threshold`` keeps ``n_kept`` answers, a ``fraction_kept`` of all,
    whose mean label is ``accuracy`` (the accuracy for 0/1 correctness labels, the mean quality
    for graded ones). The last row keeps everything, so its accuracy is the base rate.

    Args:
        scores: one confidence per answer; higher = keep first.
        labels: one quality per answer, higher = better.
        nan_policy: ``"omit"`` (drop NaN items, with a warning) or ``"raise"``.

    Returns:
        DataFrame with columns ``threshold``, ``n_kept``, ``fraction_kept``, ``accuracy``.

    Raises:
        InputValidationError: lengths differ or there are no items.

    Example:
        >>> accuracy_vs_fraction_kept([0.9, 0.5, 0.9, 0.2], [1, 1, 0, 0])
           threshold  n_kept  fraction_kept  accuracy
        0        0.9       2           0.50  0.500000
        1        0.5       3           0.75  0.666667
        2        0.2       4           1.00  0.500000
    """
    s, q = paired_arrays(scores, labels, nan_policy)
    order = np.argsort(-s, kind="mergesort")
    s_sorted = s[order]
    q_cum = np.cumsum(q[order])
    last = np.concatenate((np.flatnonzero(s_sorted[1:] != s_sorted[:-1]), [s.size - 1]))
    n_kept = last + 1
    return pd.DataFrame(
        {
            "threshold": s_sorted[last],
            "n_kept": n_kept.astype(np.int64),
            "fraction_kept": n_kept / s.size,
            "accuracy": q_cum[last] / n_kept,
        }
    )


def _area(scores: np.ndarray, quality: np.ndarray) -> float:
    """``(1/n) * sum_k Q(k)``: the area under the rejection curve."""
    return float(_expected_running_mean(scores, quality).mean())


def _expected_running_mean(scores: np.ndarray, quality: np.ndarray) -> np.ndarray:
    """Mean quality of the top-k by score, k = 1..n, ties replaced by their group's mean."""
    order = np.argsort(-scores, kind="mergesort")
    s = scores[order]
    q = quality[order]
    starts = np.concatenate(([True], s[1:] != s[:-1]))
    group = np.cumsum(starts) - 1
    group_mean = np.bincount(group, weights=q) / np.bincount(group)
    return np.cumsum(group_mean[group]) / np.arange(1, s.size + 1)
