"""How well the confidences separate right from wrong answers of a real LLM.

    python -m benchmarks.eval_real_llm [generate|score|all] [--questions FILE] [--answers FILE]

The local LLM (llama.cpp's server with the embedded SmolLM2-135M-Instruct, :class:`LocalLLM`)
answers the shipped questions (216 of BIG-bench's ``qa_wikidata``) at temperature 0 and gives
``--samples`` samples at 1.0; an answer is right when it names a gold answer. Per black-box
scorer, F1 with the idf weights alone (the earlier default), the accurate preset (where a copy is
at hand) and two anchors (mean token log-probability, a grey-box confidence; ``exact_match``):
AUROC and PRR against correctness with 95% bootstrap intervals over questions. ``generate`` saves
the answers (``real_llm_answers.jsonl``), ``score`` reads them, so scorers meet the same answers;
the table goes to ``real_llm_scores.md`` beside them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks import harness
from uqlm_bert import BERTScoreSettings, BlackBoxUQ, ModelUnavailableError
from uqlm_bert._local_llm import LocalLLM
from uqlm_bert.evaluation import auroc, prr
from uqlm_bert.examples import is_correct, load_questions
from uqlm_bert.scorers._bertscore import BERTScoreConsistency

#: The system message of every call: a short answer, as a screening pipeline would ask for.
SYSTEM_PROMPT = "You are a helpful assistant. Answer in one short sentence."
#: Every black-box scorer, the default first.
SCORERS = "bert_score bert_score_precision bert_score_recall cosine_sim rouge_l bleu exact_match"
SCORERS = SCORERS.split()


def _questions(path: Path | None, limit: int | None) -> list[dict]:
    if path is None:
        return load_questions(limit)
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return rows if limit is None else rows[:limit]


def _mean_logprob(reply) -> float:
    content = (reply.response_metadata.get("logprobs") or {}).get("content") or []
    values = [t["logprob"] for t in content if t.get("logprob") is not None]
    return float(np.mean(values)) if values else math.nan


async def generate(args: argparse.Namespace) -> None:
    """Answers (temperature 0, with log-probabilities) and samples for every question."""
    rows = _questions(args.questions, args.limit)
    questions = [r["question"] for r in rows]
    started = time.perf_counter()
    settings = {"slots": args.slots, "threads": args.threads, "max_tokens": args.max_tokens}
    local = LocalLLM(num_responses=args.samples, **settings)
    async with local as llm:
        loaded = time.perf_counter() - started
        answering = local.chat_model(logprobs=True)
        messages = [[("system", SYSTEM_PROMPT), ("user", q)] for q in questions]
        replies = await answering.abatch(messages, config={"max_concurrency": local.slots})
        answered = time.perf_counter() - started
        settings = {
            "request_timeout": args.request_timeout,
            "show_progress_bars": not args.no_progress,
        }
        uq = BlackBoxUQ(llm=llm, system_prompt=SYSTEM_PROMPT, **settings)
        samples = await uq.generate_candidate_responses(questions, num_responses=args.samples)
        calls = uq.last_generation.stats.as_dict()
    elapsed = time.perf_counter() - started
    args.answers.parent.mkdir(parents=True, exist_ok=True)
    with open(args.answers, "w", encoding="utf-8") as f:
        for row, reply, group in zip(rows, replies, samples, strict=True):
            record = {**{k: row.get(k) for k in ("question", "answers", "relation")},
                      "response": reply.content, "response_logprob": _mean_logprob(reply),
                      "sampled_responses": group, "correct": is_correct(reply.content, row["answers"])}  # fmt: skip
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    print(
        f"{len(rows)} questions x (1 + {args.samples}) in {elapsed:.0f} s (model loaded in "
        f"{loaded:.1f} s, answers by {answered:.0f} s); sample calls: {calls['attempts']} "
        f"attempts, {calls['retries']} retries, {calls['failed']} failed; saved to {args.answers}",
        file=sys.stderr,
    )


def _interval(values: np.ndarray, labels: np.ndarray, metric, resamples: int, seed: int):
    """The 95% percentile interval of ``metric`` over bootstrap resamples of the questions
    (resamples with one class only are skipped)."""
    rng = np.random.default_rng(seed)
    n = len(values)
    stats = []
    for _ in range(resamples):
        idx = rng.integers(0, n, n)
        if labels[idx].min() == labels[idx].max():
            continue
        stats.append(metric(values[idx], labels[idx]))
    return np.percentile(stats, [2.5, 97.5])


def _accurate_preset(quiet: bool) -> BlackBoxUQ | None:
    """The default scorer on the accurate preset's model: from ``$UQLM_BERT_ACCURATE_MODEL_DIR``
    (a copy of all-mpnet-base-v2) or the Hugging Face cache; None, with a note, where neither
    has it."""
    try:
        model = harness.accurate_model()
        return BlackBoxUQ(
            scorers=["bert_score"],
            bertscore=BERTScoreSettings(model_type=model),
            show_progress_bars=not quiet,
        )
    except ModelUnavailableError as exc:
        print(f"the accurate preset is left out: {exc}", file=sys.stderr)
        return None


def score(args: argparse.Namespace) -> str:
    """Per scorer and anchor: AUROC and PRR with bootstrap intervals, on the saved answers."""
    records = [json.loads(line) for line in args.answers.read_text(encoding="utf-8").splitlines()]
    responses = [r["response"] for r in records]
    samples = [r["sampled_responses"] for r in records]
    prompts = [r["question"] for r in records]
    correct = np.array([is_correct(r["response"], r["answers"]) for r in records], dtype=float)
    uq = BlackBoxUQ(scorers=SCORERS, show_progress_bars=not args.no_progress)
    started = time.perf_counter()
    data = uq.score(responses, samples, prompts=prompts).data
    scoring_s = time.perf_counter() - started
    confidences = {name: np.asarray(data[name], dtype=float) for name in SCORERS}
    # the earlier default: BERTScore's F1 with the idf weights alone
    plain = [BERTScoreConsistency(beta=1.0, zero_weight=None)]
    got = BlackBoxUQ(scorers=plain, show_progress_bars=False).score(responses, samples)
    confidences["bert_score as F1, idf weights alone"] = np.asarray(got.data["bert_score"], float)
    accurate = _accurate_preset(args.no_progress)
    if accurate is not None:
        got = accurate.score(responses, samples, prompts=prompts).data["bert_score"]
        confidences["bert_score, accurate preset"] = np.asarray(got, dtype=float)
    logprobs = [r["response_logprob"] for r in records]
    confidences["mean token log-prob (grey box)"] = np.array(logprobs, dtype=float)
    n = len(records)
    acc = correct.mean()
    rng = np.random.default_rng(args.seed)
    acc_lo, acc_hi = np.percentile(
        [correct[rng.integers(0, n, n)].mean() for _ in range(args.bootstrap)], [2.5, 97.5]
    )
    rows = []
    for name, values in confidences.items():
        keep = ~np.isnan(values)
        v, y = values[keep], correct[keep]
        a_lo, a_hi = _interval(v, y, auroc, args.bootstrap, args.seed)
        p_lo, p_hi = _interval(v, y, prr, args.bootstrap, args.seed)
        rows.append([name, f"{auroc(v, y):.3f}", f"{a_lo:.3f}-{a_hi:.3f}", f"{prr(v, y):.3f}",
                     f"{p_lo:.3f}-{p_hi:.3f}"])  # fmt: skip
    head = ["confidence", "AUROC", "95% interval", "PRR", "95% interval"]
    return "\n".join([
        f"{n} questions ({args.answers.name}), {len(samples[0])} samples each; answers right "
        f"{acc:.1%} (95% interval {acc_lo:.1%}-{acc_hi:.1%}); scored in {scoring_s:.1f} s",
        "", *harness.md_table(head, rows),
    ])  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = harness.parser(__doc__, "samples", "seed", "no-progress")
    ap.add_argument("step", nargs="?", choices=["all", "generate", "score"], default="all")
    ap.add_argument("--questions", type=Path, help="question/answers JSON Lines (default: shipped)")
    ap.add_argument("--answers", type=Path, default=harness.OUT / "real_llm_answers.jsonl")
    ap.add_argument("--limit", type=int, default=None, help="the first N questions only")
    ap.add_argument("--slots", type=int, default=12, help="the server's slots")
    ap.add_argument("--threads", type=int, default=None, help="the server's threads")
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--request-timeout", type=float, default=600.0)
    ap.add_argument("--bootstrap", type=int, default=1000)
    args = ap.parse_args(argv)
    if args.step in ("all", "generate"):
        asyncio.run(generate(args))
    if args.step in ("all", "score"):
        name = args.answers.stem.replace("answers", "scores") + ".md"
        harness.write_report(args.answers.parent, name, score(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
