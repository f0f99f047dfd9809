"""Evaluation metrics against independent computations (scikit-learn, scipy, hand cases)."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest
from scipy import stats
from sklearn import metrics as skm

from uqlm_bert import ConfigurationError, InputValidationError
from uqlm_bert.evaluation import (
    accuracy_vs_fraction_kept,
    auc_pr,
    auroc,
    choose_threshold,
    pearson,
    prr,
    rejection_curve,
    spearman,
)
from uqlm_bert.evaluation._correlation import rankdata

SEEDS = range(8)


def _random_binary(seed: int, n: int = 60, decimals: int | None = 1):
    """Scores correlated with binary labels; rounding creates many ties."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, size=n)
    y[0], y[1] = 0, 1  # both classes present
    s = y * 0.4 + rng.random(n)
    if decimals is not None:
        s = np.round(s, decimals)
    return s, y


# --------------------------------------------------------------------------- AUROC / AUC-PR


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("decimals", [None, 1])
def test_auroc_matches_sklearn(seed, decimals):
    s, y = _random_binary(seed, decimals=decimals)
    assert auroc(s, y) == pytest.approx(skm.roc_auc_score(y, s), abs=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("decimals", [None, 1])
def test_auc_pr_matches_sklearn_average_precision(seed, decimals):
    s, y = _random_binary(seed, decimals=decimals)
    assert auc_pr(s, y) == pytest.approx(skm.average_precision_score(y, s), abs=1e-12)


def test_auroc_hand_cases():
    # positives 0.35, 0.8 vs negatives 0.1, 0.4: pairs won 0.35>0.1, 0.8>0.1, 0.8>0.4 -> 3/4
    assert auroc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == 0.75
    # one tie between a positive and a negative counts 1/2: (1 + 0.5) / 2
    assert auroc([0.5, 0.5, 0.1], [1, 0, 0]) == 0.75
    assert auroc([1, 2, 3, 4], [0, 0, 1, 1]) == 1.0
    assert auroc([4, 3, 2, 1], [0, 0, 1, 1]) == 0.0


def test_auc_pr_hand_case():
    # ranking 0.8(+), 0.4(-), 0.35(+), 0.1(-): recall steps 1/2 at P=1 and 1/2 at P=2/3
    assert auc_pr([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == pytest.approx(0.5 * 1 + 0.5 * 2 / 3)
    # a tie between one positive and one negative at the top: one step, P = 1/2, R = 1
    assert auc_pr([0.9, 0.9, 0.1], [1, 0, 0]) == pytest.approx(0.5)


def test_bool_labels_accepted():
    s, y = _random_binary(3)
    assert auroc(s, y.astype(bool)) == auroc(s, y)


# --------------------------------------------------------------------------- correlations


@pytest.mark.parametrize("seed", SEEDS)
def test_pearson_matches_scipy(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=40)
    y = 0.5 * x + rng.normal(size=40)
    assert pearson(x, y) == pytest.approx(stats.pearsonr(x, y).statistic, abs=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_spearman_matches_scipy_with_ties(seed):
    rng = np.random.default_rng(seed)
    x = np.round(rng.normal(size=40), 1)
    y = np.round(0.5 * x + rng.normal(size=40)) / 2  # graded labels with many ties
    assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_rankdata_matches_scipy_average(seed):
    x = np.random.default_rng(seed).integers(0, 6, size=30).astype(float)
    np.testing.assert_array_equal(rankdata(x), stats.rankdata(x, method="average"))


def test_spearman_hand_case():
    # ranks of x: 4,3,2,1 ; ranks of y: 1, 2.5, 2.5, 4. Centred: (1.5, .5, -.5, -1.5) and
    # (-1.5, 0, 0, 1.5): dot = -4.5 ; norms^2 = 5 and 4.5 -> r = -4.5 / sqrt(22.5)
    assert spearman([0.9, 0.7, 0.4, 0.2], [0.0, 0.5, 0.5, 1.0]) == pytest.approx(
        -4.5 / math.sqrt(22.5)
    )


def test_correlation_of_constant_input_is_an_error():
    with pytest.raises(InputValidationError, match="all equal"):
        pearson([1, 1, 1], [1, 2, 3])
    with pytest.raises(InputValidationError, match="labels are all equal"):
        spearman([1, 2, 3], [0, 0, 0])
    with pytest.raises(InputValidationError, match="at least 2"):
        pearson([1.0], [2.0])


# --------------------------------------------------------------------------- PRR


def _prr_brute_force(c, q):
    """PRR by averaging the rejection area over every order of tied confidences."""
    c, q = np.asarray(c, float), np.asarray(q, float)
    n = len(c)
    groups = [list(np.flatnonzero(c == v)) for v in sorted(set(c), reverse=True)]
    areas = []
    for perms in itertools.product(*(itertools.permutations(g) for g in groups)):
        order = [i for p in perms for i in p]
        areas.append(np.mean([q[order[:k]].mean() for k in range(1, n + 1)]))
    area = np.mean(areas)
    oracle = np.mean([np.sort(q)[::-1][:k].mean() for k in range(1, n + 1)])
    return (area - q.mean()) / (oracle - q.mean())


def test_prr_hand_case():
    # order 0.9(1), 0.8(0), 0.1(1): Q = 1, 1/2, 2/3 -> A = 13/18 ; oracle Q = 1, 1, 2/3 -> 8/9 ;
    # random = 2/3 ; PRR = (13/18 - 12/18) / (16/18 - 12/18) = 1/4
    assert prr([0.9, 0.8, 0.1], [1, 0, 1]) == pytest.approx(0.25)


@pytest.mark.parametrize("seed", range(6))
def test_prr_matches_brute_force_with_ties(seed):
    rng = np.random.default_rng(seed)
    c = rng.integers(0, 3, size=7).astype(float)
    q = rng.integers(0, 2, size=7).astype(float)
    q[0], q[1] = 0.0, 1.0
    assert prr(c, q) == pytest.approx(_prr_brute_force(c, q), abs=1e-12)


def test_prr_invariants():
    rng = np.random.default_rng(0)
    q = rng.random(50)
    c = q + 0.3 * rng.normal(size=50)
    assert prr(q, q) == pytest.approx(1.0)
    assert prr(np.zeros(50), q) == pytest.approx(0.0)  # all tied = random order
    assert prr(-q, q) < 0
    base = prr(c, q)
    assert prr(np.exp(c), q) == pytest.approx(base)  # increasing transform of the confidence
    assert prr(c, 3 * q + 2) == pytest.approx(base)  # positive affine transform of the labels


def test_rejection_curve_hand_case():
    # 0.9 (1) first, then the tie {0.8: 1, 0.8: 0} counts 1/2 each
    np.testing.assert_allclose(rejection_curve([0.9, 0.8, 0.8], [1, 1, 0]), [1, 0.75, 2 / 3])


def test_prr_constant_labels_is_an_error():
    with pytest.raises(InputValidationError, match="labels are all equal"):
        prr([0.1, 0.2, 0.3], [1, 1, 1])


# --------------------------------------------------------------------------- thresholds


def _sklearn_best_f1(s, y):
    p, r, t = skm.precision_recall_curve(y, s)
    p, r = p[:-1], r[:-1]  # the last point (recall 0) has no threshold
    f1 = np.where(p + r > 0, 2 * p * r / np.maximum(p + r, 1e-300), 0)
    best = np.lexsort((-p, -f1))[0]
    return t[best], p[best], r[best], f1[best]


@pytest.mark.parametrize("seed", SEEDS)
def test_best_f1_threshold_matches_sklearn_pr_curve(seed):
    s, y = _random_binary(seed, decimals=2)
    t, p, r, f1 = _sklearn_best_f1(s, y)
    choice = choose_threshold(s, y)
    assert choice.threshold == pytest.approx(t)
    assert (choice.precision, choice.recall, choice.f1) == pytest.approx((p, r, f1))
    flagged = choice.flag(s)
    assert flagged.sum() == choice.n_flagged
    assert skm.f1_score(y, flagged) == pytest.approx(choice.f1)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("target", [0.6, 0.8, 0.95])
def test_target_precision_threshold_matches_sklearn_pr_curve(seed, target):
    s, y = _random_binary(seed, decimals=2)
    p, r, t = skm.precision_recall_curve(y, s)
    p, r = p[:-1], r[:-1]
    ok = np.flatnonzero(p >= target)
    if ok.size == 0:
        with pytest.raises(ConfigurationError, match="lower target_precision"):
            choose_threshold(s, y, "precision", target_precision=target)
        return
    best = ok[np.lexsort((-p[ok], -r[ok]))[0]]
    choice = choose_threshold(s, y, "precision", target_precision=target)
    assert choice.threshold == pytest.approx(t[best])
    assert choice.precision >= target
    assert skm.precision_score(y, choice.flag(s)) == pytest.approx(choice.precision)
    assert skm.recall_score(y, choice.flag(s)) == pytest.approx(r[best])


def test_flag_below_is_flag_above_on_negated_scores():
    s, y = _random_binary(5, decimals=2)
    below = choose_threshold(s, 1 - y, flag_when="below")
    above = choose_threshold(-s, 1 - y)
    # "below" flags score < threshold, the threshold lying between the last flagged score
    # (-above.threshold) and the next higher score
    last_flagged = -above.threshold
    higher = s[s > last_flagged]
    assert last_flagged < below.threshold
    if higher.size:
        assert below.threshold == pytest.approx((last_flagged + higher.min()) / 2)
    assert (below.f1, below.n_flagged) == (above.f1, above.n_flagged)
    np.testing.assert_array_equal(below.flag(s), above.flag(-s))


def test_below_threshold_flags_the_same_rows_as_uqresult():
    from uqlm_bert import UQResult

    s, y = _random_binary(7, decimals=2)
    choice = choose_threshold(s, y, flag_when="below")
    result = UQResult({"prompts": [f"p{i}" for i in range(len(s))], "bert_score": s.tolist()})
    flagged = result.flag(threshold=choice.threshold)["flagged"].to_numpy()
    np.testing.assert_array_equal(flagged, choice.flag(s))
    assert flagged.sum() == choice.n_flagged
    kept = result.filter(threshold=choice.threshold, keep="above")
    assert len(kept.data["prompts"]) == len(s) - choice.n_flagged


def test_below_threshold_when_everything_is_flagged():
    s = np.array([0.3, 0.5, 0.8])
    y = [1, 0, 1]
    # flagging all three: precision 2/3 >= 0.6 and recall 1, the highest recall reaching 0.6
    choice = choose_threshold(s, y, objective="precision", target_precision=0.6, flag_when="below")
    assert choice.n_flagged == 3
    assert choice.precision == pytest.approx(2 / 3)
    assert choice.threshold > 0.8
    assert choice.flag(s).all()


def test_threshold_hand_case():
    # confidences; flag low ones. Flagging {0.42, 0.35} (both hallucinated) gives F1 = 1; the
    # threshold lies midway between 0.42 (flagged) and 0.60 (kept)
    choice = choose_threshold([0.91, 0.42, 0.88, 0.35, 0.60], [0, 1, 0, 1, 0], flag_when="below")
    assert choice.threshold == pytest.approx((0.42 + 0.60) / 2)
    assert (choice.precision, choice.recall, choice.n_flagged) == (1.0, 1.0, 2)


def test_threshold_argument_errors():
    with pytest.raises(ConfigurationError, match="target_precision"):
        choose_threshold([0.1, 0.9], [0, 1], "precision")
    with pytest.raises(ConfigurationError, match=r"\(0, 1\]"):
        choose_threshold([0.1, 0.9], [0, 1], "precision", target_precision=1.5)
    with pytest.raises(ConfigurationError, match="only used"):
        choose_threshold([0.1, 0.9], [0, 1], target_precision=0.9)
    with pytest.raises(ConfigurationError, match="objective"):
        choose_threshold([0.1, 0.9], [0, 1], "recall")
    with pytest.raises(ConfigurationError, match="flag_when"):
        choose_threshold([0.1, 0.9], [0, 1], flag_when="up")


# --------------------------------------------------------------------------- kept curve


@pytest.mark.parametrize("seed", range(4))
def test_accuracy_vs_fraction_kept_matches_direct_masks(seed):
    s, y = _random_binary(seed, decimals=1)
    df = accuracy_vs_fraction_kept(s, y)
    expected_thresholds = np.unique(s)[::-1]
    np.testing.assert_array_equal(df["threshold"].to_numpy(), expected_thresholds)
    for row in df.itertuples():
        kept = s >= row.threshold
        assert row.n_kept == kept.sum()
        assert row.fraction_kept == pytest.approx(kept.mean())
        assert row.accuracy == pytest.approx(y[kept].mean())
    assert df["accuracy"].iloc[-1] == pytest.approx(y.mean())


# --------------------------------------------------------------------------- inputs


def test_nan_pairs_are_dropped_with_a_warning():
    s, y = _random_binary(1)
    s_nan = s.copy()
    s_nan[[3, 7]] = np.nan
    y_nan = y.astype(float)
    y_nan[10] = np.nan
    keep = np.ones(len(s), bool)
    keep[[3, 7, 10]] = False
    for fn in (auroc, auc_pr, pearson, spearman, prr):
        with pytest.warns(UserWarning, match=r"dropped 3 of 60 .*index 3, 7, 10"):
            got = fn(s_nan, y_nan)
        assert got == pytest.approx(fn(s[keep], y[keep]))


def test_none_counts_as_missing():
    with pytest.warns(UserWarning, match="dropped 1"):
        assert auroc([0.2, None, 0.9], [0, 1, 1]) == 1.0


def test_nan_policy_raise():
    with pytest.raises(InputValidationError, match="NaN at index 1"):
        auroc([0.2, np.nan, 0.9], [0, 1, 1], nan_policy="raise")
    with pytest.raises(InputValidationError, match="nan_policy"):
        auroc([0.2, 0.9], [0, 1], nan_policy="ignore")


def test_no_warning_without_nan():
    s, y = _random_binary(2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        auroc(s, y)


@pytest.mark.parametrize("fn", [auroc, auc_pr, pearson, spearman, prr, accuracy_vs_fraction_kept])
def test_length_mismatch(fn):
    with pytest.raises(InputValidationError, match="scores has 3 items but labels has 2"):
        fn([0.1, 0.2, 0.3], [0, 1])


@pytest.mark.parametrize("fn", [auroc, auc_pr])
def test_single_class_and_graded_labels(fn):
    with pytest.raises(InputValidationError, match="only class 1"):
        fn([0.1, 0.2, 0.3], [1, 1, 1])
    with pytest.raises(InputValidationError, match="only class 0"):
        fn([0.1, 0.2, 0.3], [0, 0, 0])
    with pytest.raises(InputValidationError, match=r"0\.5 at index 1.*labels >= 0\.5"):
        fn([0.1, 0.2, 0.3], [0, 0.5, 1])
    with pytest.raises(InputValidationError, match="only class 0"):
        choose_threshold([0.1, 0.2], [0, 0])


def test_malformed_inputs():
    with pytest.raises(InputValidationError, match="infinite"):
        auroc([0.1, np.inf], [0, 1])
    with pytest.raises(InputValidationError, match="one-dimensional"):
        auroc([[0.1, 0.2]], [[0, 1]])
    with pytest.raises(InputValidationError, match="not a string"):
        pearson("0.1 0.2", [0, 1])
    with pytest.raises(InputValidationError, match="sequence of numbers"):
        pearson(["a", "b"], [0, 1])
    with pytest.warns(UserWarning):
        with pytest.raises(InputValidationError, match="at least 1"):
            auroc([np.nan], [1])


def test_inputs_are_not_mutated():
    s = [0.3, float("nan"), 0.9, 0.1]
    y = [0, 1, 1, 0]
    arr = np.array([0.3, np.nan, 0.9, 0.1])
    with pytest.warns(UserWarning):
        auroc(s, y)
        prr(arr, y)
        accuracy_vs_fraction_kept(arr, y)
    assert s[0] == 0.3 and math.isnan(s[1]) and y == [0, 1, 1, 0]
    assert np.isnan(arr[1]) and arr[0] == 0.3
