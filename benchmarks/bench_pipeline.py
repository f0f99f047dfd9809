"""Does scoring keep up while generation runs? Scoring time inside ``generate_and_score`` against
``BlackBoxUQ.score`` on the same lists.

    python benchmarks/bench_pipeline.py [--rounds 5] [--prompts 30] [--samples 5]
        [--latency-ms 0] [--server process|thread] [--out benchmarks/out]

``generate_and_score`` scores prompts in a worker thread while the event loop keeps the LLM calls
going; ``result.metadata["timings"]["scoring_s"]`` is the time that thread spent scoring. Scoring
the same answers and samples with ``uq.score()`` afterwards, with nothing else running, gives the
time the same work takes alone. Their ratio is what running alongside generation costs: smaller
batches while prompts trickle in, the event loop's thread competing for the CPU and for the GIL.

Setup: the WikiBio GPT-3 passages of the shared data folder beside the repository (30 passages;
``--prompts`` cycles over them with distinct prompt texts), served by the scripted
OpenAI-compatible server on 127.0.0.1 (``tests/openai_server.py``) through
``langchain_openai.ChatOpenAI`` at a fixed latency (0 ms by default: generation is as fast as the
client can go, the hardest case for overlap). The server runs in a process of its own
(``--server process``, the default; ``benchmarks/loopback.py``) or in a thread of this one
(``--server thread``, as the tables of 2026-11-25 and before). One ``BlackBoxUQ`` at its
defaults, warmed up (model loaded, connections opened) before timing; rounds alternate which of
the two runs first.
Reported: medians over rounds of both scoring times and their ratio, the pipeline's batch sizes,
and the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
# bench_vs_uqlm sets the offline environment and puts tests/ on the path as it is imported
from bench_vs_uqlm import (  # noqa: E402
    SYSTEM_PROMPT,
    load_passages,
    make_llm,
    make_prompts,
    round_order,
)
from common import WIKIBIO, machine_summary  # noqa: E402
from loopback import PassageServer, add_server_option, describe  # noqa: E402

TARGET = 1.1


class BatchRecorder:
    """Records every batch the scoring pipeline scores, by wrapping its method: the batch's size,
    and when it started and ended (``time.perf_counter``)."""

    def __init__(self) -> None:
        self.sizes: list[int] = []
        self.spans: list[tuple[float, float]] = []

    def __enter__(self) -> BatchRecorder:
        from uqlm_bert.blackbox._pipeline import ScoringPipeline

        self._cls = ScoringPipeline
        self._orig = ScoringPipeline._score
        recorder = self

        def recording(pipeline: Any, scorers: Any, indices: list[int], *args: Any) -> None:
            started = time.perf_counter()
            try:
                return recorder._orig(pipeline, scorers, indices, *args)
            finally:
                recorder.sizes.append(len(indices))
                recorder.spans.append((started, time.perf_counter()))

        ScoringPipeline._score = recording  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        self._cls._score = self._orig  # type: ignore[method-assign]


async def pipeline_run(
    uq: Any, server: PassageServer, prompts: list[str], m: int
) -> dict[str, Any]:
    """One ``generate_and_score``: its timings, batch sizes and lists."""
    server.reset()
    gc.collect()
    with BatchRecorder() as rec:
        t0 = time.perf_counter()
        result = await uq.generate_and_score(prompts, num_responses=m, show_progress_bars=False)
    t = result.metadata["timings"]
    generated = t0 + t["generation_s"]
    # scoring time that overlapped generation, and that came after it
    during = sum(max(0.0, min(b, generated) - a) for a, b in rec.spans)
    return {
        "scoring_during_generation_s": during,
        "spans": [(round(a - t0, 3), round(b - t0, 3)) for a, b in rec.spans],
        "scoring_s": t["scoring_s"],
        "generation_s": t["generation_s"],
        "tail_s": t["scoring_after_generation_s"],
        "total_s": t["total_s"],
        "batches": rec.sizes,
        "responses": result.data["responses"],
        "samples": result.data["sampled_responses"],
        "scores": result.data["bert_score"],
    }


def direct_run(uq: Any, responses: list[Any], samples: list[Any]) -> dict[str, Any]:
    """``uq.score`` on the same lists, alone."""
    gc.collect()
    result = uq.score(responses, samples, show_progress_bars=False)
    return {
        "scoring_s": result.metadata["timings"]["scoring_s"],
        "scores": result.data["bert_score"],
    }


async def run_benchmark(
    prompt_map: dict[str, Any],
    m: int,
    rounds: int,
    latency_ms: float,
    log: Any = print,
    server_in: str = "process",
) -> list[dict[str, Any]]:
    from uqlm_bert import BlackBoxUQ

    prompts = list(prompt_map)
    rows = []
    with PassageServer(prompt_map, where=server_in) as server:
        server.set_latency(latency_ms / 1000.0)
        uq = BlackBoxUQ(
            make_llm(server.base_url),
            scorers=["bert_score"],
            system_prompt=SYSTEM_PROMPT,
            show_progress_bars=False,
        )
        warm = await pipeline_run(uq, server, prompts, m)  # model, connections, allocator
        direct_run(uq, warm["responses"], warm["samples"])
        for r in range(rounds):
            got: dict[str, dict[str, Any]] = {}
            for which in round_order(("pipeline", "direct"), r):
                if which == "pipeline":
                    got["pipeline"] = await pipeline_run(uq, server, prompts, m)
                else:  # the same lists the pipeline scores (the server hands out the same texts)
                    got["direct"] = direct_run(uq, warm["responses"], warm["samples"])
            p, d = got["pipeline"], got["direct"]
            diff = max(abs(a - b) for a, b in zip(p["scores"], warm_scores(warm), strict=True))
            row = {
                "round": r,
                "pipeline_scoring_s": p["scoring_s"],
                "direct_scoring_s": d["scoring_s"],
                "ratio": p["scoring_s"] / d["scoring_s"],
                "generation_s": p["generation_s"],
                "tail_s": p["tail_s"],
                "total_s": p["total_s"],
                "batches": p["batches"],
                "spans": p["spans"],
                "scoring_during_generation_s": p["scoring_during_generation_s"],
                "max_abs_diff": diff,
            }
            rows.append(row)
            log(
                f"round {r}: pipeline scoring {p['scoring_s']:.2f} s "
                f"({p['scoring_during_generation_s']:.2f} s during generation) in "
                f"{len(p['batches'])} batches {p['batches']} {p['spans']}, direct "
                f"{d['scoring_s']:.2f} s, "
                f"ratio {row['ratio']:.3f}; generation {p['generation_s']:.2f} s, "
                f"total {p['total_s']:.2f} s"
            )
    return rows


def warm_scores(warm: dict[str, Any]) -> list[float]:
    return list(warm["scores"])


def summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    med = statistics.median
    pipe = med(r["pipeline_scoring_s"] for r in rows)
    direct = med(r["direct_scoring_s"] for r in rows)
    return {
        "pipeline_scoring_s": pipe,
        "direct_scoring_s": direct,
        "ratio_of_medians": pipe / direct,
        "median_ratio": med(r["ratio"] for r in rows),
        "total_s": med(r["total_s"] for r in rows),
        "generation_s": med(r["generation_s"] for r in rows),
        "tail_s": med(r["tail_s"] for r in rows),
        "batches_per_run": med(len(r["batches"]) for r in rows),
        "max_abs_diff": max(r["max_abs_diff"] for r in rows),
    }


def markdown(s: dict[str, Any], meta: dict[str, Any]) -> str:
    before, after = meta["load_average_1min"]
    return "\n".join(
        [
            "## Scoring alongside generation (`bench_pipeline.py`)",
            "",
            f"- {meta['prompts']} prompts x {meta['samples']} samples, WikiBio GPT-3 passages served "
            f"at {meta['latency_ms']:.0f} ms through `ChatOpenAI` (the server in "
            f"{describe(meta.get('server'))}); "
            f"{meta['rounds']} rounds, "
            "order alternating, medians",
            f"- {meta['machine']}",
            f"- load average (1 min) before and after: {before:.2f}, {after:.2f}",
            "",
            "| scoring inside generate_and_score s | uq.score s | ratio | batches per run "
            "| generation s | tail after generation s |",
            "|---|---|---|---|---|---|",
            f"| {s['pipeline_scoring_s']:.2f} | {s['direct_scoring_s']:.2f} "
            f"| {s['ratio_of_medians']:.3f} (target <= {TARGET}) | {s['batches_per_run']:.0f} "
            f"| {s['generation_s']:.2f} | {s['tail_s']:.2f} |",
            "",
            f"- confidences: max abs difference between runs {s['max_abs_diff']:.1e}",
            "",
        ]
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, default=30, help="prompts per run (default 30)")
    ap.add_argument("--samples", type=int, default=5, help="num_responses (default 5)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds, order alternating (default 5)")
    ap.add_argument("--latency-ms", type=float, default=0.0, help="server latency (default 0)")
    add_server_option(ap)
    ap.add_argument("--data", type=Path, default=WIKIBIO, help="WikiBio passages (JSONL)")
    ap.add_argument(
        "--out",
        type=Path,
        default=BENCH / "out",
        help="folder for pipeline.md and pipeline.json (default benchmarks/out)",
    )
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    warnings.simplefilter("ignore")
    if not args.data.is_file():
        print(
            f"WikiBio passages not found ({args.data.name} in the shared data folder beside "
            "the repository): nothing to benchmark, the server answers with them."
        )
        return 0
    prompt_map = make_prompts(load_passages(args.data), args.prompts)
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    rows = asyncio.run(
        run_benchmark(prompt_map, args.samples, args.rounds, args.latency_ms, server_in=args.server)
    )
    s = summary(rows)
    meta = {
        "prompts": args.prompts,
        "samples": args.samples,
        "rounds": args.rounds,
        "latency_ms": args.latency_ms,
        "server": args.server,
        "machine": machine_summary(),
        "load_average_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "seconds": round(time.monotonic() - started, 1),
    }
    report = markdown(s, meta)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "pipeline.md").write_text(report, encoding="utf-8")
    (args.out / "pipeline.json").write_text(
        json.dumps({"meta": meta, "summary": s, "rounds": rows}, indent=1), encoding="utf-8"
    )
    print()
    print(report)
    return 0 if s["ratio_of_medians"] <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
