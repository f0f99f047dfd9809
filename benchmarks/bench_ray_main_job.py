"""The main job with its scoring on Ray: ``generate_and_score`` against generation alone and
scoring alone on the same pool.

    python -m benchmarks.bench_ray_main_job --prompts 2000 --rounds 3 [--latency 1] [--workers 2]

A private Ray on 127.0.0.1, a pool of ``--workers`` actors of 1 CPU each (``RayScoring``), the
loopback server in a child process answering after ``--latency`` seconds, each prompt with texts
of its own of 30-90 words (the same every round), through ``ChatOpenAI``. One ``BlackBoxUQ`` at
its defaults but fixed sampling (every sample at once), warmed up (Ray, the actors' models, the
connections). Each round, in turning order:
(a) generation alone, the answer and ``--samples`` samples of every prompt through the object's
generator, nothing scored; (b) scoring alone, the texts of (a) through the object's scoring queue
to the pool, all queued at once, as ``generate_and_score`` sends them; (c) ``generate_and_score``.

Reported: the median and every round of each, with the CPU seconds used meanwhile by this process
(the driver: generation and the queue), the scoring actors, the server and the whole machine
(other processes included); ``(c) / max((a), (b))`` of the medians (target: at most 1.15) and
within each round (same load from the rest of the machine); (c)'s batches; the largest difference
between (c)'s confidences and (b)'s. Writes ``ray_main_job.md`` (and .json).
"""

from __future__ import annotations

import contextlib
import os
import random
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import harness

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
TARGET = 1.15
NAMES = {"a": "(a) generation alone", "b": "(b) scoring alone (pool)",
         "c": "(c) generate_and_score"}  # fmt: skip
HEAD = ["run", "median s", "CPU s: driver", "actors", "server", "machine", "rounds (s)"]


def make_passages(n: int, samples: int, seed: int = 0) -> list[harness.Passage]:
    """``n`` passages, each text of its own with 30-90 words."""
    rng = random.Random(seed)
    text = lambda: harness.synthetic_passage(rng, rng.randint(30, 90), period=0.08)  # noqa: E731
    return [harness.Passage(i, text(), tuple(text() for _ in range(samples))) for i in range(n)]


def cpu_seconds(server_pid: int) -> list[float]:
    """CPU seconds used so far by this process (the driver), by the scoring actors, by the
    loopback server, and by the whole machine (every core, other processes included)."""
    tick = os.sysconf("SC_CLK_TCK")

    def used(pid: int | str) -> float:  # all its threads
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (float(fields[11]) + float(fields[12])) / tick

    actors = 0.0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):  # a process that ended meanwhile
            if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"ray::ScoringWorker"):
                actors += used(pid)
    fields = [float(x) for x in Path("/proc/stat").read_text().split()[1:8]]  # the "cpu" line
    machine = (sum(fields) - fields[3] - fields[4]) / tick  # all but idle and iowait
    return [time.process_time(), actors, used(server_pid), machine]


async def scoring_alone(uq: Any, prompts: list[str], generation: Any) -> Any:
    """The texts of ``generation`` through ``uq``'s scoring queue, all queued at once."""
    from uqlm_bert._blackbox._pipeline import ScoringPipeline

    queue = uq._queues.of_running_loop(uq.score_batch_size)
    pipeline = ScoringPipeline(
        uq.scorers, len(prompts), queue.max_batch, False, queue=queue, prompts=prompts
    )
    pipeline.start()
    for i in range(len(prompts)):
        pipeline.submit(i, generation.responses[i], list(generation.sampled_responses[i]))
    return await pipeline.finish(generation)


def measure(args: Any) -> dict[str, Any]:
    """Every round's seconds and CPU seconds of (a), (b) and (c), (c)'s batches, the diffs."""
    from uqlm_bert import BlackBoxUQ
    from uqlm_bert.distributed import RayScoring
    from uqlm_bert.distributed._session import start_local_ray

    passages = make_passages(args.prompts + 4 * args.workers, args.samples, args.seed)
    served = harness.make_prompts(passages, len(passages))  # one prompt per passage, as it is
    prompts, warm = list(served)[: args.prompts], list(served)[args.prompts :]
    got: dict[str, Any] = {"runs": {k: [] for k in NAMES}, "cpu": {k: [] for k in NAMES}}
    runs, cpu, got["batches"] = got["runs"], got["cpu"], []
    ray = start_local_ray()
    try:
        with harness.PassageServer(served) as server:
            server.set_latency(args.latency)
            pid = server._proc.pid  # the child process that serves
            uq = BlackBoxUQ(harness.make_llm(server.base_url), show_progress_bars=False,
                            generation=harness.fixed_sampling(system_prompt=None),
                            scoring=RayScoring(num_workers=args.workers))  # fmt: skip
            uq.generate_and_score_sync(warm, num_responses=args.samples)
            quiet = {"show_progress_bars": False, "settings": uq.generation}
            generate = lambda: uq._runner.run(  # noqa: E731
                lambda: uq._generator().generate(prompts, args.samples, **quiet)
            )
            texts = generate()  # what every run receives: (b) scores them

            def run(mode: str) -> Any:
                if mode == "a":
                    return generate()
                if mode == "b":
                    return uq._runner.run(lambda: scoring_alone(uq, prompts, texts)).scores
                queue = next(iter(uq._queues))
                before = len(queue.batch_sizes)
                result = uq.generate_and_score_sync(prompts, num_responses=args.samples)
                got["batches"].append(queue.batch_sizes[before:])
                return result.data

            scores: dict[tuple[int, str], Any] = {}
            for r, mode in harness.rounds(list(NAMES), args.rounds):
                server.reset()
                started, before = time.perf_counter(), cpu_seconds(pid)
                scores[r, mode] = run(mode)
                runs[mode].append(time.perf_counter() - started)
                cpu[mode].append([b - a for a, b in zip(before, cpu_seconds(pid), strict=True)])
                print(f"round {r + 1} {NAMES[mode]}: {runs[mode][-1]:.2f} s", flush=True)
            uq.close()
    finally:
        ray.shutdown()
    of = lambda r, k: scores[r, k]["bert_score"]  # noqa: E731
    got["diffs"] = [harness.max_abs_diff(of(r, "c"), of(r, "b")) for r in range(args.rounds)]
    got["ray"] = ray.__version__
    return got


def main(argv: Sequence[str] | None = None) -> int:
    ap = harness.parser(__doc__, "prompts", "samples", "rounds", "seed", "out")
    ap.add_argument("--latency", type=float, default=1.0, help="seconds per LLM call (1)")
    ap.add_argument("--workers", type=int, default=2, help="Ray actors that score (2)")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")  # the loopback texts trip no warning worth reading here
    load = os.getloadavg()[0]
    got = measure(args)
    runs, cpu = got["runs"], got["cpu"]
    med = {k: harness.median(v) for k, v in runs.items()}
    ratio = med["c"] / max(med["a"], med["b"])
    paired = [c / max(a, b) for a, b, c in zip(runs["a"], runs["b"], runs["c"], strict=True)]
    sizes = [s for run in got["batches"] for s in run]
    rows = [[name, f"{med[k]:.2f}", *(f"{harness.median(c[i] for c in cpu[k]):.1f}"
             for i in range(4)), ", ".join(f"{x:.2f}" for x in runs[k])]
            for k, name in NAMES.items()]  # fmt: skip
    lines = [
        "## The main job with its scoring on Ray (`bench_ray_main_job`)",
        "",
        f"- {args.prompts} prompts x {args.samples} samples, {args.latency:g} s per call, "
        f"{args.workers} actors of 1 CPU, medians of {args.rounds} rounds; Ray {got['ray']}",
        f"- {harness.machine_summary()}; {harness.load_line(load)}",
        "",
        *harness.md_table(HEAD, rows),
        "",
        f"- (c) / max(a, b): **{ratio:.3f}** ({'met' if ratio <= TARGET else 'NOT met'}: <= {TARGET}); within each round: "
        + ", ".join(f"{x:.3f}" for x in paired),
        f"- (c): {len(sizes) / max(1, len(got['batches'])):.0f} batches a run, median "
        f"{harness.median(sizes) if sizes else 0:.0f} prompts, largest {max(sizes, default=0)}",
        f"- max |(c) - (b)| confidence: {max(got['diffs']):.2e}",
    ]
    payload = {**got, "medians": med, "ratio": ratio, "paired": paired, "args": vars(args)}
    harness.write_report(args.out, "ray_main_job.md", "\n".join(lines), payload)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
