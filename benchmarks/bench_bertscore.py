"""BERTScore speed and accuracy, side by side with the reference package, in one process.

    python -m benchmarks.bench_bertscore [--device cpu] [--model minilm|bert-large-shape]

The reference batched and in a uqlm-style per-prompt loop, and ``uqlm_bert.BERTScorer`` in each
of ``--dtypes`` (float32: the reference's numbers; ``auto``: the scorers' default), on the same
pairs; ``--model bert-large-shape``: a random BERT of BERT-large's shape (layer 17). Reported:
medians, speed-ups over the faster reference, tokens/s, the encoder's TFLOP/s and share of the
measured matmul peak, F1 differences, and reduced dtypes' ranking agreement. Writes
``bertscore.md``.
"""

from __future__ import annotations

import tempfile
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from benchmarks import harness
from uqlm_bert.evaluation import spearman


def encoder_flops(lengths: list[int], layers: int, dim: int, ffn: int) -> float:
    """Multiply-add FLOPs (2 per MAC) of a BERT encoder over these token lengths (real tokens)."""
    total = 0.0
    for n in lengths:
        linear = n * (4 * dim * dim + 2 * dim * ffn)  # QKV + output projection + FFN
        attention = 2 * n * n * dim  # QK^T and AV
        total += 2.0 * layers * (linear + attention)
    return total


def matmul_peak_tflops(dtype: torch.dtype, device: str, dim: int, ffn: int) -> float:
    """Best TFLOP/s of a plain matmul in ``dtype`` over the model's GEMM shapes: the peak."""
    shapes = [(4096, dim, ffn), (4096, ffn, dim), (4096, dim, 3 * dim)]
    gpu = device.startswith("cuda")
    best = 0.0
    for m, k, n in shapes + ([(8192, 8192, 8192), (16384, 8192, 8192)] if gpu else []):
        a = torch.randn(m, k, device=device).to(dtype)
        b = torch.randn(k, n, device=device).to(dtype)
        for _ in range(3):
            a @ b
        reps = 20 if gpu else 5
        torch.cuda.synchronize() if gpu else None
        t0 = time.perf_counter()
        for _ in range(reps):
            a @ b
        torch.cuda.synchronize() if gpu else None
        best = max(best, 2 * m * k * n * reps / (time.perf_counter() - t0) / 1e12)
    return best


def distinct_prompts(n_prompts: int, n_samples: int) -> tuple[list[str], list[list[str]], str]:
    """The server benchmarks' :func:`harness.make_prompts`: every prompt its own texts."""
    if not harness.WIKIBIO.is_file():
        raise SystemExit("--distinct needs the WikiBio passages in the shared data folder")
    picked = harness.make_prompts(harness.load_passages(), n_prompts).values()
    responses, samples = [p.response for p in picked], [list(p.samples[:n_samples]) for p in picked]
    texts = responses + [s for ss in samples for s in ss]
    distinct = f"{len({t.strip() for t in texts}):,} distinct texts of {len(texts):,}"
    return responses, samples, f"WikiBio passages, sentences rotated per round ({distinct})"


def bert_large_shape(tokenizer_dir: str, out_dir: Path) -> str:
    """A seeded random BERT of BERT-large's shape with the embedded model's tokenizer, saved."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    torch.manual_seed(0)
    shape = {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16}
    BertModel(BertConfig(intermediate_size=4096, **shape)).save_pretrained(out_dir)
    AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(out_dir)
    return str(out_dir)


def main(argv: Sequence[str] | None = None) -> int:
    ap = harness.parser(__doc__, "prompts", "samples", "rounds", "device", "out")
    ap.add_argument("--distinct", action="store_true", help="make every text of the run distinct")
    ap.add_argument("--model", choices=["minilm", "bert-large-shape"], default="minilm")
    ap.add_argument("--dtypes", help="default float32,auto (and bfloat16,float16 on a GPU)")
    ap.add_argument("--no-loop", action="store_true", help="leave out the per-prompt loop")
    args = ap.parse_args(argv)

    warnings.simplefilter("ignore")
    import bert_score

    from uqlm_bert import BERTScorer

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    make = distinct_prompts if args.distinct else harness.load_prompts
    responses, samples, source = make(args.prompts, args.samples)
    cands = [r for r, ss in zip(responses, samples, strict=True) for _ in ss]
    refs = [s for ss in samples for s in ss]
    groups = np.repeat(np.arange(len(responses)), [len(s) for s in samples])
    path, layer = harness.embedded_model(), None
    tmp = tempfile.TemporaryDirectory()
    if args.model == "bert-large-shape":
        path, layer = bert_large_shape(path, Path(tmp.name) / "bert-large-shape"), 17
    gpu = device.startswith("cuda")
    names = (args.dtypes or ("float32,auto,bfloat16,float16" if gpu else "float32,auto")).split(",")
    ours = {}
    for name in names:
        scorer = BERTScorer(model_type=path, num_layers=layer, device=device,
                            dtype=None if name == "float32" else name, show_progress_bars=False)  # fmt: skip
        resolved = f" ({str(scorer.dtype).removeprefix('torch.')})" if name == "auto" else ""
        ours[f"uqlm-bert {name}{resolved}"] = scorer
    exact = next(iter(ours.values()))
    ref = bert_score.BERTScorer(model_type=path, num_layers=exact.num_layers, device=device)

    fns = {"reference, batched": lambda: ref.score(cands, refs)}
    if not args.no_loop:
        fns["reference, per-prompt loop (uqlm style)"] = lambda: [
            ref.score([r] * len(ss), ss) for r, ss in zip(responses, samples, strict=True)
        ]
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
    timings = harness.time_rounds(fns, args.rounds)
    med = {k: timings.median(k) for k in fns}
    ref_best_name = min((k for k in fns if k.startswith("reference")), key=med.__getitem__)
    ref_best = med[ref_best_name]

    F_ref = ref.score(cands, refs)[2].double().numpy()
    F = {label: s.score(cands, refs)[2].double().numpy() for label, s in ours.items()}
    conf = {label: np.bincount(groups, f) / np.bincount(groups) for label, f in F.items()}
    F_exact, conf_exact = F[next(iter(ours))], conf[next(iter(ours))]

    unique = sorted({t.strip() for t in cands + refs})
    lengths = [len(i) for i in exact.encoder.tokenize(unique)]
    cfg = exact.encoder.model.config
    dim, ffn = cfg.hidden_size, cfg.intermediate_size
    flops = encoder_flops(lengths, exact.num_layers, dim, ffn)
    dtypes = {s.dtype for s in ours.values()} | {torch.bfloat16}
    peaks = {dt: matmul_peak_tflops(dt, device, dim, ffn) for dt in dtypes}

    rows = []
    for name, t in med.items():
        row = [name, f"{t:.3f}", f"{ref_best / t:.2f}x", f"{sum(lengths) / t:,.0f}", "", "", ""]
        if name in ours:
            achieved = flops / t / 1e12
            row[4:] = [f"{achieved:.3g}", f"{100 * achieved / peaks[ours[name].dtype]:.0f}%",
                       f"{100 * achieved / peaks[torch.bfloat16]:.0f}%"]  # fmt: skip
        rows.append(row + ([f"{peak_mem[name]:.2f}" if name in ours else ""] if gpu else []))
    head = ["implementation", "median s", "speed-up vs faster reference", "tokens/s",
            "encoder TFLOP/s", "share of the dtype's peak", "share of the bf16 peak"]  # fmt: skip
    accuracy = [["float32: max abs F1 difference from the reference",
                 f"{np.abs(F_exact - F_ref).max():.2e}"]]  # fmt: skip
    for label in list(ours)[1:]:
        accuracy += [
            [f"{label}: max abs F1 difference from float32", f"{np.abs(F[label] - F_exact).max():.2e}"],
            [f"{label}: max abs confidence difference from float32",
             f"{np.abs(conf[label] - conf_exact).max():.2e}"],
            [f"{label}: Spearman of per-prompt confidences vs float32",
             f"{spearman(conf[label], conf_exact):.4f}"],
        ]  # fmt: skip
    model = "embedded all-MiniLM-L6-v2" if args.model == "minilm" else "BERT-large shape"
    peak_text = ", ".join(f"{str(dt).removeprefix('torch.')} {p:.1f}" for dt, p in peaks.items())
    lines = [
        f"## BERTScore speed ({device})", "", f"- {harness.machine_summary(device)}",
        f"- data: {source}; {len(responses)} prompts x {args.samples} samples = {len(cands)} "
        f"pairs, {len(unique):,} unique texts, {sum(lengths):,} tokens, "
        f"{np.mean(lengths):.0f} per text on average",
        f"- model: {model}, layer {exact.num_layers}, no idf; {args.rounds} rounds in turning "
        "order after a warm-up, medians",
        f"- matrix peaks measured here (plain matmul, TFLOP/s): {peak_text}", "",
        *harness.md_table(head + (["peak GPU memory GiB"] if gpu else []), rows), "",
        f"Faster reference: {ref_best_name}. Encoder TFLOP/s count the matrix and attention work "
        "of real tokens only, over the whole call's time (tokenizing and matching included).", "",
        *harness.md_table(["accuracy", "value"], accuracy),
    ]  # fmt: skip
    harness.write_report(args.out, "bertscore.md", "\n".join(lines))
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
