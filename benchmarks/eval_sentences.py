"""Sentence scores from token support: which aggregation, which settings, and the threshold.

The task is SelfCheckGPT's sentence level (Manakul et al., 2023): GPT-3 passages about people,
each sentence labelled accurate, minor or major inaccurate, with 20 sampled passages per prompt.
"NonFact" AUC-PR takes minor and major as positives, scored by the negated sentence score;
"Factual" AUC-PR takes accurate as positive, scored by the sentence score (x100).

Each passage is scored against its samples once (``score_with_supports``: the confidence's own
pass), giving each token's support (its best cosine with any token of a sample, averaged over
the samples); a sentence's score is an aggregate of the supports of its counted tokens (weight
above 0: punctuation and the prompt's tokens left out), the sentence located in the passage by
``locate_sentences``. Every aggregation is tried on every setting; the current
``score_sentences`` (each sentence embedded again, against each sample's sentences) gives the
reference rows. m=20 uses all samples; "m=5" is the mean (std) over the four disjoint sets of 5.
The bootstrap resamples passages (paired) and says how often the chosen method beats the
reference on both measures.

The prompt was "This is a Wikipedia passage about {concept}:"; the data do not hold the concept,
so it is taken from the passage's first words (up to its first "(", ",", "is" or "was"), or
from a ``concept`` field where the data have one.

The rule that chooses the aggregation (``SENTENCE_AGGREGATION``): at the scorers' defaults, the
best mean of NonFact and Factual over the four sets of 5 samples, among the aggregations that
beat the re-embedding ``score_sentences`` (precision) on both measures at m=20; those within 0.1
point of the best go to the best mean of the two at m=20. The threshold rule
for "weakly supported" (``WEAK_SUPPORT``): at the scorers' defaults, the chosen aggregation, over
the four sets of 5 samples pooled, the threshold that maximises Youden's J of ``support < t``
against the sentences labelled minor or major inaccurate, rounded to two decimals. The script
checks that both rules give the constants, and reports the same J for words (a word counts as
inaccurate when its sentence is).

    python -m benchmarks.eval_sentences [--data PATH] [--bootstrap 1000]   # ~15 min, 2 cores

Prints the Markdown tables. Skips (exit 0) when the data file is absent.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchmarks.harness import WIKIBIO  # noqa: E402
from uqlm_bert import BERTScorer  # noqa: E402
from uqlm_bert.bertscore.support import SENTENCE_AGGREGATION, WEAK_SUPPORT  # noqa: E402
from uqlm_bert.evaluation import auc_pr  # noqa: E402
from uqlm_bert.inputs import ScoringInputs  # noqa: E402
from uqlm_bert.scorers.base import score_with_supports  # noqa: E402
from uqlm_bert.scorers.bert import (  # noqa: E402
    BERTScoreConsistency,
    punctuation_ids,
    supports_from_matches,
)
from uqlm_bert.scorers.sentences import locate_sentences, score_sentences  # noqa: E402

PROMPT = "This is a Wikipedia passage about {concept}:"
DEGREE = {"accurate": 0.0, "minor_inaccurate": 0.5, "major_inaccurate": 1.0}
SETS = [list(range(20))] + [list(range(5 * k, 5 * k + 5)) for k in range(4)]

#: Settings of the one pass (the scorer's): name -> (BERTScore settings, prompts given).
CONFIGS: dict[str, tuple[dict, bool]] = {
    "defaults (fixed idf, dtype auto, windows, prompt)": ({}, True),
    "defaults, float32": ({"dtype": "float32"}, True),
    "defaults, float32, no prompt": ({"dtype": "float32"}, False),
    "defaults, float32, no idf": ({"dtype": "float32", "idf": False}, True),
    "defaults, float32, long texts cut": ({"dtype": "float32", "long_texts": "truncate"}, True),
    "no idf, float32, no prompt": ({"dtype": "float32", "idf": False}, False),
    "layer 4, float32": ({"dtype": "float32", "num_layers": 4}, True),
    "layer 6, float32": ({"dtype": "float32", "num_layers": 6}, True),
}
DEFAULT_CONFIG = next(iter(CONFIGS))
#: Aggregations of a sentence's counted token supports (see ``bertscore.support.aggregate``);
#: "words:" aggregates the sentence's word supports instead; "mix" is half p10, half mean.
AGGREGATIONS = [
    "min", "p3", "p5", "p10", "p15", "p20", "p25", "p50", "mean", "wmean", "trim5", "trim10",
    "trim25", "softmin0.02", "softmin0.05", "softmin0.1", "below0.5", "below0.6", "mix",
    "words:min", "words:p10",
]  # fmt: skip


@dataclass
class Passage:
    response: str
    sentences: list[str]
    degree: np.ndarray
    samples: list[str]
    concept: str


def load(path: Path) -> list[Passage]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        first = re.match(r"(.+?)(?:\s*\(|,| is | was )", row["response"].strip())
        concept = row.get("concept") or (first.group(1) if first else row["response"][:40])
        out.append(
            Passage(
                row["response"],
                list(row["sentences"]),
                np.array([DEGREE[x] for x in row["sentence_labels"]]),
                list(row["sampled_responses"]),
                concept,
            )
        )
    return out


def measures(scores: np.ndarray, degree: np.ndarray) -> tuple[float, float]:
    """(NonFact, Factual) AUC-PR x100 of sentence scores (higher: better supported)."""
    return 100 * auc_pr(-scores, degree > 0), 100 * auc_pr(scores, degree == 0)


def sentence_scores(supports, passages: Sequence[Passage], how: str) -> np.ndarray:
    out = []
    for ts, p in zip(supports, passages, strict=True):
        spans = locate_sentences(p.response, p.sentences)
        if how == "mix":
            out.append((ts.sentence_support(spans, "p10") + ts.sentence_support(spans, "mean")) / 2)
        elif how.startswith("words:"):
            out.append(_word_level(ts, spans, how[6:]))
        else:
            out.append(ts.sentence_support(spans, how))
    return np.concatenate(out)


def _word_level(ts, spans, how: str) -> np.ndarray:
    from uqlm_bert.bertscore.support import aggregate

    w = ts.word_rows()
    out = []
    for a, b in spans:
        at = (w.start >= a) & (w.start < b)
        use = at & w.counted if (at & w.counted).any() else at
        out.append(aggregate(w.support[use], w.weight[use], how) if use.any() else np.nan)
    return np.array(out)


def token_supports(
    passages: Sequence[Passage], settings: dict, prompts: bool, sets: list[list[int]]
) -> list[list]:
    """Each passage's token supports for each set of samples, from one engine call over all
    the samples (a set's supports average its own pairs' matches: no second pass). The zero
    weights are the scorer's (punctuation and the prompt's tokens); for the default settings
    the m=20 supports are checked against ``score_with_supports`` itself."""
    scorer = BERTScoreConsistency("precision", **settings)
    engine = scorer.engine
    punctuation = punctuation_ids(engine.encoder.tokenizer)
    prompt_texts = [PROMPT.format(concept=p.concept) for p in passages] if prompts else None
    cands, refs, zero, group, sample = [], [], [], [], []
    for i, p in enumerate(passages):
        own = punctuation
        if prompt_texts is not None:
            own = punctuation | frozenset(engine.encoder.tokenize([prompt_texts[i]])[0])
        for k in sorted({k for s in sets for k in s}):
            cands.append(p.response)
            refs.append(p.samples[k])
            zero.append(own)
            group.append(i)
            sample.append(k)
    matches = engine.score_matches(cands, refs, zero_weight=zero, show_progress_bars=False)
    responses = [p.response for p in passages]
    out = []
    for s in sets:
        pick = [j for j, k in enumerate(sample) if k in s]
        out.append(
            supports_from_matches(engine, matches.take(pick), [group[j] for j in pick], responses)
        )
    if not settings:  # the defaults: the product's own path must give the same supports
        samples = [[p.samples[k] for k in sets[0]] for p in passages]
        inputs = ScoringInputs(responses, samples, prompt_texts)
        direct = score_with_supports([scorer], inputs, show_progress_bars=False)[1]
        diff = max(
            float(np.abs(a.support - b.support).max()) for a, b in zip(direct, out[0], strict=True)
        )
        if diff > 1e-3:
            raise SystemExit(f"supports differ from score_with_supports by {diff:.1e}")
    return out


def reembed(passages: Sequence[Passage], metric: str, samples: list[int]) -> np.ndarray:
    """Today's ``score_sentences`` (re-embedding), layer 5, idf over the samples scored."""
    docs = [p.samples[k] for p in passages for k in samples]
    df = score_sentences(
        [p.response for p in passages],
        [[p.samples[k] for k in samples] for p in passages],
        BERTScorer(num_layers=5, idf=True, idf_sents=docs, show_progress_bars=False),
        sentences=[p.sentences for p in passages],
        metric=metric,
        method="reembed",
    )
    return df["bert_score"].to_numpy()


#: Per setting: the counted words' supports over the sets of 5, and whether their sentence is
#: labelled inaccurate.
WORDS: dict[str, tuple[np.ndarray, np.ndarray]] = {}


def word_labels(per_set, passages: Sequence[Passage]) -> tuple[np.ndarray, np.ndarray]:
    supports, labels = [], []
    for sup in per_set:
        for ts, p in zip(sup, passages, strict=True):
            w = ts.word_rows()
            spans = locate_sentences(p.response, p.sentences)
            for (a, b), deg in zip(spans, p.degree, strict=True):
                at = (w.start >= a) & (w.start < b) & w.counted
                supports.append(w.support[at])
                labels.append(np.full(int(at.sum()), deg > 0))
    return np.concatenate(supports), np.concatenate(labels)


def youden(scores: np.ndarray, positive: np.ndarray) -> tuple[float, float]:
    """``(t, J)`` maximising TPR - FPR of ``scores < t`` over the midpoints of distinct scores
    (the lowest such threshold where several tie)."""
    values = np.unique(scores)
    cuts = (values[:-1] + values[1:]) / 2
    tpr = np.searchsorted(np.sort(scores[positive]), cuts) / positive.sum()
    fpr = np.searchsorted(np.sort(scores[~positive]), cuts) / (~positive).sum()
    best = int(np.argmax(tpr - fpr))
    return float(cuts[best]), float(tpr[best] - fpr[best])


def bootstrap(passages, new: np.ndarray, old: np.ndarray, n: int, seed: int = 0) -> dict:
    """Std of each measure of ``new`` over passage resamples, and how often it beats ``old``
    on both measures (the same resamples)."""
    rng = np.random.default_rng(seed)
    sizes = [len(p.sentences) for p in passages]
    starts = np.concatenate(([0], np.cumsum(sizes)))
    degree = np.concatenate([p.degree for p in passages])
    got, wins = [], 0
    for _ in range(n):
        pick = rng.integers(0, len(passages), len(passages))
        rows = np.concatenate([np.arange(starts[i], starts[i + 1]) for i in pick])
        if len(set((degree[rows] > 0).tolist())) < 2:  # one class only: no AUC-PR
            continue
        a, b = measures(new[rows], degree[rows]), measures(old[rows], degree[rows])
        got.append(a)
        wins += a[0] > b[0] and a[1] > b[1]
    got_a = np.array(got).reshape(-1, 2)
    return {"std": got_a.std(axis=0), "wins": wins / max(len(got), 1)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=WIKIBIO, help="a JSONL file of this format")
    parser.add_argument("--bootstrap", type=int, default=1000, help="passage resamples")
    parser.add_argument("--configs", nargs="*", help="only these settings (names as listed)")
    args = parser.parse_args(argv)
    if not args.data.is_file():
        print(f"no data at {args.data}: skipped")
        return 0
    warnings.simplefilter("ignore")
    passages = load(args.data)
    degree = np.concatenate([p.degree for p in passages])
    n_samples = min(len(p.samples) for p in passages)
    sets = [s for s in SETS if max(s) < n_samples]
    started = time.perf_counter()

    rows: dict[tuple[str, str], list[tuple[float, float]]] = {}
    scored: dict[tuple[str, str], list[np.ndarray]] = {}
    for metric in ("precision", "f1"):
        name = f"`score_sentences`, {metric} (re-embedding, layer 5, idf)"
        chosen_sets = sets if metric == "precision" else sets[:1]  # F1: m=20 only (time)
        scored[(name, "")] = [reembed(passages, metric, s) for s in chosen_sets]
        rows[(name, "")] = [measures(x, degree) for x in scored[(name, "")]]
    for config in args.configs or CONFIGS:
        settings, prompts = CONFIGS[config]
        per_set = token_supports(passages, settings, prompts, sets)
        WORDS[config] = word_labels(per_set[1:], passages)
        for how in AGGREGATIONS:
            scored[(config, how)] = [sentence_scores(sup, passages, how) for sup in per_set]
            rows[(config, how)] = [measures(x, degree) for x in scored[(config, how)]]

    print(f"{len(passages)} passages, {len(degree)} sentences ({args.data.name}), m={n_samples}")
    print(f"({time.perf_counter() - started:.0f} s)\n")
    print("| settings | sentence score | NonFact m=20 | Factual m=20 | NonFact m=5 | Factual m=5 |")
    print("|---|---|---|---|---|---|")
    for (config, how), values in rows.items():
        m5 = np.array(values[1:])
        spread = [
            f"{m5[:, i].mean():.2f} ({m5[:, i].std():.2f})" if len(m5) else "" for i in (0, 1)
        ]
        bold = "**" if (config, how) == (DEFAULT_CONFIG, SENTENCE_AGGREGATION) else ""
        print(
            f"| {config} | {bold}{how}{bold} | {values[0][0]:.2f} | {values[0][1]:.2f} | "
            f"{spread[0]} | {spread[1]} |"
        )
    if DEFAULT_CONFIG in (args.configs or CONFIGS) and len(sets) > 1:
        report_choices(passages, sets, rows, scored, args.bootstrap)
    return 0


def report_choices(passages, sets, rows, scored, n_boot: int) -> None:
    """The aggregation and threshold rules (see the module docstring), checked against the
    constants, and the bootstrap of the chosen method against the references."""
    degree = np.concatenate([p.degree for p in passages])
    ref = next(k for k in rows if k[1] == "")  # the re-embedding method with precision
    eligible = {
        how: np.mean(rows[(DEFAULT_CONFIG, how)][1:])
        for how in AGGREGATIONS
        if ":" not in how
        and how != "mix"  # what aggregate() computes
        and all(a > b for a, b in zip(rows[(DEFAULT_CONFIG, how)][0], rows[ref][0], strict=True))
    }
    top = max(eligible.values()) if eligible else np.nan
    # ties within 0.1 point of the best m=5 mean go to the best m=20 mean
    close = [h for h, v in eligible.items() if v >= top - 0.1]
    best = max(close, key=lambda h: np.mean(rows[(DEFAULT_CONFIG, h)][0])) if close else None
    print(
        f"\nAggregation by the rule: {best} (m=5 mean of the two measures "
        f"{eligible.get(best, float('nan')):.3f}); SENTENCE_AGGREGATION = "
        f"{SENTENCE_AGGREGATION!r}. The best m=5 means: "
        + ", ".join(f"{h} {v:.3f}" for h, v in sorted(eligible.items(), key=lambda x: -x[1])[:4])
    )
    chosen = (DEFAULT_CONFIG, SENTENCE_AGGREGATION)
    print(
        "\n| chosen against (m=20, passages resampled) | chosen's std NonFact / Factual "
        "| chosen beats it on both |"
    )
    print("|---|---|---|")
    for other in [k for k in scored if k[1] == ""]:
        b = bootstrap(passages, scored[chosen][0], scored[other][0], n_boot)
        print(f"| {other[0]} | {b['std'][0]:.2f} / {b['std'][1]:.2f} | {b['wins']:.1%} |")
    pooled = np.concatenate(scored[chosen][1:])
    positive = np.tile(degree > 0, len(sets) - 1)
    t, j = youden(pooled, positive)
    flagged = pooled < round(t, 2)
    print(
        f"\nWeak-support threshold (Youden's J, sets of 5 pooled): {t:.4f} (J {j:.2f}), "
        f"rounded {round(t, 2)}; WEAK_SUPPORT = {WEAK_SUPPORT}. At {round(t, 2)}: "
        f"{(flagged & positive).sum() / positive.sum():.0%} of inaccurate sentences "
        f"flagged, {(flagged & ~positive).sum() / (~positive).sum():.0%} of accurate ones."
    )
    words, labels = WORDS[DEFAULT_CONFIG]
    wt, wj = youden(words, labels)
    at = words < WEAK_SUPPORT
    print(
        f"Words (counted, sets of 5 pooled; inaccurate when their sentence is): Youden's J "
        f"threshold {wt:.4f} (J {wj:.2f}); at {WEAK_SUPPORT}, {at.mean():.0%} of words weak: "
        f"{(at & labels).sum() / labels.sum():.0%} of the inaccurate sentences' words, "
        f"{(at & ~labels).sum() / (~labels).sum():.0%} of the accurate ones'."
    )


if __name__ == "__main__":
    sys.exit(main())
