"""Score the shipped example answers and flag the ones their samples do not support.

    python -m uqlm_bert.examples.quickstart [--threshold 0.7] [--quiet]

Runs on the embedded model, with no network and no LLM: the answers and samples are in the
package (``uqlm_bert/examples/answers.jsonl``).
"""

from __future__ import annotations

import argparse
import sys

from uqlm_bert.examples import load_example_answers
from uqlm_bert.scorers import build_scorer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threshold", type=float, default=0.7,
                        help="flag answers whose confidence is below this (default 0.7)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)

    rows = load_example_answers()
    scorer = build_scorer("bert_score")
    confidence = scorer.score(
        [r["response"] for r in rows],
        [r["sampled_responses"] for r in rows],
        show_progress_bars=not args.quiet,
    )
    print(f"{'confidence':>10}  {'':4}  prompt")
    for row, conf in zip(rows, confidence):
        flag = "LOW" if conf < args.threshold else ""
        print(f"{conf:10.3f}  {flag:4}  {row['prompt']}")
    low = int((confidence < args.threshold).sum())
    print(f"\n{low} of {len(rows)} answers fall below {args.threshold}: likely hallucinations.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
