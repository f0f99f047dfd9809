"""Sentence scores from token support: which aggregation, which settings, and the threshold.

    python -m benchmarks.eval_sentences [--data PATH] [--bootstrap 1000]   # ~15 min, 2 cores

SelfCheckGPT's "NonFact" and "Factual" AUC-PR (x100) of sentence scores aggregating the counted
tokens' supports of the confidence's one pass, every aggregation on every setting, against the
re-embedding ``score_sentences``; m=20, and "m=5": mean (std) over 4 disjoint sets. Checks the
rules of ``SENTENCE_AGGREGATION`` (defaults; of those beating the re-embedding with precision on
both at m=20, the best mean of the two at m=5, within 0.1 the best at m=20), ``WEAK_SUPPORT``
(Youden's J of ``support < t``, sets of 5 pooled, to 0.01) and ``SENTENCE_THRESHOLD`` (what
``refine()`` removes: the threshold maximising the smaller of its two gains, sets of 5 pooled,
to 0.01), with what removing below it does. Writes ``sentences.md``.
"""

from __future__ import annotations

import json
import re
import time
import warnings

import numpy as np

from benchmarks import harness
from uqlm_bert import BERTScorer
from uqlm_bert._inputs import ScoringInputs
from uqlm_bert.bertscore._token_support import (
    SENTENCE_AGGREGATION,
    SENTENCE_THRESHOLD,
    WEAK_SUPPORT,
    aggregate,
)
from uqlm_bert.evaluation import auc_pr
from uqlm_bert.scorers._base import score_with_supports
from uqlm_bert.scorers._bertscore import (
    BERTScoreConsistency,
    punctuation_ids,
    supports_from_matches,
)
from uqlm_bert.scorers._sentences import locate_sentences, score_sentences

SETS = [list(range(20))] + [list(range(5 * k, 5 * k + 5)) for k in range(4)]
F32 = {"dtype": "float32"}
#: Settings of the one pass (the scorer's): name -> (BERTScore settings, prompts given).
CONFIGS: dict[str, tuple[dict, bool]] = {
    "defaults (fixed idf, dtype auto, windows, prompt)": ({}, True),
    "defaults, float32": (F32, True), "defaults, float32, no prompt": (F32, False),
    "defaults, float32, no idf": ({**F32, "idf": False}, True),
    "defaults, float32, long texts cut": ({**F32, "long_texts": "truncate"}, True),
    "no idf, float32, no prompt": ({**F32, "idf": False}, False),
    "layer 4, float32": ({**F32, "num_layers": 4}, True),
    "layer 6, float32": ({**F32, "num_layers": 6}, True),
}  # fmt: skip
DEFAULT_CONFIG = next(iter(CONFIGS))
#: ``bertscore.support.aggregate``'s; "words:" of the words' supports; "mix": half p10, half mean
AGGREGATIONS = """min p3 p5 p10 p15 p20 p25 p50 mean wmean trim5 trim10 trim25 softmin0.02
softmin0.05 softmin0.1 below0.5 below0.6 mix words:min words:p10""".split()


def load(path) -> tuple[list[harness.Passage], list[str]]:
    """The passages and their concepts: a ``concept`` field, else the passage's first words."""
    t = path.read_text(encoding="utf-8")
    lines = [x for x in t.splitlines() if x.strip()]
    rows = json.loads(t) if t.lstrip()[:1] == "[" else [json.loads(x) for x in lines]
    passages, concepts = harness.load_passages(path), []
    for row, p in zip(rows, passages, strict=True):
        first = re.match(r"(.+?)(?:\s*\(|,| is | was )", p.response.strip())
        concepts.append(row.get("concept") or (first.group(1) if first else p.response[:40]))
    return passages, concepts


def measures(scores: np.ndarray, degree: np.ndarray) -> tuple[float, float]:
    """(NonFact, Factual) AUC-PR x100 of sentence scores (higher: better supported)."""
    return 100 * auc_pr(-scores, degree > 0), 100 * auc_pr(scores, degree == 0)


def sentence_scores(supports, passages, how: str) -> np.ndarray:
    out = []
    for ts, p in zip(supports, passages, strict=True):
        spans = locate_sentences(p.response, p.sentences)
        if how == "mix":
            out.append((ts.sentence_support(spans, "p10") + ts.sentence_support(spans, "mean")) / 2)
        elif how.startswith("words:"):
            w, got = ts.word_rows(), []
            for at in ((w.start >= a) & (w.start < b) for a, b in spans):
                u = at & w.counted if (at & w.counted).any() else at
                got.append(aggregate(w.support[u], w.weight[u], how[6:]) if u.any() else np.nan)
            out.append(np.array(got))
        else:
            out.append(ts.sentence_support(spans, how))
    return np.concatenate(out)


def token_supports(passages, settings: dict, prompts: list[str] | None, sets) -> list[list]:
    """Token supports per set of samples from one engine call (checked at the defaults)."""
    scorer = BERTScoreConsistency("precision", **settings)
    engine, responses = scorer.engine, [p.response for p in passages]
    own = [punctuation_ids(engine.encoder.tokenizer)] * len(passages)
    for i, text in enumerate(prompts or ()):
        own[i] = own[i] | frozenset(engine.encoder.tokenize([text])[0])
    pairs = [(i, k) for i in range(len(passages)) for k in sorted({k for s in sets for k in s})]
    matches = engine.score_matches(
        [responses[i] for i, _ in pairs], [passages[i].samples[k] for i, k in pairs],
        zero_weight=[own[i] for i, _ in pairs], show_progress_bars=False,
    )  # fmt: skip
    out = []
    for s in sets:
        pick = [j for j, (_, k) in enumerate(pairs) if k in s]
        group = [pairs[j][0] for j in pick]
        out.append(supports_from_matches(engine, matches.take(pick), group, responses))
    if not settings:  # the defaults: the product's own path must give the same supports
        samples = [[p.samples[k] for k in sets[0]] for p in passages]
        inputs = ScoringInputs(responses, samples, prompts)
        direct = score_with_supports([scorer], inputs, show_progress_bars=False)[1]
        diff = max(abs(a.support - b.support).max() for a, b in zip(direct, out[0], strict=True))
        if diff > 1e-3:
            raise SystemExit(f"supports differ from score_with_supports by {diff:.1e}")
    return out


def reembed(passages, metric: str, samples: list[int]) -> np.ndarray:
    """Today's ``score_sentences`` (re-embedding), layer 5, idf over the samples scored."""
    chosen = [[p.samples[k] for k in samples] for p in passages]
    bert = BERTScorer(num_layers=5, idf=True, idf_sents=sum(chosen, []), show_progress_bars=False)
    texts, sentences = [p.response for p in passages], [p.sentences for p in passages]
    df = score_sentences(texts, chosen, bert, sentences=sentences, metric=metric, method="reembed")
    return df["support"].to_numpy()


def word_labels(per_set, passages) -> tuple[np.ndarray, np.ndarray]:
    """The counted words' supports over the sets given, and whether their sentence is inaccurate."""
    supports, labels = [], []
    for ts, p in ((ts, p) for sup in per_set for ts, p in zip(sup, passages, strict=True)):
        w, spans = ts.word_rows(), locate_sentences(p.response, p.sentences)
        for (a, b), deg in zip(spans, p.degree, strict=True):
            at = (w.start >= a) & (w.start < b) & w.counted
            supports.append(w.support[at])
            labels.append(np.full(int(at.sum()), deg > 0))
    return np.concatenate(supports), np.concatenate(labels)


def youden(scores: np.ndarray, positive: np.ndarray) -> tuple[float, float]:
    """``(t, J)`` maximising TPR - FPR of ``scores < t`` over the midpoints (ties: the lowest)."""
    values = np.unique(scores)
    cuts = (values[:-1] + values[1:]) / 2
    tpr = np.searchsorted(np.sort(scores[positive]), cuts) / positive.sum()
    fpr = np.searchsorted(np.sort(scores[~positive]), cuts) / (~positive).sum()
    best = int(np.argmax(tpr - fpr))
    return float(cuts[best]), float(tpr[best] - fpr[best])


def refinement(scores: np.ndarray, positive: np.ndarray, t: float) -> dict[str, float]:
    """What removing the sentences scored below ``t`` does (``refine()``): the share removed,
    the inaccurate share among them and among those kept, against the base rate (points)."""
    removed, base = scores < t, positive.mean()
    among = positive[removed].mean() if removed.any() else np.nan
    kept = positive[~removed].mean() if (~removed).any() else np.nan
    return {"removed": removed.mean(), "base": base, "among_removed": among, "among_kept": kept,
            "lift": 100 * (among - base), "drop": 100 * (base - kept)}  # fmt: skip


def balanced(scores: np.ndarray, positive: np.ndarray) -> tuple[float, float]:
    """``(t, gain)``: the threshold (to 0.01) maximising the smaller of the two gains of
    :func:`refinement`, lift and drop (ties: the lowest); SENTENCE_THRESHOLD's rule."""
    grid = np.round(np.arange(0.01, 1.0, 0.01), 2)
    gains = [min(refinement(scores, positive, t)[k] for k in ("lift", "drop")) for t in grid]
    best = int(np.nanargmax(gains))
    return float(grid[best]), float(gains[best])


def youden_at(scores: np.ndarray, positive: np.ndarray, t: float) -> float:
    """TPR - FPR of ``scores < t``."""
    return float((scores[positive] < t).mean() - (scores[~positive] < t).mean())


def bootstrap(passages, new: np.ndarray, old: np.ndarray, n: int, seed: int = 0) -> dict:
    """Std of ``new``'s measures over passage resamples, how often it beats ``old`` on both."""
    rng, got = np.random.default_rng(seed), []
    starts = np.cumsum([0] + [len(p.sentences) for p in passages])
    degree = np.concatenate([p.degree for p in passages])
    for _ in range(n):
        pick = rng.integers(0, len(passages), len(passages))
        rows = np.concatenate([np.arange(starts[i], starts[i + 1]) for i in pick])
        if len(set((degree[rows] > 0).tolist())) > 1:  # one class only: no AUC-PR
            got.append((measures(new[rows], degree[rows]), measures(old[rows], degree[rows])))
    wins = sum(a[0] > b[0] and a[1] > b[1] for a, b in got) / max(len(got), 1)
    return {"std": np.array([a for a, _ in got]).reshape(-1, 2).std(axis=0), "wins": wins}


def main(argv: list[str] | None = None) -> int:
    ap = harness.parser(__doc__, "data", "out")
    ap.add_argument("--bootstrap", type=int, default=1000, help="passage resamples")
    ap.add_argument("--configs", nargs="*", help="only these settings (names as listed)")
    args = ap.parse_args(argv)
    if not harness.have_data(args.data):
        return 0
    warnings.simplefilter("ignore")
    passages, concepts = load(args.data)
    degree = np.concatenate([p.degree for p in passages])
    n_samples = min(len(p.samples) for p in passages)
    sets = [s for s in SETS if max(s) < n_samples]
    started, scored = time.perf_counter(), {}
    for metric, chosen in (("precision", sets), ("f1", sets[:1])):  # F1: m=20 only (time)
        name = f"`score_sentences`, {metric} (re-embedding, layer 5, idf)"
        scored[(name, "")] = [reembed(passages, metric, s) for s in chosen]
    for config in args.configs or CONFIGS:
        settings, prompts = CONFIGS[config]
        texts = [f"This is a Wikipedia passage about {c}:" for c in concepts] if prompts else None
        per_set = token_supports(passages, settings, texts, sets)
        if config == DEFAULT_CONFIG:  # the counted words' supports over the sets of 5, labelled
            words, labels = word_labels(per_set[1:], passages)
        for how in AGGREGATIONS:
            scored[(config, how)] = [sentence_scores(sup, passages, how) for sup in per_set]
    rows = {key: [measures(x, degree) for x in got] for key, got in scored.items()}
    table = []
    for (config, how), values in rows.items():
        v = np.array(values[1:])  # m=5
        spread = [f"{v[:, i].mean():.2f} ({v[:, i].std():.2f})" if len(v) else "" for i in (0, 1)]
        bold = "**" if (config, how) == (DEFAULT_CONFIG, SENTENCE_AGGREGATION) else ""
        table.append([config, f"{bold}{how}{bold}", *(f"{x:.2f}" for x in values[0]), *spread])
    head = "settings|sentence score|NonFact m=20|Factual m=20|NonFact m=5|Factual m=5".split("|")
    lines = [
        "# Sentence scores from token support", "", harness.machine_summary(), "",
        f"{len(passages)} passages, {len(degree)} sentences ({args.data.name}), m={n_samples}",
        f"({time.perf_counter() - started:.0f} s)", "", *harness.md_table(head, table),
    ]  # fmt: skip
    if DEFAULT_CONFIG not in (args.configs or CONFIGS) or len(sets) < 2:
        harness.write_report(args.out, "sentences.md", "\n".join(lines))
        return 0
    # the rules (the module docstring), checked against the constants, and the bootstrap
    ref = rows[next(k for k in rows if k[1] == "")][0]  # the re-embedding, precision, m=20
    default = {how: rows[(DEFAULT_CONFIG, how)] for how in AGGREGATIONS}
    eligible = {how: np.mean(got[1:]) for how, got in default.items()  # what aggregate() does
                if ":" not in how and how != "mix" and all(np.greater(got[0], ref))}  # fmt: skip
    close = [h for h, v in eligible.items() if v >= max(eligible.values()) - 0.1]  # ties: m=20
    best = max(close, key=lambda h: np.mean(default[h][0])) if close else None
    firsts = ", ".join(f"{h} {v:.3f}" for h, v in sorted(eligible.items(), key=lambda x: -x[1])[:4])
    chosen, boot = (DEFAULT_CONFIG, SENTENCE_AGGREGATION), []
    for other in [k for k in scored if k[1] == ""]:
        b = bootstrap(passages, scored[chosen][0], scored[other][0], args.bootstrap)
        boot.append([other[0], f"{b['std'][0]:.2f} / {b['std'][1]:.2f}", f"{b['wins']:.1%}"])
    pooled, positive = np.concatenate(scored[chosen][1:]), np.tile(degree > 0, len(sets) - 1)
    (t, j), (wt, wj) = youden(pooled, positive), youden(words, labels)
    flagged, at = pooled < round(t, 2), words < WEAK_SUPPORT
    (bt, gain), r = balanced(pooled, positive), refinement(pooled, positive, SENTENCE_THRESHOLD)
    per_set = [refinement(x, degree > 0, SENTENCE_THRESHOLD) for x in scored[chosen][1:]]
    lines += [
        "", f"Aggregation by the rule: {best} (m=5 mean of the two measures "
        f"{eligible.get(best, float('nan')):.3f}); SENTENCE_AGGREGATION = "
        f"{SENTENCE_AGGREGATION!r}. The best m=5 means: {firsts}",
        "", *harness.md_table(["chosen against (m=20, passages resampled)",
                               "chosen's std NonFact / Factual", "chosen beats it on both"], boot),
        "", f"Weak-support threshold (Youden's J, sets of 5 pooled): {t:.4f} (J {j:.2f}), "
        f"rounded {round(t, 2)}; WEAK_SUPPORT = {WEAK_SUPPORT}. At {round(t, 2)}: "
        f"{(flagged & positive).sum() / positive.sum():.0%} of inaccurate sentences "
        f"flagged, {(flagged & ~positive).sum() / (~positive).sum():.0%} of accurate ones.",
        f"Words (counted, sets of 5 pooled; inaccurate when their sentence is): Youden's J "
        f"threshold {wt:.4f} (J {wj:.2f}); at {WEAK_SUPPORT}, {at.mean():.0%} of words weak: "
        f"{(at & labels).sum() / labels.sum():.0%} of the inaccurate sentences' words, "
        f"{(at & ~labels).sum() / (~labels).sum():.0%} of the accurate ones'.",
        "", f"Sentence threshold (refine(): the smaller of the two gains, sets of 5 pooled, "
        f"maximised): {bt:.2f} (both gains at least {gain:.1f} points); SENTENCE_THRESHOLD = "
        f"{SENTENCE_THRESHOLD}. At {SENTENCE_THRESHOLD}: {r['removed']:.1%} of sentences "
        f"removed, inaccurate among them {r['among_removed']:.1%} against a base rate of "
        f"{r['base']:.1%} (+{r['lift']:.1f} points); among those kept {r['among_kept']:.1%} "
        f"(-{r['drop']:.1f} points). Per set of 5: lift "
        + ", ".join(f"{x['lift']:.1f}" for x in per_set) + "; drop "
        + ", ".join(f"{x['drop']:.1f}" for x in per_set) + ". Youden's J at it: "
        f"{youden_at(pooled, positive, SENTENCE_THRESHOLD):.3f} (its best: {j:.3f}).",
    ]  # fmt: skip
    harness.write_report(args.out, "sentences.md", "\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
