"""Score the shipped example answers and flag the ones their samples do not support.

    python -m uqlm_bert.examples.quickstart [--threshold T] [--quiet]

Runs on the embedded model, with no network and no LLM: the answers and samples are in the
package (``uqlm_bert/examples/answers.jsonl``).
"""

from __future__ import annotations

import argparse
import sys

from uqlm_bert import BlackBoxUQ
from uqlm_bert.examples import load_example_answers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threshold", type=float, default=None,
                        help="flag answers whose confidence is below this (default: the default "
                        "scorer's default threshold, 0.72)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)

    rows = load_example_answers()
    uq = BlackBoxUQ(scorers=["bert_score"], show_progress_bars=not args.quiet)
    result = uq.score(
        [r["response"] for r in rows],
        [r["sampled_responses"] for r in rows],
        prompts=[r["prompt"] for r in rows],
    )
    threshold = result.threshold() if args.threshold is None else args.threshold
    df = result.flag(threshold)
    print(f"{'confidence':>10}  {'':4}  prompt")
    for _, row in df.iterrows():
        print(f"{row['bert_score']:10.3f}  {'LOW' if row['flagged'] else '':4}  {row['prompt']}")
    low = int(df["flagged"].sum())
    print(f"\n{low} of {len(df)} answers fall below {threshold}: likely hallucinations.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
