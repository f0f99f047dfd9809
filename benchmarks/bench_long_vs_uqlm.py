"""Side by side with uqlm 0.6.7's long-text scorer: sentence scores, their time, and refinement.

    bash benchmarks/setup-uqlm-env.sh        # once: benchmarks/.venv-uqlm with both libraries
    benchmarks/.venv-uqlm/bin/python -m benchmarks.bench_long_vs_uqlm [--samples 5] [--rounds 3]

On the WikiBio passages (their own sentences, the first ``--samples`` samples each), one process,
the same machine, in turning order: uqlm's ``LongTextUQ(granularity="sentence",
mode="matched_unit", scorers=["bert_score"])`` (each sentence against each sample's sentences,
the best F1 per sample, averaged), its BERTScore pointed at the embedded model at layer 5 and its
NLI model left out (it would load one and use none of it for ``bert_score``; nothing is
downloaded), against ``BlackBoxUQ().score(...).sentences()`` at its defaults (the supports of the
confidence's one pass). Scoring time (median), NonFact / Factual AUC-PR x100, and what each
refinement removes: uqlm's rule (``response_refinement`` keeps a unit scoring above 1/3; it
refuses sentence granularity, so the rule is applied to its sentence scores here, without its
LLM rewrite) and ``refine()`` at its sentence threshold: how many sentences, the inaccurate share
among them and among those kept, against the base rate. Writes ``long_vs_uqlm.md``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import time
import warnings
from typing import Any
from unittest import mock

import numpy as np

from benchmarks import harness
from benchmarks.eval_sentences import load, measures, refinement

LAYER = 5
UQLM = "uqlm 0.6.7, LongTextUQ sentence matched-unit BERTScore"
OURS = "uqlm-bert, BlackBoxUQ().score().sentences()"
#: uqlm's refinement keeps a unit whose score is above this (``response_refinement_threshold``).
UQLM_KEEPS_ABOVE = 1 / 3


def make_uqlm(model_path: str, device: str | None) -> Any:
    """uqlm's sentence-level matched-unit BERTScore on the embedded model, layer 5, no NLI."""
    import uqlm.black_box.bert as bert_module
    import uqlm.longform.luq.matched_unit as matched_module
    from uqlm import LongTextUQ

    reference, unit = bert_module.BERTScorer, matched_module.MatchedUnitScorer
    settings = {"model_type": model_path, "num_layers": LAYER, "idf": False}

    def embedded(*args: Any, **kwargs: Any) -> Any:
        return reference(*args, **{**kwargs, **settings, "rescale_with_baseline": False})

    def bert_only(*args: Any, **kwargs: Any) -> Any:  # no NLI model: bert_score needs none
        return unit(*args, **{**kwargs, "consistency_functions": ["bert_score"]})

    with (
        mock.patch.object(bert_module, "BERTScorer", embedded),
        mock.patch("uqlm.scorers.longform.longtext.MatchedUnitScorer", bert_only),
    ):
        lt = LongTextUQ(granularity="sentence", mode="matched_unit", scorers=["bert_score"],
                        device=device)  # fmt: skip
    inner = lt.matched_unit_scorer.bert_scorer.bert_scorer
    got = (inner.model_type, inner.num_layers, inner.idf, inner.rescale_with_baseline)
    if got != (model_path, LAYER, False, False) or lt.matched_unit_scorer.nli is not None:
        raise RuntimeError(f"uqlm's scorer was not set up as intended: {got}")
    return lt


def uqlm_scores(lt: Any, passages: list, samples: list[list[str]]) -> np.ndarray:
    """uqlm's sentence scores of the passages' own sentences (its split of the samples)."""

    async def own_sentences(show_progress_bars: Any) -> None:
        lt.claim_sets = [list(p.sentences) for p in passages]

    with mock.patch.object(lt, "_decompose_responses", own_sentences):
        result = asyncio.run(
            lt.score([p.response for p in passages], samples, show_progress_bars=False)
        )
    rows = result.data["claims_data"]
    return np.array([unit["bert_score"] for row in rows for unit in row], dtype=np.float64)


def our_result(passages: list, samples: list[list[str]], prompts: list[str], device: Any) -> Any:
    from uqlm_bert import BlackBoxUQ

    uq = BlackBoxUQ(device=device, show_progress_bars=False)
    return uq.score([p.response for p in passages], samples, prompts=prompts)


def our_removed(result: Any, passages: list) -> np.ndarray:
    """Which sentences ``refine()`` removes, at the result's sentence threshold."""
    refined = result.refine(sentences=[list(p.sentences) for p in passages])
    removed = np.zeros(sum(len(p.sentences) for p in passages), dtype=bool)
    starts = np.cumsum([0] + [len(p.sentences) for p in passages])
    for i, gone in enumerate(refined["removed_sentences"]):
        removed[[starts[i] + g["sentence_index"] for g in gone]] = True
    return removed


def refinement_row(name: str, removed: np.ndarray, inaccurate: np.ndarray) -> list[str]:
    """A row of the refinement table: what removing ``removed`` does."""
    r = refinement(np.where(removed, 0.0, 1.0), inaccurate, 0.5)
    among = "-" if not removed.any() else f"{r['among_removed']:.1%} ({r['lift']:+.1f})"
    return [name, f"{removed.sum()} of {removed.size}", among, f"{r['among_kept']:.1%} "
            f"({-r['drop']:+.1f})", f"{r['base']:.1%}"]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = harness.parser(__doc__, "data", "out", "samples", "rounds", "device")
    ap.add_argument("--check-env", action="store_true", help="check both libraries and stop")
    ap.add_argument("--passages", type=int, help="the first N passages only (default: all)")
    args = ap.parse_args(argv)
    if importlib.util.find_spec("uqlm") is None:
        print("skipped: uqlm is not installed here (bash benchmarks/setup-uqlm-env.sh makes "
              "benchmarks/.venv-uqlm with it)")  # fmt: skip
        return 0
    model = harness.embedded_model()
    if args.check_env:
        make_uqlm(model, args.device)
        print("both libraries import, and uqlm's scorer is the embedded model at layer 5")
        return 0
    if not harness.have_data(args.data):
        return 0
    warnings.simplefilter("ignore")
    passages, concepts = load(args.data)
    passages, concepts = passages[: args.passages], concepts[: args.passages]
    samples = [list(p.samples[: args.samples]) for p in passages]
    prompts = [f"This is a Wikipedia passage about {c}:" for c in concepts]
    degree = np.concatenate([p.degree for p in passages])
    inaccurate = degree > 0
    load_before = __import__("os").getloadavg()[0]
    lt = make_uqlm(model, args.device)
    our_result(passages[:1], samples[:1], prompts[:1], args.device)  # the model loads once
    times: dict[str, list[float]] = {UQLM: [], OURS: []}
    got: dict[str, Any] = {}
    for _, name in harness.rounds([UQLM, OURS], args.rounds):
        started = time.perf_counter()
        if name == UQLM:
            got[UQLM] = uqlm_scores(lt, passages, samples)
        else:
            result = our_result(passages, samples, prompts, args.device)
            table = result.sentences(sentences=[list(p.sentences) for p in passages])
            got[OURS] = (table["support"].to_numpy(dtype=np.float64), result)
        times[name].append(time.perf_counter() - started)
    ours, result = got[OURS]
    rows = []
    for name, scores in ((UQLM, got[UQLM]), (OURS, ours)):
        nonfact, factual = measures(scores, degree)
        rows.append(
            [name, f"{harness.median(times[name]):.1f}", f"{nonfact:.2f}", f"{factual:.2f}"]
        )
    speed = harness.median(times[UQLM]) / harness.median(times[OURS])
    removed = {
        "uqlm's rule (kept above 1/3)": got[UQLM] <= UQLM_KEEPS_ABOVE,
        f"refine() (below {result.threshold(level='sentence')})": our_removed(result, passages),
    }
    lines = [
        "# Sentence scores side by side with uqlm's long-text scorer", "",
        harness.machine_summary(args.device), harness.load_line(load_before), "",
        f"{len(passages)} passages, {degree.size} sentences ({args.data.name}), "
        f"m={args.samples}, {args.rounds} rounds in turning order; median scoring time",
        "", *harness.md_table(["scorer", "scoring s", "NonFact AUC-PR", "Factual AUC-PR"], rows),
        "", f"uqlm-bert is {speed:.1f}x faster.", "",
        *harness.md_table(["refinement", "sentences removed", "inaccurate among them (points)",
                           "inaccurate among those kept (points)", "base rate"],
                          [refinement_row(n, r, inaccurate) for n, r in removed.items()]),
    ]  # fmt: skip
    payload = {"times": times, "rows": rows, "speed": speed,
               "removed": {n: int(r.sum()) for n, r in removed.items()}}  # fmt: skip
    harness.write_report(args.out, "long_vs_uqlm.md", "\n".join(lines), payload)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
