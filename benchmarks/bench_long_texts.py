"""Time per token of long answers read in windows, against short answers, in one process.

The ``bert_score`` scorer at its defaults (``long_texts="window"``) scores prompts of one answer
and five samples. Long prompts hold texts of 1,500 tokens (WikiBio GPT-3 passages of eight people
in a row, cut there: four windows of about 400 tokens each), short prompts texts of 200 tokens
(two passages in a row, cut there), no text twice, and both sides hold about the same number of
tokens. Each round scores both, in turns (the order alternates); the report gives each side's
median seconds per 1,000 tokens (of the unique texts), their ratio, the ratio per round, and the
tokens the model reads per token of text (the windows' overlap).

    python benchmarks/bench_long_texts.py [--rounds 5] [--long-prompts 6]   # 3-5 CPU-minutes

Writes ``benchmarks/out/long_texts_speed.md`` and prints it. Without the shared data the texts
are generated passages of the same lengths.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    REPO,
    WIKIBIO,
    _synthetic_passage,
    machine_summary,
    write_report,
)

LONG_TOKENS = 1500
SHORT_TOKENS = 200
SAMPLES = 5


def _passages() -> tuple[list[list[str]], str]:
    """30 groups of 21 texts (a passage and 20 samples), from the shared data or generated."""
    if WIKIBIO.is_file():
        rows = [json.loads(line) for line in WIKIBIO.read_text().splitlines() if line.strip()]
        return [
            [r["response"], *r["sampled_responses"][:20]] for r in rows
        ], "WikiBio GPT-3 passages"
    import random

    rng = random.Random(0)
    groups = [
        [_synthetic_passage(rng, rng.randint(120, 200)) for _ in range(21)] for _ in range(30)
    ]
    return groups, "generated passages"


def cut(tokenizer, text: str, tokens: int) -> str:
    """``text`` cut after its first ``tokens`` tokens, special ones included (at a token end)."""
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    offsets = enc["offset_mapping"]
    if len(offsets) <= tokens - 2:
        return text
    return text[: offsets[tokens - 3][1]]


def prompts(tokenizer, n: int, people: int, tokens: int) -> tuple[list, list]:
    """``n`` prompts (at most 90) whose answer and samples join ``people`` passages each, cut at
    ``tokens``: prompt ``i`` takes people ``i, i + 1, ...`` and, for its answer and samples, the
    passages ``6r`` to ``6r + 5`` of each (the original and 20 samples), ``r = i // 30``, so that
    no two prompts hold the same texts."""
    groups, _ = _passages()
    responses, samples = [], []
    for i in range(n):
        chosen = [groups[(i + k) % len(groups)] for k in range(people)]
        first = (SAMPLES + 1) * (i // len(groups))
        texts = [
            cut(tokenizer, "\n\n".join(g[first + k] for g in chosen), tokens)
            for k in range(SAMPLES + 1)
        ]
        responses.append(texts[0])
        samples.append(texts[1:])
    return responses, samples


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--long-prompts", type=int, default=6)
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--dtype", default=None, help="the scorer's dtype (default: its own, 'auto')"
    )
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "out")
    args = parser.parse_args(argv)

    import torch

    from uqlm_bert.bertscore.windows import split_in_windows
    from uqlm_bert.scorers import build_scorer

    settings = {"dtype": args.dtype} if args.dtype else {}
    scorer = build_scorer("bert_score", device=args.device, **settings)
    engine = scorer.engine
    tok = engine.encoder.tokenizer
    n_short = args.long_prompts * LONG_TOKENS // SHORT_TOKENS
    sides = {
        "long": prompts(tok, args.long_prompts, 8, LONG_TOKENS),
        "short": prompts(tok, n_short, 2, SHORT_TOKENS),
    }
    _, source = _passages()
    tokens, read = {}, {}
    for name, (responses, samples) in sides.items():
        texts = list(dict.fromkeys(t.strip() for t in responses + [s for g in samples for s in g]))
        ids = engine.encoder.tokenize(texts, 1 << 15)
        tokens[name] = sum(map(len, ids))
        split = split_in_windows(ids, engine._frame)
        read[name] = sum(map(len, split.sequences)) / tokens[name]
    scorer.score(*sides["short"])  # warm-up
    times: dict[str, list[float]] = {name: [] for name in sides}
    for r in range(args.rounds):
        for name in ("long", "short") if r % 2 == 0 else ("short", "long"):
            started = time.perf_counter()
            scorer.score(*sides[name])
            times[name].append(time.perf_counter() - started)
            print(f"round {r} {name}: {times[name][-1]:.2f} s", flush=True)
    per_k = {name: 1000 * statistics.median(times[name]) / tokens[name] for name in sides}
    ratios = [
        lt / tokens["long"] / (st / tokens["short"])
        for lt, st in zip(times["long"], times["short"], strict=True)
    ]
    lines = [
        f"Machine: {machine_summary()}; torch threads {torch.get_num_threads()}. Texts: {source}. "
        f"Model dtype: {str(engine.dtype).removeprefix('torch.')}.",
        "",
        "| texts | prompts | unique tokens | tokens read per token | median s per 1,000 tokens "
        "| rounds (s) |",
        "|---|---|---|---|---|---|",
    ]
    for name in sides:
        lines.append(
            f"| {name} ({LONG_TOKENS if name == 'long' else SHORT_TOKENS} tokens) | "
            f"{len(sides[name][0])} | {tokens[name]:,} | {read[name]:.3f} | {per_k[name]:.3f} | "
            f"{', '.join(f'{t:.1f}' for t in times[name])} |"
        )
    lines += [
        "",
        f"Time per token, long / short: **{per_k['long'] / per_k['short']:.3f}** (medians); "
        f"per round {', '.join(f'{x:.3f}' for x in ratios)} (median {np.median(ratios):.3f}).",
    ]
    report = "\n".join(lines) + "\n"
    write_report(args.out, "long_texts_speed.md", report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
