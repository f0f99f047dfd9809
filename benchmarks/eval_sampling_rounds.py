"""Sampling until settled against fixed sampling: samples drawn, the same flag, the same ranking.

    python -m benchmarks.eval_sampling_rounds [--orders 30] [--grid]

Two sets with 20 samples per answer: the 30 WikiBio GPT-3 passages (shared data; quality: the
passage-level Spearman correlation of the confidence with minus the mean of the sentence labels)
and 216 short answers of the local LLM (SmolLM2-135M-Instruct, recorded once by
``eval_real_llm generate --samples 20`` into ``benchmarks/data/local_llm_answers.jsonl``;
quality: AUROC against correctness). Every (answer, sample) pair is scored once by the default
``bert_score`` scorer (what a round's scoring gives); then, for ``--orders`` random orders of each
answer's 20 samples (seeded), the library's rule (``_blackbox/_settle.settled`` over
``generation/_rounds.round_ends``) draws the samples in that order, as a run would receive them,
against fixed sampling of the first ``m`` of the same order. Per set and ``m`` (5 and 10): the
samples drawn (per answer, and as a share of ``m``), how often the flag (confidence below the
default threshold) agrees with fixed ``m=5`` (and ``m=10``), and the quality against fixed
``m=5`` and ``m``, means over the orders.

``--grid`` applies the rule that chose the constants (``Z``, ``SPREAD_FLOOR``, ``FIRST_ROUND``
and doubling rounds): among ``Z`` in 1.5-3, floors 0.02-0.06, first rounds of 2 or 3 and rounds
growing by 1, 1.5 or 2 times, those with which, on both sets, the flag agrees with fixed
``m=5`` on at least 98% of answers and the quality is within 0.01 of fixed ``m=5``'s, and at
``m=10`` at most 6 samples are drawn per answer with a quality at least fixed ``m=5``'s; of
them, the one that draws the fewest samples at ``m=5`` (the larger share of the two sets). The
exit status says whether that is the library's. ``--bound`` adds what no rule of this kind can
beat on each set: half the answers (those whose 20-sample confidence lies farthest from the
threshold) scored on 2 samples, the rest on 5 (30% fewer samples). Writes
``sampling_rounds.md``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks import harness
from uqlm_bert._blackbox._settle import SPREAD_FLOOR, Z
from uqlm_bert._inputs import ScoringInputs
from uqlm_bert.evaluation import auroc, spearman
from uqlm_bert.generation._rounds import FIRST_ROUND, round_ends
from uqlm_bert.scorers._base import score_pass
from uqlm_bert.scorers._bertscore import DEFAULT_THRESHOLD
from uqlm_bert.scorers._registry import build_scorer

#: The local LLM's answers with 20 samples each, recorded once (``eval_real_llm``).
LOCAL_ANSWERS = harness.REPO / "benchmarks" / "data" / "local_llm_answers.jsonl"
#: The grid of ``--grid``: z, spread floor, first round, growth of the rounds.
GRID = [(z, floor, first, growth) for z in (1.5, 2.0, 2.5, 3.0)
        for floor in (0.02, 0.03, 0.04, 0.05, 0.06) for first in (2, 3)
        for growth in (1.0, 1.5, 2.0)]  # fmt: skip
GOALS = {"agree": 0.98, "quality": 0.01, "m10_samples": 6.0}
#: The library's rule in the grid's terms: its z, spread floor and first round, rounds doubling.
LIBRARY_RULE = (Z, SPREAD_FLOOR, FIRST_ROUND, 2.0)


@dataclass
class Set:
    """One set: each answer's pair scores of its 20 samples, and how quality is measured."""

    name: str
    scores: np.ndarray  # [answers, 20]
    quality: Callable[[np.ndarray], float]
    measure: str


def pair_scores(responses: list[str], samples: list[list[str]], prompts: list | None) -> np.ndarray:
    """Each answer's default ``bert_score`` pair score against each of its samples."""
    found = score_pass(
        [build_scorer("bert_score")], ScoringInputs(responses, samples, prompts)
    ).pairs["bert_score"]
    return np.stack(found)


def load_sets(data: Path, local: Path) -> list[Set]:
    sets = []
    if data.is_file():
        passages = harness.load_passages(data)
        label = np.array([p.degree.mean() for p in passages])
        scores = pair_scores([p.response for p in passages], [list(p.samples) for p in passages],
                             None)  # fmt: skip
        sets.append(Set("WikiBio GPT-3 passages", scores, lambda c: spearman(c, -label),
                        "passage Spearman"))  # fmt: skip
    if local.is_file():
        rows = [json.loads(line) for line in local.read_text(encoding="utf-8").splitlines()]
        right = np.array([bool(r["correct"]) for r in rows])
        scores = pair_scores([r["response"] for r in rows], [r["sampled_responses"] for r in rows],
                             [r["question"] for r in rows])  # fmt: skip
        sets.append(Set("local LLM short answers", scores, lambda c: auroc(c, right), "AUROC"))
    return sets


def ends_of(m: int, first: int, growth: float) -> list[int]:
    """The rounds' ends: ``round_ends`` for doubling, else rounds growing by ``growth``."""
    if growth == 2.0:
        return round_ends(m, first)
    ends = [min(first, m)]
    while ends[-1] < m:
        ends.append(min(m, max(ends[-1] + 1, round(ends[-1] * growth))))
    return ends


def until_settled(scores: np.ndarray, m: int, rule: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Each answer's confidence and samples drawn when sampling until settled, the samples
    arriving in column order: the library's rule (``settled``), vectorised."""
    z, floor, first, growth = rule
    n = len(scores)
    conf, drawn, done = np.zeros(n), np.zeros(n, dtype=int), np.zeros(n, dtype=bool)
    for k in ends_of(m, first, growth):
        seen = scores[:, :k]
        mean = seen.mean(axis=1)
        spread = seen.std(axis=1, ddof=1) if k > 1 else np.zeros(n)
        stop = np.abs(mean - DEFAULT_THRESHOLD) >= z * np.maximum(spread, floor) / np.sqrt(k)
        stop |= k == m
        new = stop & ~done
        conf[new], drawn[new] = mean[new], k
        done |= stop
    return conf, drawn


def evaluate(s: Set, rule: tuple, orders: list[np.ndarray]) -> dict[int, dict[str, float]]:
    """Per m (5, 10): means over ``orders`` of the samples drawn, the flag's agreement with
    fixed sampling, and the quality of each."""
    out = {}
    for m in (5, 10):
        rows = []
        for order in orders:
            x = s.scores[:, order]
            conf, drawn = until_settled(x, m, rule)
            fixed, fixed5 = x[:, :m].mean(axis=1), x[:, :5].mean(axis=1)
            flag = conf < DEFAULT_THRESHOLD
            rows.append([drawn.mean(), np.mean(flag == (fixed5 < DEFAULT_THRESHOLD)),
                         np.mean(flag == (fixed < DEFAULT_THRESHOLD)), s.quality(conf),
                         s.quality(fixed), s.quality(fixed5)])  # fmt: skip
        mean = np.mean(rows, axis=0)
        out[m] = dict(zip(["drawn", "agree5", "agree", "quality", "fixed", "fixed5"], mean,
                          strict=True)) | {"share": mean[0] / m}  # fmt: skip
    return out


def meets(results: dict[str, dict]) -> bool:
    """The rule that chose the constants: its conditions on every set (module doc)."""
    return all(
        r[5]["agree5"] >= GOALS["agree"]
        and r[5]["quality"] >= r[5]["fixed5"] - GOALS["quality"]
        and r[10]["drawn"] <= GOALS["m10_samples"]
        and r[10]["quality"] >= r[10]["fixed5"]
        for r in results.values()
    )


def bound(s: Set, orders: list[np.ndarray]) -> tuple[float, float]:
    """(quality of fixed m=5, quality with the half farthest from the threshold on 2 samples)."""
    far = np.abs(s.scores.mean(axis=1) - DEFAULT_THRESHOLD)
    half = far >= np.median(far)
    fixed, mixed = [], []
    for order in orders:
        x = s.scores[:, order]
        fixed.append(s.quality(x[:, :5].mean(axis=1)))
        mixed.append(s.quality(np.where(half, x[:, :2].mean(axis=1), x[:, :5].mean(axis=1))))
    return float(np.mean(fixed)), float(np.mean(mixed))


def main(argv: Sequence[str] | None = None) -> int:
    ap = harness.parser(__doc__, "data", "out", "seed")
    ap.add_argument("--local", type=Path, default=LOCAL_ANSWERS, help="the local LLM's answers")
    ap.add_argument("--orders", type=int, default=30, help="sample orders per set (30)")
    ap.add_argument("--grid", action="store_true", help="apply the rule that chose the constants")
    ap.add_argument("--bound", action="store_true", help="what no rule of this kind can beat")
    args = ap.parse_args(argv)
    sets = load_sets(args.data, args.local)
    if not sets:
        print(f"skipped: neither {args.data} nor {args.local} found: nothing to measure")
        return 0
    rng = np.random.default_rng(args.seed)
    orders = {s.name: [rng.permutation(s.scores.shape[1]) for _ in range(args.orders)]
              for s in sets}  # fmt: skip
    library = LIBRARY_RULE
    results = {s.name: evaluate(s, library, orders[s.name]) for s in sets}
    head = ["set", "m", "samples drawn per answer", "of m", "flag agrees with fixed m=5",
            "with fixed m", "quality (measure)", "fixed m=5", "fixed m"]  # fmt: skip
    table = [
        [s.name, m, f"{r['drawn']:.2f}", f"{r['share']:.3f}", f"{r['agree5']:.1%}",
         f"{r['agree']:.1%}", f"{r['quality']:.3f} ({s.measure})", f"{r['fixed5']:.3f}",
         f"{r['fixed']:.3f}"]
        for s in sets for m, r in results[s.name].items()
    ]  # fmt: skip
    lines = [
        "## Sampling until settled (`eval_sampling_rounds`)", "",
        f"- the library's rule: z = {Z}, spread floor {SPREAD_FLOOR}, first round "
        f"{FIRST_ROUND}, rounds doubling; threshold {DEFAULT_THRESHOLD}; {args.orders} sample "
        f"orders per set (seed {args.seed}), means",
        f"- {harness.machine_summary()}", "", *harness.md_table(head, table),
    ]  # fmt: skip
    status = 0
    if args.grid and len(sets) == 2:
        scored = [(rule, {s.name: evaluate(s, rule, orders[s.name]) for s in sets})
                  for rule in GRID]  # fmt: skip
        ok = [(max(r[5]["share"] for r in res.values()), rule) for rule, res in scored
              if meets(res)]  # fmt: skip
        chosen = min(ok)[1] if ok else None
        lines += ["", f"- the rule that chose the constants: {len(ok)} of {len(GRID)} meet its "
                  f"conditions on both sets; the fewest samples at m=5: {chosen} (z, floor, "
                  f"first round, growth); the library's: {library}: "
                  f"{'the same' if chosen == library else 'DIFFERENT'}"]  # fmt: skip
        status = 0 if chosen == library else 1
    if args.bound:
        for s in sets:
            fixed, mixed = bound(s, orders[s.name])
            lines.append(f"- bound, {s.name}: the half farthest from the threshold on 2 samples "
                         f"(30% fewer samples): {s.measure} {mixed:.4f} against fixed m=5's "
                         f"{fixed:.4f} ({mixed - fixed:+.4f})")  # fmt: skip
    payload = {"results": results, "meets": meets(results) if len(sets) == 2 else None}
    harness.write_report(args.out, "sampling_rounds.md", "\n".join(lines), payload)
    return status


if __name__ == "__main__":
    sys.exit(main())
