"""Plots of a confidence score: how it splits right from wrong answers, what filtering buys,
where a threshold falls, and whether probabilities are calibrated.

Five functions, each drawing on a matplotlib ``Axes`` (a new figure when ``ax`` is ``None``)
and returning it:

==========================================  ====================================================
:func:`plot_confidence_histogram`           distribution of the confidence, split into correct
                                            and incorrect answers when labels are given
:func:`plot_accuracy_vs_fraction_kept`      accuracy of the answers kept, against the fraction
                                            kept, when the least confident are dropped
:func:`plot_threshold`                      every answer by increasing confidence, with the
                                            threshold and what it flags
:func:`plot_reliability_diagram`            fraction correct against the predicted probability,
                                            per bin, next to the diagonal of perfect calibration
:func:`plot_supports`                       one answer word by word: how well its samples
                                            support each word, and the weakly supported ones
==========================================  ====================================================

:class:`~uqlm_bert.UQResult` has the same plots as methods (``result.plot_histogram()``,
``result.plot_accuracy_vs_fraction_kept(correct)``, ``result.plot_threshold(threshold=0.7)``,
``result.plot_supports(0)``); their options are keyword-only, ``ax=`` among them.

Labels follow :mod:`uqlm_bert.evaluation`: 1 (or ``True``) for a correct answer, 0 for an
incorrect one, ``None``/NaN where it is unknown. A confidence of NaN (no samples to judge by) has
no place on a confidence axis: the histogram and the curve leave it out and say how many they
left out; the threshold view counts it as flagged, as :meth:`UQResult.flag
<uqlm_bert.UQResult.flag>` does.

matplotlib is an optional dependency: ``pip install 'uqlm-bert[plot]'``. It is imported on the
first plot. When no ``ax`` is given, a new figure is made: through pyplot when the program uses
pyplot or has chosen a backend (Jupyter's inline backend shows the figure as usual), otherwise as
a standalone :class:`matplotlib.figure.Figure` (``ax.figure.savefig(...)`` works), so plotting on
a server or in CI needs no display and changes no process-wide matplotlib setting.

Example:
    >>> from uqlm_bert.plots import plot_confidence_histogram
    >>> ax = plot_confidence_histogram([0.95, 0.91, 0.42, 0.88, 0.35], labels=[1, 1, 0, 1, 0],
    ...                                bins=5)
    >>> ax.get_xlabel(), ax.get_ylabel()
    ('confidence', 'answers')
    >>> [int(p.get_height()) for p in ax.patches]  # 5 bars of correct, then 5 of incorrect
    [0, 0, 0, 0, 3, 0, 1, 1, 0, 0]
"""

from __future__ import annotations

import logging
import sys
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from uqlm_bert._checks import check_int
from uqlm_bert._exceptions import ConfigurationError, InputValidationError
from uqlm_bert._inputs import float_vector, paired_arrays
from uqlm_bert.bertscore._token_support import is_weak

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = [
    "plot_supports",
    "plot_accuracy_vs_fraction_kept",
    "plot_confidence_histogram",
    "plot_reliability_diagram",
    "plot_threshold",
]

logger = logging.getLogger("uqlm_bert")

ArrayLike = Sequence[Any] | np.ndarray

#: Colours: correct answers, incorrect answers, answers without a label, the threshold.
CORRECT_COLOR = "#2a9d8f"
INCORRECT_COLOR = "#e76f51"
NEUTRAL_COLOR = "#4c72b0"
THRESHOLD_COLOR = "#264653"


def plot_confidence_histogram(
    confidence: ArrayLike,
    labels: ArrayLike | None = None,
    *,
    ax: Axes | None = None,
    bins: int | Sequence[float] = 20,
    score_name: str = "confidence",
) -> Axes:
    """Histogram of the confidence; two overlaid histograms (correct, incorrect) with labels.

    A confidence that separates right from wrong answers puts the correct ones to the right and
    the incorrect ones to the left, with little overlap. Both groups share the same bins.

    Args:
        confidence: one confidence per answer (NaN: not scored; left out and counted in the
            title).
        labels: one label per answer: 1/``True`` correct, 0/``False`` incorrect, ``None``/NaN
            unknown (left out of the split, counted in the title). ``None``: one histogram.
        ax: the Axes to draw on; ``None`` makes a new figure.
        bins: the number of equal-width bins over ``[min(0, lowest), max(1, highest)]``, or the
            bin edges.
        score_name: the x-axis label (e.g. the scorer's name).

    Returns:
        The Axes: with labels, ``ax.patches`` holds the correct answers' bars then the incorrect
        answers' bars, one per bin each; without, one bar per bin.

    Raises:
        InputValidationError: lengths differ, a confidence is infinite, a label is not 0/1/None,
            or ``bins`` is not a positive number or increasing edges.
        ConfigurationError: matplotlib is not installed.

    Example:
        >>> ax = plot_confidence_histogram([0.2, 0.8, 0.9, float("nan")], bins=2)
        >>> [int(p.get_height()) for p in ax.patches], ax.get_title()
        ([1, 2], '3 answers (1 without a score)')
    """
    scores = float_vector(confidence, "confidence")
    label_arr = None if labels is None else _as_binary_labels(labels, scores.size)
    scored = ~np.isnan(scores)
    edges = _bin_edges(bins, scores[scored])
    ax = _new_axes(ax)
    style = {"bins": edges, "edgecolor": "white", "linewidth": 0.6}
    if label_arr is None:
        ax.hist(scores[scored], color=NEUTRAL_COLOR, label="answers", **style)
        title = f"{int(scored.sum())} answers"
    else:
        known = scored & ~np.isnan(label_arr)
        correct = scores[known & (label_arr == 1)]
        incorrect = scores[known & (label_arr == 0)]
        ax.hist(
            correct, color=CORRECT_COLOR, alpha=0.65, label=f"correct ({correct.size})", **style
        )
        ax.hist(
            incorrect,
            color=INCORRECT_COLOR,
            alpha=0.65,
            label=f"incorrect ({incorrect.size})",
            **style,
        )
        ax.legend(loc="upper left")
        title = f"{int(known.sum())} answers"
        unlabelled = int((scored & np.isnan(label_arr)).sum())
        if unlabelled:
            title += f" ({unlabelled} without a label)"
    missing = int((~scored).sum())
    if missing:
        title += f" ({missing} without a score)"
    ax.set_title(title)
    ax.set_xlabel(score_name)
    ax.set_ylabel("answers")
    ax.set_xlim(float(edges[0]), float(edges[-1]))
    return ax


def plot_accuracy_vs_fraction_kept(
    confidence: ArrayLike,
    correct: ArrayLike,
    *,
    ax: Axes | None = None,
    threshold: float | None = None,
    score_name: str = "confidence",
) -> Axes:
    """Accuracy of the answers kept against the fraction kept, keeping the most confident first.

    Each point is one confidence threshold ("keep answers with confidence >= t"), from the
    points of :func:`uqlm_bert.evaluation.accuracy_vs_fraction_kept`; the rightmost keeps every
    answer, at the base rate (dashed line). The dotted line is the oracle, which keeps the
    correct answers first: the best any confidence could do. The closer the curve runs to the
    oracle, the more filtering by this confidence buys (:func:`uqlm_bert.evaluation.prr`
    condenses this into one number).

    Args:
        confidence: one confidence per answer; NaN ones are left out (with a warning).
        correct: one label per answer: 1/0 correctness, or a graded quality (higher = better).
        ax: the Axes to draw on; ``None`` makes a new figure.
        threshold: also mark the operating point of this threshold (keep ``>= threshold``).
        score_name: the scorer's name, for the legend.

    Returns:
        The Axes; ``ax.lines`` holds the curve, the oracle, the base rate, and, with a
        ``threshold``, its marker.

    Raises:
        InputValidationError: lengths differ, no answer has both a confidence and a label, or a
            value is infinite.
        ConfigurationError: matplotlib is not installed.

    Example:
        >>> ax = plot_accuracy_vs_fraction_kept([0.9, 0.8, 0.4, 0.3], [1, 1, 0, 1])
        >>> ax.lines[0].get_xdata().tolist(), ax.lines[0].get_ydata().tolist()
        ([0.25, 0.5, 0.75, 1.0], [1.0, 1.0, 0.6666666666666666, 0.75])
    """
    from uqlm_bert.evaluation import accuracy_vs_fraction_kept, rejection_curve

    scores, quality = paired_arrays(confidence, correct)
    curve = accuracy_vs_fraction_kept(scores, quality)
    oracle = rejection_curve(quality, quality)
    n = scores.size
    base_rate = float(quality.mean())
    ax = _new_axes(ax)
    ax.plot(
        curve["fraction_kept"].to_numpy(),
        curve["accuracy"].to_numpy(),
        marker="o",
        markersize=3.5,
        color=NEUTRAL_COLOR,
        label=f"keep by {score_name}",
        clip_on=False,
    )
    ax.plot(
        np.arange(1, n + 1) / n,
        oracle,
        linestyle=":",
        color=CORRECT_COLOR,
        label="oracle (correct first)",
        clip_on=False,
    )
    ax.axhline(
        base_rate, linestyle="--", color="grey", linewidth=1, label=f"keep all ({base_rate:.2f})"
    )
    if threshold is not None:
        threshold = _as_threshold(threshold)
        kept = scores >= threshold
        if kept.any():
            fraction, accuracy = float(kept.mean()), float(quality[kept].mean())
            ax.plot(
                [fraction],
                [accuracy],
                marker="D",
                markersize=8,
                linestyle="none",
                color=THRESHOLD_COLOR,
                clip_on=False,
                label=f">= {threshold:.3g}: keep {fraction:.0%}, accuracy {accuracy:.2f}",
            )
        else:
            logger.info("threshold %g keeps no answer; no operating point drawn", threshold)
    low = min(0.0, float(quality.min()))
    high = max(1.0, float(quality.max()))
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(low, high + 0.05 * (high - low))
    ax.set_xlabel("fraction of answers kept")
    ax.set_ylabel("accuracy of the answers kept")
    ax.set_title(f"{n} answers, most confident kept first")
    ax.legend(loc="lower left")
    return ax


def plot_threshold(
    confidence: ArrayLike,
    threshold: float,
    *,
    labels: ArrayLike | None = None,
    ax: Axes | None = None,
    score_name: str = "confidence",
) -> Axes:
    """Every answer by increasing confidence, the threshold, and what it flags.

    Answers below the threshold (the shaded band) are flagged, as by
    :meth:`UQResult.flag <uqlm_bert.UQResult.flag>`: ``confidence < threshold``; answers with
    a NaN confidence cannot be placed on the axis and are flagged too (counted in the title).
    With labels, the points are coloured by correctness and the legend counts how many correct
    and incorrect answers the threshold keeps and flags.

    Args:
        confidence: one confidence per answer.
        threshold: flag answers whose confidence is below it.
        labels: optional 1/0/``None`` correctness labels, one per answer.
        ax: the Axes to draw on; ``None`` makes a new figure.
        score_name: the y-axis label.

    Returns:
        The Axes; ``ax.collections`` holds one group of points per legend entry (kept, flagged;
        or correct, incorrect, unlabelled where present).

    Raises:
        InputValidationError: lengths differ, a value is infinite, ``threshold`` is not a
            finite number, or a label is not 0/1/None.
        ConfigurationError: matplotlib is not installed.

    Example:
        >>> ax = plot_threshold([0.9, 0.3, 0.75, float("nan")], 0.7)
        >>> ax.get_title()
        'threshold 0.7: 2 of 4 flagged (1 without a score)'
    """
    scores = float_vector(confidence, "confidence")
    threshold = _as_threshold(threshold)
    label_arr = None if labels is None else _as_binary_labels(labels, scores.size)
    scored = ~np.isnan(scores)
    order = np.flatnonzero(scored)[np.argsort(scores[scored], kind="mergesort")]
    rank = np.empty(scores.size)
    rank[order] = np.arange(1, order.size + 1)
    flagged = ~scored | (np.nan_to_num(scores, nan=-np.inf) < threshold)
    ax = _new_axes(ax)
    low = min(0.0, threshold, float(scores[scored].min()) if order.size else 0.0)
    high = max(1.0, threshold, float(scores[scored].max()) if order.size else 1.0)
    pad = 0.03 * (high - low)
    ax.axhspan(low - pad, threshold, color=INCORRECT_COLOR, alpha=0.08, linewidth=0)
    ax.axhline(threshold, color=THRESHOLD_COLOR, linewidth=1.2, linestyle="--")
    if label_arr is None:
        groups = [
            (scored & ~flagged, NEUTRAL_COLOR, "o", "kept"),
            (scored & flagged, INCORRECT_COLOR, "o", "flagged"),
        ]
    else:
        groups = [
            (scored & (label_arr == 1), CORRECT_COLOR, "o", "correct"),
            (scored & (label_arr == 0), INCORRECT_COLOR, "X", "incorrect"),
            (scored & np.isnan(label_arr), "grey", "s", "unlabelled"),
        ]
    for mask, color, marker, name in groups:
        if label_arr is not None and not mask.any():
            continue
        if label_arr is None:
            text = f"{name} ({int(mask.sum())})"
        else:
            text = (
                f"{name}: {int((mask & ~flagged).sum())} kept, "
                f"{int((mask & flagged).sum())} flagged"
            )
        ax.scatter(rank[mask], scores[mask], color=color, marker=marker, s=28, zorder=3, label=text)
    title = f"threshold {threshold:.3g}: {int(flagged.sum())} of {scores.size} flagged"
    missing = int((~scored).sum())
    if missing:
        title += f" ({missing} without a score)"
    ax.set_title(title)
    ax.set_xlabel("answers, by increasing confidence")
    ax.set_ylabel(score_name)
    ax.set_xlim(0.5, max(order.size, 1) + 0.5)
    ax.set_ylim(low - pad, high + pad)
    ax.legend(loc="upper left")
    return ax


def plot_reliability_diagram(
    probabilities: ArrayLike,
    labels: ArrayLike,
    *,
    ax: Axes | None = None,
    n_bins: int = 10,
    strategy: Literal["uniform", "quantile"] = "uniform",
    score_name: str = "predicted probability",
) -> Axes:
    """Reliability diagram: in each probability bin, the fraction of answers that were correct.

    Each point is one bin of :func:`uqlm_bert.evaluation.reliability_curve`: its mean predicted
    probability (x) and the fraction of its answers that were correct (y). Calibrated
    probabilities lie on the dashed diagonal; points below it are overconfident (fewer answers
    correct than predicted), points above it underconfident. The bars at the bottom show each
    bin's share of the answers: a point over a thin bar rests on few answers. The title gives
    the expected calibration error and the Brier score (:mod:`uqlm_bert.evaluation`).

    Use it on probabilities, such as a :class:`~uqlm_bert.ScoreCalibrator`'s
    predictions on held-out answers; a raw confidence can be drawn too, to see how far its
    values are from probabilities.

    Args:
        probabilities: one probability of being correct per answer, in [0, 1]; NaN ones are
            left out (with a warning).
        labels: one label per answer: 1/``True`` correct, 0/``False`` incorrect, ``None``/NaN
            unknown (left out, with a warning).
        ax: the Axes to draw on; ``None`` makes a new figure.
        n_bins: how many bins.
        strategy: ``"uniform"`` (equal widths over [0, 1]) or ``"quantile"`` (about equally
            many answers per bin).
        score_name: the x-axis label.

    Returns:
        The Axes; ``ax.lines`` holds the curve (one point per non-empty bin) then the diagonal,
        and ``ax.patches`` one bar per non-empty bin, spanning the bin, as high as its share of
        the answers.

    Raises:
        InputValidationError: lengths differ, a probability is outside [0, 1] or infinite, a
            label is not 0/1/None, or no answer has both a probability and a label.
        ConfigurationError: ``n_bins`` or ``strategy`` is invalid, or matplotlib is not
            installed.

    Example:
        >>> ax = plot_reliability_diagram([0.1, 0.3, 0.7, 0.9], [0, 1, 1, 1], n_bins=2)
        >>> ax.lines[0].get_xdata().tolist(), ax.lines[0].get_ydata().tolist()
        ([0.2, 0.8], [0.5, 1.0])
        >>> [float(p.get_height()) for p in ax.patches]  # half of the answers in each bin
        [0.5, 0.5]
    """
    from uqlm_bert.evaluation import brier_score, reliability_curve
    from uqlm_bert.evaluation._reliability import ece_of_curve

    curve = reliability_curve(probabilities, labels, n_bins=n_bins, strategy=strategy)
    n = int(curve["count"].sum())
    count = curve["count"].to_numpy()
    ece = ece_of_curve(curve)
    with warnings.catch_warnings():
        # the NaN pairs were reported once already, by reliability_curve
        warnings.simplefilter("ignore", UserWarning)
        brier = brier_score(probabilities, labels)
    ax = _new_axes(ax)
    ax.plot(
        curve["mean_predicted"].to_numpy(),
        curve["observed_frequency"].to_numpy(),
        marker="o",
        markersize=5,
        color=NEUTRAL_COLOR,
        label=f"fraction correct per bin (ECE {ece:.3f})",
        clip_on=False,
        zorder=3,
    )
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1, label="calibrated")
    lower = curve["bin_lower"].to_numpy()
    ax.bar(
        lower,
        count / n,
        width=curve["bin_upper"].to_numpy() - lower,
        align="edge",
        color=NEUTRAL_COLOR,
        alpha=0.2,
        edgecolor="white",
        linewidth=0.6,
        label="share of answers",
    )
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0.0, 1.0)
    ax.set_xlabel(score_name)
    ax.set_ylabel("fraction correct")
    ax.set_title(f"{n} answers, {len(curve)} bins: ECE {ece:.3f}, Brier {brier:.3f}")
    ax.legend(loc="upper left")
    return ax


def plot_supports(
    words: Any, threshold: float, *, ax: Axes | None = None, max_words: int = 80
) -> Axes:
    """One answer word by word: a bar per word with how well the samples support it, the weakly
    supported ones (below ``threshold``) in red, the words that do not count (the prompt's own
    words, punctuation) hatched and grey, and the threshold as a line.

    Args:
        words: the answer's word rows, as ``UQResult.words()`` gives them (``word``,
            ``support``, ``counted``): one answer's.
        threshold: words below it are weakly supported.
        ax: a matplotlib Axes to draw on (default: a new figure).
        max_words: at most this many words are drawn (the first ones); the title says how many
            were left out.

    Returns:
        The Axes.

    Example:
        >>> words = {"word": ["Lima", "is", "in", "Peru", "."], "counted": [1, 1, 1, 1, 0],
        ...          "support": [0.95, 0.9, 0.9, 0.4, 0.99]}
        >>> ax = plot_supports(words, threshold=0.59)
        >>> [t.get_text() for t in ax.get_xticklabels()], len(ax.patches)
        (['Lima', 'is', 'in', 'Peru', '.'], 5)
    """
    check_int("max_words", max_words, 1)
    text = [str(t) for t in words["word"]]
    support = np.asarray(words["support"], dtype=np.float64)
    counted = np.asarray(words["counted"], dtype=bool)
    if not len(text) == len(support) == len(counted):
        raise InputValidationError("words: word, support and counted differ in length")
    cut = _as_threshold(threshold)
    shown = min(len(text), max_words)
    ax = _new_axes(ax)
    x = np.arange(shown)
    weak = is_weak({"support": support, "counted": counted}, cut)[:shown]
    colours = np.where(weak, "#c0392b", np.where(counted[:shown], "#2e86c1", "#bbbbbb"))
    bars = ax.bar(x, support[:shown], color=colours)
    for bar, is_counted in zip(bars, counted[:shown], strict=True):
        if not is_counted:
            bar.set_hatch("//")
    ax.axhline(cut, color="black", linestyle="--", linewidth=1, label=f"threshold {cut:g}")
    ax.set_xticks(x)
    ax.set_xticklabels(text[:shown], rotation=60, ha="right", fontsize=8)
    ax.set_ylim(0.0, 1.05)
    ax.set_ylabel("support")
    title = f"{int(weak.sum())} of {int(counted[:shown].sum())} counted words weakly supported"
    if shown < len(text):
        title += f" (first {shown} of {len(text)} words)"
    ax.set_title(title)
    ax.legend(loc="lower right")
    return ax


def _matplotlib() -> Any:
    try:
        import matplotlib
    except ImportError as exc:
        raise ConfigurationError(
            "plots need matplotlib, which is not installed; install it with: "
            "pip install 'uqlm-bert[plot]'"
        ) from exc
    return matplotlib


def _backend_unset(matplotlib: Any) -> bool:
    getter = getattr(matplotlib.rcParams, "_get_backend_or_none", None)
    if getter is not None:
        return getter() is None
    from matplotlib import rcsetup

    return dict.__getitem__(matplotlib.rcParams, "backend") is rcsetup._auto_backend_sentinel


def _new_axes(ax: Axes | None) -> Axes:
    """``ax``, or the axes of a new figure (see the module docstring for which kind)."""
    if ax is not None:
        return ax
    matplotlib = _matplotlib()
    size = (6.4, 4.0)
    if "matplotlib.pyplot" in sys.modules or not _backend_unset(matplotlib):
        import matplotlib.pyplot as plt

        _, new = plt.subplots(figsize=size, layout="constrained")
        return new
    from matplotlib.figure import Figure

    return Figure(figsize=size, layout="constrained").add_subplot()


def _as_binary_labels(labels: ArrayLike, n: int) -> np.ndarray:
    arr = float_vector(labels, "labels")
    if arr.size != n:
        raise InputValidationError(
            f"labels has {arr.size} items for {n} confidences; give one label per answer"
        )
    bad = np.flatnonzero(~np.isnan(arr) & (arr != 0) & (arr != 1))
    if bad.size:
        raise InputValidationError(
            f"labels must be 1 (correct), 0 (incorrect) or None (unknown), got "
            f"{float(arr[bad[0]])!r} at index {bad[0]}; binarise graded labels first"
        )
    return arr


def _as_threshold(threshold: Any) -> float:
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.number)):
        raise InputValidationError(f"threshold must be a number, got {threshold!r}")
    value = float(threshold)
    if not np.isfinite(value):
        raise InputValidationError(f"threshold must be finite, got {value!r}")
    return value


def _bin_edges(bins: int | Sequence[float], scores: np.ndarray) -> np.ndarray:
    if isinstance(bins, (int, np.integer)):
        count = check_int("bins", bins, 1, numpy_ok=True, error=InputValidationError)
        low = min(0.0, float(scores.min())) if scores.size else 0.0
        high = max(1.0, float(scores.max())) if scores.size else 1.0
        return np.linspace(low, high, count + 1)
    edges = float_vector(bins, "bins")
    if edges.size < 2 or np.isnan(edges).any() or np.any(np.diff(edges) <= 0):
        raise InputValidationError(
            "bins must be a number of bins or at least two increasing bin edges"
        )
    return edges
