"""What token supports cost: ``score`` + ``words()`` + ``sentences()`` against ``score`` alone.

    python -m benchmarks.bench_supports [--prompts 30] [--samples 5 20] [--rounds 5]

Each answer against its first m samples (m = 5 and 20): the WikiBio passages where the shared
data are there, else generated passages of their lengths. In one process, rounds in turning
order: ``BlackBoxUQ(scoring=ScoringSettings(supports=False)).score`` (the confidence alone) against
``BlackBoxUQ().score`` followed by the result's ``words()`` and ``sentences()`` (the word and
sentence tables): the ratio of the medians is the cost of "where" on top of "whether". Memory:
the token supports a result holds, in bytes per answer token (one row per token, whatever m is).
Writes ``supports.md``.
"""

from __future__ import annotations

import os

import numpy as np

from benchmarks import harness
from uqlm_bert import BlackBoxUQ, ScoringSettings


def held_bytes(result) -> tuple[int, int]:
    """Bytes of the token supports' arrays a result holds, and the answer tokens they cover."""
    held = [s for s in result.data["supports"] if s is not None]
    arrays = (a for s in held for a in (s.starts, s.ends, s.words, s.weights, s.support))
    return sum(a.nbytes for a in arrays), sum(len(s) for s in held)


def main(argv: list[str] | None = None) -> int:
    ap = harness.parser(__doc__, "prompts", "rounds", "device", "seed", "out")
    ap.add_argument("--samples", type=int, nargs="+", default=[5, 20], help="m (default 5 20)")
    args = ap.parse_args(argv)
    load = os.getloadavg()[0]
    responses, samples, source = harness.load_prompts(args.prompts, max(args.samples), args.seed)
    plain = BlackBoxUQ(
        device=args.device, scoring=ScoringSettings(supports=False), show_progress_bars=False
    )
    full = BlackBoxUQ(device=args.device, show_progress_bars=False)
    rows, memory, differ = [], [], 0.0
    for m in args.samples:
        some = [s[:m] for s in samples]
        checked = full.score(responses, some)  # also warms the model up
        alone = plain.score(responses, some).data["bert_score"]
        differ = max(differ, harness.max_abs_diff(checked.data["bert_score"], alone))

        def where(some=some) -> None:
            result = full.score(responses, some)
            result.words()
            result.sentences()

        t = harness.time_rounds(
            {"score alone": lambda some=some: plain.score(responses, some), "with supports": where},
            args.rounds,
        )
        a, b = t.median("score alone"), t.median("with supports")
        rows.append([m, f"{a:.3f}", f"{b:.3f}", f"{b / a:.3f}", len(responses)])
        held, tokens = held_bytes(checked)
        memory.append([m, tokens, held, f"{held / tokens:.1f}"])
    ratios = np.array([float(r[3]) for r in rows])
    report = [
        f"# Token supports: the cost of where, on top of whether ({len(responses)} answers)",
        "",
        harness.machine_summary(args.device),
        harness.load_line(load),
        "",
        f"{source}; medians of {args.rounds} rounds in turning order (wall clock).",
        "",
        *harness.md_table(
            ["m", "score alone s", "score + words() + sentences() s", "ratio", "answers"], rows
        ),
        "",
        f"Largest ratio: {ratios.max():.3f}. Confidences with and without supports differ by at "
        f"most {differ:.1e}.",
        "",
        "What a result holds of the token supports: one row per answer token, whatever m is.",
        "",
        *harness.md_table(["m", "answer tokens", "bytes held", "bytes per token"], memory),
    ]
    harness.write_report(args.out, "supports.md", "\n".join(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
