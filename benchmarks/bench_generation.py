"""Generation at the defaults against its floor: does the work on the client's event loop stay
small beside the provider's latency, with the default scorer scoring beside it as users run it?

    python -m benchmarks.bench_generation [--prompts 119] [--rounds 3] [--latencies 1000 0]

``BlackBoxUQ(llm).generate_and_score(prompts, num_responses=5)`` through ``ChatOpenAI`` to the
loopback server (own process), distinct WikiBio texts, nothing learned about the server
beforehand: at its defaults (the ``bert_score`` scorer, samples asked for with ``n``, sampling
until settled); with ``sampling="fixed"`` (every sample at once: the calls of uqlm's fixed m);
fixed with ``use_n_param=False`` (one call per sample); the last two with a scorer that does no
work (generation alone: what the calls cost the client); and generation alone against a server
that ignores ``n``. Per latency, in turning order, medians (min-max) of
``metadata["timings"]["generation_s"]`` and of the event loop's thread CPU time over the call.

The floor of a run at latency L is its own generation at 0 ms plus L for each round of samples
it drew: every call of a round goes out at once (no limit binds), so a round trip per round is
all the latency adds (one with fixed sampling; sampling until settled waits for a round's scores
before the next, which the 0 ms run holds too). The goal: at defaults and with fixed sampling,
generation within 1.15x of its floor. Writes ``generation.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import time
import warnings
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from benchmarks import harness

DEFAULTS = "defaults (until settled, samples with n)"
FIXED = "fixed sampling, samples with n"
NO_N = "fixed sampling, one call per sample"
ALONE = "generation alone, samples with n"
ALONE_NO_N = "generation alone, one call per sample"
IGNORED = "generation alone, a server that ignores n"
#: The variants, and the goal of those with a goal: generation / floor at most this.
GOALS = {DEFAULTS: 1.15, FIXED: 1.15, NO_N: None, ALONE: None, ALONE_NO_N: None, IGNORED: None}


@dataclass
class Run:
    """One timed ``generate_and_score`` call."""

    latency_ms: float
    round: int
    variant: str
    generation_s: float
    wall_s: float
    loop_cpu_s: float  # the event loop's thread, over the call
    calls: int
    text_mismatches: int
    rounds: int  # the most rounds of samples a prompt drew


def variants(llm: Any) -> dict[str, Any]:
    """Each variant's ``BlackBoxUQ`` on ``llm``."""
    from uqlm_bert import BlackBoxUQ, GenerationSettings

    def make(scorers: Any = None, **settings: Any) -> Any:
        generation = GenerationSettings(system_prompt=harness.SYSTEM_PROMPT, **settings)
        return BlackBoxUQ(llm, scorers, generation=generation, show_progress_bars=False)

    alone = [harness.no_work_scorer()]
    return {
        DEFAULTS: make(),
        FIXED: make(sampling="fixed"),
        NO_N: make(sampling="fixed", use_n_param=False),
        ALONE: make(alone, sampling="fixed"),
        ALONE_NO_N: make(alone, sampling="fixed", use_n_param=False),
        IGNORED: make(alone, sampling="fixed"),
    }


async def timed_run(server: harness.PassageServer, uq: Any, prompts: list[str], m: int) -> dict:
    """One call from a fresh start: its timings, the loop's CPU, calls and text mismatches."""
    from uqlm_bert.generation import forget_learned_limits

    server.reset()
    forget_learned_limits()
    gc.collect()
    cpu, t0 = time.thread_time(), time.perf_counter()  # this coroutine runs on the loop's thread
    result = await uq.generate_and_score(prompts, num_responses=m)
    wall, cpu = time.perf_counter() - t0, time.thread_time() - cpu
    from uqlm_bert.generation._rounds import round_ends

    d = result.data
    bad = server.answers.mismatches(prompts, list(d["responses"]), list(d["sampled_responses"]))
    ends = round_ends(m) if result.metadata["sampling"]["rule"] != "fixed" else [m]
    rounds = max(ends.index(len(s)) + 1 for s in d["sampled_responses"])
    return {"generation_s": result.metadata["timings"]["generation_s"], "wall_s": wall,
            "loop_cpu_s": cpu, "calls": len(server.log().arrivals), "text_mismatches": bad,
            "rounds": rounds}  # fmt: skip


async def run_benchmark(passages: Sequence[harness.Passage], args, log=print) -> list[Run]:
    """Every timed run (``args``: :func:`options`), each variant warmed up first."""
    prompt_map = harness.make_prompts(passages, args.prompts)
    prompts = list(prompt_map)
    runs = []
    with harness.PassageServer(prompt_map, where=args.server) as server:
        uqs = variants(harness.make_llm(server.base_url))
        for name, uq in uqs.items():  # load the model, open connections: not timed
            server.ignore_n(name == IGNORED)
            await timed_run(server, uq, prompts[:4], args.samples)
        for latency in args.latencies:
            server.set_latency(latency / 1000.0)
            for r, name in harness.rounds(list(uqs), args.rounds):
                server.ignore_n(name == IGNORED)
                got = await timed_run(server, uqs[name], prompts, args.samples)
                runs.append(Run(latency, r, name, **got))
                log(f"{latency:6.0f} ms  round {r}  {name:44s} generation "
                    f"{got['generation_s']:.2f} s, loop CPU {got['loop_cpu_s']:.2f} s, "
                    f"{got['calls']} calls")  # fmt: skip
        for uq in uqs.values():
            uq.close()
    return runs


def summarize(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """One row per (latency, variant): medians and ranges, and against the floor."""
    by_key: dict[tuple[float, str], list[Run]] = defaultdict(list)
    for run in runs:
        by_key[(run.latency_ms, run.variant)].append(run)

    def spread(group: list[Run], key: str) -> list[float]:
        return harness.spread(getattr(g, key) for g in group)

    rows = []
    for (latency, variant), group in by_key.items():
        zero = by_key.get((0.0, variant))
        rounds = max(g.rounds for g in group)
        floor = None
        if zero:
            floor = harness.median(g.generation_s for g in zero) + rounds * latency / 1000.0
        generation = spread(group, "generation_s")
        rows.append({"latency_ms": latency, "variant": variant, "runs": len(group),
                     "generation_s": generation, "loop_cpu_s": spread(group, "loop_cpu_s"),
                     "wall_s": spread(group, "wall_s"), "floor_s": floor,
                     "of_floor": generation[0] / floor if floor and latency else None,
                     "goal": GOALS[variant] if latency else None, "rounds": rounds,
                     "calls": sorted({g.calls for g in group}),
                     "text_mismatches": sum(g.text_mismatches for g in group)})  # fmt: skip
    return rows


def checks(rows: Sequence[dict[str, Any]]) -> dict[str, bool]:
    goals = [r for r in rows if r["goal"] is not None and r["of_floor"] is not None]
    return {
        "every prompt received its own texts": all(r["text_mismatches"] == 0 for r in rows),
        "generation at defaults within its goal of the floor": all(
            r["of_floor"] <= r["goal"] for r in goals
        ),
    }


def markdown(rows: Sequence[dict], verdicts: dict[str, bool], meta: dict[str, Any]) -> str:
    spread = harness.shown_spread

    def against(r: dict) -> str:
        if r["of_floor"] is None:
            return ""
        text = f"{r['floor_s']:.2f} s ({r['rounds']}): {r['of_floor']:.3f}x"
        if r["goal"] is not None:
            text = f"**{text}** ({'met' if r['of_floor'] <= r['goal'] else 'NOT met'}: "
            text += f"<= {r['goal']})"
        return text

    head = ["latency", "run", "generation s", "loop CPU s", "floor, and generation / floor",
            "calls", "texts"]  # fmt: skip
    table = [
        [f"{r['latency_ms']:,.0f} ms", r["variant"], spread(r["generation_s"]),
         spread(r["loop_cpu_s"]), against(r), "/".join(map(str, r["calls"])),
         "as expected" if r["text_mismatches"] == 0 else f"{r['text_mismatches']} off"]
        for r in rows
    ]  # fmt: skip
    return "\n".join([
        "## Generation at the defaults against its floor (`bench_generation`)", "",
        f"- {meta['prompts']} prompts x {meta['samples']} samples of distinct WikiBio texts "
        f"through `ChatOpenAI`, the server in {harness.describe_server(meta['server'])}; "
        f"{meta['rounds']} round(s) per latency, the order turning; medians (min-max); the "
        "floor: the variant's generation at 0 ms plus the latency for each round of samples "
        "(the rounds drawn in brackets)",
        f"- {meta['machine']}", f"- {meta['load']}", "",
        *harness.md_table(head, table), "",
        *(f"- {k}: {'yes' if v else 'NO'}" for k, v in verdicts.items()),
    ])  # fmt: skip


def options(argv: Sequence[str] | None = None) -> argparse.Namespace:
    shared = ("prompts", "samples", "rounds", "latencies", "server", "data", "out")
    ap = harness.parser(__doc__, *shared)
    ap.set_defaults(prompts=119, rounds=3)
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = options(argv)
    warnings.simplefilter("ignore")
    if not harness.have_data(args.data):
        return 0
    before = os.getloadavg()[0]
    runs = asyncio.run(run_benchmark(harness.load_passages(args.data), args))
    rows = summarize(runs)
    verdicts = checks(rows)
    meta = {**vars(args), "machine": harness.machine_summary(), "load": harness.load_line(before)}
    payload = {"meta": meta, "rows": rows, "checks": verdicts, "runs": [asdict(r) for r in runs]}
    harness.write_report(args.out, "generation.md", markdown(rows, verdicts, meta), payload)
    return 0 if all(verdicts.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
