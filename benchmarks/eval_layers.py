"""Which layer of a model detects hallucinations best? Every layer, on WikiBio GPT-3 passages.

    python -m benchmarks.eval_layers --model accurate                # every layer, dev passages
    python -m benchmarks.eval_layers --model DIR --data held_out.jsonl --exclude DEV.jsonl

For a model (a preset, a hub name or a directory) and each layer, the ``bert_score`` scorer at
its defaults otherwise scores each answer against its 20 samples; the mean is judged by passage
Spearman (x100) at m=20 and over the 4 disjoint sets of 5. Pair scores do not depend on the
call's other pairs (fixed idf): at the default layer that is checked against ``BlackBoxUQ.score``.
Writes ``layers_<model>.md``.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from benchmarks import harness
from benchmarks.eval_wikibio import N_SAMPLES
from uqlm_bert import BlackBoxUQ
from uqlm_bert.bertscore import clear_model_cache
from uqlm_bert.bertscore._layer_truncation import config_layers
from uqlm_bert.bertscore._resolve import resolve_model
from uqlm_bert.bertscore._settings import SCORER_DEFAULTS
from uqlm_bert.evaluation import spearman
from uqlm_bert.scorers._base import Pairs
from uqlm_bert.scorers._bertscore import BERTScoreConsistency

SETS_OF_FIVE = [list(range(5 * k, 5 * k + 5)) for k in range(N_SAMPLES // 5)]


def load_rows(path: Path, exclude: set[int]) -> list[dict]:
    """The labelled passages with all 20 samples as ``{idx, response, samples, degree}``."""
    return [
        {"idx": p.idx, "response": p.response, "samples": list(p.samples[:N_SAMPLES]),
         "degree": float(p.degree.mean())}
        for p in harness.load_passages(path, exclude)
        if p.labels and len(p.samples) >= N_SAMPLES
    ]  # fmt: skip


def passage_spearman(scores: np.ndarray, degree: np.ndarray, samples: Sequence[int]) -> float:
    """Spearman (x100) of the negated mean pair score over ``samples`` against the passage degree."""
    return 100 * spearman(-scores[:, list(samples)].mean(axis=1), degree)


def pair_scores(scorer: BERTScoreConsistency, rows: list[dict]) -> tuple[np.ndarray, float]:
    """``[passages, 20]`` scores of each response against each sample, and the call's seconds."""
    cands = [r["response"] for r in rows for _ in range(N_SAMPLES)]
    refs = [s for r in rows for s in r["samples"]]
    t0 = time.perf_counter()
    scores = scorer.score_pairs(Pairs(cands, refs))
    return scores.reshape(len(rows), N_SAMPLES), time.perf_counter() - t0


def evaluate(
    model: str, layers: Sequence[int], datasets: dict[str, list[dict]], device
) -> tuple[list[dict], dict[tuple[str, int], np.ndarray]]:
    """One row per (data, layer): Spearman at m=20 and over the m=5 sets, time; the pair scores."""
    out, pairs = [], {}
    for layer in layers:
        clear_model_cache()  # one model in memory at a time
        settings = SCORER_DEFAULTS.replace(model_type=model, num_layers=layer, device=device)
        scorer = BERTScoreConsistency(bertscore=settings)
        for name, rows in datasets.items():
            degree = np.array([r["degree"] for r in rows])
            scores, seconds = pair_scores(scorer, rows)
            pairs[name, layer] = scores
            fives = [passage_spearman(scores, degree, s) for s in SETS_OF_FIVE]
            out.append({"data": name, "layer": layer,
                        "m=20": passage_spearman(scores, degree, range(N_SAMPLES)),
                        "m=5 mean": float(np.mean(fives)), "m=5 std": float(np.std(fives)),
                        "seconds": seconds, "s per 1,000 answers (m=20)": 1000 * seconds / len(rows)})  # fmt: skip
            print(f"layer {layer} {name}: {out[-1]}", file=sys.stderr, flush=True)
    return out, pairs


def check_against_black_box(
    model: str, rows: list[dict], scores_at: dict[int, np.ndarray], device
) -> float | None:
    """Largest |difference| from ``BlackBoxUQ.score`` (first set of 5, default layer) or None."""
    clear_model_cache()
    settings = SCORER_DEFAULTS.replace(model_type=model, device=device)
    uq = BlackBoxUQ(scorers=[BERTScoreConsistency(bertscore=settings)], show_progress_bars=False)
    scores = scores_at.get(uq.scorers[0].engine.num_layers)
    if scores is None:
        return None
    first = SETS_OF_FIVE[0]
    got = uq.score([r["response"] for r in rows], [[r["samples"][j] for j in first] for r in rows])
    return float(np.abs(np.asarray(got.data["bert_score"]) - scores[:, first].mean(axis=1)).max())


def report(model: str, rows: list[dict], sizes: dict[str, int], check: float | None) -> str:
    lines = [
        f"# Every layer of {model}: WikiBio GPT-3 passage Spearman (x100)", "",
        f"{harness.machine_summary()}. The `bert_score` scorer at its defaults otherwise; m=5: "
        "mean (std) over the 4 disjoint sets of 5; seconds: the one call at m=20.",
    ]  # fmt: skip
    if check is not None:
        lines.append(f"Against `BlackBoxUQ.score` (first set of 5, default layer): {check:.2e}.")
    head = ["layer", "m=20", "m=5 mean (std)", "seconds", "s per 1,000 answers (m=20)"]
    for name, n in sizes.items():
        table = [
            [r["layer"], f"{r['m=20']:.2f}", f"{r['m=5 mean']:.2f} ({r['m=5 std']:.2f})",
             f"{r['seconds']:.1f}", f"{r['s per 1,000 answers (m=20)']:.0f}"]
            for r in rows
            if r["data"] == name
        ]  # fmt: skip
        lines += ["", f"## {name} ({n} passages)", "", *harness.md_table(head, table)]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = harness.parser(__doc__, "device", "out")
    ap.add_argument("--model", default="fast", help="a preset, hub name or directory")
    ap.add_argument("--layers", type=int, nargs="+", help="default: every layer")
    files = "files, each reported on its own (default: the shared passages)"
    ap.add_argument("--data", type=Path, nargs="+", default=[harness.WIKIBIO], help=files)
    ap.add_argument("--exclude", type=Path, help="drop the passages of this file")
    ap.add_argument("--no-check", action="store_true", help="skip the BlackBoxUQ check")
    args = ap.parse_args(argv)
    if not all(harness.have_data(p) for p in args.data):
        return 0
    exclude = {p.idx for p in harness.load_passages(args.exclude)} if args.exclude else set()
    datasets = {p.name: load_rows(p, exclude) for p in args.data}
    model = harness.accurate_model() if args.model == "accurate" else args.model  # the copy given
    if args.layers is None:
        from transformers import AutoConfig

        total = config_layers(AutoConfig.from_pretrained(resolve_model(model)[1]))
        args.layers = list(range(1, total + 1))
    rows, pairs = evaluate(model, args.layers, datasets, args.device)
    check = None
    if not args.no_check:
        first = next(iter(datasets))
        scores_at = {layer: s for (name, layer), s in pairs.items() if name == first}
        check = check_against_black_box(model, datasets[first], scores_at, args.device)
    name = Path(args.model).name if os.sep in args.model else args.model.replace("/", "_")
    text = report(args.model, rows, {k: len(v) for k, v in datasets.items()}, check)
    harness.write_report(args.out, f"layers_{name}.md", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
