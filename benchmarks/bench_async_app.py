"""An async app's load on one ``BlackBoxUQ``: a burst of one-prompt calls, and a stream of them.

    python benchmarks/bench_async_app.py [--prompts 119] [--samples 5] [--rounds 3]
        [--latencies 0 1000] [--rate 5] [--duration 20] [--device cpu|cuda]
        [--server process|thread] [--quick] [--out benchmarks/out]

A web service awaits ``generate_and_score([question], num_responses=m)`` once per request, on
one ``BlackBoxUQ`` shared by every request in flight. Two loads, at each server latency:

- **burst**: ``--prompts`` N one-prompt calls started at once on one ``BlackBoxUQ``, against one
  call holding the same N prompts on another ``BlackBoxUQ`` of the same settings (each object
  its own ``ChatOpenAI``). Rounds alternate which of the two runs first; medians over rounds.
  Reported: wall time of each, their ratio, and the burst's per-request latency (p50, p95);
- **stream**: one-prompt calls started at ``--rate`` per second for ``--duration`` seconds (on
  schedule, whether or not earlier ones have finished), on the burst's object. Reported: request
  latency (from its scheduled start to its result) p50, p95 and max, and throughput (requests
  over the time from the first start to the last result).

Setup: the WikiBio GPT-3 passages of the shared data folder beside the repository (skipped with
a message when absent), one distinct prompt per request (``make_prompts``: later rounds over the
30 passages get their sentences rotated), served by the loopback OpenAI-compatible server
(``benchmarks/loopback.py``) in a process of its own at a fixed latency, through
``langchain_openai.ChatOpenAI``. ``BlackBoxUQ(scorers=["bert_score"])`` at its defaults (on
``--device`` when given), warmed up before timing (model loaded, connections opened); what was
learned about the server is forgotten before every timed run, so each starts alike. Checked:
every request received its own prompt's texts, and the burst's confidences equal the one call's
within the reduced dtype's rounding (1e-3). The exit status is 0 when the checks hold; the
targets (burst <= 1.15x one call, stream p95 <= 1.5 s) are reported, not enforced.
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
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
# bench_vs_uqlm sets the offline environment and puts tests/ on the path as it is imported
from bench_vs_uqlm import (  # noqa: E402
    REDUCED_TOLERANCE,
    SYSTEM_PROMPT,
    load_passages,
    make_llm,
    make_prompts,
    max_abs_diff,
    round_order,
)
from common import WIKIBIO, gpu_name, machine_summary  # noqa: E402
from loopback import PassageServer, add_server_option, describe  # noqa: E402

BURST = "burst of one-prompt calls"
ONE_CALL = "one call of all the prompts"
BURST_TARGET = 1.15  # burst wall time over one call's
STREAM_P95_TARGET_S = 1.5
QUICK = {"prompts": 12, "rounds": 1, "rate": 5.0, "duration": 2.0}


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


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100), linear between the closest ranks (numpy's default)."""
    xs = sorted(values)
    if not xs:
        return float("nan")
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def cpu_bf16() -> str:
    """The CPU model, and whether it has AMX (bfloat16 matrix tiles) or only AVX512-BF16."""
    model, flags = "unknown CPU", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and model == "unknown CPU":
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        import platform

        model = platform.processor() or model
    if "amx_bf16" in flags:
        kind = "AMX (amx_bf16): bfloat16 matrix tiles"
    elif "avx512_bf16" in flags:
        kind = "only AVX512-BF16 (no AMX)"
    else:
        kind = "neither AMX nor AVX512-BF16: bfloat16 is emulated"
    return f"{model}; {kind}"


def make_uq(base_url: str, device: str | None) -> Any:
    from uqlm_bert import BlackBoxUQ

    return BlackBoxUQ(
        make_llm(base_url),
        scorers=["bert_score"],
        device=device,
        system_prompt=SYSTEM_PROMPT,
        show_progress_bars=False,
    )


async def one_prompt(uq: Any, prompt: str, m: int, t0: float) -> tuple[float, Any, Any, float]:
    """One request: ``(seconds from t0 to its result, response, samples, confidence)``."""
    result = await uq.generate_and_score([prompt], num_responses=m, show_progress_bars=False)
    done = time.monotonic() - t0
    data = result.data
    return done, data["responses"][0], data["sampled_responses"][0], data["bert_score"][0]


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


async def timed(
    server: PassageServer, run: Callable[[], Any], prompts: list[str]
) -> tuple[float, list[float], list[float], int, int, int]:
    """Reset the server and what was learned about it, then time ``run``; ``(wall, request
    latencies, confidences, calls, max in flight, text mismatches)``."""
    from uqlm_bert.generation import forget_learned_limits

    server.reset()
    forget_learned_limits()
    gc.collect()
    wall, rows = await run()
    log = server.log()
    bad = server.answers.mismatches(prompts, [r[1] for r in rows], [r[2] for r in rows])
    scores = [float(r[3]) for r in rows]
    return wall, [r[0] for r in rows], scores, len(log.arrivals), log.max_in_flight, bad


async def stream(
    server: PassageServer, uq: Any, prompts: list[str], m: int, rate: float, latency_ms: float
) -> StreamRun:
    """``len(prompts)`` one-prompt calls, the i-th started at ``i / rate`` seconds."""
    from uqlm_bert.generation import forget_learned_limits

    server.reset()
    forget_learned_limits()
    gc.collect()
    t0 = time.monotonic()

    async def request(i: int, prompt: str) -> tuple[float, Any, Any, float]:
        start = i / rate
        await asyncio.sleep(max(0.0, start - (time.monotonic() - t0)))
        done, response, samples, score = await one_prompt(uq, prompt, m, t0)
        return done - start, response, samples, done

    got = await asyncio.gather(*(request(i, p) for i, p in enumerate(prompts)))
    log = server.log()
    return StreamRun(
        latency_ms=latency_ms,
        rate=rate,
        duration_s=len(prompts) / rate,
        requests=len(prompts),
        latencies_s=[g[0] for g in got],
        span_s=max(g[3] for g in got),
        calls=len(log.arrivals),
        max_in_flight=log.max_in_flight,
        text_mismatches=server.answers.mismatches(
            prompts, [g[1] for g in got], [g[2] for g in got]
        ),
    )


async def run_benchmark(
    passages: Sequence[Any],
    n_prompts: int,
    m: int,
    rounds: int,
    latencies_ms: Sequence[float],
    rate: float,
    duration_s: float,
    device: str | None = None,
    server_in: str = "process",
    log: Callable[[str], None] = print,
) -> tuple[list[BurstRun], list[StreamRun]]:
    n_stream = max(1, round(rate * duration_s))
    prompt_map = make_prompts(passages, max(n_prompts, n_stream))
    every = list(prompt_map)
    prompts, stream_prompts = every[:n_prompts], every[:n_stream]
    bursts: list[BurstRun] = []
    streams: list[StreamRun] = []
    with PassageServer(prompt_map, where=server_in) as server:
        objects = {
            BURST: make_uq(server.base_url, device),
            ONE_CALL: make_uq(server.base_url, device),
        }
        runs = {
            BURST: lambda: burst(objects[BURST], prompts, m),
            ONE_CALL: lambda: one_call(objects[ONE_CALL], prompts, m),
        }
        warm = prompts[: min(4, len(prompts))]  # model loaded, connections opened: not timed
        await burst(objects[BURST], warm, m)
        await one_call(objects[ONE_CALL], warm, m)
        for latency in latencies_ms:
            server.set_latency(latency / 1000.0)
            for r in range(rounds):
                for name in round_order([BURST, ONE_CALL], r):
                    wall, lat, scores, calls, peak, bad = await timed(server, runs[name], prompts)
                    run = BurstRun(
                        latency,
                        r,
                        name,
                        wall,
                        lat if name == BURST else [wall],
                        calls,
                        peak,
                        bad,
                        scores,
                    )
                    bursts.append(run)
                    log(
                        f"{latency:6.0f} ms  round {r}  {name:28s} {wall:7.2f} s, request p50 "
                        f"{percentile(run.latencies_s, 50):.2f} s, {calls} calls, max {peak} "
                        f"in flight, {bad} texts off"
                    )
            s = await stream(server, objects[BURST], stream_prompts, m, rate, latency)
            streams.append(s)
            log(
                f"{latency:6.0f} ms  stream {rate:g}/s x {s.duration_s:g} s: p50 "
                f"{percentile(s.latencies_s, 50):.2f} s, p95 {percentile(s.latencies_s, 95):.2f} "
                f"s, {s.requests / s.span_s:.2f} requests/s, {s.text_mismatches} texts off"
            )
        for uq in objects.values():
            uq.close()
    return bursts, streams


def summarize(bursts: Sequence[BurstRun]) -> list[dict[str, Any]]:
    """One row per (latency, variant): medians over rounds; the burst against the one call."""
    rows = []
    for latency in sorted({b.latency_ms for b in bursts}):
        mine = [b for b in bursts if b.latency_ms == latency]
        base = statistics.median(b.wall_s for b in mine if b.variant == ONE_CALL)
        one = {b.round: b.scores for b in mine if b.variant == ONE_CALL}
        for variant in (BURST, ONE_CALL):
            runs = [b for b in mine if b.variant == variant]
            walls = [b.wall_s for b in runs]
            wall = statistics.median(walls)
            rows.append(
                {
                    "latency_ms": latency,
                    "variant": variant,
                    "wall_s_median": wall,
                    "wall_s_min": min(walls),
                    "wall_s_max": max(walls),
                    "vs_one_call": wall / base,
                    "request_p50_s": statistics.median(percentile(b.latencies_s, 50) for b in runs),
                    "request_p95_s": statistics.median(percentile(b.latencies_s, 95) for b in runs),
                    "calls": sorted({b.calls for b in runs}),
                    "max_in_flight": max(b.max_in_flight for b in runs),
                    "text_mismatches": sum(b.text_mismatches for b in runs),
                    "max_abs_diff_vs_one_call": max(
                        max_abs_diff(b.scores, one[b.round]) for b in runs
                    ),
                }
            )
    return rows


def checks(rows: Sequence[dict[str, Any]], streams: Sequence[StreamRun]) -> dict[str, bool]:
    return {
        "every request received its own prompt's texts": all(
            r["text_mismatches"] == 0 for r in rows
        )
        and all(s.text_mismatches == 0 for s in streams),
        f"burst confidences equal the one call's within {REDUCED_TOLERANCE:g}": all(
            r["max_abs_diff_vs_one_call"] <= REDUCED_TOLERANCE for r in rows
        ),
    }


def markdown(
    rows: Sequence[dict[str, Any]],
    streams: Sequence[StreamRun],
    verdicts: dict[str, bool],
    meta: dict[str, Any],
) -> str:
    before, after = meta["load_average_1min"]
    busy = max(before, after) > (os.cpu_count() or 1)
    lines = [
        "## An async app's load on one BlackBoxUQ (`bench_async_app.py`)",
        "",
        f"- burst: {meta['prompts']} one-prompt `generate_and_score` calls at once on one "
        f"`BlackBoxUQ`, against one call of the {meta['prompts']} prompts on another of the "
        f"same settings; {meta['samples']} samples per prompt; {meta['rounds']} round(s) per "
        "latency, order alternating, medians",
        f"- stream: one-prompt calls started at {meta['rate']:g} per second for "
        f"{meta['duration_s']:g} s; latency from each request's scheduled start to its result",
        "- WikiBio GPT-3 passages served by a loopback OpenAI-compatible server through "
        f"`ChatOpenAI` (the server in {describe(meta.get('server'))}); `BlackBoxUQ(scorers="
        f'["bert_score"])` at its defaults, device: {meta.get("device") or "its own choice"}'
        + (f" ({meta['gpu']})" if meta.get("gpu") else ""),
        f"- CPU: {meta['cpu']}",
        f"- {meta['machine']}",
        f"- load average (1 min) before and after: {before:.2f}, {after:.2f}"
        + (
            " (more than the cores: other processes shared the CPU, timings are noisy)"
            if busy
            else ""
        ),
        "",
        "| latency | run | wall s | vs one call | request p50 s | request p95 s | calls "
        "| max in flight | max abs diff vs one call | texts |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        texts = "as expected" if r["text_mismatches"] == 0 else f"{r['text_mismatches']} off"
        lines.append(
            f"| {r['latency_ms']:.0f} ms | {r['variant']} | {r['wall_s_median']:.2f} "
            f"({r['wall_s_min']:.2f}-{r['wall_s_max']:.2f}) | {r['vs_one_call']:.2f}x "
            f"| {r['request_p50_s']:.2f} | {r['request_p95_s']:.2f} "
            f"| {'/'.join(map(str, r['calls']))} | {r['max_in_flight']} "
            f"| {r['max_abs_diff_vs_one_call']:.1e} | {texts} |"
        )
    lines += [
        "",
        "| latency | rate /s | requests | request p50 s | p95 s | max s | throughput /s "
        "| calls | max in flight | texts |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in streams:
        texts = "as expected" if s.text_mismatches == 0 else f"{s.text_mismatches} off"
        lines.append(
            f"| {s.latency_ms:.0f} ms | {s.rate:g} | {s.requests} "
            f"| {percentile(s.latencies_s, 50):.2f} | {percentile(s.latencies_s, 95):.2f} "
            f"| {max(s.latencies_s):.2f} | {s.requests / s.span_s:.2f} | {s.calls} "
            f"| {s.max_in_flight} | {texts} |"
        )
    lines.append("")
    for r in rows:
        if r["variant"] == BURST:
            met = "met" if r["vs_one_call"] <= BURST_TARGET else "NOT met"
            lines.append(
                f"- {r['latency_ms']:.0f} ms: burst {r['vs_one_call']:.2f}x one call "
                f"(target <= {BURST_TARGET}x: {met})"
            )
    for s in streams:
        p95 = percentile(s.latencies_s, 95)
        met = "met" if p95 <= STREAM_P95_TARGET_S else "NOT met"
        lines.append(
            f"- {s.latency_ms:.0f} ms: stream p95 {p95:.2f} s "
            f"(target <= {STREAM_P95_TARGET_S} s: {met})"
        )
    lines += [f"- {k}: {'yes' if v else 'NO'}" for k, v in verdicts.items()]
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, default=119, help="burst size N (default 119)")
    ap.add_argument("--samples", type=int, default=5, help="num_responses m (default 5)")
    ap.add_argument("--rounds", type=int, default=3, help="burst rounds per latency (default 3)")
    ap.add_argument(
        "--latencies",
        type=float,
        nargs="+",
        default=[0.0, 1000.0],
        help="server latencies in ms (default 0 1000)",
    )
    ap.add_argument("--rate", type=float, default=5.0, help="stream requests per second (5)")
    ap.add_argument("--duration", type=float, default=20.0, help="stream seconds (default 20)")
    ap.add_argument(
        "--device",
        default=None,
        help="where BERTScore runs (cpu, cuda; default: the library chooses)",
    )
    add_server_option(ap)
    ap.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: 12 prompts, 1 round, a 2-second stream at 5/s",
    )
    ap.add_argument("--data", type=Path, default=WIKIBIO, help="WikiBio passages (JSONL)")
    ap.add_argument(
        "--out",
        type=Path,
        default=BENCH / "out",
        help="folder for async_app.md and async_app.json (default benchmarks/out)",
    )
    args = ap.parse_args(argv)
    if args.quick:
        for k, v in QUICK.items():
            setattr(args, k, v)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    warnings.simplefilter("ignore")
    print(f"CPU: {cpu_bf16()}")
    if not args.data.is_file():
        print(
            f"WikiBio passages not found ({args.data.name} in the shared data folder beside "
            "the repository): nothing to benchmark, the server answers with them."
        )
        return 0
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    bursts, streams = asyncio.run(
        run_benchmark(
            load_passages(args.data),
            args.prompts,
            args.samples,
            args.rounds,
            args.latencies,
            args.rate,
            args.duration,
            device=args.device,
            server_in=args.server,
        )
    )
    rows = summarize(bursts)
    verdicts = checks(rows, streams)
    meta = {
        "prompts": args.prompts,
        "samples": args.samples,
        "rounds": args.rounds,
        "latencies_ms": args.latencies,
        "rate": args.rate,
        "duration_s": args.duration,
        "device": args.device,
        "gpu": gpu_name(args.device),
        "server": args.server,
        "cpu": cpu_bf16(),
        "machine": machine_summary(),
        "load_average_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "seconds": round(time.monotonic() - started, 1),
    }
    report = markdown(rows, streams, verdicts, meta)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "async_app.md").write_text(report, encoding="utf-8")
    payload = {
        "meta": meta,
        "rows": rows,
        "checks": verdicts,
        "bursts": [asdict(b) for b in bursts],
        "streams": [asdict(s) for s in streams],
    }
    (args.out / "async_app.json").write_text(json.dumps(payload, indent=1), encoding="utf-8")
    print()
    print(report)
    return 0 if all(verdicts.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
