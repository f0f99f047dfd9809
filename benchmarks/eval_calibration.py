"""How well does a calibrated confidence read as a probability? WikiBio GPT-3 passages.

    python -m benchmarks.eval_calibration [--folds 5] [--repeats 20]

Sentences (their supports, ``UQResult.sentences()``, label 1 = accurate) and, as a rough check,
passages (the ``bert_score`` scorer, label 1 = mean degree below 0.5): the raw confidence clipped
to [0, 1], the training folds' base rate, isotonic and Platt ``ScoreCalibrator``, on out-of-fold
predictions, folds grouped by passage and reshuffled per repeat: mean (std) of ECE, Brier and
AUROC. Writes ``calibration.md`` and ``calibration_sentences.png``.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks import harness
from benchmarks.eval_sentences import load as load_with_concepts
from benchmarks.harness import Passage
from uqlm_bert import BlackBoxUQ
from uqlm_bert.evaluation import auroc, brier_score, expected_calibration_error
from uqlm_bert.evaluation._calibration import ScoreCalibrator
from uqlm_bert.scorers._registry import build_scorer

METHODS = ("raw score", "base rate", "isotonic", "platt")
MEASURES = ("mean_probability", "ece_uniform", "ece_quantile", "brier", "auroc")


def sentence_level(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(confidence, label, passage index)`` per sentence; label 1 = accurate. The confidence is
    the sentence's support as ``UQResult.sentences()`` gives it: the answers scored with their
    prompts at the scorers' defaults, every sample."""
    passages, concepts = load_with_concepts(path)
    result = BlackBoxUQ(show_progress_bars=False).score(
        [p.response for p in passages],
        [list(p.samples) for p in passages],
        prompts=[f"This is a Wikipedia passage about {c}:" for c in concepts],
    )
    df = result.sentences(sentences=[list(p.sentences) for p in passages])
    labels = np.concatenate([(p.degree == 0).astype(np.float64) for p in passages])
    if len(df) != labels.size:
        raise SystemExit(f"{len(df)} sentence scores for {labels.size} labels")
    return df["support"].to_numpy(), labels, df["prompt_index"].to_numpy()


def passage_level(passages: Sequence[Passage]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(confidence, label, passage index)`` per passage; label 1 = mean degree < 0.5."""
    scorer = build_scorer("bert_score")
    conf = scorer.score([p.response for p in passages], [p.samples for p in passages])
    labels = np.array([float(p.degree.mean() < 0.5) for p in passages])
    return np.asarray(conf, dtype=np.float64), labels, np.arange(len(passages))


def grouped_folds(groups: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """The fold (0..k-1) of each item: whole groups are dealt to folds in a shuffled order."""
    unique = np.unique(groups)
    if unique.size < k:
        raise SystemExit(f"{unique.size} groups cannot fill {k} folds")
    order = rng.permutation(unique).tolist()
    fold_of_group = dict(zip(order, (np.arange(unique.size) % k).tolist(), strict=True))
    return np.array([fold_of_group[g] for g in groups.tolist()])


def out_of_fold(
    scores: np.ndarray, labels: np.ndarray, folds: np.ndarray, method: str
) -> tuple[np.ndarray, int]:
    """Each item's probability from a model fitted on the other folds; and how many fits warned."""
    if method == "raw score":
        return np.clip(scores, 0.0, 1.0), 0
    out, warned = np.empty(scores.size), 0
    for f in np.unique(folds):
        test, train = folds == f, folds != f
        if method == "base rate":
            out[test] = labels[train].mean()
            continue
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cal = ScoreCalibrator(method).fit(scores[train], labels[train])
        warned += bool(caught)
        out[test] = cal.predict(scores[test])
    return out, warned


def measure(prob: np.ndarray, labels: np.ndarray, n_bins: int, ranks: bool) -> dict[str, float]:
    """Mean probability, ECE (uniform and quantile bins), Brier and AUROC (NaN unless ``ranks``)."""
    ece = expected_calibration_error
    return {
        "mean_probability": float(prob.mean()),
        "ece_uniform": ece(prob, labels, n_bins=n_bins),
        "ece_quantile": ece(prob, labels, n_bins=n_bins, strategy="quantile"),
        "brier": brier_score(prob, labels),
        "auroc": auroc(prob, labels) if ranks else float("nan"),
    }


def evaluate(
    scores: np.ndarray, labels: np.ndarray, groups: np.ndarray, *, folds: int, repeats: int,
    n_bins: int, seed: int = 0,
) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:  # fmt: skip
    """Per method: mean and std over repeats of each measure; and the first repeat's predictions."""
    keep = ~np.isnan(scores)
    scores, labels, groups = scores[keep], labels[keep], groups[keep]
    rng, rows, first = np.random.default_rng(seed), [], {}
    for r in range(repeats):
        assignment = grouped_folds(groups, folds, rng)
        for method in METHODS:
            prob, warned = out_of_fold(scores, labels, assignment, method)
            if r == 0:
                first[method] = prob
            rows.append({"method": method, "repeat": r, "warned_fits": warned,
                         **measure(prob, labels, n_bins, method != "base rate")})  # fmt: skip
    df = pd.DataFrame(rows)
    summary = df.groupby("method", sort=False).agg(
        **{f"{m}_mean": (m, "mean") for m in MEASURES},
        **{f"{m}_std": (m, lambda v: float(np.std(v))) for m in MEASURES},
        warned_fits=("warned_fits", "sum"),
    )
    return summary.reset_index(), first


def table(summary: pd.DataFrame, repeats: int, folds: int) -> list[str]:
    """One row per method: mean (std over repeats) of each measure (the raw score: one value)."""
    rows = []
    for _, row in summary.iterrows():
        method = row["method"]
        name = method if method == "raw score" else f"{method} (CV)"
        if row["warned_fits"]:
            name += f" [{int(row['warned_fits'])} of {repeats * folds} fits warned]"
        cells = [(row[f"{m}_mean"], row[f"{m}_std"]) for m in MEASURES]
        rows.append([name, *("n/a" if np.isnan(mean) else f"{mean:.3f}" if method == "raw score"
                             else f"{mean:.3f} ({std:.3f})" for mean, std in cells)])  # fmt: skip
    head = ["probability", "mean", "ECE, uniform bins", "ECE, quantile bins", "Brier", "AUROC"]
    return harness.md_table(head, rows)


def markdown(levels: dict[str, tuple], folds: int, repeats: int) -> str:
    """The report: how it was measured, then one table per level."""
    out = [
        "# Calibration of the confidence on WikiBio GPT-3 (30 passages)", "",
        f"{folds}-fold cross-validation grouped by passage, repeated {repeats} times: mean (std "
        "over repeats) over the pooled out-of-fold predictions; `mean`: the mean probability "
        "(against the fraction labelled 1). The base rate row predicts the training folds' "
        "fraction for everything: a calibrator must beat its Brier score.", "",
    ]  # fmt: skip
    for title, (summary, n, base, n_bins, rule) in levels.items():
        out += [f"## {title}", "", f"{n} items, {base:.1%} labelled 1 ({rule}); ECE over "
                f"{n_bins} bins.", "", *table(summary, repeats, folds), ""]  # fmt: skip
    return "\n".join(out)


def save_diagrams(
    path: Path, first: dict[str, np.ndarray], labels: np.ndarray, n_bins: int
) -> bool:
    """Reliability diagrams of the raw score and the two calibrators (first repeat)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    from uqlm_bert.plots import plot_reliability_diagram

    names = ("raw score", "isotonic", "platt")
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.6), layout="constrained")
    for ax, name in zip(axes, names, strict=True):
        plot_reliability_diagram(first[name], labels, ax=ax, n_bins=n_bins)
        cv = "" if name == "raw score" else " (CV)"
        ax.set_title(f"sentences, {name}{cv}\n" + ax.get_title())
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    ap = harness.parser(__doc__, "data", "out")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args(argv)
    if not harness.have_data(args.data):
        return 0
    passages = harness.load_passages(args.data)
    s_conf, s_label, s_group = sentence_level(args.data)
    p_conf, p_label, p_group = passage_level(passages)
    cv = {"folds": args.folds, "repeats": args.repeats}
    sentence_summary, first = evaluate(s_conf, s_label, s_group, n_bins=10, **cv)
    passage_summary, _ = evaluate(p_conf, p_label, p_group, n_bins=5, **cv)
    keep = ~np.isnan(s_conf)
    levels = {
        "Sentence level: the sentences' supports (UQResult.sentences())":
            (sentence_summary, int(keep.sum()), float(s_label.mean()), 10, "sentence labelled accurate"),
        "Passage level: bert_score (a rough check: 30 items)":
            (passage_summary, p_label.size, float(p_label.mean()), 5, "mean hallucination degree < 0.5"),
    }  # fmt: skip
    harness.write_report(args.out, "calibration.md", markdown(levels, args.folds, args.repeats))
    save_diagrams(args.out / "calibration_sentences.png", first, s_label[keep], 10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
