"""Which layer of a model detects hallucinations best? Every layer, on WikiBio GPT-3 passages.

For a model (a preset such as ``accurate``, a hub name or a local directory) and each of its
layers, the ``bert_score`` scorer at its defaults (fixed idf for the model's tokenizer,
``dtype="auto"``, long texts in windows, punctuation weighing 0, the F-measure with beta
:data:`~uqlm_bert.scorers.bert.F_BETA`) scores every passage's response against each of its 20
samples. A passage's confidence is the mean of those pair scores; it is judged by the
passage-level Spearman correlation (x100) of the negated confidence with the passage's mean
sentence label (accurate 0, minor 0.5, major 1), as in ``eval_wikibio.py``:

- ``m=20``: the mean over all 20 samples;
- ``m=5``: the mean (and spread) over the 4 disjoint sets of 5 samples (5 is the default
  ``num_responses``);
- ``time``: the seconds of the one scoring call over all passages and samples at that layer (its
  texts embedded once), and the same per 1,000 answers of 20 samples.

The score of a pair does not depend on the other pairs of a call (fixed idf), so one call at m=20
gives the sets of 5 too; where the model's default layer is among ``--layers``, the script checks
that by scoring the first set of 5 of the first ``--data`` file through ``BlackBoxUQ.score``
itself (the difference is printed; in bfloat16 the batches differ, so it is within bfloat16's
rounding rather than exactly 0).

Each ``--data`` file is reported on its own: the 30 development passages shipped beside the
repository by default; more passages (the rest of the 238 of the published set, say) in the same
JSON Lines format, or in the published set's own (``gpt3_text``, ``gpt3_sentences``,
``annotation``, ``gpt3_text_samples``). ``--exclude FILE`` drops the passages of FILE (by
``wiki_bio_test_idx``), so the full set minus the development passages is held out.

    python benchmarks/eval_layers.py --model accurate                # every layer, dev passages
    python benchmarks/eval_layers.py --model fast --layers 4 5 6
    python benchmarks/eval_layers.py --model $UQLM_BERT_ACCURATE_MODEL_DIR \\
        --data held_out.jsonl --exclude ../shared/data/wikibio_gpt3_dev.jsonl --layers 10 11 12

The accurate preset's model is not shipped: give ``--model`` a local copy's directory (or set
``UQLM_BERT_ACCURATE_MODEL_DIR``, which ``--model accurate`` then uses), or have it in the
Hugging Face cache. Writes ``benchmarks/out/layers_<model>.md`` and prints it. Skips (exit 0)
when the data is absent. Under load, read the times as ratios between layers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import accurate_model, machine_summary, write_report  # noqa: E402
from eval_wikibio import DEFAULT_DATA, DEFAULT_OUT, LABEL_DEGREE, N_SAMPLES  # noqa: E402

from uqlm_bert import BlackBoxUQ  # noqa: E402
from uqlm_bert.bertscore import clear_model_cache  # noqa: E402
from uqlm_bert.bertscore.layer_stack import config_layers  # noqa: E402
from uqlm_bert.bertscore.settings import SCORER_DEFAULTS  # noqa: E402
from uqlm_bert.evaluation import spearman  # noqa: E402
from uqlm_bert.scorers.base import Pairs  # noqa: E402
from uqlm_bert.scorers.bert import BERTScoreConsistency  # noqa: E402

SETS_OF_FIVE = [list(range(5 * k, 5 * k + 5)) for k in range(N_SAMPLES // 5)]


def load_rows(path: Path, exclude: set[int]) -> list[dict]:
    """Passages as ``{idx, response, samples, degree}``, from JSON Lines or a JSON array, in the
    shared data's format or the published set's; those whose ``wiki_bio_test_idx`` is in
    ``exclude`` dropped; only passages with all 20 samples kept."""
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    records = (
        json.loads(text)
        if stripped.startswith("[")
        else [json.loads(line) for line in text.splitlines() if line.strip()]
    )
    rows = []
    for r in records:
        if r.get("wiki_bio_test_idx") in exclude:
            continue
        samples = r.get("sampled_responses", r.get("gpt3_text_samples"))
        labels = r.get("sentence_labels", r.get("annotation"))
        if samples is None or labels is None or len(samples) < N_SAMPLES:
            continue
        rows.append(
            {
                "idx": r.get("wiki_bio_test_idx"),
                "response": r.get("response", r.get("gpt3_text")),
                "samples": list(samples[:N_SAMPLES]),
                "degree": float(np.mean([LABEL_DEGREE[x] for x in labels])),
            }
        )
    return rows


def passage_spearman(scores: np.ndarray, degree: np.ndarray, samples: Sequence[int]) -> float:
    """Spearman (x100) of the negated mean pair score over ``samples`` against the passage degree."""
    return 100 * spearman(-scores[:, list(samples)].mean(axis=1), degree)


def pair_scores(scorer: BERTScoreConsistency, rows: list[dict]) -> tuple[np.ndarray, float]:
    """``[passages, 20]`` scores of each response against each sample (the scorer's own pair
    scores, no prompts), and the call's seconds."""
    cands = [r["response"] for r in rows for _ in range(N_SAMPLES)]
    refs = [s for r in rows for s in r["samples"]]
    t0 = time.perf_counter()
    scores = scorer.score_pairs(Pairs(cands, refs))
    return scores.reshape(len(rows), N_SAMPLES), time.perf_counter() - t0


def evaluate(
    model: str, layers: Sequence[int], datasets: dict[str, list[dict]], device
) -> tuple[list[dict], dict[tuple[str, int], np.ndarray]]:
    """One row per (data, layer): Spearman at m=20, the m=5 sets' mean and spread, time; and
    the pair scores of each (data, layer)."""
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
            out.append(
                {
                    "data": name,
                    "layer": layer,
                    "m=20": passage_spearman(scores, degree, range(N_SAMPLES)),
                    "m=5 mean": float(np.mean(fives)),
                    "m=5 std": float(np.std(fives)),
                    "seconds": seconds,
                    "s per 1,000 answers (m=20)": 1000 * seconds / len(rows),
                }
            )
            print(f"layer {layer} {name}: {out[-1]}", file=sys.stderr, flush=True)
    return out, pairs


def check_against_black_box(
    model: str, rows: list[dict], scores_at: dict[int, np.ndarray], device
) -> float | None:
    """Largest |difference| between the confidences this script derives for the first set of 5
    samples at the model's default layer and ``BlackBoxUQ.score``'s own (None where that layer
    was not evaluated: ``scores_at`` holds the evaluated layers' pair scores of ``rows``)."""
    clear_model_cache()
    settings = SCORER_DEFAULTS.replace(model_type=model, device=device)
    scorer = BERTScoreConsistency(bertscore=settings)
    uq = BlackBoxUQ(scorers=[scorer], show_progress_bars=False)
    scores = scores_at.get(uq.scorers[0].engine.num_layers)
    if scores is None:
        return None
    first = SETS_OF_FIVE[0]
    ours = scores[:, first].mean(axis=1)
    got = uq.score([r["response"] for r in rows], [[r["samples"][j] for j in first] for r in rows])
    return float(np.abs(np.asarray(got.data["bert_score"]) - ours).max())


def report(model: str, rows: list[dict], sizes: dict[str, int], check: float | None) -> str:
    lines = [
        f"# Every layer of {model}: WikiBio GPT-3 passage Spearman (x100)",
        "",
        f"Machine: {machine_summary()}.",
        "",
        "The `bert_score` scorer at its defaults otherwise (fixed idf, dtype auto). m=20: all "
        "samples; m=5: mean (std) over the 4 disjoint sets of 5. Seconds: one call scoring every "
        "passage against its 20 samples.",
        "",
    ]
    if check is not None:
        lines += [
            f"Check against `BlackBoxUQ.score` (first set of 5, default layer): max |diff| "
            f"{check:.2e}.",
            "",
        ]
    for name, n in sizes.items():
        lines += [
            f"## {name} ({n} passages)",
            "",
            "| layer | m=20 | m=5 mean (std) | seconds | s per 1,000 answers (m=20) |",
            "|---|---|---|---|---|",
        ]
        for r in rows:
            if r["data"] == name:
                lines.append(
                    f"| {r['layer']} | {r['m=20']:.2f} | {r['m=5 mean']:.2f} ({r['m=5 std']:.2f})"
                    f" | {r['seconds']:.1f} | {r['s per 1,000 answers (m=20)']:.0f} |"
                )
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="fast", help="a preset, hub name or directory")
    parser.add_argument("--layers", type=int, nargs="+", help="default: every layer")
    parser.add_argument("--data", type=Path, nargs="+", default=[DEFAULT_DATA])
    parser.add_argument("--exclude", type=Path, help="drop the passages of this file")
    parser.add_argument("--device", default=None)
    parser.add_argument("--no-check", action="store_true", help="skip the BlackBoxUQ check")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    missing = [p for p in args.data if not p.is_file()]
    if missing:
        print(f"data not found: {', '.join(map(str, missing))}; skipping", file=sys.stderr)
        return 0
    exclude: set[int] = set()
    if args.exclude is not None:
        exclude = {r["wiki_bio_test_idx"] for r in map(json.loads, args.exclude.open())}
    datasets = {p.name: load_rows(p, exclude) for p in args.data}
    model = accurate_model() if args.model == "accurate" else args.model  # the copy given
    layers = args.layers
    if layers is None:
        from transformers import AutoConfig

        from uqlm_bert.bertscore.resolve import resolve_model

        total = config_layers(AutoConfig.from_pretrained(resolve_model(model)[1]))
        layers = list(range(1, total + 1))
    rows, pairs = evaluate(model, layers, datasets, args.device)
    check = None
    if not args.no_check:
        first = next(iter(datasets))
        scores_at = {layer: s for (name, layer), s in pairs.items() if name == first}
        check = check_against_black_box(model, datasets[first], scores_at, args.device)
    name = Path(args.model).name if os.sep in args.model else args.model.replace("/", "_")
    text = report(args.model, rows, {k: len(v) for k, v in datasets.items()}, check)
    write_report(args.out, f"layers_{name}.md", text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
