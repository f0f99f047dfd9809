"""Peak memory when scoring many pairs: bounded by streaming, not by the number of pairs.

    python -m benchmarks.bench_memory [--sizes 2000 20000] [--samples 5] [--reference]

Each size runs in a fresh process (peak RSS only grows within a process): answers with
``--samples`` samples each, every text distinct, generated passages of 30-60 words. With
``--reference`` the reference package's batched call is measured the same way, at the embedded
model's layer. Writes ``memory.md``.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
import warnings
from collections.abc import Sequence

from benchmarks import harness


def child(n_pairs: int, samples: int, impl: str) -> None:
    warnings.simplefilter("ignore")
    rng = random.Random(n_pairs)
    n_prompts = n_pairs // samples
    responses = [harness.synthetic_passage(rng, rng.randint(30, 60)) for _ in range(n_prompts)]
    cands = [r for r in responses for _ in range(samples)]
    refs = [harness.synthetic_passage(rng, rng.randint(30, 60)) for _ in range(len(cands))]
    base = harness.peak_rss_mb()
    t0 = time.perf_counter()
    if impl == "uqlm-bert":
        from uqlm_bert import BERTScorer

        BERTScorer(show_progress_bars=False).score(cands, refs)
    else:
        import bert_score

        from uqlm_bert.bertscore._known_models import EMBEDDED_MODEL_NAME, MODEL_LAYERS

        layer = MODEL_LAYERS[EMBEDDED_MODEL_NAME]  # at the same layer as ours
        bert_score.BERTScorer(model_type=harness.embedded_model(), num_layers=layer).score(
            cands, refs
        )
    seconds = time.perf_counter() - t0
    print(json.dumps({"impl": impl, "pairs": len(cands), "peak_rss_mb": harness.peak_rss_mb(),
                      "rss_before_mb": base, "seconds": seconds}))  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    ap = harness.parser(__doc__, "samples", "out")
    ap.add_argument("--sizes", type=int, nargs="+", default=[2000, 20000])
    ap.add_argument("--reference", action="store_true")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(int(args.child[0]), int(args.child[1]), args.child[2])
        return 0
    impls = ["uqlm-bert"] + (["reference"] if args.reference else [])
    rows = []
    for impl in impls:
        first = None
        for n in args.sizes:
            command = ["-m", "benchmarks.bench_memory", "--child", str(n), str(args.samples), impl]
            out = subprocess.run(
                [sys.executable, *command], capture_output=True, text=True, check=True,
                cwd=harness.REPO,
            )  # fmt: skip
            r = json.loads(out.stdout.strip().splitlines()[-1])
            first = first or r["peak_rss_mb"]
            rows.append([impl, f"{r['pairs']:,}", f"{r['peak_rss_mb']:.0f}",
                         f"{r['peak_rss_mb'] / first:.2f}x", f"{r['seconds']:.0f}"])  # fmt: skip
    head = ["implementation", "pairs", "peak RSS MiB", "ratio to smallest", "seconds"]
    lines = [harness.machine_summary(), "", *harness.md_table(head, rows)]
    harness.write_report(args.out, "memory.md", "\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
