"""Combinations of passage-level detectors on WikiBio GPT-3, beyond ``eval_wikibio``'s single
settings: scores averaged over layers, rank ensembles with BLEU, other ways to pool the samples.

    python -m benchmarks.eval_combinations

Each candidate is judged as ``eval_wikibio`` judges a setting: passage Spearman (x100) of the
negated confidence against the passage's mean label, at k=20, over the disjoint sets of 10 and of
5 samples, over all seven sets ("all cells") and the worst; idf, where used, over the samples of
all passages (``idf=True`` on one call). Writes ``combinations.md``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
from scipy.stats import rankdata

from benchmarks import harness
from benchmarks.eval_wikibio import N_SAMPLES, subsets
from benchmarks.harness import Passage
from uqlm_bert.bertscore import BERTScorer
from uqlm_bert.evaluation import spearman
from uqlm_bert.scorers.text import BleuScorer

LAYERS = (2, 3, 4, 5, 6)
Pool = Callable[[list[int]], np.ndarray]  # sample indices -> one confidence per passage


def pair_matrices(passages: list[Passage]) -> dict[tuple[int, bool], np.ndarray]:
    """BERTScore F1 of each (answer, sample) pair, ``[passages, samples]``, per (layer, idf)."""
    cands = [p.response for p in passages for _ in p.samples]
    refs = [s for p in passages for s in p.samples]
    out = {}
    for layer in LAYERS:
        for idf in (False, True):
            scorer = BERTScorer(num_layers=layer, idf=idf, show_progress_bars=False)
            f1 = scorer.score(cands, refs)[2].double().numpy()
            out[(layer, idf)] = f1.reshape(len(passages), -1)
    return out


def bleu_matrix(passages: list[Passage]) -> np.ndarray:
    """BLEU consistency of each (answer, sample) pair, ``[passages, samples]``."""
    bleu = BleuScorer()
    return np.array(
        [
            [bleu._pair(bleu._prepare(p.response), bleu._prepare(s)) for s in p.samples]
            for p in passages
        ]
    )


def judge(pool: Pool, degree: np.ndarray) -> dict[str, float]:
    """Spearman x100 of ``-confidence`` against ``degree`` for each sample subset, summarised."""
    cells: dict[int, list[float]] = {}
    for k, _, idx in subsets():
        cells.setdefault(k, []).append(100 * spearman(-pool(idx), degree))
    every = [v for vs in cells.values() for v in vs]
    return {
        "k=20": float(np.mean(cells[20])),
        "k=10": float(np.mean(cells[10])),
        "k=5": float(np.mean(cells[5])),
        "all cells": float(np.mean(every)),
        "worst": float(np.min(every)),
    }


def candidates(f1: dict[tuple[int, bool], np.ndarray], bleu: np.ndarray) -> dict[str, Pool]:
    """The detectors compared, each as a pooling of per-sample scores."""

    def mean_of(m: np.ndarray) -> Pool:
        return lambda idx: m[:, idx].mean(1)

    best = f1[(5, True)]
    out: dict[str, Pool] = {
        "layer 5, idf, F1, mean over samples (best single setting)": mean_of(best),
        "layer 5, no idf, F1 (the default)": mean_of(f1[(5, False)]),
    }
    for idf in (False, True):
        for layers in ((4, 5), (4, 5, 6), (3, 4, 5), (3, 4, 5, 6), (2, 3, 4, 5, 6)):
            name = f"F1 averaged over layers {','.join(map(str, layers))}, {'idf' if idf else 'no idf'}"
            out[name] = mean_of(np.mean([f1[(layer, idf)] for layer in layers], axis=0))
    for w in (0.25, 0.5):
        out[f"rank ensemble: {1 - w:g} x BERTScore (layer 5, idf) + {w:g} x BLEU"] = (
            lambda idx, w=w: (
                (1 - w) * rankdata(best[:, idx].mean(1)) + w * rankdata(bleu[:, idx].mean(1))
            )
        )
    out["rank ensemble: layer 5 with idf + layer 5 without"] = lambda idx: (
        rankdata(best[:, idx].mean(1)) + rankdata(f1[(5, False)][:, idx].mean(1))
    )
    out["layer 5, idf, F1, minimum over samples"] = lambda idx: best[:, idx].min(1)
    out["layer 5, idf, F1, mean without the best sample"] = lambda idx: np.sort(best[:, idx], 1)[
        :, :-1
    ].mean(1)
    out["BLEU alone"] = mean_of(bleu)
    return out


def main(argv: list[str] | None = None) -> int:
    args = harness.parser(__doc__, "data", "out").parse_args(argv)
    if not harness.have_data(args.data):
        return 0
    warnings.simplefilter("ignore")
    passages = harness.load_passages(args.data)
    if any(len(p.samples) < N_SAMPLES for p in passages):
        raise SystemExit(f"every passage needs {N_SAMPLES} samples")
    degree = np.array([p.degree.mean() for p in passages])
    pools = candidates(pair_matrices(passages), bleu_matrix(passages))
    cols = ("k=20", "k=10", "k=5", "all cells", "worst")
    rows = []
    for name, pool in pools.items():
        r = judge(pool, degree)
        rows.append([name, *(f"{r[c]:.2f}" for c in cols)])
    table = harness.md_table(["detector (passage Spearman x100)", *cols], rows)
    harness.write_report(args.out, "combinations.md", "\n".join(table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
