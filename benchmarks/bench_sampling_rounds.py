"""Sampling until settled against fixed sampling, end to end: wall time and calls.

    python -m benchmarks.bench_sampling_rounds [--prompts 60] [--rounds 3] [--rate 40]

``BlackBoxUQ(llm).generate_and_score(prompts, num_responses=5)`` at its defaults through
``ChatOpenAI`` to the loopback server (own process) answering after 1 s, WikiBio passages (each
prompt's samples served in a fixed order), nothing learned about the server beforehand:
``sampling="until_settled"`` (the default) against ``sampling="fixed"``, with the samples asked
for with ``n`` and one call per sample (a provider without ``n``), each with no limit and under a
binding ``max_calls_per_min`` (``--rate`` calls a second: ``rate_limit_period=1``). Per variant,
in turning order, medians (min-max) of the wall time, and the calls and samples drawn; the ratio
of each until-settled variant's wall time to its fixed twin's. Goals: no limit, at most 2.0x
fixed (a prompt's rounds cost round trips); binding limit, at most 0.8x fixed (fewer calls).

The samples each prompt drew are checked against the rule applied to the pair scores of the
samples it was served, in order (what ``eval_sampling_rounds`` simulates): the share of prompts
where they agree. Writes ``sampling_rounds_wall.md``.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import time
import warnings
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from benchmarks import harness

#: The variants: (sampling, use_n_param, binding limit).
VARIANTS = {
    f"{sampling}, {ask}, {limit}": (sampling, use_n, bound)
    for ask, use_n in (("samples with n", "auto"), ("one call per sample", False))
    for limit, bound in (("no limit", False), ("binding limit", True))
    for sampling in ("fixed", "until_settled")
}
GOALS = {False: 2.0, True: 0.8}  # until settled / fixed, by whether a limit binds


def make(llm: Any, sampling: str, use_n: Any, bound: bool, rate: int) -> Any:
    from uqlm_bert import BlackBoxUQ, GenerationSettings

    limit = {"max_calls_per_min": rate, "rate_limit_period": 1.0} if bound else {}
    settings = GenerationSettings(
        system_prompt=harness.SYSTEM_PROMPT, use_n_param=use_n, sampling=sampling, **limit
    )
    return BlackBoxUQ(llm=llm, generation=settings, show_progress_bars=False)


async def timed(server: harness.PassageServer, uq: Any, prompts: list[str], m: int) -> dict:
    from uqlm_bert.generation import forget_learned_limits

    server.reset()
    forget_learned_limits()
    gc.collect()
    t0 = time.perf_counter()
    result = await uq.generate_and_score(prompts, num_responses=m)
    wall = time.perf_counter() - t0
    d, sampling = result.data, result.metadata["sampling"]
    bad = server.answers.mismatches(prompts, list(d["responses"]), list(d["sampled_responses"]))
    return {"wall_s": wall, "calls": len(server.log().arrivals), "result_calls": sampling["calls"],
            "samples": sampling["samples_drawn"], "mismatches": bad,
            "drawn": [len(s) for s in d["sampled_responses"]]}  # fmt: skip


def simulated_drawn(prompt_map: dict[str, harness.Passage], m: int) -> list[int]:
    """The samples each prompt draws by the rule, its samples arriving in the server's order."""
    from benchmarks.eval_sampling_rounds import LIBRARY_RULE, pair_scores, until_settled

    passages = list(prompt_map.values())
    served = [harness.PassageAnswers.served(p, m) for p in passages]
    scores = pair_scores([p.response for p in passages], served, list(prompt_map))
    return until_settled(scores, m, LIBRARY_RULE)[1].tolist()


async def run_benchmark(passages: Sequence[harness.Passage], args, log=print) -> list[dict]:
    prompt_map = harness.make_prompts(passages, args.prompts)
    prompts = list(prompt_map)
    runs = []
    with harness.PassageServer(prompt_map, where=args.server) as server:
        llm = harness.make_llm(server.base_url)
        uqs = {name: make(llm, *v, args.rate) for name, v in VARIANTS.items()}
        for uq in uqs.values():  # the model loaded, connections open: not timed
            await timed(server, uq, prompts[:4], args.samples)
        server.set_latency(args.latency / 1000.0)
        for r, name in harness.rounds(list(uqs), args.rounds):
            got = await timed(server, uqs[name], prompts, args.samples)
            runs.append({"variant": name, "round": r, **got})
            log(f"round {r}  {name:52s} {got['wall_s']:6.2f} s, {got['calls']} calls, "
                f"{got['samples']} samples")  # fmt: skip
        for uq in uqs.values():
            uq.close()
    return runs


def summarize(runs: Sequence[dict], simulated: list[int]) -> list[dict]:
    by: dict[str, list[dict]] = defaultdict(list)
    for run in runs:
        by[run["variant"]].append(run)
    rows = []
    for name, group in by.items():
        sampling, use_n, bound = VARIANTS[name]
        walls = [g["wall_s"] for g in group]
        twin = name.replace("until_settled", "fixed")
        row = {"variant": name, "sampling": sampling, "bound": bound,
               "wall_s": harness.spread(walls),
               "calls": sorted({g["calls"] for g in group}),
               "samples": sorted({g["samples"] for g in group}),
               "counted_as_the_result_says": all(g["calls"] == g["result_calls"] for g in group),
               "mismatches": sum(g["mismatches"] for g in group)}  # fmt: skip
        if sampling == "until_settled":
            fixed = harness.median(g["wall_s"] for g in by[twin])
            row["of_fixed"] = row["wall_s"][0] / fixed
            row["goal"] = GOALS[bound]
            agree = [np.mean(np.array(g["drawn"]) == np.array(simulated)) for g in group]
            row["drawn_as_simulated"] = float(np.mean(agree))
        rows.append(row)
    return rows


def markdown(rows: Sequence[dict], meta: dict) -> str:
    spread = harness.shown_spread

    head = ["run", "wall s", "calls", "samples drawn", "until settled / fixed",
            "drawn as simulated", "texts"]  # fmt: skip
    table = []
    for r in rows:
        ratio = ""
        if "of_fixed" in r:
            met = "met" if r["of_fixed"] <= r["goal"] else "NOT met"
            ratio = f"**{r['of_fixed']:.3f}** ({met}: <= {r['goal']})"
        sim = f"{r['drawn_as_simulated']:.1%}" if "drawn_as_simulated" in r else ""
        texts = "as expected" if r["mismatches"] == 0 else f"{r['mismatches']} off"
        table.append([r["variant"], spread(r["wall_s"]), "/".join(map(str, r["calls"])),
                      "/".join(map(str, r["samples"])), ratio, sim, texts])  # fmt: skip
    return "\n".join([
        "## Sampling until settled, end to end (`bench_sampling_rounds`)", "",
        f"- {meta['prompts']} WikiBio prompts x {meta['samples']} samples through `ChatOpenAI`, "
        f"the server in {harness.describe_server(meta['server'])} answering after "
        f"{meta['latency']:g} ms; binding limit: {meta['rate']} calls a second; "
        f"{meta['rounds']} rounds, the order turning; medians (min-max)",
        f"- {meta['machine']}", f"- {meta['load']}", "", *harness.md_table(head, table),
    ])  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    ap = harness.parser(__doc__, "prompts", "samples", "rounds", "server", "data", "out")
    ap.add_argument("--latency", type=float, default=1000.0, help="the server's ms (1000)")
    ap.add_argument("--rate", type=int, default=40, help="the binding limit's calls a second")
    ap.set_defaults(prompts=60, rounds=3)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    if not harness.have_data(args.data):
        return 0
    before = os.getloadavg()[0]
    passages = harness.load_passages(args.data)
    runs = asyncio.run(run_benchmark(passages, args))
    simulated = simulated_drawn(harness.make_prompts(passages, args.prompts), args.samples)
    rows = summarize(runs, simulated)
    meta = {**vars(args), "machine": harness.machine_summary(), "load": harness.load_line(before)}
    harness.write_report(args.out, "sampling_rounds_wall.md", markdown(rows, meta),
                         {"meta": meta, "rows": rows, "runs": runs})  # fmt: skip
    ok = all(r["mismatches"] == 0 and r["counted_as_the_result_says"] for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
