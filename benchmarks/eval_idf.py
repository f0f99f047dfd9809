"""Fixed idf weights against no idf and idf over the call, on the WikiBio GPT-3 passages.

    python -m benchmarks.eval_idf [--random-subsets N] [--seed 0]

Whole-answer F1 at layer 5 with three weightings: ``none``, ``call`` (idf over the samples of
every passage scored in one call) and ``fixed`` (the shipped table), judged as in ``eval_wikibio``
on 20 samples, the 4 disjoint sets of 5 and N random sets of 5 (paired per-set differences). A
robustness check halves and doubles the table's L and M. Writes ``idf_eval.md`` and ``.csv``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import numpy as np
import pandas as pd

from benchmarks import harness
from benchmarks.eval_wikibio import N_SAMPLES, LayerSweep, _table, evaluate, idf_tables, subsets
from benchmarks.harness import Passage
from uqlm_bert.bertscore import BERTScorer
from uqlm_bert.bertscore import _fixed_idf as fixed_idf
from uqlm_bert.bertscore._idf import IdfWeights, idf_from_token_ids

LAYER = 5
F1 = 2  # index of F1 in the sweep's [P, R, F1] axis
SETTINGS = ("none", "call", "fixed")
REPORTED_K = (N_SAMPLES, 5)
MEASURES = ("passage_pearson", "passage_spearman", "nonfact_aucpr", "factual_aucpr")
RANDOM_K = 5  # samples per random set
METHODS = ("sentence", "passage")  # the two methods the measures read


def idf_settings(
    sweep: LayerSweep, passages: list[Passage], samples: list[int], fixed: IdfWeights
) -> dict[str, dict[int, IdfWeights | None]]:
    """Per-passage idf of each setting, for one set of samples."""
    tables = idf_tables(sweep, passages, samples)
    fixed_for = dict.fromkeys(range(len(passages)), fixed)
    return {"none": tables["none"], "call": tables["all"], "fixed": fixed_for}


def measure(
    sweep: LayerSweep, passages: list[Passage], idf_for: dict[int, IdfWeights | None],
    samples: list[int], passage_only: bool = False,
) -> dict[str, float]:  # fmt: skip
    """The four measures (x100) of one weighting on one set (AUC-PRs NaN if ``passage_only``)."""
    per = sweep.scores(idf_for, samples, passage_only=passage_only)
    pas = per["passage"].mean(axis=2)[F1]
    sent = None if passage_only else per["sentence"].mean(axis=2)[F1]
    return evaluate(passages, sent, pas)


def summary(rows: pd.DataFrame, key: str, columns: Sequence[str]) -> pd.DataFrame:
    """One row per ``key`` value: each measure at k=20, and its mean (std) over the k=5 sets."""
    out = []
    for value, g in rows.groupby(key, sort=False):
        row: dict[str, object] = {key: value}
        for m in columns:
            row[f"{m} k=20"] = float(g[g.k == N_SAMPLES][m].iloc[0])
            five = g[g.k == 5][m]
            row[f"{m} k=5"] = f"{five.mean():.2f} ({five.std(ddof=0):.2f})"
        out.append(row)
    return pd.DataFrame(out)


def random_draws(n: int, n_passages: int, seed: int) -> list[np.ndarray]:
    """``n`` random sets, ``[passages, RANDOM_K]`` sorted sample indices: each passage draws its
    own without replacement, from ``default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    return [
        np.sort(
            np.stack([rng.choice(N_SAMPLES, RANDOM_K, replace=False) for _ in range(n_passages)]),
            axis=1,
        )
        for _ in range(n)
    ]


class RandomSubsets:
    """The three settings on sets of samples drawn per passage, without new model forwards: a
    set's confidence is the mean of its samples' columns of :meth:`f1` (per set for ``call``)."""

    def __init__(self, sweep: LayerSweep, passages: list[Passage], fixed: IdfWeights) -> None:
        self.sweep = sweep
        self.passages = passages
        self.item_passage = {
            "sentence": np.repeat(np.arange(len(passages)), [len(p.sentences) for p in passages]),
            "passage": np.arange(len(passages)),
        }
        self.cached = {"none": self.f1(None), "fixed": self.f1(fixed)}

    def f1(self, idf: IdfWeights | None) -> dict[str, np.ndarray]:
        """Per method, ``[items, N_SAMPLES]`` F1, one idf table (or none) for every passage."""
        per = self.sweep.scores({i: idf for i in range(len(self.passages))}, list(range(N_SAMPLES)))
        return {m: per[m][F1] for m in METHODS}

    def call_idf(self, draw: np.ndarray) -> IdfWeights:
        """idf over the drawn samples of every passage, each sample one document."""
        texts = [p.samples[j] for p, js in zip(self.passages, draw, strict=True) for j in js]
        return idf_from_token_ids([self.sweep.ids[t.strip()] for t in texts])

    def measure(self, draw: np.ndarray) -> dict[str, dict[str, float]]:
        """The four measures (x100) of each setting on one set (``[passages, RANDOM_K]``)."""
        out, idx = {}, self.item_passage
        for name in SETTINGS:
            per = self.f1(self.call_idf(draw)) if name == "call" else self.cached[name]
            conf = {m: np.take_along_axis(per[m], draw[idx[m]], axis=1).mean(1) for m in METHODS}
            out[name] = evaluate(self.passages, conf["sentence"], conf["passage"])
        return out

    def rows(self, draws: Sequence[np.ndarray]) -> pd.DataFrame:
        """One row per setting and set: ``idf``, ``k``, ``subset`` and the four measures."""
        return pd.DataFrame(
            {"idf": name, "k": RANDOM_K, "subset": r, **found}
            for r, draw in enumerate(draws)
            for name, found in self.measure(draw).items()
        )


def check_random_subsets(sets: RandomSubsets, rows: pd.DataFrame) -> float:
    """Largest |difference| between :class:`RandomSubsets` and the main loop on samples 0..4."""
    draw = np.tile(np.arange(RANDOM_K), (len(sets.passages), 1))
    want = rows[(rows.k == RANDOM_K) & (rows.subset == 0)].set_index("idf")
    found = sets.measure(draw)
    return max(abs(found[name][m] - float(want.loc[name, m])) for name in found for m in MEASURES)


def random_summary(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per setting, ``mean ± SEM`` of each measure over the random sets; per measure, ``fixed``
    minus ``call`` and ``none`` per set: mean, SEM and the sets with ``fixed`` at least as high."""
    n = rows["subset"].nunique()

    def mean_sem(values: pd.Series) -> tuple[float, float]:
        v = values.dropna().to_numpy()
        sem = float(v.std(ddof=1) / np.sqrt(len(v))) if len(v) > 1 else float("nan")
        return float(v.mean()), sem

    per_setting = [
        {"idf": name, **{m: "{:.2f} ± {:.2f}".format(*mean_sem(g[m])) for m in MEASURES}}
        for name, g in rows.groupby("idf", sort=False)
    ]
    paired = []
    for other in ("call", "none"):
        for m in MEASURES:
            wide = rows.pivot(index="subset", columns="idf", values=m)
            diff = wide["fixed"] - wide[other]
            mean, sem = mean_sem(diff)
            paired.append({"difference": f"fixed - {other}", "measure": m, "mean": mean, "SEM": sem,
                           "sets with fixed >= other": f"{int((diff >= 0).sum())} / {n}"})  # fmt: skip
    return pd.DataFrame(per_setting), pd.DataFrame(paired)


def robustness(sweep: LayerSweep, passages: list[Passage], tokenizer: object) -> pd.DataFrame:
    """Passage figures with L or M of the table halved and doubled (the other one kept)."""
    words, docs = fixed_idf.DOC_WORDS, fixed_idf.NUM_DOCS
    variants = [(f"L={words}, M={docs} (shipped)", words, docs),
                (f"L={words // 2}", words / 2, docs), (f"L={words * 2}", words * 2, docs),
                (f"M={docs // 2}", words, docs / 2), (f"M={docs * 2}", words, docs * 2)]  # fmt: skip
    rows = []
    for name, doc_words, num_docs in variants:
        table = fixed_idf.build_idf(tokenizer, doc_words=doc_words, num_docs=num_docs)
        idf_for = {i: table for i in range(len(passages))}
        for k, s, idx in (t for t in subsets() if t[0] in REPORTED_K):
            found = measure(sweep, passages, idf_for, idx, passage_only=True)
            rows.append({"table": name, "k": k, "subset": s, **found})
    return pd.DataFrame(rows)


def markdown(
    main: pd.DataFrame, robust: pd.DataFrame, parity: float,
    random_rows: pd.DataFrame | None = None, seed: int = 0,
) -> str:  # fmt: skip
    """The report; with ``random_rows`` (from :meth:`RandomSubsets.rows`) their section too."""
    lines = [
        f"# Fixed idf on WikiBio GPT-3 (embedded model, layer {LAYER}, F1, x100)", "",
        "`k=5`: mean (std) over 4 disjoint sets of 5 samples; `call`: idf over every passage's "
        "samples in one call; `fixed`: the shipped table.", "",
        _table(summary(main, "idf", MEASURES)), "",
        "## Robustness of the table's constants (passage level; not used to choose them)", "",
        _table(summary(robust, "table", MEASURES[:2])), "",
        f"Parity: the sweep's fixed-table scores differ from `BERTScorer(idf=<mapping>)` by "
        f"at most {parity:.1e}.",
    ]  # fmt: skip
    if random_rows is not None:
        per_setting, paired = random_summary(random_rows)
        lines += [
            "", f"## Random sets of {RANDOM_K} samples ({random_rows['subset'].nunique()} sets, seed {seed})",
            "", "Each passage draws its own; mean ± standard error over the sets:", "",
            _table(per_setting), "", "Paired per set (x100 points):", "", _table(paired),
        ]  # fmt: skip
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = harness.parser(__doc__, "device", "data", "out", "seed", "no-progress")
    ap.add_argument("--random-subsets", type=int, default=0, metavar="N", help="default 0: off")
    args = ap.parse_args(argv)
    if not harness.have_data(args.data):
        return 0
    passages = harness.load_passages(args.data)
    if any(len(p.samples) < N_SAMPLES for p in passages):
        raise SystemExit(f"every passage needs {N_SAMPLES} samples")
    scorer = BERTScorer(num_layers=LAYER, device=args.device, show_progress_bars=False)
    sweep = LayerSweep(scorer, passages, show=not args.no_progress)
    tokenizer = scorer.encoder.tokenizer
    fixed = fixed_idf.idf_for_tokenizer(tokenizer)

    full = idf_settings(sweep, passages, list(range(N_SAMPLES)), fixed)
    every = [x for p in passages for x in p.samples]
    parity = max(
        sweep.check_parity(full["none"], idf=False),
        sweep.check_parity(full["call"], idf=True, idf_sents=every),
        sweep.check_parity(full["fixed"], idf=fixed_idf.idf_mapping(fixed)),
    )
    if not parity < 1e-5:
        raise SystemExit(f"parity check failed: the sweep differs from the engine by {parity:.2e}")

    main_rows = pd.DataFrame(
        {"idf": name, "k": k, "subset": s, **measure(sweep, passages, idf_for, idx)}
        for k, s, idx in subsets()
        if k in REPORTED_K
        for name, idf_for in idf_settings(sweep, passages, idx, fixed).items()
    )
    robust_rows = robustness(sweep, passages, tokenizer)
    parts = [main_rows.assign(part="settings"), robust_rows.assign(part="robustness")]
    random_rows = None
    if args.random_subsets > 0:
        sets = RandomSubsets(sweep, passages, fixed)
        diff = check_random_subsets(sets, main_rows)
        if not diff < 1e-9:
            raise SystemExit(f"random-set check failed: set 0..4 differs by {diff:.2e}")
        draws = random_draws(args.random_subsets, len(passages), args.seed)
        random_rows = sets.rows(draws)
        parts.append(random_rows.assign(part="random"))

    text = markdown(main_rows, robust_rows, parity, random_rows, args.seed)
    harness.write_report(args.out, "idf_eval.md", text)
    pd.concat(parts).to_csv(args.out / "idf_eval.csv", index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
