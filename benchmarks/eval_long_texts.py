"""Long answers scored whole: does the second half of an answer count? And the window choice.

    python -m benchmarks.eval_long_texts [--sets 4] [--skip-task] [--skip-fidelity]

**The task.** Answer ``i`` joins the passages of people ``i .. i+5`` (about 1,100 tokens), its
samples theirs; a corrupted copy replaces the last three by people ``i+6 .. i+8``'s. Per scorer
and ``long_texts``: AUROC of faithful against corrupted, mean confidences and paired drop.

**The window choice.** Texts of 510 tokens are also read in windows of 128 or 256 tokens, per
overlap and rule (most context on both sides, first window, mean over the windows: the engine's,
checked): each token's cosine to its whole-text embedding, each pair's F1 change (fixed idf),
tokens read per token. Writes ``long_texts.md``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import torch

from benchmarks import harness
from benchmarks.harness import Passage
from uqlm_bert.bertscore._fixed_idf import idf_for_tokenizer
from uqlm_bert.bertscore._loading import load_encoder
from uqlm_bert.bertscore._matching import greedy_match
from uqlm_bert.bertscore._settings import SCORER_DEFAULTS
from uqlm_bert.bertscore._windows import Frame, plan_windows, split_in_windows
from uqlm_bert.evaluation import auroc
from uqlm_bert.scorers._registry import build_scorer

PEOPLE = 6  # passages per long answer
KEPT = 3  # passages a corrupted copy keeps
SAMPLES = 5  # samples per set
WINDOW_SIZES = (128, 256)
OVERLAPS = (0, 16, 32, 64)
RULES = ("most context", "first window", "mean of windows")
FIDELITY_SAMPLES = 2  # samples per answer in the window-choice measurement


def long_answers(
    rows: Sequence[Passage], sample_set: int
) -> tuple[list[str], list[str], list[list[str]]]:
    """``(faithful, corrupted, samples)``: one of each per starting person (see the module doc)."""
    n, join = len(rows), "\n\n".join
    faithful, corrupted, samples = [], [], []
    for i in range(n):
        people = [(i + j) % n for j in range(PEOPLE)]
        others = [(i + PEOPLE + j) % n for j in range(PEOPLE - KEPT)]
        faithful.append(join(rows[p].response for p in people))
        corrupted.append(join(rows[p].response for p in people[:KEPT] + others))
        chosen = range(sample_set * SAMPLES, (sample_set + 1) * SAMPLES)
        samples.append([join(rows[p].samples[s] for p in people) for s in chosen])
    return faithful, corrupted, samples


def separation(scorer, faithful, corrupted, samples) -> dict[str, float]:
    """AUROC, mean confidences and the mean paired drop of one scorer on one set of samples."""
    conf = scorer.score(faithful + corrupted, samples + samples)
    good, bad = conf[: len(faithful)], conf[len(faithful) :]
    auc = auroc(np.r_[good, bad], np.r_[np.ones(len(good)), np.zeros(len(bad))])
    return {"auroc": auc, "faithful": float(good.mean()), "corrupted": float(bad.mean()),
            "drop": float((good - bad).mean())}  # fmt: skip


def task_table(rows: Sequence[Passage], sets: int, device: str) -> list[dict]:
    out = []
    for name in ("bert_score", "cosine_sim"):
        for mode in ("window", "truncate"):
            scorer = build_scorer(name, device=device, long_texts=mode)
            started, n_sets = time.perf_counter(), sets if name == "bert_score" else 1
            per_set = [separation(scorer, *long_answers(rows, s)) for s in range(n_sets)]
            row = {k: float(np.mean([p[k] for p in per_set])) for k in per_set[0]}
            row |= {"scorer": name, "long_texts": mode, "sets": len(per_set),
                    "auroc_per_set": [round(p["auroc"], 3) for p in per_set],
                    "seconds": time.perf_counter() - started}  # fmt: skip
            out.append(row)
            print(row, flush=True)
    return out


def fidelity_texts(enc, rows: Sequence[Passage]) -> tuple[list[np.ndarray], list[tuple[int, int]]]:
    """Token ids of the first 510 tokens of each long answer and its first samples; the pairs."""
    faithful, _, samples = long_answers(rows, 0)
    texts, pairs = [], []
    for answer, group in zip(faithful, samples, strict=True):
        a = len(texts)
        texts.append(answer)
        for sample in group[:FIDELITY_SAMPLES]:
            pairs.append((a, len(texts)))
            texts.append(sample)
    ids = [np.asarray(i, dtype=np.int64) for i in enc.tokenize(texts, enc.max_length)]
    return ids, pairs


def embed_all(enc, seqs: list[np.ndarray], batch: int = 32) -> list[torch.Tensor]:
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    out: list[torch.Tensor | None] = [None] * len(seqs)
    with enc.reuse_workspace():
        for b in range(0, len(order), batch):
            idx = order[b : b + batch]
            rows = enc.embed_packed([seqs[i] for i in idx]).split([len(seqs[i]) for i in idx])
            for i, e in zip(idx, rows, strict=True):
                out[i] = e
    return out  # type: ignore[return-value]


def most_context_spans(windows: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The tokens each window gives under the "most context" rule (each token's from the window
    where min(context before, context after) is largest): the cuts fall mid-overlap."""
    cuts = [
        (b - 1 + a_next) // 2 + 1 for (_, b), (a_next, _) in zip(windows, windows[1:], strict=False)
    ]
    return list(zip([windows[0][0], *cuts], [*cuts, windows[-1][1]], strict=True))


def windowed(enc, ids: list[np.ndarray], window: int, overlap: int) -> tuple[dict, float]:
    """Each text's embedding read in windows by each rule (the mean checked against the engine's);
    and the tokens read per token of text."""
    frame = Frame.of(enc.tokenizer, window)
    p, s = len(frame.prefix), len(frame.suffix)
    plans, seqs = [], []
    for t in ids:
        own = t[p : len(t) - s]
        plan = plan_windows(len(own), frame.capacity, overlap)
        plans.append((len(seqs), plan))
        seqs += [np.concatenate((t[:p], own[a:b], t[len(t) - s :])) for a, b in plan]
    embs = embed_all(enc, seqs)
    out = {rule: [] for rule in RULES}
    for t, (first, plan) in zip(ids, plans, strict=True):
        parts = [embs[first + j][p : p + (b - a)] for j, (a, b) in enumerate(plan)]
        head, tail = embs[first][:p], embs[first + len(plan) - 1][p + plan[-1][1] - plan[-1][0] :]
        n = len(t) - p - s
        spans, prev = most_context_spans(plan), [plan[0][0], *(b for _, b in plan[:-1])]
        most = torch.cat(
            [e[ka - a : kb - a] for e, (a, _), (ka, kb) in zip(parts, plan, spans, strict=True)]
        )
        firsts = torch.cat([e[pb - a :] for e, (a, _), pb in zip(parts, plan, prev, strict=True)])
        total, count = torch.zeros((n, parts[0].shape[1])), torch.zeros((n, 1))
        for (a, b), e in zip(plan, parts, strict=True):
            total[a:b] += e
            count[a:b] += 1
        mean = torch.nn.functional.normalize(total / count, dim=-1)
        for rule, own_emb in zip(RULES, (most, firsts, mean), strict=True):
            out[rule].append(torch.cat((head, own_emb, tail)))
    cost = sum(len(q) for q in seqs) / sum(len(t) for t in ids)
    split = split_in_windows(ids, frame, overlap)
    stitched = split.stitch_packed(torch.cat(embed_all(enc, split.sequences)), normalize=True)
    engine = stitched.split(split.lengths)
    for mine, theirs in zip(out["mean of windows"], engine, strict=True):
        assert torch.allclose(mine, theirs, atol=1e-5), "the engine's stitching differs"
    return out, cost


def f1(emb_a: torch.Tensor, w_a: torch.Tensor, emb_b: torch.Tensor, w_b: torch.Tensor) -> float:
    return float(greedy_match(emb_a @ emb_b.T, w_a, w_b)[2])


def fidelity_table(device: str, rows: Sequence[Passage]) -> list[dict]:
    enc = load_encoder(SCORER_DEFAULTS.replace(device=device))
    idf, zero = idf_for_tokenizer(enc.tokenizer), set(enc.special_ids)
    ids, pairs = fidelity_texts(enc, rows)
    weights = [torch.tensor([0.0 if i in zero else idf[int(i)] for i in t]) for t in ids]
    weights = [w / w.sum() for w in weights]
    whole = embed_all(enc, ids)
    exact = [f1(whole[a], weights[a], whole[b], weights[b]) for a, b in pairs]
    out = []
    for window in WINDOW_SIZES:
        # the overlap the windows get: at most a quarter of a window (see plan_windows)
        for overlap in sorted({min(o, (window - 2) // 4) for o in OVERLAPS}):
            by_rule, cost = windowed(enc, ids, window, overlap)
            for rule, embs in by_rule.items():
                cos = torch.cat([(e * w).sum(-1) for e, w in zip(embs, whole, strict=True)])
                got = [f1(embs[a], weights[a], embs[b], weights[b]) for a, b in pairs]
                diff = np.abs(np.asarray(got) - np.asarray(exact))
                out.append({"window": window, "overlap": overlap, "rule": rule, "cost": cost,
                            "cos_mean": float(cos.mean()), "cos_p1": float(cos.quantile(0.01)),
                            "df1_mean": float(diff.mean()), "df1_max": float(diff.max())})  # fmt: skip
                print(out[-1], flush=True)
    return out


def markdown(task: list[dict], fidelity: list[dict]) -> str:
    task_rows = [
        [r["scorer"], r["long_texts"], r["sets"], f"{r['auroc']:.3f}", f"{r['faithful']:.4f}",
         f"{r['corrupted']:.4f}", f"{r['drop']:.4f}", r["auroc_per_set"]]
        for r in task
    ]  # fmt: skip
    window_rows = [
        [r["window"], r["overlap"], r["rule"], f"{r['cost']:.3f}", f"{r['cos_mean']:.4f}",
         f"{r['cos_p1']:.4f}", f"{r['df1_mean']:.5f}", f"{r['df1_max']:.5f}"]
        for r in fidelity
    ]  # fmt: skip
    return "\n".join([
        "### Long answers: faithful against second half replaced (sets of 5 samples)", "",
        *harness.md_table(["scorer", "long_texts", "sets", "AUROC", "mean confidence, faithful",
                           "corrupted", "mean drop", "AUROC per set"], task_rows), "",
        "### Window choice: windowed against whole-text embeddings (510-token texts)", "",
        *harness.md_table(["window", "overlap", "rule", "tokens read per token",
                           "token cosine, mean", "1st pct", "abs F1 change, mean", "max"],
                          window_rows),
    ])  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    ap = harness.parser(__doc__, "device", "data", "out")
    ap.add_argument("--sets", type=int, default=1, choices=(1, 2, 3, 4))
    ap.add_argument("--skip-fidelity", action="store_true", help="only the task")
    ap.add_argument("--skip-task", action="store_true", help="only the window choice")
    args = ap.parse_args(argv)
    if not harness.have_data(args.data):
        return 0
    torch.manual_seed(0)
    rows = harness.load_passages(args.data)
    task = [] if args.skip_task else task_table(rows, args.sets, args.device)
    fidelity = [] if args.skip_fidelity else fidelity_table(args.device, rows)
    harness.write_report(args.out, "long_texts.md", markdown(task, fidelity))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
