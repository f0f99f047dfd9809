"""Rows per second of ``score_file`` on a local Ray with 1 and 2 workers, against one process.

    python -m benchmarks.bench_ray [--rows 240] [--samples 5] [--batch-size 16] [--workers 1 2]

Rows of an answer and 5 samples (pseudo-text, 60-190 tokens, a fixed seed) in JSON Lines, scored
by :func:`uqlm_bert.distributed.score_file` (reading, Ray, the actors' start and model load,
Parquet included); ``steady rows/s`` leaves out the start-up, from a second run of one batch per
worker; ``max abs diff`` against scores in this process (torch on every core; each Ray worker 1
CPU and 1 thread). Writes ``ray.md``.
"""

from __future__ import annotations

import json
import os
import random
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from benchmarks import harness
from uqlm_bert.distributed import score_file, start_local_ray
from uqlm_bert.scorers import build_scorer

#: The words of the pseudo-text: the harness's and some more.
WORDS = [*harness.WORDS, *"museum orchestra parliament village province engineer company "
         "village championship".split()]  # fmt: skip


def passage(rng: random.Random, n_words: int) -> str:
    """Biography-like pseudo-text with sentences and commas."""
    return harness.synthetic_passage(rng, n_words, WORDS, period=0.08, comma=0.05)


def make_rows(n: int, n_samples: int, seed: int) -> list[dict]:
    """``n`` rows; each text has 52-165 words, about 60-190 tokens."""
    rng = random.Random(seed)
    text = lambda: passage(rng, rng.randint(52, 165))  # noqa: E731
    return [
        {"id": i, "response": text(), "sampled_responses": [text() for _ in range(n_samples)]}
        for i in range(n)
    ]


def write_jsonl(rows: list[dict], path: Path) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def timed_score_file(src: Path, dst: Path, workers: int, batch: int) -> tuple[float, np.ndarray]:
    t0 = time.perf_counter()
    frame = score_file(src, dst, num_workers=workers, batch_size=batch, show_progress_bars=False)
    return time.perf_counter() - t0, frame["bert_score"].to_numpy()


def main(argv: Sequence[str] | None = None) -> int:
    ap = harness.parser(__doc__, "samples", "seed", "out")
    ap.add_argument("--rows", type=int, default=240)
    ap.add_argument("--batch-size", type=int, default=16, help="rows per actor batch")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args(argv)

    import ray
    import torch

    rows = make_rows(args.rows, args.samples, args.seed)
    scorer = build_scorer("bert_score")
    tok = scorer.engine.encoder.tokenizer
    lengths = [
        len(tok(t)["input_ids"]) for r in rows for t in [r["response"], *r["sampled_responses"]]
    ]
    before = os.getloadavg()[0]
    threads = os.cpu_count() or 1
    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    expected = scorer.score([r["response"] for r in rows], [r["sampled_responses"] for r in rows])
    single_s = time.perf_counter() - t0
    table = [["one process", f"1 x {threads}", f"{single_s:.1f}", f"{args.rows / single_s:.2f}",
              f"{args.rows / single_s:.2f}", "0"]]  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "rows.jsonl"
        write_jsonl(rows, src)
        start_local_ray(num_cpus=threads, log_to_driver=False)
        try:
            for workers in args.workers:
                small = Path(tmp) / f"small{workers}.jsonl"
                n_small = workers * args.batch_size
                write_jsonl(make_rows(n_small, args.samples, args.seed + 1000 + workers), small)
                small_s, _ = timed_score_file(
                    small, Path(tmp) / "s.parquet", workers, args.batch_size
                )
                wall_s, got = timed_score_file(
                    src, Path(tmp) / "o.parquet", workers, args.batch_size
                )
                steady = (args.rows - n_small) / (wall_s - small_s) if wall_s > small_s else np.nan
                diff = float(np.max(np.abs(got - expected)))
                table.append(["Ray, score_file", f"{workers} x 1", f"{wall_s:.1f}",
                              f"{args.rows / wall_s:.2f}", f"{steady:.2f}", f"{diff:.1e}"])  # fmt: skip
        finally:
            ray.shutdown()
    head = [
        "engine",
        "workers x torch threads",
        "wall s",
        "rows/s",
        "steady rows/s",
        "max abs diff",
    ]
    lines = [
        f"{harness.machine_summary()}; ray {ray.__version__}; {harness.load_line(before)}",
        f"Rows: {args.rows}, each a response and {args.samples} samples; "
        f"{min(lengths)}-{max(lengths)} tokens per text (mean {np.mean(lengths):.0f}); "
        f"{args.batch_size} rows per actor batch",
        "",
        *harness.md_table(head, table),
    ]
    harness.write_report(args.out, "ray.md", "\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
