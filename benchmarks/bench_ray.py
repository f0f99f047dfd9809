"""Rows per second of ``score_file`` on a local Ray with 1 and 2 workers, against one process.

Each row is an LLM-answer sized response with 5 sampled responses (pseudo-text of 60-190 tokens
for the embedded all-MiniLM-L6-v2, drawn with a fixed seed). The rows are written to JSON Lines
and scored with :func:`uqlm_bert.distributed.score_file`, which is what
``uqlm-bert score ... --engine ray`` runs, so the times include reading the file, handing the
rows to Ray, starting the actors (each loads the model once) and writing Parquet.

- ``wall s`` / ``rows/s``: the whole call, end to end.
- ``steady rows/s``: the rate once the actors are up: (N - n) / (T(N) - T(n)), from a second,
  small run of n rows (one batch per worker) that costs the same start-up.
- ``max |diff|``: the largest difference from single-process scores of the same rows.

The single-process line scores the same rows in this process with torch using every core (the
model load is not counted). Every Ray worker asks for 1 CPU and runs torch with 1 thread.

Usage::

    python benchmarks/bench_ray.py                  # 240 rows, workers 1 and 2
    python benchmarks/bench_ray.py --rows 400 --batch-size 16 --workers 1 2 4
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from uqlm_bert.distributed import score_file, start_local_ray  # noqa: E402
from uqlm_bert.scorers import build_scorer  # noqa: E402

_WORDS = (
    "the a of and in to is was he she it born known for his her career team city river "
    "university award film album played wrote released served member president football "
    "american british french german novel song year early later life died married children "
    "professional league season record first second national government science research "
    "published studied worked became founded led won politician actor singer author england "
    "museum orchestra parliament village province engineer company village championship"
).split()


def passage(rng: random.Random, n_words: int) -> str:
    """Biography-like pseudo-text with sentences and commas."""
    out: list[str] = []
    for i in range(n_words):
        word = rng.choice(_WORDS)
        if i == 0 or out[-1].endswith("."):
            word = word.capitalize()
        if rng.random() < 0.08:
            word += "."
        elif rng.random() < 0.05:
            word += ","
        out.append(word)
    return " ".join(out).rstrip(",.") + "."


def make_rows(n: int, n_samples: int, seed: int) -> list[dict]:
    """``n`` rows; each text has 52-165 words, about 60-190 tokens."""
    rng = random.Random(seed)
    return [
        {
            "id": i,
            "response": passage(rng, rng.randint(52, 165)),
            "sampled_responses": [passage(rng, rng.randint(52, 165)) for _ in range(n_samples)],
        }
        for i in range(n)
    ]


def write_jsonl(rows: list[dict], path: Path) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def timed_score_file(
    src: Path, dst: Path, workers: int, batch_size: int
) -> tuple[float, np.ndarray]:
    t0 = time.perf_counter()
    frame = score_file(
        src, dst, num_workers=workers, batch_size=batch_size, show_progress_bars=False
    )
    return time.perf_counter() - t0, frame["bert_score"].to_numpy()


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=240)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=16, help="rows per actor batch")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    import ray
    import torch

    rows = make_rows(args.rows, args.samples, args.seed)
    scorer = build_scorer("bert_score")
    tokenizer = scorer.engine.encoder.tokenizer
    lengths = [
        len(tokenizer(t)["input_ids"])
        for r in rows
        for t in [r["response"], *r["sampled_responses"]]
    ]
    load_before = os.getloadavg()[0]

    torch.set_num_threads(os.cpu_count() or 1)
    t0 = time.perf_counter()
    expected = scorer.score([r["response"] for r in rows], [r["sampled_responses"] for r in rows])
    single_s = time.perf_counter() - t0

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        src = tmp_path / "rows.jsonl"
        write_jsonl(rows, src)
        start_local_ray(num_cpus=os.cpu_count() or 1, log_to_driver=False)
        try:
            for workers in args.workers:
                small = tmp_path / f"small{workers}.jsonl"
                n_small = workers * args.batch_size
                write_jsonl(make_rows(n_small, args.samples, args.seed + 1000 + workers), small)
                small_s, _ = timed_score_file(
                    small, tmp_path / "small.parquet", workers, args.batch_size
                )
                wall_s, got = timed_score_file(
                    src, tmp_path / "out.parquet", workers, args.batch_size
                )
                steady = (
                    (args.rows - n_small) / (wall_s - small_s) if wall_s > small_s else float("nan")
                )
                results.append((workers, wall_s, steady, float(np.max(np.abs(got - expected)))))
        finally:
            ray.shutdown()
    load_after = os.getloadavg()[0]

    print(
        f"Machine: {cpu_name()}, {os.cpu_count()} cores; "
        f"torch {torch.__version__}, ray {ray.__version__}; load average "
        f"{load_before:.1f} before, {load_after:.1f} after"
    )
    print(
        f"Rows: {args.rows}, each a response and {args.samples} samples; "
        f"{min(lengths)}-{max(lengths)} tokens per text (mean {np.mean(lengths):.0f}); "
        f"{args.batch_size} rows per actor batch"
    )
    print()
    print("| engine | workers x torch threads | wall s | rows/s | steady rows/s | max abs diff |")
    print("|---|---|---:|---:|---:|---:|")
    threads = os.cpu_count() or 1
    print(
        f"| one process | 1 x {threads} | {single_s:.1f} | {args.rows / single_s:.2f} | "
        f"{args.rows / single_s:.2f} | 0 |"
    )
    for workers, wall_s, steady, diff in results:
        print(
            f"| Ray, score_file | {workers} x 1 | {wall_s:.1f} | {args.rows / wall_s:.2f} | "
            f"{steady:.2f} | {diff:.1e} |"
        )


if __name__ == "__main__":
    main()
