"""End to end through a client and a server: does scoring hide behind generation and keep up
with it, and does an async app's burst of one-prompt calls cost what one call costs?

    python -m benchmarks.bench_end_to_end [--rate 5] [--duration 20] [--device cpu|cuda]

``BlackBoxUQ`` objects at their defaults but fixed sampling (every prompt's samples at once;
sampling until settled: ``bench_sampling_rounds``) call the loopback server through ``ChatOpenAI``. Each
round, in turning order, nothing learned about the server: generation only (a scorer that does
no work), scoring only (``score`` on the texts served), one ``generate_and_score`` call of all the
prompts, and a burst of them as one-prompt calls (an app's requests); then a stream of one-prompt
calls at ``--rate`` per second for ``--duration`` s. Per latency, medians: the overlap, one call /
max(generation only, scoring only); keeping up, the scoring time inside the one call / scoring
alone's; the burst / the one call; the stream's latency and throughput. The exit status says
whether every request received its texts and the confidences agree. Writes ``end_to_end.md``.
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
from unittest import mock

from benchmarks import harness
from uqlm_bert import BlackBoxUQ
from uqlm_bert._blackbox._pipeline import ScoringPipeline
from uqlm_bert.generation import forget_learned_limits

GEN, SCORE, ONE, BURST = "generation only", "scoring only", "one call", "burst"
GOALS = {"overlap": 1.15, "keeping up": 1.1, "burst / one call": 1.15, "stream p95 s": 1.5}
pct = harness.percentile


@contextlib.contextmanager
def batch_sizes() -> Iterator[list[int]]:
    """The size of each batch the scoring pipeline scores meanwhile, for the calls it serves."""
    sizes: list[int] = []
    scored = ScoringPipeline.scored

    def recording(self: Any, rows: Any, result: Any, seconds: float, batch_size: int) -> None:
        sizes.append(batch_size)
        scored(self, rows, result, seconds, batch_size)

    with mock.patch.object(ScoringPipeline, "scored", recording):
        yield sizes


async def requests(uq: Any, prompts: list[str], m: int, starts: Sequence[float]) -> list[tuple]:
    """One-prompt calls, the i-th at ``starts[i]`` s: ``(latency, response, samples, score, end)``."""
    t0 = time.monotonic()

    async def request(prompt: str, start: float) -> tuple:
        await asyncio.sleep(max(0.0, start - (time.monotonic() - t0)))
        d = (await uq.generate_and_score([prompt], num_responses=m)).data
        end = time.monotonic() - t0
        return end - start, d["responses"][0], d["sampled_responses"][0], d["bert_score"][0], end

    return await asyncio.gather(*(request(p, s) for p, s in zip(prompts, starts, strict=True)))


async def timed_run(name: str, uqs: dict, prompts: list[str], texts: tuple, m: int) -> dict:
    """One run: its wall time, per-request seconds, timings, batches, texts and confidences."""
    t0 = time.perf_counter()
    run: dict[str, Any] = {"run": name, "scoring_s": None, "generation_s": None, "tail_s": None}
    with batch_sizes() as run["batches"]:
        if name == BURST:
            got = await requests(uqs[BURST], prompts, m, [0.0] * len(prompts))
            run["request_s"], responses, samples, scores, _ = map(list, zip(*got, strict=True))
        else:
            if name == SCORE:
                result = uqs[ONE].score(*texts, prompts=prompts)
            else:
                result = await uqs[name].generate_and_score(prompts, num_responses=m)
            d, t = result.data, result.metadata["timings"]
            responses, samples = d.get("responses", texts[0]), d.get("sampled_responses", texts[1])
            scores = list(d.get("bert_score", []))
            run |= {"scoring_s": t["scoring_s"], "generation_s": t.get("generation_s"),
                    "tail_s": t.get("scoring_after_generation_s")}  # fmt: skip
    run["wall_s"] = time.perf_counter() - t0
    run.setdefault("request_s", [run["wall_s"]])
    return run | {"responses": responses, "samples": samples, "scores": scores}


async def run_benchmark(passages: Sequence[Any], args, log=print) -> tuple[list, list]:
    """Every timed run and every stream, as dicts (``args``: :func:`options`)."""
    m, n_stream = args.samples, round(args.rate * args.duration)
    prompt_map = harness.make_prompts(passages, max(args.prompts, n_stream))
    prompts = list(prompt_map)[: args.prompts]
    with harness.PassageServer(prompt_map, where=args.server) as server:

        def make(*scorer: Any, **device: Any) -> Any:
            common = {"generation": harness.fixed_sampling(), "show_progress_bars": False}
            return BlackBoxUQ(harness.make_llm(server.base_url), list(scorer), **common, **device)

        uqs = {GEN: make(harness.no_work_scorer())}
        uqs |= {name: make("bert_score", device=args.device) for name in (ONE, BURST)}
        await requests(uqs[BURST], prompts[:4], m, [0.0] * len(prompts[:4]))  # not timed
        for uq in (uqs[GEN], uqs[ONE]):
            server.reset()
            warm = (await uq.generate_and_score(prompts, num_responses=m)).data
        texts = warm["responses"], warm["sampled_responses"]  # what every run receives
        uqs[ONE].score(*texts, prompts=prompts)
        runs, streams = [], []
        for latency in args.latencies:
            server.set_latency(latency / 1000.0)
            for r, name in harness.rounds([GEN, SCORE, ONE, BURST], args.rounds):
                server.reset()
                forget_learned_limits()
                gc.collect()
                run = await timed_run(name, uqs, prompts, texts, m)
                got = run.pop("responses"), run.pop("samples")
                bad = 0 if name == SCORE else server.answers.mismatches(prompts, *got)
                calls = len(server.log().arrivals)
                runs.append(run | {"latency_ms": latency, "round": r, "calls": calls,
                                   "text_mismatches": bad})  # fmt: skip
                log(f"{latency:6.0f} ms  round {r}  {name:16s} {run['wall_s']:6.2f} s, {bad} off")
            if n_stream:
                server.reset()
                forget_learned_limits()
                stream = list(prompt_map)[:n_stream]
                starts = [i / args.rate for i in range(n_stream)]
                got = await requests(uqs[BURST], stream, m, starts)
                lat, responses, samples, _, ends = map(list, zip(*got, strict=True))
                bad = server.answers.mismatches(stream, responses, samples)
                streams.append({"latency_ms": latency, "requests": n_stream, "request_s": lat,
                                "span_s": max(ends), "calls": len(server.log().arrivals),
                                "text_mismatches": bad})  # fmt: skip
                log(f"{latency:6.0f} ms  stream: p95 {pct(lat, 95):.2f} s, {bad} off")
        for uq in uqs.values():
            uq.close()
    return runs, streams


def summarize(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per latency: medians over rounds, the ratios, and the agreement checks."""
    rows = []
    for latency in sorted({r["latency_ms"] for r in runs}):
        mine = [r for r in runs if r["latency_ms"] == latency]
        of = {n: [r for r in mine if r["run"] == n] for n in (GEN, SCORE, ONE, BURST)}

        def med(name: str, key: Any, of: dict = of) -> float:
            return harness.median(key(r) if callable(key) else r[key] for r in of[name])

        def diff(name: str, base: str, of: dict = of) -> float:
            by_round = {r["round"]: r["scores"] for r in of[base]}
            return max(harness.max_abs_diff(r["scores"], by_round[r["round"]]) for r in of[name])

        wall = {name: med(name, "wall_s") for name in of}
        rows.append(
            {"latency_ms": latency, **{f"{n} s": w for n, w in wall.items()},
             "overlap": wall[ONE] / max(wall[GEN], wall[SCORE]),
             "keeping up": med(ONE, "scoring_s") / med(SCORE, "scoring_s"),
             "scoring inside s": med(ONE, "scoring_s"), "scoring alone s": med(SCORE, "scoring_s"),
             "burst / one call": wall[BURST] / wall[ONE],
             "request p50 s": med(BURST, lambda r: pct(r["request_s"], 50)),
             "request p95 s": med(BURST, lambda r: pct(r["request_s"], 95)),
             "batches per run": med(ONE, lambda r: len(r["batches"])),
             "generation s": med(ONE, "generation_s"), "tail after generation s": med(ONE, "tail_s"),
             "calls": sorted({r["calls"] for r in of[ONE] + of[BURST]}),
             "max abs diff, one call vs scoring alone": diff(ONE, SCORE),
             "max abs diff, burst vs one call": diff(BURST, ONE),
             "text_mismatches": sum(r["text_mismatches"] for r in mine)}
        )  # fmt: skip
    return rows


def checks(rows: Sequence[dict[str, Any]], streams: Sequence[dict[str, Any]]) -> dict[str, bool]:
    tolerance, texts = harness.REDUCED_TOLERANCE, [*rows, *streams]
    diffs = [r[k] for r in rows for k in r if k.startswith("max abs diff")]
    return {"every request received its own texts": all(r["text_mismatches"] == 0 for r in texts),
            f"confidences agree within {tolerance:g}": all(d <= tolerance for d in diffs)}  # fmt: skip


def markdown(rows: Sequence[dict], streams: Sequence[dict], verdicts: dict, meta: dict) -> str:
    def goal(name: str, value: float) -> str:
        return f"**{value:.3f}** ({'met' if value <= GOALS[name] else 'NOT met'}: <= {GOALS[name]})"

    head = ["latency", f"{GEN} s", f"{SCORE} s", f"{ONE} s", f"{BURST} s", "overlap",
            "keeping up", "burst / one call", "burst request p50 / p95 s", "batches per run",
            "generation s", "tail after generation s", "calls"]  # fmt: skip
    table = [
        [f"{r['latency_ms']:.0f} ms", *(f"{r[f'{n} s']:.2f}" for n in (GEN, SCORE, ONE, BURST)),
         goal("overlap", r["overlap"]), goal("keeping up", r["keeping up"]),
         goal("burst / one call", r["burst / one call"]),
         f"{r['request p50 s']:.2f} / {r['request p95 s']:.2f}", f"{r['batches per run']:g}",
         f"{r['generation s']:.2f}", f"{r['tail after generation s']:.2f}",
         "/".join(map(str, r["calls"]))]
        for r in rows
    ]  # fmt: skip
    stream_rows = [
        [f"{s['latency_ms']:.0f} ms", s["requests"], f"{pct(s['request_s'], 50):.2f}",
         goal("stream p95 s", pct(s["request_s"], 95)), f"{max(s['request_s']):.2f}",
         f"{s['requests'] / s['span_s']:.2f}"]
        for s in streams
    ]  # fmt: skip
    stream_head = ["latency", "requests", "request p50 s", "p95 s", "max s", "throughput /s"]
    lines = [
        "## End to end: scoring beside generation, and an app's calls (`bench_end_to_end`)", "",
        f"- {meta['prompts']} prompts x {meta['samples']} samples, WikiBio passages through "
        f"`ChatOpenAI` (the server in {harness.describe_server(meta['server'])}); "
        f"{meta['rounds']} rounds, the order turning, medians; device: "
        f"{meta['device'] or 'its own choice'}; stream: {meta['rate']:g} requests per "
        f"second for {meta['duration']:g} s",
        f"- {meta['machine']}", f"- {meta['load']}", "",
        *harness.md_table(head, table),
        *(["", *harness.md_table(stream_head, stream_rows)] if streams else []), "",
        *(f"- {k}: {'yes' if v else 'NO'}" for k, v in verdicts.items()),
    ]  # fmt: skip
    return "\n".join(lines)


def options(argv: Sequence[str] | None = None) -> argparse.Namespace:
    shared = ("prompts", "samples", "rounds", "latencies", "server", "device", "data", "out")
    ap = harness.parser(__doc__, *shared)
    ap.add_argument("--rate", type=float, default=5.0, help="stream requests per second (5)")
    ap.add_argument("--duration", type=float, default=20.0, help="stream seconds (20; 0: none)")
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = options(argv)
    warnings.simplefilter("ignore")
    if not harness.have_data(args.data):
        return 0
    before = os.getloadavg()[0]
    runs, streams = asyncio.run(run_benchmark(harness.load_passages(args.data), args))
    rows = summarize(runs)
    verdicts = checks(rows, streams)
    meta = {**vars(args), "machine": harness.machine_summary(args.device),
            "load": harness.load_line(before)}  # fmt: skip
    payload = {"meta": meta, "rows": rows, "checks": verdicts, "runs": runs, "streams": streams}
    report = markdown(rows, streams, verdicts, meta)
    harness.write_report(args.out, "end_to_end.md", report, payload)
    return 0 if all(verdicts.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
