"""Input checks shared by the evaluation metrics.

Every metric takes ``scores`` (one number per item) and ``labels`` (one per item), turns both
into float64 arrays, checks that they pair up, and applies the missing-value policy:

* ``nan_policy="omit"`` (the default): an item whose score or label is NaN (or ``None``) is
  dropped, with a :class:`UserWarning` that says how many were dropped and where. Scorers give
  NaN where a prompt had no samples to score against, so this keeps an evaluation running.
* ``nan_policy="raise"``: a NaN raises :class:`~uqlm_bert.exceptions.InputValidationError`
  naming its index.

Infinite values are always an error: no metric here can rank or average them meaningfully.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from uqlm_bert._warn import warn_user
from uqlm_bert.exceptions import InputValidationError
from uqlm_bert.inputs import float_vector

NanPolicy = Literal["omit", "raise"]

_SHOW_AT_MOST = 5


def paired_arrays(
    scores: Sequence[float] | np.ndarray,
    labels: Sequence[float] | np.ndarray,
    nan_policy: NanPolicy = "omit",
    *,
    min_items: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(scores, labels)`` as 1-D float64 arrays with NaN pairs handled per ``nan_policy``.

    Raises:
        InputValidationError: not 1-D, lengths differ, an infinite value, a NaN under
            ``nan_policy="raise"``, or fewer than ``min_items`` items left.
    """
    if nan_policy not in ("omit", "raise"):
        raise InputValidationError(f"nan_policy must be 'omit' or 'raise', got {nan_policy!r}")
    s = float_vector(scores, "scores")
    y = float_vector(labels, "labels")
    if s.shape[0] != y.shape[0]:
        raise InputValidationError(
            f"scores has {s.shape[0]} items but labels has {y.shape[0]}; give one label per score"
        )
    missing = np.isnan(s) | np.isnan(y)
    if missing.any():
        where = np.flatnonzero(missing)
        shown = ", ".join(str(i) for i in where[:_SHOW_AT_MOST])
        more = f" and {where.size - _SHOW_AT_MOST} more" if where.size > _SHOW_AT_MOST else ""
        if nan_policy == "raise":
            raise InputValidationError(
                f"scores or labels are NaN at index {shown}{more}; drop those items or pass "
                "nan_policy='omit'"
            )
        warn_user(
            f"dropped {where.size} of {s.shape[0]} items whose score or label is NaN "
            f"(index {shown}{more})",
            UserWarning,
        )
        keep = ~missing
        s, y = s[keep], y[keep]
    if s.shape[0] < min_items:
        raise InputValidationError(
            f"need at least {min_items} scored item(s) with a label, got {s.shape[0]}"
        )
    return s, y


def check_binary(
    labels: np.ndarray,
    *,
    both_classes: bool = True,
    purpose: str = "this metric",
    scores: np.ndarray | None = None,
) -> np.ndarray:
    """Return ``labels`` as a bool array; they must be 0/1 (or bool).

    Args:
        labels: the labels, as :func:`paired_arrays` returns them.
        both_classes: also require at least one 1 and one 0.
        purpose: what needs both classes, for the error message.
        scores: the scores given with them: when those are all 0/1 and the labels are not, the
            message says the arguments look swapped (scikit-learn takes labels first).

    Raises:
        InputValidationError: a label other than 0 or 1, or (with ``both_classes``) only one
            class present.
    """
    bad = np.flatnonzero((labels != 0) & (labels != 1))
    if bad.size and scores is not None and np.isin(scores, (0.0, 1.0)).all():
        raise InputValidationError(
            f"labels must be 0/1, got {float(labels[bad[0]])!r} at index {bad[0]}, while the "
            "scores are all 0/1: the arguments look swapped. These functions take (scores, "
            "labels), the reverse of scikit-learn's (y_true, y_score)"
        )
    if bad.size:
        raise InputValidationError(
            f"labels must be 0/1 or bool, got {float(labels[bad[0]])!r} at index {bad[0]}; "
            "binarise graded labels first, e.g. labels >= 0.5"
        )
    y = labels == 1
    n_pos = int(y.sum())
    if both_classes and (n_pos == 0 or n_pos == y.size):
        cls = 1 if n_pos else 0
        raise InputValidationError(
            f"labels contain only class {cls} ({y.size} items); {purpose} needs both "
            "positives (1) and negatives (0)"
        )
    return y


def check_not_constant(values: np.ndarray, name: str) -> None:
    """Raise if every value is the same (a correlation or ratio would be undefined)."""
    if values.size and np.all(values == values[0]):
        raise InputValidationError(
            f"{name} are all equal ({float(values[0])!r}) over {values.size} items; the metric is "
            "undefined for a constant input"
        )
