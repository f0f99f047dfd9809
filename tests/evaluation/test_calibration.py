"""ScoreCalibrator against scikit-learn and scipy, its invariants, persistence and errors.

Isotonic predictions are compared with ``sklearn.isotonic.IsotonicRegression(increasing=True,
out_of_bounds="clip")``; Platt parameters and predictions with an unpenalised
``sklearn.linear_model.LogisticRegression`` (``C=inf``); the constrained Platt fit with a bounded
``scipy.optimize.minimize`` of the same log-likelihood.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import optimize
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression

from tests.conftest import REPO_ROOT
from uqlm_bert import (
    ConfigurationError,
    InputValidationError,
    NotFittedError,
    UQLMBertError,
)
from uqlm_bert.evaluation._calibration import FILE_FORMAT, FILE_VERSION, ScoreCalibrator

SEEDS = range(6)
#: Scores to predict at: below, inside and above the fitted range, and the fitted values' grid.
QUERY = np.concatenate([np.linspace(-0.5, 1.5, 401), np.round(np.linspace(0, 1, 11), 1)])


def _data(seed: int, n: int = 80, decimals: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Scores in [0, 1] with P(correct) rising with the score, not separable."""
    rng = np.random.default_rng(seed)
    s = rng.random(n)
    if decimals is not None:
        s = np.round(s, decimals)
    y = (rng.random(n) < 0.15 + 0.7 * s).astype(int)
    y[np.argmin(s)], y[np.argmax(s)] = 1, 0  # both classes, and no perfect separation
    return s, y


def _sklearn_isotonic(s, y) -> IsotonicRegression:
    return IsotonicRegression(increasing=True, out_of_bounds="clip").fit(s, y)


def _sklearn_logistic(s, y, sample_weight=None) -> LogisticRegression:
    return LogisticRegression(C=np.inf, solver="newton-cholesky", tol=1e-14, max_iter=1000).fit(
        np.asarray(s, dtype=float)[:, None], y, sample_weight=sample_weight
    )


def _quiet_fit(method: str, s, y) -> ScoreCalibrator:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return ScoreCalibrator(method).fit(s, y)


# --------------------------------------------------------------------------- isotonic


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("decimals", [None, 1, 2])
def test_isotonic_matches_sklearn(seed, decimals):
    s, y = _data(seed, decimals=decimals)
    ours = ScoreCalibrator("isotonic").fit(s, y)
    ref = _sklearn_isotonic(s, y)
    np.testing.assert_allclose(ours.predict(QUERY), ref.predict(QUERY), rtol=0, atol=1e-12)
    np.testing.assert_allclose(ours.predict(s), ref.predict(s), rtol=0, atol=1e-12)
    # the fitted points: sklearn drops interior points of flat runs, which interpolation
    # does not need; every point it keeps is one of ours with the same value
    idx = np.searchsorted(ours.x_thresholds, ref.X_thresholds_)
    np.testing.assert_array_equal(ours.x_thresholds[idx], ref.X_thresholds_)
    np.testing.assert_allclose(ours.y_thresholds[idx], ref.y_thresholds_, atol=1e-12)


@pytest.mark.parametrize(
    ("scores", "labels"),
    [
        pytest.param([0.2, 0.2, 0.5, 0.5, 0.5, 0.8, 0.8], [0, 1, 1, 0, 1, 1, 1], id="ties"),
        pytest.param([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [0, 0, 0, 1, 1, 1], id="already-monotone"),
        pytest.param([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [1, 1, 1, 0, 0, 0], id="reversed"),
        pytest.param([0.7] * 5, [1, 0, 1, 1, 0], id="all-equal-scores"),
        pytest.param([0.3, 0.9], [0, 1], id="two-points"),
        pytest.param([0.5, 0.1, 0.9, 0.3, 0.7], [1, 0, 0, 1, 1], id="unsorted"),
    ],
)
def test_isotonic_edge_cases_match_sklearn(scores, labels):
    ours = ScoreCalibrator("isotonic").fit(scores, labels)
    ref = _sklearn_isotonic(np.array(scores), np.array(labels))
    np.testing.assert_allclose(ours.predict(QUERY), ref.predict(QUERY), rtol=0, atol=1e-12)


def test_isotonic_hand_cases():
    # already monotone: the labels themselves, a ramp between 0.3 and 0.4
    cal = ScoreCalibrator().fit([0.1, 0.2, 0.3, 0.4, 0.5], [0, 0, 0, 1, 1])
    assert cal.y_thresholds.tolist() == [0.0, 0.0, 0.0, 1.0, 1.0]
    assert cal.predict([0.35]).tolist() == pytest.approx([0.5])
    # fully reversed: one pooled block at the base rate
    cal = ScoreCalibrator().fit([0.1, 0.2, 0.3, 0.4], [1, 1, 0, 0])
    assert cal.predict(QUERY).tolist() == [0.5] * QUERY.size
    # ties are averaged before pooling: 0.5 holds 1 of 3 correct
    cal = ScoreCalibrator().fit([0.2, 0.5, 0.5, 0.5, 0.8], [0, 1, 0, 0, 1])
    assert cal.x_thresholds.tolist() == [0.2, 0.5, 0.8]
    assert cal.y_thresholds.tolist() == pytest.approx([0.0, 1 / 3, 1.0])
    # all scores equal: the base rate everywhere
    cal = ScoreCalibrator().fit([0.6] * 4, [1, 0, 1, 1])
    assert cal.predict([0.0, 0.6, 1.0]).tolist() == [0.75] * 3


# --------------------------------------------------------------------------- platt


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("decimals", [None, 1])
def test_platt_matches_unpenalised_sklearn_logistic_regression(seed, decimals):
    s, y = _data(seed, decimals=decimals)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an ordinary fit warns about nothing
        ours = ScoreCalibrator("platt").fit(s, y)
    ref = _sklearn_logistic(s, y)
    assert ref.coef_[0, 0] > 0
    assert ours.slope == pytest.approx(ref.coef_[0, 0], rel=1e-8)
    assert ours.intercept == pytest.approx(ref.intercept_[0], rel=1e-8, abs=1e-10)
    np.testing.assert_allclose(
        ours.predict(QUERY), ref.predict_proba(QUERY[:, None])[:, 1], rtol=0, atol=1e-10
    )
    assert ours.fit_note is None


@pytest.mark.parametrize("seed", SEEDS)
def test_platt_maximum_likelihood_reproduces_the_base_rate(seed):
    # the score equations of the logistic MLE: sum(p) = sum(y) and sum(p * s) = sum(y * s)
    s, y = _data(seed, n=50)
    p = ScoreCalibrator("platt").fit(s, y).predict(s)
    assert p.sum() == pytest.approx(y.sum(), rel=1e-10)
    assert np.dot(p, s) == pytest.approx(np.dot(y, s), rel=1e-10)


def test_platt_with_ties_matches_sklearn():
    s = np.array([0.2, 0.2, 0.5, 0.5, 0.5, 0.8, 0.8, 0.8])
    y = np.array([0, 1, 1, 0, 0, 1, 1, 0])
    ours = ScoreCalibrator("platt").fit(s, y)
    ref = _sklearn_logistic(s, y)
    np.testing.assert_allclose(
        ours.predict(QUERY), ref.predict_proba(QUERY[:, None])[:, 1], rtol=0, atol=1e-10
    )


def test_platt_all_equal_scores_predict_the_base_rate():
    cal = ScoreCalibrator("platt").fit([0.4] * 5, [1, 1, 0, 1, 0])
    assert cal.slope == 0.0
    np.testing.assert_allclose(cal.predict(QUERY), 0.6, rtol=0, atol=1e-12)
    # sklearn identifies only slope * 0.4 + intercept (its Hessian is singular, so it falls
    # back to a looser solver); at the fitted score it agrees
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = _sklearn_logistic([0.4] * 5, [1, 1, 0, 1, 0])
    assert cal.predict([0.4])[0] == pytest.approx(ref.predict_proba([[0.4]])[0, 1], abs=1e-6)


def _neg_log_likelihood(theta, s, t):
    eta = theta[0] * s + theta[1]
    return float(np.sum(t * np.logaddexp(0, -eta) + (1 - t) * np.logaddexp(0, eta)))


def test_platt_negative_slope_is_held_at_zero_with_a_warning():
    rng = np.random.default_rng(3)
    s = rng.random(60)
    y = (rng.random(60) < 0.9 - 0.7 * s).astype(int)  # correctness falls with the score
    assert _sklearn_logistic(s, y).coef_[0, 0] < 0  # the unconstrained fit is negative
    with pytest.warns(UserWarning, match="slope is held at 0") as caught:
        cal = ScoreCalibrator("platt").fit(s, y)
    assert f"base rate {y.mean():.4g}" in str(caught[0].message)
    assert cal.slope == 0.0 and cal.fit_note == "slope constrained to 0"
    np.testing.assert_allclose(cal.predict(QUERY), y.mean(), rtol=0, atol=1e-12)
    # the same optimum as a bounded minimisation of the log-likelihood with slope >= 0
    best = optimize.minimize(
        _neg_log_likelihood, x0=[1.0, 0.0], args=(s, y), bounds=[(0, None), (None, None)]
    )
    assert best.x[0] == pytest.approx(0.0, abs=1e-6)
    assert cal.intercept == pytest.approx(best.x[1], abs=1e-5)


def test_platt_constrained_fit_equals_the_bounded_optimum_when_the_slope_is_positive():
    s, y = _data(1)
    cal = ScoreCalibrator("platt").fit(s, y)
    best = optimize.minimize(
        _neg_log_likelihood,
        x0=[0.0, 0.0],
        args=(s, y),
        bounds=[(0, None), (None, None)],
        method="L-BFGS-B",
        options={"ftol": 1e-15, "gtol": 1e-10},
    )
    assert _neg_log_likelihood([cal.slope, cal.intercept], s, y) <= best.fun + 1e-9
    assert cal.slope == pytest.approx(best.x[0], rel=1e-4)


def test_platt_separable_labels_use_smoothed_targets_with_a_warning():
    s = np.array([0.1, 0.25, 0.3, 0.6, 0.7, 0.8, 0.95])
    y = np.array([0, 0, 0, 1, 1, 1, 1])
    with pytest.warns(UserWarning, match="separate the labels perfectly"):
        cal = ScoreCalibrator("platt").fit(s, y)
    assert cal.fit_note == "separable: smoothed targets"
    # the reference: each answer twice, as correct with weight t and incorrect with 1 - t
    t = np.where(y == 1, (4 + 1) / (4 + 2), 1 / (3 + 2))
    ref = _sklearn_logistic(
        np.concatenate([s, s]),
        np.concatenate([np.ones(7, int), np.zeros(7, int)]),
        sample_weight=np.concatenate([t, 1 - t]),
    )
    np.testing.assert_allclose(
        cal.predict(QUERY), ref.predict_proba(QUERY[:, None])[:, 1], rtol=0, atol=1e-9
    )
    p = cal.predict(s)
    assert p.min() > 0.0 and p.max() < 1.0


def test_quasi_separable_labels_with_a_shared_boundary_score_are_separable():
    # the highest incorrect and the lowest correct answer share a score: still no finite MLE
    with pytest.warns(UserWarning, match="separate the labels perfectly"):
        cal = ScoreCalibrator("platt").fit([0.1, 0.5, 0.5, 0.9], [0, 0, 1, 1])
    assert np.isfinite(cal.slope) and cal.slope > 0


# --------------------------------------------------------------------------- both methods


@pytest.mark.parametrize("method", ["isotonic", "platt"])
@pytest.mark.parametrize("seed", range(20))
def test_predictions_are_probabilities_and_never_decrease(method, seed):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(2, 40))
    s = np.round(rng.random(n), int(rng.integers(1, 4)))
    y = rng.integers(0, 2, n)
    y[0], y[-1] = 0, 1
    cal = _quiet_fit(method, s, y)
    grid = np.sort(rng.uniform(-1, 2, 500))
    p = cal.predict(grid)
    assert np.all(np.diff(p) >= 0)
    assert p.min() >= 0.0 and p.max() <= 1.0


@pytest.mark.parametrize("method", ["isotonic", "platt"])
def test_nan_scores_in_fit_are_dropped_with_their_count(method):
    s, y = _data(0, n=30)
    s_nan = s.astype(float).copy()
    s_nan[[2, 5, 11]] = np.nan
    with pytest.warns(UserWarning, match=r"dropped 3 of 30 items .* \(index 2, 5, 11\)"):
        cal = ScoreCalibrator(method).fit(s_nan, y)
    keep = ~np.isnan(s_nan)
    clean = _quiet_fit(method, s[keep], y[keep])
    assert cal.n_fitted == 27
    np.testing.assert_array_equal(cal.predict(QUERY), clean.predict(QUERY))


@pytest.mark.parametrize("method", ["isotonic", "platt"])
def test_nan_and_none_scores_predict_nan_and_shape_is_kept(method):
    cal = _quiet_fit(method, *_data(2))
    out = cal.predict([0.3, float("nan"), None, 0.8])
    assert out.dtype == np.float64
    assert [math.isnan(v) for v in out] == [False, True, True, False]
    grid = np.array([[0.1, 0.2], [0.7, np.nan]])
    two_d = cal.predict(grid)
    assert two_d.shape == (2, 2)
    np.testing.assert_array_equal(two_d.ravel()[:3], cal.predict(grid.ravel()[:3]))
    series = pd.Series([0.3, 0.8], index=[10, 20])
    np.testing.assert_array_equal(cal.predict(series), cal.predict([0.3, 0.8]))


def test_inputs_are_not_mutated_and_bool_labels_work():
    s = np.array([0.9, 0.1, 0.5, 0.4])
    y = np.array([True, False, True, False])
    before = s.copy()
    cal = ScoreCalibrator().fit(s, y)
    cal.predict(s)
    np.testing.assert_array_equal(s, before)
    assert cal.base_rate == 0.5


# --------------------------------------------------------------------------- save / load


@pytest.mark.parametrize("method", ["isotonic", "platt"])
@pytest.mark.parametrize("seed", [0, 4])
def test_save_load_round_trip_is_exact(method, seed, tmp_path):
    cal = _quiet_fit(method, *_data(seed, decimals=2))
    path = cal.save(tmp_path / "cal.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["format"] == FILE_FORMAT and data["version"] == FILE_VERSION
    assert data["method"] == method
    loaded = ScoreCalibrator.load(path)
    np.testing.assert_array_equal(loaded.predict(QUERY), cal.predict(QUERY))
    assert loaded.to_dict() == cal.to_dict()
    for attr in ("method", "n_fitted", "base_rate", "slope", "intercept", "fit_note"):
        assert getattr(loaded, attr) == getattr(cal, attr)
    if method == "isotonic":
        np.testing.assert_array_equal(loaded.x_thresholds, cal.x_thresholds)
        np.testing.assert_array_equal(loaded.y_thresholds, cal.y_thresholds)
    # saving the loaded one writes the same bytes
    again = loaded.save(tmp_path / "again.json")
    assert again.read_bytes() == path.read_bytes()


def test_save_accepts_a_str_path_and_load_a_path(tmp_path):
    cal = ScoreCalibrator("platt").fit([0.1, 0.6, 0.4, 0.9], [0, 0, 1, 1])
    out = cal.save(str(tmp_path / "p.json"))
    assert ScoreCalibrator.load(out).slope == cal.slope


def _saved(tmp_path, **changes) -> str:
    data = ScoreCalibrator().fit([0.2, 0.5, 0.8], [0, 1, 1]).to_dict()
    data.update(changes)
    path = tmp_path / "c.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"format": "something-else"}, "not a saved ScoreCalibrator"),
        ({"version": FILE_VERSION + 1}, "upgrade uqlm-bert"),
        ({"version": "1"}, "bad version"),
        ({"method": "beta"}, "unknown method"),
        ({"params": {"x": [0.2, 0.8], "y": [0.0]}}, "as many x as y"),
        ({"params": {"x": [0.8, 0.2], "y": [0.0, 1.0]}}, "increasing x"),
        ({"params": {"x": [0.2, 0.8], "y": [1.0, 0.0]}}, "non-decreasing y"),
        ({"params": {"x": [0.2, 0.8], "y": [0.0, 1.5]}}, r"outside \[0, 1\]"),
        ({"params": {"x": ["a"], "y": [0.0]}}, "list of numbers"),
        ({"params": None}, "no 'params'"),
        ({"n_fitted": 0}, "bad n_fitted"),
    ],
)
def test_load_rejects_malformed_files(tmp_path, changes, message):
    with pytest.raises(InputValidationError, match=message):
        ScoreCalibrator.load(_saved(tmp_path, **changes))


def test_load_rejects_a_negative_platt_slope_and_non_json(tmp_path):
    data = ScoreCalibrator("platt").fit([0.1, 0.6, 0.4, 0.9], [0, 0, 1, 1]).to_dict()
    data["params"]["slope"] = -1.0
    path = tmp_path / "neg.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(InputValidationError, match="negative slope"):
        ScoreCalibrator.load(path)
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"\x80\x04 not json")
    with pytest.raises(InputValidationError, match="not a saved ScoreCalibrator"):
        ScoreCalibrator.load(bad)
    text = tmp_path / "text.json"
    text.write_text("{not json", encoding="utf-8")
    with pytest.raises(InputValidationError, match="not a saved ScoreCalibrator"):
        ScoreCalibrator.load(text)


# --------------------------------------------------------------------------- errors


def test_unknown_method_is_a_configuration_error():
    with pytest.raises(ConfigurationError, match="'isotonic' or 'platt'"):
        ScoreCalibrator("sigmoid")


def test_predict_and_save_before_fit(tmp_path):
    cal = ScoreCalibrator()
    assert not cal.is_fitted and "not fitted" in repr(cal)
    with pytest.raises(NotFittedError, match=r"call fit\(scores, labels\)"):
        cal.predict([0.5])
    with pytest.raises(NotFittedError, match="fit"):
        cal.save(tmp_path / "x.json")
    assert issubclass(NotFittedError, UQLMBertError)


@pytest.mark.parametrize("method", ["isotonic", "platt"])
@pytest.mark.parametrize(
    ("scores", "labels", "message"),
    [
        ([0.1, 0.5, 0.9], [0, 0.5, 1], r"labels must be 0/1 .* binarise graded labels"),
        ([0.1, 0.5, 0.9], [0, 2, 1], "at index 1"),
        ([0.1, 0.5, 0.9], [0, 1], "scores has 3 items but labels has 2"),
        ([0.1, 0.5, 0.9], [1, 1, 1], r"only class 1 .* a calibrator needs both"),
        ([0.1, 0.5, float("nan")], [0, 0, 1], "only class 0"),
        ([0.1, float("inf")], [0, 1], "infinite"),
        ("0.5", [1], "not a string"),
        ([[0.1, 0.2]], [[0, 1]], "one-dimensional"),
    ],
)
def test_fit_rejects_bad_input_with_a_typed_error(method, scores, labels, message):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with pytest.raises(InputValidationError, match=message):
            ScoreCalibrator(method).fit(scores, labels)


def test_predict_rejects_infinite_and_non_numeric_scores():
    cal = ScoreCalibrator().fit([0.2, 0.8], [0, 1])
    with pytest.raises(InputValidationError, match="infinite"):
        cal.predict([0.5, float("-inf")])
    with pytest.raises(InputValidationError, match="numbers"):
        cal.predict(["high"])
    with pytest.raises(InputValidationError, match="not a string"):
        cal.predict("0.5")


# --------------------------------------------------------------------------- dependencies


@pytest.mark.slow
def test_fitting_and_predicting_import_neither_sklearn_nor_scipy(tmp_path):
    script = (
        "import sys\n"
        "from uqlm_bert.evaluation._calibration import ScoreCalibrator\n"
        "for m in ('isotonic', 'platt'):\n"
        "    c = ScoreCalibrator(m).fit([0.1, 0.4, 0.5, 0.9], [0, 1, 0, 1])\n"
        "    c.save('c.json'); ScoreCalibrator.load('c.json').predict([0.3])\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sklearn', 'scipy')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


# --------------------------------------------------------------------------- with the metrics


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
def test_isotonic_is_perfectly_calibrated_on_its_own_data(seed, strategy):
    # each pooled block predicts its own fraction correct, and equal predictions share a bin,
    # so every bin's mean probability equals its fraction correct
    from uqlm_bert.evaluation import expected_calibration_error

    s, y = _data(seed, decimals=2)
    p = ScoreCalibrator("isotonic").fit(s, y).predict(s)
    assert expected_calibration_error(p, y, n_bins=10, strategy=strategy) == pytest.approx(
        0.0, abs=1e-12
    )
