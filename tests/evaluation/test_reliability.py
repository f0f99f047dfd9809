"""Reliability metrics against scikit-learn (brier_score_loss, calibration_curve) and by hand."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.calibration import calibration_curve
from sklearn.metrics import brier_score_loss

from uqlm_bert import ConfigurationError, InputValidationError
from uqlm_bert.evaluation import brier_score, expected_calibration_error, reliability_curve

SEEDS = range(6)


def _probabilities(seed: int, n: int = 120, decimals: int | None = None):
    rng = np.random.default_rng(seed)
    p = rng.beta(2, 1.2, n)
    if decimals is not None:
        p = np.round(p, decimals)  # ties, and values exactly on uniform bin edges
    y = (rng.random(n) < p**1.5).astype(int)
    return p, y


def _ece_by_hand(p, y, edges) -> float:
    """Loop over bins: (lower, upper], the first one closed."""
    total = 0.0
    for b, (lo, hi) in enumerate(zip(edges[:-1], edges[1:], strict=True)):
        inside = (p <= hi) & ((p > lo) if b > 0 else (p >= lo))
        if b == len(edges) - 2:
            inside |= p > hi  # nothing lies above the last edge
        if inside.any():
            total += inside.sum() * abs(p[inside].mean() - y[inside].mean())
    return total / p.size


@pytest.mark.parametrize("seed", SEEDS)
def test_brier_matches_sklearn(seed):
    p, y = _probabilities(seed)
    assert brier_score(p, y) == pytest.approx(brier_score_loss(y, p), abs=1e-15)


def test_brier_hand_cases_and_single_class():
    assert brier_score([0.9, 0.2], [1, 0]) == pytest.approx((0.01 + 0.04) / 2)
    assert brier_score([0.5] * 4, [1, 0, 1, 1]) == 0.25
    # a single class is fine for a probability score (unlike AUROC)
    assert brier_score([0.7, 1.0], [1, 1]) == pytest.approx(0.09 / 2)
    assert brier_score([0.3], [False]) == pytest.approx(0.09)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
@pytest.mark.parametrize("n_bins", [1, 5, 10, 15])
@pytest.mark.parametrize("decimals", [None, 1])
def test_reliability_curve_matches_sklearn(seed, strategy, n_bins, decimals):
    p, y = _probabilities(seed, decimals=decimals)
    curve = reliability_curve(p, y, n_bins=n_bins, strategy=strategy)
    prob_true, prob_pred = calibration_curve(y, p, n_bins=n_bins, strategy=strategy)
    np.testing.assert_allclose(curve["observed_frequency"], prob_true, rtol=0, atol=1e-12)
    np.testing.assert_allclose(curve["mean_predicted"], prob_pred, rtol=0, atol=1e-12)
    assert curve["count"].sum() == p.size
    assert (curve["count"] > 0).all()
    # the bins' edges are those sklearn cuts with
    if strategy == "uniform":
        edges = np.linspace(0, 1, n_bins + 1)
    else:
        edges = np.percentile(p, np.linspace(0, 1, n_bins + 1) * 100)  # as sklearn
    for _, row in curve.iterrows():
        lo, hi = row["bin_lower"], row["bin_upper"]
        assert lo in edges and hi in edges
        inside = (p >= lo) & (p <= hi)
        assert row["count"] <= inside.sum()
        assert lo - 1e-12 <= row["mean_predicted"] <= hi + 1e-12


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
@pytest.mark.parametrize("decimals", [None, 1])
def test_ece_matches_a_loop_over_bins(seed, strategy, decimals):
    p, y = _probabilities(seed, decimals=decimals)
    edges = (
        np.linspace(0, 1, 11)
        if strategy == "uniform"
        else np.percentile(p, np.linspace(0, 1, 11) * 100)
    )
    got = expected_calibration_error(p, y, n_bins=10, strategy=strategy)
    assert got == pytest.approx(_ece_by_hand(p, y, edges), abs=1e-12)


def test_ece_hand_cases():
    # two bins; 0.5 lies on the inner edge and goes to the lower bin [0, 0.5], which holds
    # 0.2, 0.4, 0.5 with 2 of 3 correct; (0.5, 1] holds 0.9, correct: gap 0.1
    p = [0.2, 0.4, 0.5, 0.9]
    y = [0, 1, 1, 1]
    expected = 3 / 4 * abs((0.2 + 0.4 + 0.5) / 3 - 2 / 3) + 1 / 4 * 0.1
    assert expected_calibration_error(p, y, n_bins=2) == pytest.approx(expected, abs=1e-15)
    # one bin: |mean probability - base rate|
    assert expected_calibration_error(p, y, n_bins=1) == pytest.approx(abs(0.5 - 0.75))
    # perfectly calibrated within each bin
    p2 = [0.25] * 4 + [0.75] * 4
    y2 = [1, 0, 0, 0, 1, 1, 1, 0]
    assert expected_calibration_error(p2, y2, n_bins=10) == 0.0
    assert expected_calibration_error(p2, y2, n_bins=3, strategy="quantile") == 0.0


def test_reliability_curve_hand_case_and_edges():
    curve = reliability_curve([0.0, 0.1, 0.15, 0.5, 1.0], [0, 0, 1, 1, 1], n_bins=4)
    assert curve.columns.tolist() == [
        "bin_lower",
        "bin_upper",
        "mean_predicted",
        "observed_frequency",
        "count",
    ]
    # bins [0, .25], (.25, .5], (.5, .75], (.75, 1]: 0.5 sits on an edge and goes below
    assert curve["bin_lower"].tolist() == [0.0, 0.25, 0.75]
    assert curve["bin_upper"].tolist() == [0.25, 0.5, 1.0]
    assert curve["count"].tolist() == [3, 1, 1]
    assert curve["mean_predicted"].tolist() == pytest.approx([0.25 / 3, 0.5, 1.0])
    assert curve["observed_frequency"].tolist() == pytest.approx([1 / 3, 1.0, 1.0])
    assert curve["count"].dtype == np.int64


def test_nan_pairs_dropped_with_a_warning_or_raise():
    p = [0.2, np.nan, 0.8, 0.6]
    y = [0, 1, None, 1]
    with pytest.warns(UserWarning, match=r"dropped 2 of 4 items .*index 1, 2"):
        assert brier_score(p, y) == pytest.approx((0.04 + 0.16) / 2)
    with pytest.warns(UserWarning, match="dropped 2 of 4"):
        assert reliability_curve(p, y, n_bins=2)["count"].tolist() == [1, 1]
    with pytest.raises(InputValidationError, match="NaN at index 1, 2"):
        expected_calibration_error(p, y, nan_policy="raise")


@pytest.mark.parametrize("fn", [brier_score, expected_calibration_error, reliability_curve])
def test_bad_inputs_are_typed_errors(fn):
    with pytest.raises(InputValidationError, match=r"must lie in \[0, 1\].*ScoreCalibrator"):
        fn([0.2, 1.3], [0, 1])
    with pytest.raises(InputValidationError, match="must lie in"):
        fn([-0.1, 0.5], [0, 1])
    with pytest.raises(InputValidationError, match="binarise"):
        fn([0.2, 0.5], [0, 0.5])
    with pytest.raises(InputValidationError, match="labels has 1"):
        fn([0.2, 0.5], [0])
    with pytest.warns(UserWarning), pytest.raises(InputValidationError, match="at least 1"):
        fn([np.nan], [1], nan_policy="omit")


@pytest.mark.parametrize("fn", [expected_calibration_error, reliability_curve])
def test_bad_binning_is_a_configuration_error(fn):
    for n_bins in (0, -3, 2.5, True):
        with pytest.raises(ConfigurationError, match="n_bins must be an int >= 1"):
            fn([0.2, 0.5], [0, 1], n_bins=n_bins)
    with pytest.raises(ConfigurationError, match="'uniform' or 'quantile'"):
        fn([0.2, 0.5], [0, 1], strategy="kmeans")
