"""The default threshold of the default scorer: the rule that chose it, and what it flags.

    python -m benchmarks.eval_threshold

On the WikiBio GPT-3 passages, ``BlackBoxUQ().score`` at its defaults; a passage is a likely
hallucination when the mean of its sentence labels (accurate 0, minor 0.5, major 1) is at least
0.5. The rule: the threshold maximises Youden's J (true-positive minus false-positive rate) of
``confidence < threshold`` over the four disjoint sets of 5 samples pooled (5: the default
``num_responses``), rounded to two decimals; the exit status says whether it gives
``DEFAULT_THRESHOLD``. Reported at that threshold, per set of 5 and for all 20: the passages
flagged, precision, recall, false-positive rate; and for scale the confidences against each
passage's own samples and against another passage's. Writes ``threshold.md``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import numpy as np

from benchmarks import harness
from uqlm_bert import BlackBoxUQ
from uqlm_bert.scorers._bertscore import DEFAULT_THRESHOLD

SETS_OF_FIVE = [list(range(5 * k, 5 * k + 5)) for k in range(4)]


def youden_threshold(confidence: np.ndarray, positive: np.ndarray) -> tuple[float, float]:
    """``(threshold, J)`` maximising TPR - FPR of ``confidence < threshold``; candidates are
    the midpoints between consecutive distinct confidences (ties go to the lower threshold)."""
    values = np.unique(confidence)
    best_t, best_j = float(values[0]), -1.0
    for t in (values[:-1] + values[1:]) / 2:
        flagged = confidence < t
        tpr = (flagged & positive).sum() / positive.sum()
        fpr = (flagged & ~positive).sum() / (~positive).sum()
        if tpr - fpr > best_j + 1e-12:
            best_t, best_j = float(t), float(tpr - fpr)
    return best_t, best_j


def rates(confidence: np.ndarray, positive: np.ndarray, threshold: float) -> dict[str, float]:
    """What ``confidence < threshold`` flags: counts, precision, recall and false-positive rate."""
    flagged = confidence < threshold
    tp = int((flagged & positive).sum())
    return {
        "flagged": int(flagged.sum()),
        "of": len(confidence),
        "precision": tp / max(int(flagged.sum()), 1),
        "recall": tp / int(positive.sum()),
        "false_positive_rate": int((flagged & ~positive).sum()) / int((~positive).sum()),
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = harness.parser(__doc__, "data", "out").parse_args(argv)
    if not harness.have_data(args.data):
        return 0
    passages = harness.load_passages(args.data)
    positive = np.array([p.degree.mean() >= 0.5 for p in passages])
    responses = [p.response for p in passages]
    uq = BlackBoxUQ(show_progress_bars=False)

    def confidence(sample_sets: list[list[str]]) -> np.ndarray:
        return np.asarray(uq.score(responses, sample_sets).data["bert_score"], dtype=np.float64)

    fives = [confidence([[p.samples[j] for j in idx] for p in passages]) for idx in SETS_OF_FIVE]
    pooled = np.concatenate(fives)
    t, j = youden_threshold(pooled, np.tile(positive, len(fives)))
    chosen = round(t, 2)
    rows = [("5 samples, set " + str(k), c) for k, c in enumerate(fives)]
    rows.append(("5 samples, the 4 sets pooled", pooled))
    rows.append(("20 samples", confidence([p.samples for p in passages])))
    shift = len(passages) // 2 + 1  # another person's biography: unrelated samples
    unrelated = confidence([passages[(i + shift) % len(passages)].samples[:5]
                            for i in range(len(passages))])  # fmt: skip

    table = []
    for name, conf in rows:
        r = rates(conf, np.tile(positive, len(conf) // len(positive)), DEFAULT_THRESHOLD)
        table.append([name, f"{r['flagged']} of {r['of']}", f"{r['precision']:.2f}",
                      f"{r['recall']:.2f}", f"{r['false_positive_rate']:.2f}"])  # fmt: skip
    scale = [[name, f"{c.min():.3f}", f"{np.median(c):.3f}", f"{c.max():.3f}"]
             for name, c in (("own samples", fives[0]), ("another passage's (unrelated)", unrelated))]  # fmt: skip
    lines = [
        f"# The default threshold on WikiBio GPT-3 ({len(passages)} passages)",
        "",
        f"Likely hallucinations (mean sentence label >= 0.5): {int(positive.sum())}. Youden's J "
        f"over the 4 sets of 5 samples pooled: threshold {t:.4f} (J {j:.3f}), rounded "
        f"{chosen:.2f}; DEFAULT_THRESHOLD = {DEFAULT_THRESHOLD}.",
        "",
        *harness.md_table(
            [f"at {DEFAULT_THRESHOLD}", "flagged", "precision", "recall", "false-positive rate"],
            table,
        ),  # fmt: skip
        "",
        *harness.md_table(["confidences (5 samples, set 0)", "min", "median", "max"], scale),
    ]
    report = "\n".join(lines) + "\n"
    harness.write_report(args.out, "threshold.md", report)
    if chosen != DEFAULT_THRESHOLD:
        print(f"the rule gives {chosen:.2f}, not DEFAULT_THRESHOLD = {DEFAULT_THRESHOLD}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
