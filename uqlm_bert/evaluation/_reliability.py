"""Whether probabilities mean what they say: Brier score, expected calibration error, reliability.

These judge a *probability* that an answer is correct (for instance the output of
:class:`~uqlm_bert.ScoreCalibrator`, or a raw score read as one) against 0/1
correctness labels. Unlike AUROC or PRR they are not indifferent to the values: among answers
given probability 0.8, about 80% should be correct.

- :func:`brier_score`: mean squared difference between probability and label
  (``sklearn.metrics.brier_score_loss``);
- :func:`reliability_curve`: per probability bin, the mean probability, the observed fraction
  correct and the count (``sklearn.calibration.calibration_curve``, with counts and bin edges);
- :func:`expected_calibration_error`: the count-weighted mean gap between the two.

Probabilities must lie in [0, 1]; labels must be 0/1 (a single class is allowed). Missing values
follow ``nan_policy`` (see :mod:`uqlm_bert._inputs`).

Example:
    >>> from uqlm_bert.evaluation import brier_score, expected_calibration_error
    >>> probability = [0.9, 0.8, 0.3, 0.2]
    >>> correct = [1, 1, 0, 1]
    >>> round(brier_score(probability, correct), 4)  # (0.01 + 0.04 + 0.09 + 0.64) / 4
    0.195
    >>> # bin [0, 0.5]: mean 0.25, 1 of 2 correct; bin (0.5, 1]: mean 0.85, 2 of 2 correct
    >>> round(expected_calibration_error(probability, correct, n_bins=2), 4)
    0.2
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import pandas as pd

from uqlm_bert._checks import check_int
from uqlm_bert._exceptions import ConfigurationError, InputValidationError
from uqlm_bert._inputs import NanPolicy, check_binary, paired_arrays

__all__ = ["brier_score", "ece_of_curve", "expected_calibration_error", "reliability_curve"]

ArrayLike = Sequence[float] | np.ndarray
Strategy = Literal["uniform", "quantile"]

RELIABILITY_COLUMNS = [
    "bin_lower",
    "bin_upper",
    "mean_predicted",
    "observed_frequency",
    "count",
]


def brier_score(
    probabilities: ArrayLike, labels: ArrayLike, *, nan_policy: NanPolicy = "omit"
) -> float:
    """Brier score: the mean of ``(probability - label) ** 2``; lower is better.

    0 is a perfect forecast; always predicting the base rate ``b`` scores ``b (1 - b)``, and
    0.25 is what a constant 0.5 scores. Equals ``sklearn.metrics.brier_score_loss(labels,
    probabilities)`` (note the argument order: probabilities first, as everywhere in
    :mod:`uqlm_bert.evaluation`).

    Args:
        probabilities, labels: per answer, the probability of being correct (in [0, 1]) and
            1/``True`` (correct) or 0/``False``.
        nan_policy: ``"omit"`` (drop NaN items, with a warning) or ``"raise"``.

    Returns:
        The Brier score in [0, 1].

    Raises:
        InputValidationError: lengths differ, a probability is outside [0, 1], a label is not
            0/1, or no item is left.

    Example:
        >>> brier_score([1.0, 0.5, 0.0], [1, 1, 0])
        0.08333333333333333
    """
    p, y = _probabilities_and_labels(probabilities, labels, nan_policy)
    return float(np.mean((p - y) ** 2))


def reliability_curve(
    probabilities: ArrayLike,
    labels: ArrayLike,
    *,
    n_bins: int = 10,
    strategy: Strategy = "uniform",
    nan_policy: NanPolicy = "omit",
) -> pd.DataFrame:
    """Per probability bin: the mean probability, the fraction correct, and how many answers.

    Bins: ``strategy="uniform"`` cuts [0, 1] into ``n_bins`` equal widths; ``"quantile"`` puts
    the edges at the quantiles of the probabilities, so bins hold about equally many answers
    (tied probabilities can leave some bins empty). A probability on an inner edge belongs to
    the bin below it, as in scikit-learn: bins are ``(lower, upper]``, the first ``[lower,
    upper]``. Only bins holding an answer are returned, so ``mean_predicted`` and
    ``observed_frequency`` equal scikit-learn's ``calibration_curve(labels, probabilities,
    n_bins=n_bins, strategy=strategy)`` (``prob_pred`` and ``prob_true``).

    For well-calibrated probabilities, ``observed_frequency`` is close to ``mean_predicted`` in
    every bin; bins with few answers are noisy, so read the two next to ``count``.

    Args:
        probabilities, labels: per answer, the probability of being correct (in [0, 1]) and
            1/``True`` (correct) or 0/``False``.
        n_bins: how many bins (at least 1).
        strategy: ``"uniform"`` or ``"quantile"``.
        nan_policy: ``"omit"`` (drop NaN items, with a warning) or ``"raise"``.

    Returns:
        DataFrame with one row per non-empty bin, in increasing order: ``bin_lower``,
        ``bin_upper``, ``mean_predicted``, ``observed_frequency``, ``count``.

    Raises:
        InputValidationError: lengths differ, a probability is outside [0, 1], a label is not
            0/1, or no item is left.
        ConfigurationError: ``n_bins`` is not an int >= 1 or ``strategy`` is unknown.

    Example:
        >>> reliability_curve([0.1, 0.3, 0.7, 0.9], [0, 1, 1, 1], n_bins=2)
           bin_lower  bin_upper  mean_predicted  observed_frequency  count
        0        0.0        0.5             0.2                 0.5      2
        1        0.5        1.0             0.8                 1.0      2
    """
    n_bins = check_int("n_bins", n_bins, 1, numpy_ok=True)
    p, y = _probabilities_and_labels(probabilities, labels, nan_policy)
    edges = _bin_edges(p, n_bins, strategy)
    # inner edges only: a value equal to an inner edge goes to the bin below (side="left")
    bin_of = np.searchsorted(edges[1:-1], p)
    count = np.bincount(bin_of, minlength=n_bins)
    prob_sum = np.bincount(bin_of, weights=p, minlength=n_bins)
    true_sum = np.bincount(bin_of, weights=y, minlength=n_bins)
    kept = count > 0
    return pd.DataFrame(
        {
            "bin_lower": edges[:-1][kept],
            "bin_upper": edges[1:][kept],
            "mean_predicted": prob_sum[kept] / count[kept],
            "observed_frequency": true_sum[kept] / count[kept],
            "count": count[kept].astype(np.int64),
        },
        columns=RELIABILITY_COLUMNS,
    )


def expected_calibration_error(
    probabilities: ArrayLike,
    labels: ArrayLike,
    *,
    n_bins: int = 10,
    strategy: Strategy = "uniform",
    nan_policy: NanPolicy = "omit",
) -> float:
    """Expected calibration error: the mean gap between probability and frequency, per bin.

    ``ECE = sum_b (n_b / n) * |mean_predicted_b - observed_frequency_b|`` over the bins of
    :func:`reliability_curve` (same ``n_bins`` and ``strategy``). 0 means that in every bin the
    fraction of correct answers equals the mean probability. ECE depends on the binning: compare
    values computed with the same ``n_bins`` and ``strategy``, and prefer ``"quantile"`` when
    the probabilities crowd into a few uniform bins. With one bin it is ``|mean probability -
    base rate|``. The arguments are those of :func:`reliability_curve`.

    Returns:
        ECE in [0, 1].

    Raises:
        InputValidationError: lengths differ, a probability is outside [0, 1], a label is not
            0/1, or no item is left.
        ConfigurationError: ``n_bins`` is not an int >= 1 or ``strategy`` is unknown.

    Example:
        >>> # bin [0, 0.5]: mean 0.2, 1 of 2 correct; bin (0.5, 1]: mean 0.8, 2 of 2
        >>> round(expected_calibration_error([0.1, 0.3, 0.7, 0.9], [0, 1, 1, 1], n_bins=2), 4)
        0.25
    """
    curve = reliability_curve(
        probabilities, labels, n_bins=n_bins, strategy=strategy, nan_policy=nan_policy
    )
    return ece_of_curve(curve)


def ece_of_curve(curve: pd.DataFrame) -> float:
    """The expected calibration error of a :func:`reliability_curve` table, for a caller that
    has the table already (a plot of it, say).

    Example:
        >>> curve = reliability_curve([0.1, 0.3, 0.7, 0.9], [0, 1, 1, 1], n_bins=2)
        >>> round(ece_of_curve(curve), 4)
        0.25
    """
    count = curve["count"].to_numpy(dtype=np.float64)
    gap = np.abs(curve["mean_predicted"].to_numpy() - curve["observed_frequency"].to_numpy())
    return float(np.dot(count, gap) / count.sum())


def _probabilities_and_labels(
    probabilities: ArrayLike, labels: ArrayLike, nan_policy: NanPolicy
) -> tuple[np.ndarray, np.ndarray]:
    """Paired float arrays, NaNs handled, probabilities in [0, 1], labels 0/1."""
    p, y = paired_arrays(probabilities, labels, nan_policy)
    outside = np.flatnonzero((p < 0) | (p > 1))
    if outside.size:
        raise InputValidationError(
            f"probabilities must lie in [0, 1], got {float(p[outside[0]])!r} at index "
            f"{outside[0]} (after dropping NaNs); turn a score into a probability with "
            "uqlm_bert.ScoreCalibrator first"
        )
    return p, check_binary(y, both_classes=False).astype(np.float64)


def _bin_edges(p: np.ndarray, n_bins: int, strategy: str) -> np.ndarray:
    if strategy == "uniform":
        return np.linspace(0.0, 1.0, n_bins + 1)
    if strategy == "quantile":
        return np.percentile(p, np.linspace(0.0, 1.0, n_bins + 1) * 100)
    raise ConfigurationError(f"strategy must be 'uniform' or 'quantile', got {strategy!r}")
