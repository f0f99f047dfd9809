"""ONNX Runtime (CPU) against the PyTorch encoder forward, in float32 and in reduced precision.

    python benchmarks/bench_onnxruntime.py [--prompts 24] [--samples 5] [--rounds 5]
        [--batch-size 64] [--threads 2] [--exporter torchscript|dynamo] [--no-reduced]

Needs ``onnxruntime`` and ``onnx`` (plus ``onnxscript`` for ``--exporter dynamo``); without
``onnxruntime`` it prints why and exits with status 0. Nothing is downloaded: the embedded
all-MiniLM-L6-v2 is exported from its installed copy into a temporary folder.

The model, truncated to the layer the scorer uses (5), is exported to ONNX with dynamic batch
and sequence axes. The default TorchScript exporter runs on a copy of the model with eager
attention, the graph that ONNX Runtime's transformer optimizer fuses into its ``Attention``,
``EmbedLayerNormalization``, ``SkipLayerNormalization`` and ``BiasGelu`` kernels. Then, in one
process, with interleaved rounds after a warm-up, it times the forward over the unique texts of
realistic (answer, sample) pairs, sorted by length and cut into batches as the scorer does:

- uqlm-bert exact: ``Encoder.embed_packed`` in float32 (the packed forward, no work on padding
  outside attention) under ``Encoder.reuse_workspace()``, the scorer's own call;
- uqlm-bert fast: the same in bfloat16 (when the CPU supports bfloat16 in oneDNN);
- the transformers forward in float32 on padded batches (what the packed forward replaces);
- ONNX Runtime float32: the plain export, and the export after the transformer optimizer;
- the optimized graph again, one text per call (no padding), to show what padding costs it;
- ONNX Runtime reduced precision: the optimized graph converted to float16 (inputs and outputs
  stay float32; ONNX Runtime runs any node its CPU provider has no float16 kernel for in float32),
  and dynamic int8 quantization (``quantize_dynamic``, per-channel int8 weights) of its MatMul
  and Attention nodes. There is no bfloat16 ONNX Runtime variant; the report says whether the
  CPU provider has a bfloat16 ``MatMul`` kernel at all.

ONNX Runtime gets padded ``input_ids``, ``attention_mask`` and ``token_type_ids``; every variant
returns the same thing, each text's L2-normalised ``[tokens, 384]`` embeddings (tokenization is
shared and not timed). Accuracy is measured against the exact path: the largest absolute
difference of the normalised token embeddings, the smallest token cosine, and the BERTScore F1 of
the (answer, sample) pairs, computed by greedy matching without idf ([CLS]/[SEP] weigh 0 but stay
match targets), which the report checks against ``uqlm_bert.BERTScorer``. Prints a Markdown
report.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import logging
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import load_prompts, machine_summary, median, time_rounds  # noqa: E402

INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
NUM_LAYERS = 5  # the embedded model's published BERTScore layer

Embeddings = list[torch.Tensor]  # per text, L2-normalised [tokens, dim] float32


@dataclass
class Variant:
    """One engine configuration: how to embed a list of batches, and notes for the report."""

    name: str
    embed: Callable[[Sequence[Sequence[Sequence[int]]]], Embeddings]
    batches: Sequence[Sequence[Sequence[int]]]
    notes: list[str] = field(default_factory=list)

    def run(self) -> Embeddings:
        return self.embed(self.batches)


# ---------------------------------------------------------------------------------------------
# export and graph transforms


class _ExportWrapper(torch.nn.Module):
    """The encoder with positional inputs and the last hidden state as its only output."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> torch.Tensor:
        out = self.model(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        )
        return out.last_hidden_state


def export_onnx(model: torch.nn.Module, path: Path, exporter: str) -> str:
    """Export ``model`` (a truncated ``BertModel``) to ``path``; return how it was exported.

    The example batch has padding, so nothing in the graph is specialised to an all-ones mask;
    batch and sequence axes are dynamic.
    """
    model = copy.deepcopy(model).eval()
    if exporter == "torchscript":
        # Eager attention: the matmul/softmax pattern the transformer optimizer fuses.
        model.set_attn_implementation("eager")
    wrapper = _ExportWrapper(model).eval()
    ids = torch.tensor([[101, 2023, 2003, 1037, 3231, 102], [101, 7592, 102, 0, 0, 0]])
    mask = (ids != 0).long()
    args = (ids, mask, torch.zeros_like(ids))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "torchscript":
            axes = {name: {0: "batch", 1: "sequence"} for name in INPUT_NAMES}
            axes["last_hidden_state"] = {0: "batch", 1: "sequence"}
            torch.onnx.export(
                wrapper,
                args,
                str(path),
                input_names=list(INPUT_NAMES),
                output_names=["last_hidden_state"],
                dynamic_axes=axes,
                opset_version=17,
                do_constant_folding=True,
                dynamo=False,
            )
            return (
                "torch.onnx.export, TorchScript exporter (dynamo=False), opset 17, eager attention"
            )
        batch, seq = torch.export.Dim("batch"), torch.export.Dim("sequence")
        onnx_program = torch.onnx.export(
            wrapper,
            args,
            input_names=list(INPUT_NAMES),
            output_names=["last_hidden_state"],
            dynamic_shapes={name: {0: batch, 1: seq} for name in INPUT_NAMES},
            dynamo=True,
            optimize=True,
            verbose=False,
        )
        onnx_program.save(str(path))
    return "torch.onnx.export, dynamo exporter (torch.export), SDPA attention"


def optimize_graph(src: Path, dst: Path, heads: int, hidden: int) -> dict[str, int]:
    """Apply ONNX Runtime's transformer optimizer (BERT fusions); return the fused-op counts."""
    from onnxruntime.transformers.optimizer import optimize_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = optimize_model(str(src), model_type="bert", num_heads=heads, hidden_size=hidden)
    opt.save_model_to_file(str(dst))
    stats = opt.get_fused_operator_statistics()
    return {k: v for k, v in stats.items() if v}


def float16_graph(src: Path, dst: Path, heads: int, hidden: int) -> None:
    """The optimized graph converted to float16 (its inputs and outputs stay float32)."""
    from onnxruntime.transformers.optimizer import optimize_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = optimize_model(str(src), model_type="bert", num_heads=heads, hidden_size=hidden)
        opt.convert_float_to_float16(keep_io_types=True)
    opt.save_model_to_file(str(dst))


def int8_graph(src: Path, dst: Path) -> None:
    """Dynamic int8 quantization of the optimized graph's MatMul and Attention nodes.

    Weights become int8 per output channel, activations are quantized on the fly; the embedding
    tables and layer norms stay float32. Symbolic shape inference runs first, since the
    quantizer needs the types of the fused (contrib-domain) nodes' outputs.
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.shape_inference import quant_pre_process

    typed = dst.with_name(dst.stem + "_typed.onnx")
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # the quantizer warns through the root logger
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            quant_pre_process(str(src), str(typed), skip_optimization=True)
            quantize_dynamic(
                str(typed),
                str(dst),
                weight_type=QuantType.QInt8,
                per_channel=True,
                op_types_to_quantize=["MatMul", "Attention"],
            )
    finally:
        root.setLevel(level)


def ort_cpu_has_bf16_matmul() -> bool:
    """Whether ONNX Runtime's CPU provider can run a bfloat16 ``MatMul`` node."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    node = helper.make_node("MatMul", ["a", "b"], ["y"])
    inputs = [helper.make_tensor_value_info(n, TensorProto.BFLOAT16, [4, 4]) for n in "ab"]
    output = helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [4, 4])
    graph = helper.make_graph([node], "probe", inputs, [output])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    try:
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - NOT_IMPLEMENTED is the expected answer
        return False
    return True


# ---------------------------------------------------------------------------------------------
# engines


def ort_session(path: Path, threads: int) -> object:
    """A CPU ``InferenceSession`` with ``threads`` intra-op threads and full graph optimization."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def ort_embedder(
    session: object, pad_id: int
) -> Callable[[Sequence[Sequence[Sequence[int]]]], Embeddings]:
    """Embed batches with an ONNX Runtime session: padded inputs, normalised per-text outputs."""
    np_types = {"tensor(int64)": np.int64, "tensor(int32)": np.int32}
    inputs = {i.name: np_types[i.type] for i in session.get_inputs()}
    output = session.get_outputs()[0].name

    def embed(batches: Sequence[Sequence[Sequence[int]]]) -> Embeddings:
        result: Embeddings = []
        for batch in batches:
            lens = [len(ids) for ids in batch]
            ids = np.full((len(batch), max(lens)), pad_id, dtype=np.int64)
            mask = np.zeros_like(ids)
            for i, row in enumerate(batch):
                ids[i, : lens[i]] = row
                mask[i, : lens[i]] = 1
            arrays = {
                "input_ids": ids,
                "attention_mask": mask,
                "token_type_ids": np.zeros_like(ids),
            }
            feed = {name: arrays[name].astype(dt, copy=False) for name, dt in inputs.items()}
            hidden = torch.from_numpy(session.run([output], feed)[0]).float()
            hidden = hidden / hidden.norm(dim=-1, keepdim=True)
            result.extend(hidden[i, :n] for i, n in enumerate(lens))
        return result

    return embed


def ours_embedder(encoder: object) -> Callable[[Sequence[Sequence[Sequence[int]]]], Embeddings]:
    """Embed batches as the scorer does: ``embed_packed`` under one ``reuse_workspace`` block."""

    def embed(batches: Sequence[Sequence[Sequence[int]]]) -> Embeddings:
        result: Embeddings = []
        with encoder.reuse_workspace():
            for batch in batches:
                result.extend(encoder.embed_packed(batch).split([len(ids) for ids in batch]))
        return result

    return embed


def padded_torch_embedder(
    encoder: object,
) -> Callable[[Sequence[Sequence[Sequence[int]]]], Embeddings]:
    """Embed batches with the plain transformers forward on padded batches (the encoder's path
    for architectures the packed pass does not cover)."""

    def embed(batches: Sequence[Sequence[Sequence[int]]]) -> Embeddings:
        result: Embeddings = []
        for batch in batches:
            lens = [len(ids) for ids in batch]
            ids = torch.zeros((len(batch), max(lens)), dtype=torch.long)
            for i, row in enumerate(batch):
                ids[i, : len(row)] = torch.tensor(row)
            mask = (torch.arange(max(lens))[None, :] < torch.tensor(lens)[:, None]).long()
            with torch.inference_mode():
                hidden = encoder.model(ids, attention_mask=mask)[0].float()
            hidden = hidden / hidden.norm(dim=-1, keepdim=True)
            result.extend(hidden[i, :n] for i, n in enumerate(lens))
        return result

    return embed


# ---------------------------------------------------------------------------------------------
# accuracy


def embedding_error(embs: Embeddings, ref: Embeddings) -> tuple[float, float]:
    """Largest absolute difference and smallest token cosine between two sets of embeddings."""
    a, b = torch.cat(embs).double(), torch.cat(ref).double()
    cos = (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))
    return float((a - b).abs().max()), float(cos.min())


def pair_f1(
    embs: dict[str, torch.Tensor],
    weights: dict[str, torch.Tensor],
    pairs: Sequence[tuple[str, str]],
) -> np.ndarray:
    """BERTScore F1 of each (candidate, reference) pair by greedy matching."""
    from uqlm_bert.bertscore.matching import greedy_match

    out = np.empty(len(pairs))
    for k, (c, r) in enumerate(pairs):
        ec, er = embs[c].double(), embs[r].double()
        out[k] = float(greedy_match(ec @ er.T, weights[c], weights[r])[2])
    return out


# ---------------------------------------------------------------------------------------------


def _skip(message: str) -> None:
    print(f"Skipped: {message}")
    sys.exit(0)


def _versions() -> str:
    import onnxruntime
    import transformers

    parts = [
        f"onnxruntime {onnxruntime.__version__}",
        f"torch {torch.__version__}",
        f"transformers {transformers.__version__}",
    ]
    for mod in ("onnx", "onnxscript"):
        if importlib.util.find_spec(mod) is not None:
            parts.append(f"{mod} {__import__(mod).__version__}")
    return ", ".join(parts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--prompts", type=int, default=24)
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2, help="torch threads and ORT intra-op threads")
    ap.add_argument("--exporter", choices=("torchscript", "dynamo"), default="torchscript")
    ap.add_argument("--no-reduced", action="store_true", help="skip the float16 and int8 graphs")
    args = ap.parse_args()

    if importlib.util.find_spec("onnxruntime") is None:
        _skip("onnxruntime is not installed (pip install onnxruntime onnx); nothing was measured.")
    if importlib.util.find_spec("onnx") is None:
        _skip(
            "the onnx package is not installed (pip install onnx); it is needed to export the "
            "model and to run ONNX Runtime's graph tools."
        )
    if args.exporter == "dynamo" and importlib.util.find_spec("onnxscript") is None:
        _skip("--exporter dynamo needs onnxscript (pip install onnxscript).")

    import onnxruntime as ort

    warnings.simplefilter("ignore")
    ort.set_default_logger_severity(3)
    logging.getLogger("onnxruntime").setLevel(logging.ERROR)
    for name in ("transformers", "torch.onnx", "onnxscript"):
        logging.getLogger(name).setLevel(logging.ERROR)
    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()

    from uqlm_bert import BERTScorer
    from uqlm_bert.bertscore.models import load_encoder
    from uqlm_bert.bertscore.settings import BERTScoreSettings

    responses, samples, source = load_prompts(args.prompts, args.samples)
    pairs = [(r.strip(), s.strip()) for r, ss in zip(responses, samples, strict=True) for s in ss]
    texts = sorted({t for pair in pairs for t in pair})

    exact = load_encoder(BERTScoreSettings(num_layers=NUM_LAYERS, device="cpu"))
    token_ids = exact.tokenize(texts)
    order = sorted(range(len(texts)), key=lambda i: len(token_ids[i]))
    texts = [texts[i] for i in order]
    token_ids = [token_ids[i] for i in order]
    lengths = [len(ids) for ids in token_ids]
    batches = [token_ids[b : b + args.batch_size] for b in range(0, len(texts), args.batch_size)]
    singles = [[ids] for ids in token_ids]
    real = sum(lengths)
    padded = sum(len(b) * max(len(ids) for ids in b) for b in batches)
    pad_id = exact.tokenizer.pad_token_id or 0
    cfg = exact.model.config
    heads, hidden = cfg.num_attention_heads, cfg.hidden_size

    variants: list[Variant] = [
        Variant("uqlm-bert exact (float32, packed)", ours_embedder(exact), batches),
    ]
    not_run: list[str] = []
    if torch.ops.mkldnn._is_mkldnn_bf16_supported():
        fast = load_encoder(
            BERTScoreSettings(num_layers=NUM_LAYERS, device="cpu", dtype="bfloat16")
        )
        variants.append(Variant("uqlm-bert fast (bfloat16, packed)", ours_embedder(fast), batches))
    else:
        not_run.append("uqlm-bert fast (bfloat16): this CPU has no bfloat16 support in oneDNN")
    variants.append(
        Variant(
            "transformers forward (float32, padded)",
            padded_torch_embedder(exact),
            batches,
        )
    )

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        plain, opt = folder / "plain.onnx", folder / "optimized.onnx"
        t0 = time.perf_counter()
        export_method = export_onnx(exact.model, plain, args.exporter)
        export_s = time.perf_counter() - t0
        fused = optimize_graph(plain, opt, heads, hidden)
        opt_session = ort_session(opt, args.threads)
        variants += [
            Variant(
                "ORT float32, plain export",
                ort_embedder(ort_session(plain, args.threads), pad_id),
                batches,
            ),
            Variant("ORT float32, optimized", ort_embedder(opt_session, pad_id), batches),
            Variant(
                "ORT float32, optimized, 1 text per call (no padding)",
                ort_embedder(opt_session, pad_id),
                singles,
            ),
        ]
        if args.no_reduced:
            not_run.append("ORT float16 and int8: --no-reduced")
        else:
            reduced: list[tuple[str, Callable[[Path], None]]] = [
                ("ORT float16, optimized", lambda p: float16_graph(plain, p, heads, hidden)),
                (
                    "ORT int8 dynamic quantization (per channel), optimized",
                    lambda p: int8_graph(opt, p),
                ),
            ]
            for i, (name, build) in enumerate(reduced):
                path = folder / f"reduced{i}.onnx"
                try:
                    build(path)
                    variant = Variant(
                        name, ort_embedder(ort_session(path, args.threads), pad_id), batches
                    )
                    variant.run()  # fails here when a kernel is missing for this CPU
                except Exception as exc:  # noqa: BLE001 - report any failure and go on
                    not_run.append(
                        f"{name}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                    )
                    continue
                variants.append(variant)
        if ort_cpu_has_bf16_matmul():
            not_run.append(
                "ORT bfloat16: this ONNX Runtime's CPU provider has a bfloat16 MatMul kernel, but "
                "ONNX Runtime's graph tools offer no bfloat16 conversion of the model to time"
            )
        else:
            not_run.append(
                "ORT bfloat16: this ONNX Runtime's CPU provider has no bfloat16 MatMul kernel "
                "(NOT_IMPLEMENTED), so a bfloat16 graph cannot run on it"
            )

        outputs = {v.name: v.run() for v in variants}  # warm-up, and the outputs for accuracy
        times = time_rounds({v.name: v.run for v in variants}, args.rounds)

    med = {k: median(t) for k, t in times.items()}
    base_name = variants[0].name
    base = outputs[base_name]
    special = exact.special_ids
    weights = {
        t: torch.tensor([0.0 if i in special else 1.0 for i in ids], dtype=torch.float64)
        for t, ids in zip(texts, token_ids, strict=True)
    }
    f1 = {
        name: pair_f1(dict(zip(texts, embs, strict=True)), weights, pairs)
        for name, embs in outputs.items()
    }
    scorer = BERTScorer(num_layers=NUM_LAYERS, show_progress_bars=False)
    f1_scorer = scorer.score([c for c, _ in pairs], [r for _, r in pairs])[2].double().numpy()
    load_after = os.getloadavg()

    print("## ONNX Runtime vs the PyTorch encoder forward (CPU)\n")
    print(f"- machine: {machine_summary()}; ORT intra-op threads {args.threads}")
    print(f"- versions: {_versions()}")
    print(
        f"- data: {source}; {len(pairs)} (answer, sample) pairs, {len(texts)} unique texts, "
        f"{np.mean(lengths):.0f} tokens per text on average ({min(lengths)}-{max(lengths)})"
    )
    print(
        f"- model: embedded all-MiniLM-L6-v2 truncated to layer {NUM_LAYERS}; texts sorted by "
        f"length, batches of {args.batch_size}; {args.rounds} interleaved rounds after a "
        "warm-up, medians; tokenization not timed"
    )
    print(f"- export: {export_method} ({export_s:.1f} s); dynamic batch and sequence axes")
    print(
        f"- transformer optimizer fusions: "
        f"{', '.join(f'{k} x{v}' for k, v in fused.items()) or 'none'}"
    )
    print(
        f"- padding: the padded batches hold {padded:,} token slots for {real:,} real tokens "
        f"(+{100 * (padded / real - 1):.1f}%)"
    )
    print(
        f"- load average (1/5/15 min): before {load_before[0]:.2f}/{load_before[1]:.2f}/"
        f"{load_before[2]:.2f}, after {load_after[0]:.2f}/{load_after[1]:.2f}/{load_after[2]:.2f}\n"
    )
    print(
        "| engine | median s | min-max s | time vs uqlm-bert exact | tokens/s | "
        "max abs emb. diff | min token cosine | max abs F1 diff |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for v in variants:
        t = med[v.name]
        diff, cos = embedding_error(outputs[v.name], base)
        f1_diff = np.abs(f1[v.name] - f1[base_name]).max()
        print(
            f"| {v.name} | {t:.3f} | {min(times[v.name]):.3f}-{max(times[v.name]):.3f} | "
            f"{t / med[base_name]:.2f}x | {real / t:,.0f} | {diff:.1e} | {cos:.6f} | "
            f"{f1_diff:.1e} |"
        )
    print(
        "\nTime ratios above 1 are slower than the exact path. Differences are against the "
        "exact path's normalised token embeddings and its F1 on the pairs."
    )
    print(
        f"\nF1 from the exact path's embeddings vs `uqlm_bert.BERTScorer` (layer {NUM_LAYERS}, "
        f"no idf): max abs difference {np.abs(f1[base_name] - f1_scorer).max():.1e}."
    )
    if not_run:
        print("\nNot measured:\n")
        for line in not_run:
            print(f"- {line}")


if __name__ == "__main__":
    main()
