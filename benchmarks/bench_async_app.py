"""An async app's load on one ``BlackBoxUQ``: a burst of one-prompt calls, and a stream of them.

    python -m benchmarks.bench_async_app [--prompts 30] [--samples 5] [--rounds 5]
        [--latencies 0 1000] [--rate 5] [--duration 20] [--device cpu|cuda]

A web service awaits ``generate_and_score([question], num_responses=m)`` per request on one
shared ``BlackBoxUQ`` (``bert_score`` at its defaults), one distinct prompt per request (WikiBio
passages from the loopback server). Per latency: the **burst**, ``--prompts`` one-prompt calls at
once against one call of the same prompts on another object, rounds in turning order (wall time
of each, their ratio, the burst's request latency p50 and p95); the **stream**, one-prompt calls
started at ``--rate`` per second for ``--duration`` seconds on the burst's object (request
latency from its scheduled start, p50, p95, max, and throughput). What was learned about the
server is forgotten before every run. The exit status says whether every request received its
own texts and the burst's confidences equal the one call's within the reduced dtype's rounding;
the goals (burst <= 1.15x one call, stream p95 <= 1.5 s) are reported. Writes ``async_app.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import time
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from benchmarks import harness

BURST = "burst of one-prompt calls"
ONE_CALL = "one call of all the prompts"
BURST_GOAL = 1.15  # burst wall time over one call's
STREAM_P95_GOAL_S = 1.5
pct = harness.percentile


@dataclass
class BurstRun:
    """One timed run of the burst comparison."""

    latency_ms: float
    round: int
    variant: str
    wall_s: float
    #: per request, from the burst's start to its result (the one call: its wall time, once)
    latencies_s: list[float]
    calls: int
    max_in_flight: int
    text_mismatches: int
    scores: list[float] = field(repr=False)


@dataclass
class StreamRun:
    """One stream of one-prompt calls at a fixed rate."""

    latency_ms: float
    rate: float
    duration_s: float
    requests: int
    latencies_s: list[float]
    span_s: float
    calls: int
    max_in_flight: int
    text_mismatches: int


def make_uq(base_url: str, device: str | None) -> Any:
    from uqlm_bert import BlackBoxUQ

    return BlackBoxUQ(
        harness.make_llm(base_url),
        scorers=["bert_score"],
        device=device,
        system_prompt=harness.SYSTEM_PROMPT,
        show_progress_bars=False,
    )


async def one_prompt(uq: Any, prompt: str, m: int, t0: float) -> tuple[float, Any, Any, float]:
    """One request: ``(seconds from t0 to its result, response, samples, confidence)``."""
    result = await uq.generate_and_score([prompt], num_responses=m, show_progress_bars=False)
    d = result.data
    return time.monotonic() - t0, d["responses"][0], d["sampled_responses"][0], d["bert_score"][0]


async def burst(uq: Any, prompts: list[str], m: int) -> tuple[float, list[tuple]]:
    t0 = time.monotonic()
    got = await asyncio.gather(*(one_prompt(uq, p, m, t0) for p in prompts))
    return time.monotonic() - t0, got


async def one_call(uq: Any, prompts: list[str], m: int) -> tuple[float, list[tuple]]:
    t0 = time.monotonic()
    result = await uq.generate_and_score(prompts, num_responses=m, show_progress_bars=False)
    wall = time.monotonic() - t0
    d = result.data
    rows = zip(d["responses"], d["sampled_responses"], d["bert_score"], strict=True)
    return wall, [(wall, r, s, c) for r, s, c in rows]


def _fresh(server: harness.PassageServer) -> None:
    """Before a timed run: the server's counters and log reset, nothing learned about it."""
    from uqlm_bert.generation import forget_learned_limits

    server.reset()
    forget_learned_limits()
    gc.collect()


async def stream(
    server: harness.PassageServer, uq: Any, prompts: list[str], m: int, rate: float, latency: float
) -> StreamRun:
    """``len(prompts)`` one-prompt calls, the i-th started at ``i / rate`` seconds."""
    _fresh(server)
    t0 = time.monotonic()

    async def request(i: int, prompt: str) -> tuple[float, Any, Any, float]:
        start = i / rate
        await asyncio.sleep(max(0.0, start - (time.monotonic() - t0)))
        done, response, samples, _ = await one_prompt(uq, prompt, m, t0)
        return done - start, response, samples, done

    got = await asyncio.gather(*(request(i, p) for i, p in enumerate(prompts)))
    log = server.log()
    bad = server.answers.mismatches(prompts, [g[1] for g in got], [g[2] for g in got])
    return StreamRun(
        latency, rate, len(prompts) / rate, len(prompts), [g[0] for g in got],
        max(g[3] for g in got), len(log.arrivals), log.max_in_flight, bad,
    )  # fmt: skip


async def run_benchmark(passages: Sequence[Any], args, log=print) -> tuple[list, list]:
    """The burst and one-call runs, and the streams (``args``: :func:`options`)."""
    m, rate = args.samples, args.rate
    n_stream = max(1, round(rate * args.duration))
    prompt_map = harness.make_prompts(passages, max(args.prompts, n_stream))
    every = list(prompt_map)
    prompts, stream_prompts = every[: args.prompts], every[:n_stream]
    bursts: list[BurstRun] = []
    streams: list[StreamRun] = []
    with harness.PassageServer(prompt_map, where=args.server) as server:
        objects = {name: make_uq(server.base_url, args.device) for name in (BURST, ONE_CALL)}
        runs = {BURST: burst, ONE_CALL: one_call}
        warm = prompts[: min(4, len(prompts))]  # model loaded, connections opened: not timed
        for name, uq in objects.items():
            await runs[name](uq, warm, m)
        for latency in args.latencies:
            server.set_latency(latency / 1000.0)
            for r, name in harness.rounds([BURST, ONE_CALL], args.rounds):
                _fresh(server)
                wall, rows = await runs[name](objects[name], prompts, m)
                got = server.log()
                bad = server.answers.mismatches(prompts, [x[1] for x in rows], [x[2] for x in rows])
                lat = [x[0] for x in rows] if name == BURST else [wall]
                scores = [float(x[3]) for x in rows]
                calls, peak = len(got.arrivals), got.max_in_flight
                bursts.append(BurstRun(latency, r, name, wall, lat, calls, peak, bad, scores))
                log(
                    f"{latency:6.0f} ms  round {r}  {name:28s} {wall:7.2f} s, request p50 "
                    f"{pct(lat, 50):.2f} s, {calls} calls, max {peak} in flight, {bad} texts off"
                )
            s = await stream(server, objects[BURST], stream_prompts, m, rate, latency)
            streams.append(s)
            log(
                f"{latency:6.0f} ms  stream {rate:g}/s x {s.duration_s:g} s: p50 "
                f"{pct(s.latencies_s, 50):.2f} s, p95 {pct(s.latencies_s, 95):.2f} s, "
                f"{s.requests / s.span_s:.2f} requests/s, {s.text_mismatches} texts off"
            )
        for uq in objects.values():
            uq.close()
    return bursts, streams


def summarize(bursts: Sequence[BurstRun]) -> list[dict[str, Any]]:
    """One row per (latency, variant): medians over rounds; the burst against the one call."""
    rows = []
    for latency in sorted({b.latency_ms for b in bursts}):
        mine = [b for b in bursts if b.latency_ms == latency]
        base = harness.median(b.wall_s for b in mine if b.variant == ONE_CALL)
        one = {b.round: b.scores for b in mine if b.variant == ONE_CALL}
        for variant in (BURST, ONE_CALL):
            runs = [b for b in mine if b.variant == variant]
            walls = [b.wall_s for b in runs]
            rows.append(
                {
                    "latency_ms": latency,
                    "variant": variant,
                    "wall_s_median": harness.median(walls),
                    "wall_s_min": min(walls),
                    "wall_s_max": max(walls),
                    "vs_one_call": harness.median(walls) / base,
                    "request_p50_s": harness.median(pct(b.latencies_s, 50) for b in runs),
                    "request_p95_s": harness.median(pct(b.latencies_s, 95) for b in runs),
                    "calls": sorted({b.calls for b in runs}),
                    "max_in_flight": max(b.max_in_flight for b in runs),
                    "text_mismatches": sum(b.text_mismatches for b in runs),
                    "max_abs_diff_vs_one_call": max(
                        harness.max_abs_diff(b.scores, one[b.round]) for b in runs
                    ),
                }
            )
    return rows


def checks(rows: Sequence[dict[str, Any]], streams: Sequence[StreamRun]) -> dict[str, bool]:
    tolerance = harness.REDUCED_TOLERANCE
    return {
        "every request received its own prompt's texts": all(
            r["text_mismatches"] == 0 for r in rows
        )
        and all(s.text_mismatches == 0 for s in streams),
        f"burst confidences equal the one call's within {tolerance:g}": all(
            r["max_abs_diff_vs_one_call"] <= tolerance for r in rows
        ),
    }


def markdown(rows: Sequence[dict], streams: Sequence[StreamRun], verdicts: dict, meta: dict) -> str:
    def texts(bad: int) -> str:
        return "as expected" if bad == 0 else f"{bad} off"

    burst_rows = [
        [f"{r['latency_ms']:.0f} ms", r["variant"],
         f"{r['wall_s_median']:.2f} ({r['wall_s_min']:.2f}-{r['wall_s_max']:.2f})",
         f"{r['vs_one_call']:.2f}x", f"{r['request_p50_s']:.2f}", f"{r['request_p95_s']:.2f}",
         "/".join(map(str, r["calls"])), r["max_in_flight"],
         f"{r['max_abs_diff_vs_one_call']:.1e}", texts(r["text_mismatches"])]
        for r in rows
    ]  # fmt: skip
    stream_rows = [
        [f"{s.latency_ms:.0f} ms", f"{s.rate:g}", s.requests, f"{pct(s.latencies_s, 50):.2f}",
         f"{pct(s.latencies_s, 95):.2f}", f"{max(s.latencies_s):.2f}",
         f"{s.requests / s.span_s:.2f}", s.calls, s.max_in_flight, texts(s.text_mismatches)]
        for s in streams
    ]  # fmt: skip
    goals = [
        f"- {r['latency_ms']:.0f} ms: burst {r['vs_one_call']:.2f}x one call (goal <= "
        f"{BURST_GOAL}x: {'met' if r['vs_one_call'] <= BURST_GOAL else 'NOT met'})"
        for r in rows
        if r["variant"] == BURST
    ] + [
        f"- {s.latency_ms:.0f} ms: stream p95 {pct(s.latencies_s, 95):.2f} s (goal <= "
        f"{STREAM_P95_GOAL_S} s: {'met' if pct(s.latencies_s, 95) <= STREAM_P95_GOAL_S else 'NOT met'})"
        for s in streams
    ]
    lines = [
        "## An async app's load on one BlackBoxUQ (`bench_async_app`)",
        "",
        f"- burst: {meta['prompts']} one-prompt `generate_and_score` calls at once on one "
        f"`BlackBoxUQ`, against one call of the {meta['prompts']} prompts on another; "
        f"{meta['samples']} samples per prompt; {meta['rounds']} round(s) per latency, the "
        "order turning, medians",
        f"- stream: one-prompt calls started at {meta['rate']:g} per second for "
        f"{meta['duration']:g} s; latency from each request's scheduled start to its result",
        f"- WikiBio passages from the loopback server (in {harness.describe_server(meta['server'])})"
        f" through `ChatOpenAI`; `bert_score` at its defaults, device: {meta['device'] or 'its own choice'}",
        f"- {meta['machine']}",
        f"- {meta['load']}",
        "",
        *harness.md_table(
            ["latency", "run", "wall s", "vs one call", "request p50 s", "request p95 s", "calls",
             "max in flight", "max abs diff vs one call", "texts"], burst_rows,
        ),
        "",
        *harness.md_table(
            ["latency", "rate /s", "requests", "request p50 s", "p95 s", "max s", "throughput /s",
             "calls", "max in flight", "texts"], stream_rows,
        ),
        "",
        *goals,
        *(f"- {k}: {'yes' if v else 'NO'}" for k, v in verdicts.items()),
    ]  # fmt: skip
    return "\n".join(lines) + "\n"


def options(argv: Sequence[str] | None = None) -> argparse.Namespace:
    shared = ("prompts", "samples", "rounds", "latencies", "server", "device", "data", "out")
    ap = harness.parser(__doc__, *shared)
    ap.add_argument("--rate", type=float, default=5.0, help="stream requests per second (5)")
    ap.add_argument("--duration", type=float, default=20.0, help="stream seconds (default 20)")
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = options(argv)
    warnings.simplefilter("ignore")
    if not harness.have_data(args.data):
        return 0
    before = os.getloadavg()[0]
    bursts, streams = asyncio.run(run_benchmark(harness.load_passages(args.data), args))
    rows = summarize(bursts)
    verdicts = checks(rows, streams)
    meta = {**vars(args), "machine": harness.machine_summary(args.device),
            "load": harness.load_line(before)}  # fmt: skip
    payload = {"meta": meta, "rows": rows, "checks": verdicts,
               "bursts": [asdict(b) for b in bursts], "streams": [asdict(s) for s in streams]}  # fmt: skip
    harness.write_report(args.out, "async_app.md", markdown(rows, streams, verdicts, meta), payload)
    return 0 if all(verdicts.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
