"""How well a score separates two classes: AUROC, AUC-PR, and a threshold for flagging.

Conventions for every function here: ``labels`` are 0/1 (or bool), the positive class is 1, and
a higher score means "more likely positive". To judge a confidence (higher = more trustworthy)
as a hallucination detector, either pass correctness labels (1 = correct) with the confidence,
or hallucination labels (1 = hallucinated) with the negated confidence (for AUROC the two give
the same number; for AUC-PR they answer different questions). Missing values follow
``nan_policy`` (see :mod:`uqlm_bert._inputs`).

Example:
    >>> from uqlm_bert.evaluation import auroc, auc_pr
    >>> auroc([0.9, 0.8, 0.3, 0.1], [1, 0, 1, 0])
    0.75
    >>> round(auc_pr([0.9, 0.8, 0.3, 0.1], [1, 0, 1, 0]), 4)
    0.8333
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from uqlm_bert._exceptions import ConfigurationError, InputValidationError
from uqlm_bert._inputs import NanPolicy, check_binary, paired_arrays
from uqlm_bert.evaluation._correlation import rankdata

__all__ = ["ThresholdChoice", "auc_pr", "auroc", "choose_threshold"]

ArrayLike = Sequence[float] | np.ndarray


@dataclass(frozen=True)
class ThresholdChoice:
    """A threshold for flagging items, with how it performed on the data it was chosen on.

    Attributes:
        threshold: flag an item when its score is ``>= threshold`` (``flag_when="above"``) or
            ``< threshold`` (``flag_when="below"``, the rule of ``UQResult.flag`` and
            ``UQResult.filter``, so the threshold can be passed to them as it is).
        flag_when: ``"above"`` or ``"below"``.
        precision: fraction of flagged items that are positives.
        recall: fraction of positives that are flagged.
        f1: harmonic mean of precision and recall.
        n_flagged: how many items the threshold flags.
        objective: the objective it was chosen for.

    Example:
        >>> from uqlm_bert.evaluation import choose_threshold
        >>> choice = choose_threshold([0.2, 0.9, 0.4, 0.7], [0, 1, 0, 1])
        >>> choice.threshold, choice.f1
        (0.7, 1.0)
        >>> choice.flag([0.1, 0.75]).tolist()
        [False, True]
    """

    threshold: float
    flag_when: Literal["above", "below"]
    precision: float
    recall: float
    f1: float
    n_flagged: int
    objective: str

    def flag(self, scores: ArrayLike) -> np.ndarray:
        """Return a bool array: True where an item is flagged (NaN scores are never flagged)."""
        s = np.asarray(scores, dtype=np.float64)
        if self.flag_when == "above":
            return s >= self.threshold
        return s < self.threshold


def auroc(scores: ArrayLike, labels: ArrayLike, *, nan_policy: NanPolicy = "omit") -> float:
    """Area under the ROC curve: the chance that a random positive outscores a random negative.

    Computed exactly from ranks (the Mann-Whitney U statistic); a tie between a positive and a
    negative counts one half. This equals ``sklearn.metrics.roc_auc_score(labels, scores)``.
    Note the argument order: scores first, as everywhere in :mod:`uqlm_bert.evaluation`.

    Args:
        scores, labels: per item, a score (higher: more likely positive) and a 0/1 or bool
            label (1: the positive class).
        nan_policy: ``"omit"`` (drop NaN items, with a warning) or ``"raise"``.

    Returns:
        AUROC in [0, 1]; 0.5 is chance.

    Raises:
        InputValidationError: lengths differ, labels are not 0/1, or only one class is present.

    Example:
        >>> auroc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1])
        0.75
    """
    s, y = paired_arrays(scores, labels, nan_policy)
    pos = check_binary(y, scores=s)
    n_pos = int(pos.sum())
    n_neg = pos.size - n_pos
    rank_sum = float(rankdata(s)[pos].sum())
    u = rank_sum - n_pos * (n_pos + 1) / 2.0
    return u / (n_pos * n_neg)


def auc_pr(scores: ArrayLike, labels: ArrayLike, *, nan_policy: NanPolicy = "omit") -> float:
    """Area under the precision-recall curve, as average precision (AP).

    ``AP = sum_k (R_k - R_{k-1}) * P_k`` over the distinct score values taken as thresholds from
    the highest down (flag items with score >= threshold), where ``P_k`` and ``R_k`` are the
    precision and recall at the k-th threshold and ``R_0 = 0``. This is the step-wise sum of
    ``sklearn.metrics.average_precision_score(labels, scores)``, not a trapezoidal area, so it
    does not interpolate optimistically between operating points.

    Args:
        scores, labels: per item, a score (higher: more likely positive) and a 0/1 or bool
            label (1: the positive class).
        nan_policy: ``"omit"`` (drop NaN items, with a warning) or ``"raise"``.

    Returns:
        AP in [0, 1]; a random score gets about the positive rate.

    Raises:
        InputValidationError: lengths differ, labels are not 0/1, or only one class is present.

    Example:
        >>> round(auc_pr([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]), 4)
        0.8333
    """
    s, y = paired_arrays(scores, labels, nan_policy)
    pos = check_binary(y, scores=s)
    _, tp, fp = _cumulative_counts(s, pos)
    precision = tp / (tp + fp)
    recall = tp / tp[-1]
    recall_steps = np.diff(np.concatenate(([0.0], recall)))
    return float(np.sum(recall_steps * precision))


def choose_threshold(
    scores: ArrayLike,
    labels: ArrayLike,
    objective: Literal["f1", "precision"] = "f1",
    target_precision: float | None = None,
    *,
    flag_when: Literal["above", "below"] = "above",
    nan_policy: NanPolicy = "omit",
) -> ThresholdChoice:
    """Choose the score threshold at which to flag items (say, as hallucinations).

    Candidate thresholds are the distinct score values (for ``flag_when="below"``, the midpoint
    between a score and the next higher one, so that ``score < threshold`` flags the same items
    as ``score <= that score``, as ``UQResult.flag`` expects). With ``objective="f1"`` the threshold
    with the highest F1 is chosen (F1 ties go to the higher precision). With
    ``objective="precision"`` the threshold that flags the most positives (highest recall) while
    keeping precision >= ``target_precision`` is chosen (recall ties go to the higher
    precision): use it when a false alarm is costly.

    Args:
        scores: one score per item.
        labels: 0/1 or bool per item; 1 marks an item that should be flagged.
        objective: ``"f1"`` or ``"precision"``.
        target_precision: the precision to reach, in (0, 1]; required for
            ``objective="precision"``.
        flag_when: ``"above"`` flags ``score >= threshold`` (hallucination scores);
            ``"below"`` flags ``score < threshold`` (confidences such as ``bert_score``; the
            threshold then works with ``UQResult.flag`` and ``UQResult.filter`` as it is).
        nan_policy: ``"omit"`` (drop NaN items, with a warning) or ``"raise"``.

    Returns:
        A :class:`ThresholdChoice` with the threshold and its precision, recall and F1 here.

    Raises:
        ConfigurationError: an unknown objective or ``flag_when``, a missing or out-of-range
            ``target_precision``, or no threshold reaches the target (the message gives the
            highest precision reachable).
        InputValidationError: lengths differ, labels are not 0/1, or only one class is present.

    Example:
        >>> # flag answers whose confidence is low; 1 = the answer was a hallucination
        >>> conf = [0.91, 0.42, 0.88, 0.35, 0.60]
        >>> hallucinated = [0, 1, 0, 1, 0]
        >>> choice = choose_threshold(conf, hallucinated, flag_when="below")
        >>> round(choice.threshold, 2)  # midway between 0.42 (flagged) and 0.60 (kept)
        0.51
        >>> choice.flag(conf).tolist()
        [False, True, False, True, False]
    """
    if objective not in ("f1", "precision"):
        raise ConfigurationError(f"objective must be 'f1' or 'precision', got {objective!r}")
    if flag_when not in ("above", "below"):
        raise ConfigurationError(f"flag_when must be 'above' or 'below', got {flag_when!r}")
    if objective == "precision":
        if target_precision is None:
            raise ConfigurationError(
                "objective='precision' needs target_precision, e.g. target_precision=0.9"
            )
        if not 0.0 < float(target_precision) <= 1.0:
            raise ConfigurationError(
                f"target_precision must be in (0, 1], got {target_precision!r}"
            )
    elif target_precision is not None:
        raise ConfigurationError(
            "target_precision is only used with objective='precision'; drop it or set "
            "objective='precision'"
        )
    s, y = paired_arrays(scores, labels, nan_policy)
    pos = check_binary(y, scores=s)
    sign = 1.0 if flag_when == "above" else -1.0
    thresholds, tp, fp = _cumulative_counts(sign * s, pos)
    precision = tp / (tp + fp)
    recall = tp / tp[-1]
    f1 = 2 * precision * recall / (precision + recall)
    f1 = np.where(tp > 0, f1, 0.0)
    if objective == "f1":
        best = int(np.lexsort((-precision, -f1))[0])
    else:
        ok = np.flatnonzero(precision >= float(target_precision) - 1e-12)
        if ok.size == 0:
            raise ConfigurationError(
                f"no threshold reaches precision {target_precision}; the highest reachable "
                f"on these labels is {precision.max():.4f}; lower target_precision"
            )
        order = np.lexsort((-precision[ok], -recall[ok]))
        best = int(ok[order[0]])
    threshold = float(sign * thresholds[best])
    if flag_when == "below":
        # flag score < threshold: put it between the last flagged score and the next one up
        higher = s[s > threshold]
        threshold = (
            float((threshold + higher.min()) / 2)
            if higher.size
            else float(np.nextafter(threshold, np.inf))
        )
    return ThresholdChoice(
        threshold=threshold,
        flag_when=flag_when,
        precision=float(precision[best]),
        recall=float(recall[best]),
        f1=float(f1[best]),
        n_flagged=int(tp[best] + fp[best]),
        objective=objective,
    )


def _cumulative_counts(
    scores: np.ndarray, positive: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """True and false positives when flagging ``score >= t``, for each distinct ``t`` descending.

    Returns ``(thresholds, tp, fp)`` as arrays of equal length, thresholds strictly decreasing.
    """
    if positive.size == 0:
        raise InputValidationError("no items to evaluate")
    order = np.argsort(-scores, kind="mergesort")
    s = scores[order]
    p = positive[order].astype(np.float64)
    last_of_group = np.flatnonzero(np.diff(s)).tolist() + [s.size - 1]
    tp = np.cumsum(p)[last_of_group]
    fp = (np.asarray(last_of_group) + 1) - tp
    return s[last_of_group], tp, fp.astype(np.float64)
