"""benchmarks/eval_calibration.py: grouped folds, out-of-fold predictions, and no data."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import eval_calibration as ec
from uqlm_bert.evaluation._calibration import ScoreCalibrator


@pytest.mark.parametrize("seed", range(5))
def test_grouped_folds_never_split_a_group(seed):
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(30), rng.integers(1, 15, 30))
    folds = ec.grouped_folds(groups, 5, np.random.default_rng(seed))
    for g in np.unique(groups):
        assert np.unique(folds[groups == g]).size == 1
    # every fold gets 6 of the 30 groups
    per_fold = [np.unique(groups[folds == f]).size for f in range(5)]
    assert per_fold == [6] * 5


def test_out_of_fold_predictions_come_from_the_other_folds():
    rng = np.random.default_rng(0)
    scores = rng.random(60)
    labels = (rng.random(60) < scores).astype(float)
    folds = np.arange(60) % 3
    for method in ("isotonic", "platt"):
        pred, warned = ec.out_of_fold(scores, labels, folds, method)
        assert warned == 0
        for f in range(3):
            test = folds == f
            cal = ScoreCalibrator(method).fit(scores[~test], labels[~test])
            np.testing.assert_array_equal(pred[test], cal.predict(scores[test]))
    base, _ = ec.out_of_fold(scores, labels, folds, "base rate")
    for f in range(3):
        assert np.all(base[folds == f] == labels[folds != f].mean())
    raw, _ = ec.out_of_fold(np.array([-0.1, 0.5, 1.2]), np.array([0, 1, 1.0]), None, "raw score")
    assert raw.tolist() == [0.0, 0.5, 1.0]


def test_skips_cleanly_without_the_data(tmp_path, capsys):
    assert ec.main(["--data", str(tmp_path / "absent.jsonl"), "--out", str(tmp_path)]) == 0
    assert "skipped" in capsys.readouterr().out
    assert not any(tmp_path.iterdir())
