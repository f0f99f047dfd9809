"""The main job with its scoring on Ray: ``generate_and_score`` against generation alone and
scoring alone on the same pool.

    python -m benchmarks.bench_ray_main_job [--prompts 2000] [--samples 5] [--rounds 3]
        [--latency 1.0] [--workers 2] [--out FILE]

Setup: a private Ray on 127.0.0.1 (``start_local_ray``), a pool of ``--workers`` actors of 1 CPU
each (``RayScoring(num_workers=...)``), and an OpenAI-compatible server on 127.0.0.1 in a child
process (``tests/openai_server.py``: it answers after ``--latency`` seconds, each prompt with its
own LLM-answer sized texts of 30-90 words, the same in every round), reached through
``langchain_openai.ChatOpenAI``. One ``BlackBoxUQ`` at its defaults (the embedded model,
``dtype="auto"``), warmed up before timing (Ray started, the actors' models loaded, the client's
connections open). Each round times, in alternating order:

- (a) generation alone: the answer and ``--samples`` samples of every prompt, through the
  object's generator (its limits and settings), nothing scored;
- (b) scoring alone: the texts of (a) sent through the object's scoring queue to the pool at
  once, as ``generate_and_score`` sends them (the same batches, in flight at once);
- (c) ``generate_and_score`` with the pool.

Reported: the median and every round of each, with the CPU seconds used while it ran by this
process (the driver: generation and the queue), by the scoring actors, by the loopback server,
and by the whole machine (every core, other processes included); ``(c) / max((a), (b))`` of the medians (the issue asks
for at most 1.15), and the same within each round (its runs saw the same load from the rest of
the machine); the batches of (c); the largest difference between (c)'s confidences and (b)'s;
the load average and the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

TARGET = 1.15

_WORDS = (
    "the a of and in to is was he she it born known for his her career team city river "
    "university award film album played wrote released served member president football "
    "american british french german novel song year early later life died married children "
    "professional league season record first second national government science research "
    "published studied worked became founded led won politician actor singer author england"
).split()


def passage(seed: int, n_words: int) -> str:
    """Biography-like pseudo-text of ``n_words`` words, the same for the same seed."""
    rng = random.Random(seed)
    words: list[str] = []
    for i in range(n_words):
        word = rng.choice(_WORDS)
        if i == 0 or words[-1].endswith("."):
            word = word.capitalize()
        if rng.random() < 0.08:
            word += "."
        words.append(word)
    return " ".join(words) + "."


class Answers:
    """The server's texts: a prompt's answer at temperature 0, its samples otherwise; each a
    function of the prompt and the choice's place, so every round receives the same texts."""

    def choices(self, prompt: str, temperature: float | None, n: int) -> list[str]:
        seed = int(prompt.rsplit(" ", 1)[-1].rstrip("?"))
        if not temperature:
            return [passage(1_000_003 * seed, 30 + seed % 61)]
        return [passage(1_000_003 * seed + 1 + j, 30 + (seed + 7 * j) % 61) for j in range(n)]

    def __call__(self, prompt: str, temperature: float | None) -> str:
        return self.choices(prompt, temperature, 1)[0]


def serve(latency: float) -> None:
    """The child process: serve until stdin closes; the base URL goes out on stdout."""
    from tests.openai_server import FakeOpenAIServer

    with FakeOpenAIServer(
        default_latency=latency, answer=Answers(), request_queue_size=4096
    ) as server:
        print(json.dumps(server.base_url), flush=True)
        sys.stdin.read()


def start_server(latency: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "benchmarks.bench_ray_main_job",
            "--serve",
            "--latency",
            str(latency),
        ],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())


def _process_cpu(pid: int | str, tick: float) -> float:
    """CPU seconds a process has used, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (float(fields[11]) + float(fields[12])) / tick


def cpu_seconds(server_pid: int) -> tuple[float, float, float, float]:
    """CPU seconds used so far by this process (the driver), by the scoring actors, by the
    loopback server, and by the whole machine (every core, other processes included)."""
    tick = os.sysconf("SC_CLK_TCK")
    actors = 0.0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"ray::ScoringWorker"):
                actors += _process_cpu(pid, tick)
        except OSError:  # a process that ended meanwhile
            continue
    with open("/proc/stat") as f:
        fields = [float(x) for x in f.readline().split()[1:8]]
    machine = (sum(fields) - fields[3] - fields[4]) / tick
    return time.process_time(), actors, _process_cpu(server_pid, tick), machine


def machine() -> str:
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next(
        (ln.split(":", 1)[1].strip() for ln in cpuinfo.splitlines() if ln.startswith("model name")),
        platform.processor(),
    )
    have = set(
        next(
            (ln.split(":", 1)[1].split() for ln in cpuinfo.splitlines() if ln.startswith("flags")),
            [],
        )
    )
    flags = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "avx512_vnni") if f in have]
    return (
        f"{model}, {os.cpu_count()} cores ({', '.join(flags)}), Python {platform.python_version()}"
    )


async def generation_alone(uq: Any, prompts: list[str], samples: int) -> Any:
    return await uq._generator().generate(
        prompts, samples, show_progress_bars=False, settings=uq.generation
    )


async def scoring_alone(uq: Any, prompts: list[str], generation: Any) -> Any:
    """The texts of ``generation`` through ``uq``'s scoring queue, all queued at once."""
    from uqlm_bert.blackbox._pipeline import ScoringPipeline

    queue = uq._queues.of_running_loop(uq.score_batch_size)
    pipeline = ScoringPipeline(
        uq.scorers, len(prompts), queue.max_batch, False, queue=queue, prompts=prompts
    )
    pipeline.start()
    for i in range(len(prompts)):
        pipeline.submit(i, generation.responses[i], list(generation.sampled_responses[i]))
    return await pipeline.finish(generation)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=2000)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency", type=float, default=1.0, help="seconds per LLM call")
    parser.add_argument("--workers", type=int, default=2, help="Ray actors that score")
    parser.add_argument("--out", help="write the figures as JSON here too")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.latency)
        return 0

    import langchain_openai
    import numpy as np

    from uqlm_bert import BlackBoxUQ
    from uqlm_bert.distributed import RayScoring, start_local_ray

    warnings.simplefilter("ignore")  # the loopback texts trip no warning worth reading here
    ray = start_local_ray()
    server, base_url = start_server(args.latency)
    try:
        llm = langchain_openai.ChatOpenAI(
            model="bench", base_url=base_url, api_key="bench", temperature=0.0
        )
        uq = BlackBoxUQ(llm, show_progress_bars=False, scoring=RayScoring(num_workers=args.workers))
        prompts = [f"Who is person {i}?" for i in range(args.prompts)]
        warm = [f"Who is person {args.prompts + i}?" for i in range(4 * args.workers)]
        uq.generate_and_score_sync(warm, num_responses=args.samples)

        runs: dict[str, list[float]] = {"a": [], "b": [], "c": []}
        cpu: dict[str, list[list[float]]] = {"a": [], "b": [], "c": []}
        batches: list[list[int]] = []
        diffs: list[float] = []
        # the texts (b) scores: those every run of the server gives
        texts = uq._runner.run(lambda: generation_alone(uq, prompts, args.samples))

        def run(mode: str) -> Any:
            if mode == "a":
                return uq._runner.run(lambda: generation_alone(uq, prompts, args.samples))
            if mode == "b":
                return uq._runner.run(lambda: scoring_alone(uq, prompts, texts)).scores
            queue = next(iter(uq._queues))
            before = len(queue.batch_sizes)
            result = uq.generate_and_score_sync(prompts, num_responses=args.samples)
            batches.append(queue.batch_sizes[before:])
            return result.data

        for r in range(args.rounds):
            scores = {}
            for mode in "abc" if r % 2 == 0 else "cba":
                started, before = time.perf_counter(), cpu_seconds(server.pid)
                scores[mode] = run(mode)
                runs[mode].append(time.perf_counter() - started)
                after = cpu_seconds(server.pid)
                cpu[mode].append([b - a for a, b in zip(before, after, strict=True)])
                print(f"round {r + 1} ({mode}): {runs[mode][-1]:.2f} s", flush=True)
            combined = np.asarray(scores["c"]["bert_score"], dtype=float)
            diffs.append(float(np.nanmax(np.abs(combined - scores["b"]["bert_score"]))))
        uq.close()
    finally:
        server.communicate(input="", timeout=60)
        ray.shutdown()

    med = {k: statistics.median(v) for k, v in runs.items()}
    ratio = med["c"] / max(med["a"], med["b"])
    sizes = [s for run_batches in batches for s in run_batches]
    print()
    print(f"machine: {machine()}")
    print(f"load average after: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        f"{args.prompts} prompts x {args.samples} samples, {args.latency:g} s per call, "
        f"{args.workers} actors of 1 CPU, medians of {args.rounds} rounds"
    )
    print(
        f"{'':26} {'median s':>9}  {'CPU s: driver':>13} {'actors':>7} {'server':>7} "
        f"{'machine':>8}  rounds (s)"
    )
    names = {
        "a": "(a) generation alone",
        "b": "(b) scoring alone (pool)",
        "c": "(c) generate_and_score",
    }
    for k, name in names.items():
        driver, actors, served, total = (statistics.median(c[i] for c in cpu[k]) for i in range(4))
        rounds = ", ".join(f"{x:.2f}" for x in runs[k])
        print(
            f"{name:26} {med[k]:9.2f}  {driver:13.1f} {actors:7.1f} {served:7.1f} {total:8.1f}  "
            f"{rounds}"
        )
    paired = [c / max(a, b) for a, b, c in zip(runs["a"], runs["b"], runs["c"], strict=True)]
    print(f"(c) / max(a, b) = {ratio:.3f}  (target <= {TARGET})")
    print(f"the same within each round: {', '.join(f'{x:.3f}' for x in paired)}")
    print(
        f"(c): {len(sizes) / max(1, len(batches)):.0f} batches a run, median "
        f"{statistics.median(sizes) if sizes else 0:.0f} prompts, largest {max(sizes, default=0)}"
    )
    print(f"max |(c) - (b)| confidence: {max(diffs):.2e}")
    if args.out:
        figures = {"runs": runs, "cpu": cpu, "medians": med, "ratio": ratio, "paired": paired}
        figures["batches"] = batches
        Path(args.out).write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
