"""The evaluation scripts in benchmarks/: their scoring helpers and their behaviour without data."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import eval_combinations as combos  # noqa: E402
import eval_idf  # noqa: E402


def test_judge_matches_scipy_over_sample_subsets():
    rng = np.random.default_rng(0)
    scores = rng.random((12, 20))  # [passages, samples]
    degree = rng.random(12)
    got = combos.judge(lambda idx: scores[:, idx].mean(1), degree)

    def cell(idx):
        return 100 * spearmanr(-scores[:, idx].mean(1), degree).statistic

    k20 = cell(list(range(20)))
    k10 = [cell(list(range(s * 10, (s + 1) * 10))) for s in range(2)]
    k5 = [cell(list(range(s * 5, (s + 1) * 5))) for s in range(4)]
    assert got["k=20"] == pytest.approx(k20)
    assert got["k=10"] == pytest.approx(np.mean(k10))
    assert got["k=5"] == pytest.approx(np.mean(k5))
    assert got["all cells"] == pytest.approx(np.mean([k20, *k10, *k5]))
    assert got["worst"] == pytest.approx(min([k20, *k10, *k5]))


def test_candidates_pool_the_chosen_samples_only():
    rng = np.random.default_rng(1)
    f1 = {(layer, idf): rng.random((6, 20)) for layer in combos.LAYERS for idf in (False, True)}
    bleu = rng.random((6, 20))
    pools = combos.candidates(f1, bleu)
    idx = [0, 3, 7]
    best = pools["layer 5, idf, F1, mean over samples (best single setting)"]
    np.testing.assert_allclose(best(idx), f1[(5, True)][:, idx].mean(1))
    avg = pools["F1 averaged over layers 4,5, no idf"]
    np.testing.assert_allclose(
        avg(idx), (f1[(4, False)][:, idx].mean(1) + f1[(5, False)][:, idx].mean(1)) / 2
    )
    drop = pools["layer 5, idf, F1, mean without the best sample"]
    m = f1[(5, True)][:, idx]
    np.testing.assert_allclose(drop(idx), (m.sum(1) - m.max(1)) / 2)


def test_idf_summary_gives_k20_and_the_spread_over_the_k5_sets():
    rng = np.random.default_rng(2)
    rows = pd.DataFrame(
        [
            {"idf": name, "k": k, "subset": s, "passage_spearman": rng.normal(70, 5)}
            for name in ("none", "fixed")
            for k, s in [(20, 0), (5, 0), (5, 1), (5, 2), (5, 3)]
        ]
    )
    got = eval_idf.summary(rows, "idf", ["passage_spearman"]).set_index("idf")
    for name in ("none", "fixed"):
        mine = rows[rows.idf == name]
        five = mine[mine.k == 5]["passage_spearman"].to_numpy()
        assert got.loc[name, "passage_spearman k=20"] == mine[mine.k == 20].iloc[0, -1]
        assert got.loc[name, "passage_spearman k=5"] == f"{five.mean():.2f} ({five.std():.2f})"


@pytest.mark.parametrize("script", [combos, eval_idf], ids=["eval_combinations", "eval_idf"])
def test_scripts_skip_cleanly_without_the_data(script, tmp_path, capsys):
    missing = tmp_path / "absent.jsonl"
    assert script.main(["--data", str(missing)]) == 0
    assert "not found" in capsys.readouterr().out
