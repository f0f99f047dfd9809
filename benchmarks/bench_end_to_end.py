"""End to end through a client and a server: does scoring hide behind generation, and keep up?

    python -m benchmarks.bench_end_to_end [--prompts 30] [--samples 5] [--rounds 5]
        [--latencies 0 1000] [--server process|thread]

``BlackBoxUQ`` objects at their defaults, warmed up, call the loopback server (WikiBio passages,
distinct texts per prompt, a fixed latency) through ``ChatOpenAI``. Each round, in turning order:
generation only (``generate_and_score`` with a scorer that does no work), scoring only
(``score`` with ``bert_score`` on the prompts and the texts the server hands out) and both
(``generate_and_score`` with ``bert_score``). Reported per latency, medians: the **overlap**, both
/ max(generation only, scoring only) in wall time (1.0: one hidden behind the other; 2.0: one
after the other), and **keeping up**, the scoring time inside ``generate_and_score``
(``metadata["timings"]["scoring_s"]``) over the same work's in ``score`` alone (at 0 ms, the
hardest case). The exit status says whether every run received its texts and both ways of
scoring agree; the goals are reported. Writes ``end_to_end.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import time
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from benchmarks import harness

OVERLAP_GOAL = 1.15
KEEPING_UP_GOAL = 1.1
GEN, SCORE, BOTH = "generation only", "scoring only", "both"


@contextlib.contextmanager
def batch_sizes() -> Iterator[list[int]]:
    """The size of each batch the scoring pipeline scores meanwhile, for the calls it serves."""
    from uqlm_bert.blackbox._pipeline import ScoringPipeline

    sizes: list[int] = []
    scored = ScoringPipeline.scored

    def recording(self: Any, rows: Any, result: Any, seconds: float, batch_size: int) -> None:
        sizes.append(batch_size)
        scored(self, rows, result, seconds, batch_size)

    ScoringPipeline.scored = recording  # type: ignore[method-assign]
    try:
        yield sizes
    finally:
        ScoringPipeline.scored = scored  # type: ignore[method-assign]


async def run_benchmark(prompt_map: dict[str, Any], args, log=print) -> list[dict[str, Any]]:
    """Every timed run: its latency, round, kind, wall time, timings, batches and confidences."""
    from uqlm_bert import BlackBoxUQ

    prompts = list(prompt_map)
    runs = []
    m = args.samples
    with harness.PassageServer(prompt_map, where=args.server) as server:
        common = {"system_prompt": harness.SYSTEM_PROMPT, "show_progress_bars": False}
        gen = BlackBoxUQ(harness.make_llm(server.base_url), [harness.no_work_scorer()], **common)
        both = BlackBoxUQ(harness.make_llm(server.base_url), ["bert_score"], **common)
        for uq in (gen, both):  # model, connections, allocator: not timed
            server.reset()
            warm = (await uq.generate_and_score(prompts, num_responses=m)).data
        texts = warm["responses"], warm["sampled_responses"]  # what every run receives
        both.score(*texts, prompts=prompts)
        for latency in args.latencies:
            server.set_latency(latency / 1000.0)
            for r, name in harness.rounds([GEN, SCORE, BOTH], args.rounds):
                server.reset()
                gc.collect()
                t0 = time.perf_counter()
                with batch_sizes() as sizes:
                    if name == SCORE:
                        result = both.score(*texts, prompts=prompts)
                    else:
                        uq = gen if name == GEN else both
                        result = await uq.generate_and_score(prompts, num_responses=m)
                wall = time.perf_counter() - t0
                d, t = result.data, result.metadata["timings"]
                bad = 0
                if name != SCORE:
                    bad = server.answers.mismatches(prompts, d["responses"], d["sampled_responses"])
                runs.append(
                    {"latency_ms": latency, "round": r, "run": name, "wall_s": wall,
                     "scoring_s": t["scoring_s"], "generation_s": t.get("generation_s"),
                     "tail_s": t.get("scoring_after_generation_s"), "batches": sizes,
                     "text_mismatches": bad, "scores": list(d.get("bert_score", []))}
                )  # fmt: skip
                log(f"{latency:6.0f} ms  round {r}  {name:16s} {wall:6.2f} s, batches {sizes}")
    return runs


def summarize(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per latency: medians over rounds, the two ratios, and the agreement checks."""
    rows = []
    for latency in sorted({r["latency_ms"] for r in runs}):
        mine = [r for r in runs if r["latency_ms"] == latency]
        of = {name: [r for r in mine if r["run"] == name] for name in (GEN, SCORE, BOTH)}
        wall = {name: harness.median(r["wall_s"] for r in group) for name, group in of.items()}
        inside = harness.median(r["scoring_s"] for r in of[BOTH])
        alone = harness.median(r["scoring_s"] for r in of[SCORE])
        direct = of[SCORE][0]["scores"]
        rows.append(
            {"latency_ms": latency, **{f"{k} s": v for k, v in wall.items()},
             "overlap": wall[BOTH] / max(wall[GEN], wall[SCORE]),
             "scoring inside s": inside, "score alone s": alone, "keeping up": inside / alone,
             "batches per run": harness.median(len(r["batches"]) for r in of[BOTH]),
             "generation s": harness.median(r["generation_s"] for r in of[BOTH]),
             "tail after generation s": harness.median(r["tail_s"] for r in of[BOTH]),
             "max abs diff": max(harness.max_abs_diff(r["scores"], direct) for r in of[BOTH]),
             "text_mismatches": sum(r["text_mismatches"] for r in mine)}
        )  # fmt: skip
    return rows


def checks(rows: Sequence[dict[str, Any]]) -> dict[str, bool]:
    tolerance = harness.REDUCED_TOLERANCE
    return {
        "every run received its prompts' texts": all(r["text_mismatches"] == 0 for r in rows),
        f"confidences of both ways agree within {tolerance:g}": all(
            r["max abs diff"] <= tolerance for r in rows
        ),
    }


def markdown(rows: Sequence[dict[str, Any]], verdicts: dict[str, bool], meta: dict) -> str:
    head = ["latency", GEN + " s", SCORE + " s", BOTH + " s", "overlap", "scoring inside s",
            "score alone s", "keeping up", "batches per run", "generation s",
            "tail after generation s", "max abs diff"]  # fmt: skip
    table = [
        [f"{r['latency_ms']:.0f} ms", *(f"{r[k]:.2f}" for k in head[1:4]),
         f"**{r['overlap']:.3f}** (goal <= {OVERLAP_GOAL})", *(f"{r[k]:.2f}" for k in head[5:7]),
         f"**{r['keeping up']:.3f}** (goal <= {KEEPING_UP_GOAL})", f"{r['batches per run']:g}",
         *(f"{r[k]:.2f}" for k in head[9:11]), f"{r['max abs diff']:.1e}"]
        for r in rows
    ]  # fmt: skip
    return "\n".join(
        [
            "## End to end: scoring beside generation (`bench_end_to_end`)",
            "",
            f"- {meta['prompts']} prompts x {meta['samples']} samples, WikiBio passages served "
            f"through `ChatOpenAI` (the server in {harness.describe_server(meta['server'])}); "
            f"{meta['rounds']} rounds, the order turning, medians",
            f"- {meta['machine']}",
            f"- {meta['load']}",
            "",
            *harness.md_table(head, table),
            "",
            *(f"- {k}: {'yes' if v else 'NO'}" for k, v in verdicts.items()),
        ]
    )


def options(argv: Sequence[str] | None = None) -> argparse.Namespace:
    shared = ("prompts", "samples", "rounds", "latencies", "server", "data", "out")
    return harness.parser(__doc__, *shared).parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = options(argv)
    warnings.simplefilter("ignore")
    if not harness.have_data(args.data):
        return 0
    prompt_map = harness.make_prompts(harness.load_passages(args.data), args.prompts)
    before = os.getloadavg()[0]
    runs = asyncio.run(run_benchmark(prompt_map, args))
    rows = summarize(runs)
    verdicts = checks(rows)
    meta = {**vars(args), "machine": harness.machine_summary(), "load": harness.load_line(before)}
    payload = {"meta": meta, "rows": rows, "checks": verdicts, "runs": runs}
    harness.write_report(args.out, "end_to_end.md", markdown(rows, verdicts, meta), payload)
    return 0 if all(verdicts.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
