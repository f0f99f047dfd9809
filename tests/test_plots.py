"""Plots: rendered images, the data behind every bar, line and point, axes, and errors.

Expected bar heights come from numpy.histogram on the split data; curves from a direct loop over
thresholds; flag counts from the rule ``confidence < threshold or NaN`` applied here.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")

import matplotlib.image as mpimg  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tests.conftest import REPO_ROOT  # noqa: E402
from uqlm_bert import (  # noqa: E402
    ConfigurationError,
    InputValidationError,
    UQResult,  # noqa: E402
)
from uqlm_bert.plots import (  # noqa: E402
    plot_accuracy_vs_fraction_kept,
    plot_confidence_histogram,
    plot_reliability_diagram,
    plot_threshold,
)

RNG = np.random.default_rng(7)
N = 60
LABELS = (RNG.random(N) < 0.6).astype(float)
CONF = np.clip(np.where(LABELS == 1, RNG.normal(0.8, 0.1, N), RNG.normal(0.5, 0.15, N)), 0, 1)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _png(ax) -> np.ndarray:
    buf = io.BytesIO()
    ax.figure.savefig(buf, format="png", dpi=50)
    data = buf.getvalue()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    image = mpimg.imread(io.BytesIO(data), format="png")
    width, height = ax.figure.get_size_inches() * 50
    assert image.shape[:2] == (round(height), round(width))
    # something is drawn: the image is not a single colour
    assert float(image[..., :3].std()) > 0.05
    return image


def _heights(patches) -> list[float]:
    return [p.get_height() for p in patches]


def _legend_texts(ax) -> list[str]:
    return [t.get_text() for t in ax.get_legend().get_texts()]


# -- histogram ---------------------------------------------------------------------------------


def test_histogram_without_labels_counts_every_scored_answer():
    conf = CONF.copy()
    conf[[3, 10]] = np.nan
    ax = plot_confidence_histogram(conf, bins=10)
    expected, edges = np.histogram(conf[~np.isnan(conf)], bins=10, range=(0, 1))
    assert len(ax.patches) == 10
    assert _heights(ax.patches) == expected.tolist()
    assert [p.get_x() for p in ax.patches] == pytest.approx(edges[:-1].tolist())
    assert ax.get_xlabel() == "confidence" and ax.get_ylabel() == "answers"
    assert ax.get_xlim() == pytest.approx((0.0, 1.0))
    assert ax.get_title() == f"{N - 2} answers (2 without a score)"
    _png(ax)


def test_histogram_with_labels_splits_correct_and_incorrect():
    labels = LABELS.astype(object)
    labels[5] = None  # unknown label: left out of both groups
    ax = plot_confidence_histogram(CONF, labels=labels, bins=8)
    known = np.array([lab is not None for lab in labels])
    lab = np.array([np.nan if v is None else v for v in labels], dtype=float)
    correct, _ = np.histogram(CONF[known & (lab == 1)], bins=8, range=(0, 1))
    incorrect, _ = np.histogram(CONF[known & (lab == 0)], bins=8, range=(0, 1))
    assert len(ax.patches) == 16
    assert _heights(ax.patches[:8]) == correct.tolist()
    assert _heights(ax.patches[8:]) == incorrect.tolist()
    assert sum(_heights(ax.patches)) == N - 1
    n_correct = int((known & (lab == 1)).sum())
    assert _legend_texts(ax) == [f"correct ({n_correct})", f"incorrect ({N - 1 - n_correct})"]
    assert ax.get_title() == f"{N - 1} answers (1 without a label)"
    _png(ax)


def test_histogram_range_grows_for_rescaled_scores_and_takes_edges():
    conf = np.array([-0.4, 0.1, 0.5, 1.2])
    ax = plot_confidence_histogram(conf, bins=4)
    assert ax.get_xlim() == pytest.approx((-0.4, 1.2))
    assert _heights(ax.patches) == np.histogram(conf, bins=4, range=(-0.4, 1.2))[0].tolist()

    edges = [0.0, 0.5, 0.9, 1.0]
    ax2 = plot_confidence_histogram([0.1, 0.6, 0.95, 0.97], bins=edges)
    assert _heights(ax2.patches) == [1, 1, 2]
    assert ax2.get_xlim() == pytest.approx((0.0, 1.0))


def test_histogram_draws_on_a_given_axes():
    fig, axes = plt.subplots(1, 2)
    out = plot_confidence_histogram(CONF, ax=axes[1], bins=5, score_name="bert_score")
    assert out is axes[1]
    assert len(axes[0].patches) == 0 and len(axes[1].patches) == 5
    assert out.get_xlabel() == "bert_score"
    assert plt.get_fignums() == [fig.number]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"confidence": [0.1, 0.2], "labels": [1]}, "one label per answer"),
        ({"confidence": [0.1, 0.2], "labels": [1, 0.5]}, "index 1"),
        ({"confidence": [0.1, float("inf")]}, r"confidence\[1\] is infinite"),
        ({"confidence": "0.5"}, "not a string"),
        ({"confidence": [0.1], "bins": 0}, "bins must be an int >= 1"),
        ({"confidence": [0.1], "bins": True}, "bins must be an int >= 1, got True"),
        ({"confidence": [0.1], "bins": [0.5, 0.2]}, "increasing bin edges"),
    ],
)
def test_histogram_rejects_bad_input(kwargs, message):
    with pytest.raises(InputValidationError, match=message):
        plot_confidence_histogram(**kwargs)


# -- accuracy against fraction kept ------------------------------------------------------------


def _curve_by_loop(conf: np.ndarray, labels: np.ndarray) -> tuple[list[float], list[float]]:
    fractions, accuracies = [], []
    for t in sorted(set(conf.tolist()), reverse=True):
        kept = [lab for c, lab in zip(conf, labels, strict=True) if c >= t]
        fractions.append(len(kept) / len(conf))
        accuracies.append(sum(kept) / len(kept))
    return fractions, accuracies


def test_accuracy_curve_points_oracle_and_base_rate():
    conf = np.round(CONF, 1)  # ties: one point per distinct confidence
    ax = plot_accuracy_vs_fraction_kept(conf, LABELS)
    fractions, accuracies = _curve_by_loop(conf, LABELS)
    curve, oracle, base = ax.lines[:3]
    assert curve.get_xdata().tolist() == pytest.approx(fractions)
    assert curve.get_ydata().tolist() == pytest.approx(accuracies)
    n_pos = int(LABELS.sum())
    k = np.arange(1, N + 1)
    assert oracle.get_xdata().tolist() == pytest.approx((k / N).tolist())
    assert oracle.get_ydata().tolist() == pytest.approx((np.minimum(k, n_pos) / k).tolist())
    assert list(base.get_ydata()) == pytest.approx([n_pos / N] * 2)
    assert ax.get_xlim() == (0.0, 1.0)
    assert ax.get_ylim() == pytest.approx((0.0, 1.05))
    assert ax.get_xlabel() == "fraction of answers kept"
    assert ax.get_ylabel() == "accuracy of the answers kept"
    assert _legend_texts(ax)[2] == f"keep all ({n_pos / N:.2f})"
    _png(ax)


def test_accuracy_curve_marks_the_threshold_operating_point():
    ax = plot_accuracy_vs_fraction_kept(CONF, LABELS, threshold=0.7, score_name="bert_score")
    kept = CONF >= 0.7
    marker = ax.lines[3]
    assert marker.get_xdata().tolist() == pytest.approx([kept.mean()])
    assert marker.get_ydata().tolist() == pytest.approx([LABELS[kept].mean()])
    assert _legend_texts(ax)[0] == "keep by bert_score"
    assert _legend_texts(ax)[3].startswith(">= 0.7: keep")

    none_kept = plot_accuracy_vs_fraction_kept(CONF, LABELS, threshold=2.0)
    assert len(none_kept.lines) == 3


def test_accuracy_curve_leaves_out_unscored_answers_with_a_warning():
    conf = np.array([0.9, np.nan, 0.5, 0.7])
    labels = np.array([1, 1, 0, 1])
    with pytest.warns(UserWarning, match="dropped 1 of 4"):
        ax = plot_accuracy_vs_fraction_kept(conf, labels)
    assert ax.lines[0].get_xdata().tolist() == pytest.approx([1 / 3, 2 / 3, 1.0])
    assert ax.lines[0].get_ydata().tolist() == pytest.approx([1.0, 1.0, 2 / 3])


def test_accuracy_curve_graded_quality_widens_the_y_axis():
    ax = plot_accuracy_vs_fraction_kept([0.9, 0.2, 0.5], [2.0, -1.0, 0.5])
    low, high = ax.get_ylim()
    assert low == pytest.approx(-1.0) and high == pytest.approx(2.0 + 0.05 * 3.0)


def test_accuracy_curve_rejects_mismatched_lengths():
    with pytest.raises(InputValidationError, match="labels has 2"):
        plot_accuracy_vs_fraction_kept([0.1, 0.2, 0.3], [1, 0])


# -- threshold view ----------------------------------------------------------------------------


def test_threshold_view_without_labels_separates_kept_and_flagged():
    conf = CONF.copy()
    conf[0] = np.nan
    t = 0.65
    ax = plot_threshold(conf, t)
    kept, flagged = ax.collections
    order = np.sort(conf[~np.isnan(conf)])
    offsets = np.vstack([kept.get_offsets(), flagged.get_offsets()])
    offsets = offsets[np.argsort(offsets[:, 0])]
    # x is the rank by increasing confidence, y the confidence
    assert offsets[:, 0].tolist() == list(range(1, N))
    assert offsets[:, 1].tolist() == pytest.approx(order.tolist())
    assert (flagged.get_offsets()[:, 1] < t).all() and (kept.get_offsets()[:, 1] >= t).all()
    n_flagged = int(np.sum(np.isnan(conf) | (np.nan_to_num(conf, nan=-1) < t)))
    assert ax.get_title() == f"threshold 0.65: {n_flagged} of {N} flagged (1 without a score)"
    assert _legend_texts(ax) == [f"kept ({N - n_flagged})", f"flagged ({n_flagged - 1})"]
    line = ax.lines[0]
    assert list(line.get_ydata()) == [t, t]
    assert ax.get_xlim() == (0.5, N - 1 + 0.5)
    low, high = ax.get_ylim()
    assert low < 0.0 and high > 1.0
    assert ax.get_ylabel() == "confidence"
    _png(ax)


def test_threshold_view_with_labels_counts_the_confusion():
    t = 0.7
    ax = plot_threshold(CONF, t, labels=LABELS)
    flagged = CONF < t
    correct = LABELS == 1
    expected = [
        f"correct: {int((correct & ~flagged).sum())} kept, {int((correct & flagged).sum())} flagged",
        f"incorrect: {int((~correct & ~flagged).sum())} kept, "
        f"{int((~correct & flagged).sum())} flagged",
    ]
    assert _legend_texts(ax) == expected
    assert [len(c.get_offsets()) for c in ax.collections] == [
        int(correct.sum()),
        int((~correct).sum()),
    ]
    _png(ax)


def test_threshold_view_outside_the_unit_range_and_errors():
    ax = plot_threshold([0.2, 0.4], 1.5)
    assert ax.get_ylim()[1] > 1.5
    with pytest.raises(InputValidationError, match="threshold must be a number"):
        plot_threshold([0.2], "0.5")
    with pytest.raises(InputValidationError, match="threshold must be finite"):
        plot_threshold([0.2], float("nan"))


# -- reliability diagram ----------------------------------------------------------------------


def _bins_by_loop(prob: np.ndarray, labels: np.ndarray, edges: np.ndarray) -> list[tuple]:
    """(lower, upper, mean probability, fraction correct, count) of each non-empty bin.

    Bins are (lower, upper], the first one closed, as in sklearn's calibration_curve.
    """
    out = []
    for b, (lo, hi) in enumerate(zip(edges[:-1], edges[1:], strict=True)):
        inside = (prob <= hi) & ((prob > lo) if b else (prob >= lo))
        if inside.any():
            out.append((lo, hi, prob[inside].mean(), labels[inside].mean(), int(inside.sum())))
    return out


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
def test_reliability_diagram_points_bars_and_title(strategy):
    from sklearn.calibration import calibration_curve
    from sklearn.metrics import brier_score_loss

    prob = np.round(CONF, 2)
    ax = plot_reliability_diagram(prob, LABELS, n_bins=8, strategy=strategy)
    curve, diagonal = ax.lines
    prob_true, prob_pred = calibration_curve(LABELS, prob, n_bins=8, strategy=strategy)
    assert curve.get_xdata().tolist() == pytest.approx(prob_pred.tolist())
    assert curve.get_ydata().tolist() == pytest.approx(prob_true.tolist())
    assert list(diagonal.get_xdata()) == [0, 1] and list(diagonal.get_ydata()) == [0, 1]
    edges = (
        np.linspace(0, 1, 9)
        if strategy == "uniform"
        else np.percentile(prob, np.linspace(0, 1, 9) * 100)
    )
    bins = _bins_by_loop(prob, LABELS, edges)
    assert len(ax.patches) == len(bins)
    assert [p.get_x() for p in ax.patches] == pytest.approx([b[0] for b in bins])
    assert [p.get_width() for p in ax.patches] == pytest.approx([b[1] - b[0] for b in bins])
    assert _heights(ax.patches) == pytest.approx([b[4] / N for b in bins])
    ece = sum(b[4] * abs(b[2] - b[3]) for b in bins) / N
    brier = brier_score_loss(LABELS, prob)
    assert ax.get_title() == f"{N} answers, {len(bins)} bins: ECE {ece:.3f}, Brier {brier:.3f}"
    assert _legend_texts(ax) == [
        f"fraction correct per bin (ECE {ece:.3f})",
        "calibrated",
        "share of answers",
    ]
    assert ax.get_xlim() == (0.0, 1.0) and ax.get_ylim() == (0.0, 1.0)
    assert ax.get_xlabel() == "predicted probability" and ax.get_ylabel() == "fraction correct"
    _png(ax)


def test_reliability_diagram_leaves_out_missing_values_with_one_warning():
    prob = np.array([0.9, np.nan, 0.2, 0.6, 0.4])
    labels = np.array([1, 1, 0, np.nan, 1], dtype=object)
    labels[3] = None
    with pytest.warns(UserWarning, match="dropped 2 of 5") as caught:
        ax = plot_reliability_diagram(prob, labels, n_bins=2)
    assert len(caught) == 1
    assert ax.lines[0].get_xdata().tolist() == pytest.approx([0.3, 0.9])
    assert ax.lines[0].get_ydata().tolist() == pytest.approx([0.5, 1.0])
    assert ax.get_title().startswith("3 answers, 2 bins")


def test_reliability_diagram_draws_on_a_given_axes_and_names_the_axis():
    fig, axes = plt.subplots(1, 2)
    out = plot_reliability_diagram(CONF, LABELS, ax=axes[0], score_name="P(correct)")
    assert out is axes[0] and len(axes[1].lines) == 0
    assert out.get_xlabel() == "P(correct)"
    assert plt.get_fignums() == [fig.number]


def test_reliability_diagram_rejects_bad_input():
    with pytest.raises(InputValidationError, match=r"must lie in \[0, 1\]"):
        plot_reliability_diagram([0.2, 1.4], [0, 1])
    with pytest.raises(InputValidationError, match="binarise"):
        plot_reliability_diagram([0.2, 0.4], [0, 0.5])
    with pytest.raises(InputValidationError, match="labels has 1"):
        plot_reliability_diagram([0.2, 0.4], [0])
    with pytest.raises(ConfigurationError, match="n_bins"):
        plot_reliability_diagram([0.2, 0.4], [0, 1], n_bins=0)
    with pytest.raises(ConfigurationError, match="strategy"):
        plot_reliability_diagram([0.2, 0.4], [0, 1], strategy="equal")


# -- UQResult helpers --------------------------------------------------------------------------


def _result() -> UQResult:
    return UQResult(
        {
            "prompts": [f"q{i}" for i in range(N)],
            "bert_score": CONF.tolist(),
            "bert_score_recall": (1 - CONF).tolist(),
        },
        {"scorers": ["bert_score", "bert_score_recall"]},
    )


def test_result_helpers_plot_the_chosen_scorer():
    result = _result()
    ax = result.plot_histogram(labels=LABELS, bins=5)
    assert ax.get_xlabel() == "bert_score"
    assert _heights(ax.patches[:5]) == np.histogram(CONF[LABELS == 1], 5, range=(0, 1))[0].tolist()

    ax = result.plot_histogram(scorer="bert_score_recall", bins=5)
    assert ax.get_xlabel() == "bert_score_recall"
    assert _heights(ax.patches) == np.histogram(1 - CONF, 5, range=(0, 1))[0].tolist()

    ax = result.plot_accuracy_vs_fraction_kept(LABELS, threshold=0.6)
    fractions, accuracies = _curve_by_loop(CONF, LABELS)
    assert ax.lines[0].get_ydata().tolist() == pytest.approx(accuracies)
    assert _legend_texts(ax)[0] == "keep by bert_score"

    ax = result.plot_threshold(threshold=0.6, labels=LABELS)
    assert ax.get_ylabel() == "bert_score"
    n_flagged = int(result.flag(threshold=0.6)["flagged"].sum())
    assert ax.get_title() == f"threshold 0.6: {n_flagged} of {N} flagged"
    _png(ax)


def test_result_helpers_on_a_filtered_result_and_bad_scorer():
    kept = _result().filter(threshold=0.6)
    ax = kept.plot_histogram(bins=4)
    assert sum(_heights(ax.patches)) == int((CONF >= 0.6).sum())
    with pytest.raises(InputValidationError, match="no scores for scorer 'cosine'"):
        kept.plot_threshold(threshold=0.5, scorer="cosine")
    with pytest.raises(InputValidationError, match="one label per answer"):
        kept.plot_histogram(labels=LABELS)


# -- matplotlib itself -------------------------------------------------------------------------


def test_missing_matplotlib_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ConfigurationError, match=r"pip install 'uqlm-bert\[plot\]'"):
        plot_confidence_histogram([0.5])


_BACKEND_SCRIPT = textwrap.dedent(
    """
    import io, sys
    from uqlm_bert.plots import plot_threshold
    assert "matplotlib" not in sys.modules  # imported on the first plot only
    ax = plot_threshold([0.2, 0.9], 0.5)
    ax.figure.savefig(io.BytesIO(), format="png")  # a figure that can be saved either way
    import matplotlib
    chosen = matplotlib.rcParams._get_backend_or_none()
    print("matplotlib.pyplot" in sys.modules, chosen)
    """
)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("env_backend", "expected"),
    # no backend chosen: a standalone figure, and the choice is left to the program;
    # a backend chosen: pyplot, so that Jupyter and GUIs show the figure
    [(None, "False None"), ("svg", "True svg")],
)
def test_plotting_leaves_the_backend_choice_to_the_program(env_backend, expected, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    env["PYTHONPATH"] = str(REPO_ROOT)
    env["MPLCONFIGDIR"] = str(tmp_path)  # no user matplotlibrc choosing a backend
    if env_backend:
        env["MPLBACKEND"] = env_backend
    out = subprocess.run(
        [sys.executable, "-c", _BACKEND_SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == expected
