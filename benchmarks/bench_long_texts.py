"""Time per token of long answers read in windows, against short answers, in one process.

    python -m benchmarks.bench_long_texts [--rounds 5] [--long-prompts 6] [--dtype float32]

The ``bert_score`` scorer at its defaults (``long_texts="window"``) scores prompts of one answer
and five samples: long prompts of 1,500-token texts (WikiBio passages of eight people in a row,
cut there), short prompts of 200-token texts (two in a row), no text twice, about the same number
of tokens on each side. Rounds alternate the order; reported per side: the median seconds per
1,000 tokens (of the unique texts), their ratio (per round too), and the tokens the model reads
per token of text (the windows' overlap). Without the shared data the texts are generated
passages of the same lengths. Writes ``long_texts_speed.md``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from benchmarks import harness

LONG_TOKENS = 1500
SHORT_TOKENS = 200
SAMPLES = 5


def _passages() -> tuple[list[list[str]], str]:
    """30 groups of 21 texts (a passage and 20 samples), from the shared data or generated."""
    if harness.WIKIBIO.is_file():
        groups = [[p.response, *p.samples[:20]] for p in harness.load_passages()]
        return groups, "WikiBio GPT-3 passages"
    rng = random.Random(0)
    groups = [
        [harness.synthetic_passage(rng, rng.randint(120, 200)) for _ in range(21)]
        for _ in range(30)
    ]
    return groups, "generated passages"


def cut(tokenizer, text: str, tokens: int) -> str:
    """``text`` cut after its first ``tokens`` tokens, special ones included (at a token end)."""
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    offsets = enc["offset_mapping"]
    if len(offsets) <= tokens - 2:
        return text
    return text[: offsets[tokens - 3][1]]


def prompts(tokenizer, groups: list[list[str]], n: int, people: int, tokens: int) -> tuple:
    """``n`` prompts (at most 90) whose answer and samples join ``people`` passages each, cut at
    ``tokens``: prompt ``i`` takes people ``i, i + 1, ...`` and, for its answer and samples, the
    passages ``6r`` to ``6r + 5`` of each (the original and 20 samples), ``r = i // 30``, so that
    no two prompts hold the same texts."""
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
    ap = harness.parser(__doc__, "rounds", "device", "out")
    ap.add_argument("--long-prompts", type=int, default=6)
    ap.add_argument("--dtype", default=None, help="the scorer's dtype (default: its own, auto)")
    args = ap.parse_args(argv)

    from uqlm_bert.bertscore._windows import split_in_windows
    from uqlm_bert.scorers._registry import build_scorer

    settings = {"dtype": args.dtype} if args.dtype else {}
    scorer = build_scorer("bert_score", device=args.device, **settings)
    engine = scorer.engine
    tok = engine.encoder.tokenizer
    groups, source = _passages()
    n_short = args.long_prompts * LONG_TOKENS // SHORT_TOKENS
    sides = {
        "long": prompts(tok, groups, args.long_prompts, 8, LONG_TOKENS),
        "short": prompts(tok, groups, n_short, 2, SHORT_TOKENS),
    }
    tokens, read = {}, {}
    for name, (responses, samples) in sides.items():
        texts = list(dict.fromkeys(t.strip() for t in responses + [s for g in samples for s in g]))
        ids = engine.encoder.tokenize(texts, 1 << 15)
        tokens[name] = sum(map(len, ids))
        split = split_in_windows(ids, engine.encoder.frame)
        read[name] = sum(map(len, split.sequences)) / tokens[name]
    scorer.score(*sides["short"])  # warm-up
    fns = {name: (lambda side=side: scorer.score(*side)) for name, side in sides.items()}
    times = harness.time_rounds(fns, args.rounds, log=print).wall
    per_k = {name: 1000 * harness.median(times[name]) / tokens[name] for name in sides}
    ratios = [
        lt / tokens["long"] / (st / tokens["short"])
        for lt, st in zip(times["long"], times["short"], strict=True)
    ]
    table = [
        [f"{name} ({LONG_TOKENS if name == 'long' else SHORT_TOKENS} tokens)",
         len(sides[name][0]), f"{tokens[name]:,}", f"{read[name]:.3f}", f"{per_k[name]:.3f}",
         ", ".join(f"{t:.1f}" for t in times[name])]
        for name in sides
    ]  # fmt: skip
    head = ["texts", "prompts", "unique tokens", "tokens read per token",
            "median s per 1,000 tokens", "rounds (s)"]  # fmt: skip
    lines = [
        f"{harness.machine_summary(args.device)}. Texts: {source}. Model dtype: "
        f"{str(engine.dtype).removeprefix('torch.')}.",
        "",
        *harness.md_table(head, table),
        "",
        f"Time per token, long / short: **{per_k['long'] / per_k['short']:.3f}** (medians); per "
        f"round {', '.join(f'{x:.3f}' for x in ratios)} (median {harness.median(ratios):.3f}).",
    ]
    harness.write_report(args.out, "long_texts_speed.md", "\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
