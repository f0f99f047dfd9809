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
from uqlm_bert.distributed import score_file
from uqlm_bert.distributed._session import start_local_ray
from uqlm_bert.scorers._registry import build_scorer

#: The words of the pseudo-text: the harness's and some more.
WORDS = [*harness.WORDS, *"museum orchestra parliament village province engineer company "
         "village championship".split()]  # fmt: skip
HEAD = ["engine", "workers x torch threads", "wall s", "rows/s", "steady rows/s", "max abs diff"]


def make_rows(n: int, n_samples: int, seed: int) -> list[dict]:
    """``n`` rows of biography-like pseudo-text with sentences and commas; each text has 52-165
    words, about 60-190 tokens."""
    rng = random.Random(seed)

    def text() -> str:
        return harness.synthetic_passage(rng, rng.randint(52, 165), WORDS, 0.08, 0.05)

    return [{"id": i, "response": text(), "sampled_responses": [text() for _ in range(n_samples)]}
            for i in range(n)]  # fmt: skip


def timed_score_file(rows: list[dict], workers: int, batch: int) -> tuple[float, np.ndarray]:
    """The seconds ``score_file`` takes on ``rows`` in a JSON Lines file (reading, scoring and
    writing Parquet), and their confidences."""
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "rows.jsonl", Path(tmp) / "rows.parquet"
        src.write_text("".join(json.dumps(r) + "\n" for r in rows))
        t0 = time.perf_counter()
        frame = score_file(
            src, dst, num_workers=workers, batch_size=batch, show_progress_bars=False
        )
        return time.perf_counter() - t0, frame["bert_score"].to_numpy()


def main(argv: Sequence[str] | None = None) -> int:
    ap = harness.parser(__doc__, "samples", "seed", "out")
    ap.add_argument("--rows", type=int, default=240)
    ap.add_argument("--batch-size", type=int, default=16, help="rows per actor batch")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args(argv)

    import torch

    rows = make_rows(args.rows, args.samples, args.seed)
    scorer = build_scorer("bert_score")
    texts = [t for r in rows for t in [r["response"], *r["sampled_responses"]]]
    lengths = [len(ids) for ids in scorer.engine.encoder.tokenizer(texts)["input_ids"]]
    before = os.getloadavg()[0]
    threads = os.cpu_count() or 1
    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    expected = scorer.score([r["response"] for r in rows], [r["sampled_responses"] for r in rows])
    single_s = time.perf_counter() - t0
    table = [["one process", f"1 x {threads}", f"{single_s:.1f}", f"{args.rows / single_s:.2f}",
              f"{args.rows / single_s:.2f}", "0"]]  # fmt: skip
    ray = start_local_ray(num_cpus=threads, log_to_driver=False)
    try:
        for workers in args.workers:
            n_small = workers * args.batch_size  # one batch per worker: the start-up alone
            small = make_rows(n_small, args.samples, args.seed + 1000 + workers)
            small_s, _ = timed_score_file(small, workers, args.batch_size)
            wall_s, got = timed_score_file(rows, workers, args.batch_size)
            steady = (args.rows - n_small) / (wall_s - small_s) if wall_s > small_s else np.nan
            diff = float(np.max(np.abs(got - expected)))
            table.append(["Ray, score_file", f"{workers} x 1", f"{wall_s:.1f}",
                          f"{args.rows / wall_s:.2f}", f"{steady:.2f}", f"{diff:.1e}"])  # fmt: skip
    finally:
        ray.shutdown()
    head = (f"{harness.machine_summary()}; ray {ray.__version__}; {harness.load_line(before)}\n"
            f"Rows: {args.rows}, each a response and {args.samples} samples; "
            f"{min(lengths)}-{max(lengths)} tokens per text (mean {np.mean(lengths):.0f}); "
            f"{args.batch_size} rows per actor batch\n")  # fmt: skip
    harness.write_report(args.out, "ray.md", "\n".join([head, *harness.md_table(HEAD, table)]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
