"""Which BERTScore settings detect hallucinations best? A sweep on the WikiBio GPT-3 passages.

    python -m benchmarks.eval_wikibio [--layers 1 2 3 4 5 6] [--no-other-scorers]

SelfCheckGPT's task: people labelled each sentence of a GPT-3 passage accurate (0), minor (0.5)
or major inaccurate (1). Judged (x100): passage Pearson and Spearman of the negated confidence
against the mean label; sentence "NonFact" and "Factual" AUC-PR. Swept on the embedded model:
layer; idf off, over each passage's samples or over all; P, R or F1; the method (each answer
sentence against each sample's sentences, against each whole sample, or the whole answer against
each sample); 5, 10 and 20 samples over disjoint subsets; the other scorers as baselines; with
layers 2-6, combinations (layer averages, rank ensembles with BLEU, other poolings). Embeddings
and greedy matches are computed once per layer and reweighed per setting, after a parity check
against ``BERTScorer.score`` (1e-5). Writes ``wikibio_sweep.csv`` and ``wikibio_sweep.md``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch
from scipy.stats import rankdata
from tqdm.auto import tqdm

from benchmarks import harness
from benchmarks.harness import Passage
from uqlm_bert.bertscore import BERTScorer
from uqlm_bert.bertscore._idf import IdfWeights, idf_from_token_ids
from uqlm_bert.evaluation import auc_pr, pearson, spearman
from uqlm_bert.scorers._cosine import CosineSimScorer
from uqlm_bert.scorers._lexical import (
    BleuScorer,
    ExactMatchScorer,
    RougeLScorer,
    rouge_l,
    sentence_bleu,
)

N_SAMPLES = 20
SAMPLE_COUNTS = (5, 10, 20)
METRICS = ("P", "R", "F1")
METHODS = ("sentence", "sent-vs-sample", "passage")
IDF_MODES = ("none", "passage", "all")
PUBLISHED = {
    "BERTScore, roberta-large (published)": (58.18, 55.90, 81.96, 44.23),
    "NLI, DeBERTa-v3-large (published)": (74.14, 73.78, 92.50, 66.08),
    "Prompt, gpt-3.5-turbo (published)": (78.32, 78.30, 93.42, 67.09),
}
MEASURES = ("passage_pearson", "passage_spearman", "nonfact_aucpr", "factual_aucpr")
KEYS = ["scorer", "layer", "idf", "metric", "method"]  # a setting


def subsets() -> list[tuple[int, int, list[int]]]:
    """``(k, subset_index, sample_indices)``: disjoint subsets of k samples for each k."""
    return [(k, s, list(range(s * k, (s + 1) * k)))
            for k in SAMPLE_COUNTS for s in range(N_SAMPLES // k)]  # fmt: skip


def all_texts(passages: Sequence[Passage]) -> list[str]:
    """Every distinct text of the passages, stripped: answers, samples and their sentences."""
    texts = ([p.response, *p.sentences, *p.samples, *sum(p.sample_sentences, [])] for p in passages)
    return list(dict.fromkeys(t.strip() for group in texts for t in group))


def evaluate(passages: Sequence[Passage], sent_conf: np.ndarray, pass_conf: np.ndarray) -> dict:
    """The four published measures (x100) for sentence and passage confidences; NaN where one
    is undefined (every item given the same value)."""
    degree = np.concatenate([p.degree for p in passages])
    mean_degree = np.array([p.degree.mean() for p in passages])
    safe = lambda fn, x, y: np.nan if np.all(x == x[0]) else 100 * fn(x, y)  # noqa: E731
    out = {
        "passage_pearson": safe(pearson, -pass_conf, mean_degree),
        "passage_spearman": safe(spearman, -pass_conf, mean_degree),
        "nonfact_aucpr": np.nan,
        "factual_aucpr": np.nan,
    }
    if sent_conf is not None:
        out["nonfact_aucpr"] = safe(auc_pr, -sent_conf, degree > 0)
        out["factual_aucpr"] = safe(auc_pr, sent_conf, degree == 0)
    return out


@dataclass
class _PassageMatches:
    """Best token similarities of one passage at one layer, before any weighting. Token axes:
    ``rs`` the response's sentences concatenated (``rs_seg``: each token's sentence), ``resp``
    the response, per sample ``ss`` its sentences concatenated (``ss_seg``), ``samp`` itself."""

    rs_ids: list[int]
    rs_seg: torch.Tensor
    resp_ids: list[int]
    ss_ids: list[list[int]]
    ss_seg: list[torch.Tensor]
    samp_ids: list[list[int]]
    a_p: list[torch.Tensor]  # [rs tokens, sample sentences]: best sim in each sample sentence
    a_r: list[torch.Tensor]  # [response sentences, ss tokens]: best sim in each response sentence
    b_p: list[torch.Tensor]  # [rs tokens]: best sim anywhere in the whole sample
    b_r: list[torch.Tensor]  # [response sentences, samp tokens]
    c_p: list[torch.Tensor]  # [resp tokens]
    c_r: list[torch.Tensor]  # [samp tokens]


class LayerSweep:
    """Embeddings and greedy matches of every passage at one layer, reweighed per setting."""

    def __init__(self, scorer: BERTScorer, passages: list[Passage], show: bool) -> None:
        self.scorer, self.passages, enc = scorer, passages, scorer.encoder
        special = (getattr(enc.tokenizer, f"{t}_token_id", None) for t in ("cls", "sep"))
        self.zero_ids = {i for i in special if i is not None}
        texts = all_texts(passages)
        self.ids = ids = dict(zip(texts, enc.tokenize(texts), strict=True))
        batch = scorer.batch_size or 64  # texts per forward pass (the engine's own: a budget)
        emb = _embed_all(enc, texts, ids, batch, show, f"layer {enc.num_layers}")
        bar = tqdm(passages, desc="matching", leave=False, disable=not show)
        self.matches = [self._match(p, ids, emb) for p in bar]

    def _match(self, p: Passage, ids: dict, emb: dict) -> _PassageMatches:
        rs_keys = [s.strip() for s in p.sentences]
        rs = torch.cat([emb[k] for k in rs_keys])
        rs_seg = torch.cat([torch.full((len(ids[k]),), i) for i, k in enumerate(rs_keys)])
        resp = emb[p.response.strip()]
        n_k = len(rs_keys)
        m = _PassageMatches(
            [t for k in rs_keys for t in ids[k]], rs_seg, ids[p.response.strip()],
            [], [], [], [], [], [], [], [], [],
        )  # fmt: skip
        for sample, sents in zip(p.samples, p.sample_sentences, strict=True):
            ss_keys = [s.strip() for s in sents]
            ss = torch.cat([emb[k] for k in ss_keys])
            ss_seg = torch.cat([torch.full((len(ids[k]),), t) for t, k in enumerate(ss_keys)])
            samp = emb[sample.strip()]
            sim = rs @ ss.T
            m.a_p.append(_segment_max(sim, ss_seg, len(ss_keys), dim=1))
            m.a_r.append(_segment_max(sim, rs_seg, n_k, dim=0))
            sim = rs @ samp.T
            m.b_p.append(sim.max(dim=1).values)
            m.b_r.append(_segment_max(sim, rs_seg, n_k, dim=0))
            sim = resp @ samp.T
            m.c_p.append(sim.max(dim=1).values)
            m.c_r.append(sim.max(dim=0).values)
            m.ss_ids.append([t for k in ss_keys for t in ids[k]])
            m.ss_seg.append(ss_seg)
            m.samp_ids.append(ids[sample.strip()])
        return m

    def weights(self, token_ids: list[int], idf: IdfWeights | None) -> torch.Tensor:
        """Unnormalised token weights: 1 (idf) with [CLS]/[SEP] at 0, as the engine does."""
        if idf is None:
            return torch.tensor([0.0 if t in self.zero_ids else 1.0 for t in token_ids])
        return torch.tensor(
            [0.0 if t in self.zero_ids and t not in idf.weights else idf[t] for t in token_ids]
        )

    def scores(
        self, idf_for: dict[int, IdfWeights | None], samples: list[int], passage_only=False
    ) -> dict[str, np.ndarray]:
        """Per method, ``[3, items, len(samples)]`` P/R/F of each item against each sample, with
        ``idf_for[p]`` passage p's idf (or None). Items are sentences, passages for ``passage``
        (the only method computed when ``passage_only``)."""
        out: dict[str, list[torch.Tensor]] = {method: [] for method in METHODS}
        for pi, m in enumerate(self.matches):
            idf, got = idf_for[pi], {method: [] for method in METHODS}
            w_resp = _normalise(self.weights(m.resp_ids, idf))
            sent_w = None if passage_only else _segment_normaliser(  # [n_k, rs tokens]
                self.weights(m.rs_ids, idf), m.rs_seg, int(m.rs_seg.max()) + 1)  # fmt: skip
            for j in samples:
                w_samp = _normalise(self.weights(m.samp_ids[j], idf))
                P, R = (w_resp * m.c_p[j]).sum(), (w_samp * m.c_r[j]).sum()
                got["passage"].append(_prf(P, R)[:, None])
                if sent_w is None:
                    continue
                n_t = int(m.ss_seg[j].max()) + 1
                w_ss = _segment_normaliser(self.weights(m.ss_ids[j], idf), m.ss_seg[j], n_t)
                # [n_k, n_t] -> [3, n_k]
                got["sentence"].append(_prf(sent_w @ m.a_p[j], m.a_r[j] @ w_ss.T).max(dim=2).values)
                got["sent-vs-sample"].append(_prf(sent_w @ m.b_p[j], m.b_r[j] @ w_samp))
            for method, per in got.items():
                out[method] += [torch.stack(per, dim=2)] if per else []
        return {k: torch.cat(v, dim=1).double().numpy() for k, v in out.items() if v}

    def check_parity(self, idf_for: dict[int, IdfWeights | None], **engine_idf: Any) -> float:
        """Largest |difference| between :meth:`scores` and ``BERTScorer.score`` on real pairs of
        passage 0; ``engine_idf`` gives the engine the same weights (``idf``, ``idf_sents``)."""
        p = self.passages[0]
        got = self.scores(idf_for, [0, 1])
        layer, device = self.scorer.encoder.num_layers, self.scorer.device
        engine = BERTScorer(num_layers=layer, device=device, show_progress_bars=False, **engine_idf)
        n_k = len(p.sentences)
        diffs = []
        for j in (0, 1):
            checks = [
                ("sentence", list(p.sentences), [p.sample_sentences[j]] * n_k),
                ("sent-vs-sample", list(p.sentences), [p.samples[j]] * n_k),
                ("passage", [p.response], [p.samples[j]]),
            ]
            for method, cands, refs in checks:
                want = torch.stack(engine.score(cands, refs)).double().numpy()
                diffs.append(np.abs(want - got[method][:, : len(cands), j]).max())
        return float(max(diffs))


def _embed_all(enc, texts, ids, batch_size, show, desc) -> dict[str, torch.Tensor]:
    """Token embeddings of every text, in length-sorted batches (CPU float32)."""
    order = sorted(texts, key=lambda t: len(ids[t]))
    out = {}
    for b in tqdm(range(0, len(order), batch_size), desc=desc, leave=False, disable=not show):
        batch = order[b : b + batch_size]
        seqs = [ids[t] for t in batch]
        rows = enc.embed_packed(seqs).split([len(s) for s in seqs])
        for t, e in zip(batch, rows, strict=True):
            out[t] = e.float().cpu()
    return out


def _segment_max(sim: torch.Tensor, seg: torch.Tensor, n: int, dim: int) -> torch.Tensor:
    """Max of ``sim`` over the segments ``seg`` along ``dim`` (that axis becomes length n)."""
    if dim == 0:
        return _segment_max(sim.T, seg, n, 1).T.contiguous()
    out = torch.full((sim.shape[0], n), -torch.inf)
    return out.scatter_reduce(1, seg[None, :].expand_as(sim), sim, reduce="amax", include_self=True)


def _segment_normaliser(w: torch.Tensor, seg: torch.Tensor, n: int) -> torch.Tensor:
    """``[n, tokens]`` matrix whose row i holds segment i's weights normalised to sum 1."""
    mat = torch.zeros((n, w.shape[0]))
    mat[seg, torch.arange(w.shape[0])] = w
    total = mat.sum(dim=1, keepdim=True)
    return torch.where(total > 0, mat / total.clamp(min=1e-30), torch.zeros_like(mat))


def _normalise(w: torch.Tensor) -> torch.Tensor:
    total = w.sum()
    return w / total if total > 0 else torch.zeros_like(w)


def _prf(P: torch.Tensor, R: torch.Tensor) -> torch.Tensor:
    """``[P, R, F1]`` stacked (F1 0 where P + R is 0)."""
    denom = P + R
    return torch.stack([P, R, torch.where(denom == 0, torch.zeros_like(P), 2 * P * R / denom)])


def idf_tables(
    sweep: LayerSweep, passages: list[Passage], samples: list[int]
) -> dict[str, dict[int, IdfWeights | None]]:
    """idf per passage for each mode, computed over the given samples only."""
    docs = [[sweep.ids[p.samples[j].strip()] for j in samples] for p in passages]
    everything = idf_from_token_ids([d for ds in docs for d in ds])
    return {
        "none": {i: None for i in range(len(passages))},
        "passage": {i: idf_from_token_ids(docs[i]) for i in range(len(passages))},
        "all": {i: everything for i in range(len(passages))},
    }


def sweep_bertscore(
    passages: list[Passage], layers: Sequence[int], device: str | None, show: bool
) -> tuple[list[dict], dict[tuple, np.ndarray], list[dict], dict]:
    """Every BERTScore setting on every sample subset: the rows, the k=20 passage confidences per
    setting (for the bootstrap), the idf-corpus rows (:func:`idf_corpus_size`), and each pair's
    whole-answer F1 at k=20, ``[passages, samples]`` per (layer, idf over all samples)."""
    rows, confidences, corpus_rows, pair_f1 = [], {}, [], {}
    for layer in layers:
        t0 = time.time()
        scorer = BERTScorer(num_layers=layer, device=device, show_progress_bars=False)
        sweep = LayerSweep(scorer, passages, show)
        full = idf_tables(sweep, passages, list(range(N_SAMPLES)))
        every = [x for p in passages for x in p.samples]
        docs = {"none": None, "passage": list(passages[0].samples), "all": every}
        for mode in IDF_MODES:
            diff = sweep.check_parity(full[mode], idf=docs[mode] is not None, idf_sents=docs[mode])
            if not diff < 1e-5:
                raise SystemExit(f"parity check failed at layer {layer}, idf={mode}: the sweep's "
                                 f"numbers differ from BERTScorer.score by {diff:.2e}")  # fmt: skip
        for k, s, idx in subsets():
            tables = idf_tables(sweep, passages, idx)
            for mode in IDF_MODES:
                per = sweep.scores(tables[mode], idx)
                for method in METHODS:
                    conf = per[method].mean(axis=2)  # [3, items]: mean over the samples
                    for mi, metric in enumerate(METRICS):
                        sent = None if method == "passage" else conf[mi]
                        pas = conf[mi] if sent is None else _passage_means(passages, sent)
                        key = ("bert_score", layer, mode, metric, method)
                        if k == N_SAMPLES:
                            confidences[key] = pas
                        rows.append({**dict(zip(KEYS, key, strict=True)), "k": k, "subset": s,
                                     **evaluate(passages, sent, pas)})  # fmt: skip
        for idf in (False, True):  # each pair's F1 at k=20, for the combinations
            per = sweep.scores(full["all" if idf else "none"], list(range(N_SAMPLES)), True)
            pair_f1[(layer, idf)] = per["passage"][2]
        corpus_rows += idf_corpus_size(sweep, passages, layer)
        del sweep
        print(f"layer {layer}: {time.time() - t0:.0f}s", file=sys.stderr)
    return rows, confidences, corpus_rows, pair_f1


def idf_corpus_size(
    sweep: LayerSweep, passages: list[Passage], layer: int, repeats: int = 5
) -> list[dict]:
    """Whole-passage F1 with idf over the samples of G prompts scored together (as one call's
    idf): the passages split at random into groups of G, ``repeats`` times; G = 1: per prompt."""
    rng = np.random.default_rng(0)
    everything = list(range(N_SAMPLES))
    out = []
    for group in (1, 2, 3, 5, 10, len(passages)):
        values = []
        for _ in range(repeats if group < len(passages) else 1):
            order = rng.permutation(len(passages))
            idf_for: dict[int, IdfWeights | None] = {}
            for start in range(0, len(order), group):
                members = order[start : start + group]
                docs = [
                    sweep.ids[passages[i].samples[j].strip()] for i in members for j in everything
                ]
                idf_for.update(dict.fromkeys(map(int, members), idf_from_token_ids(docs)))
            conf = sweep.scores(idf_for, everything, passage_only=True)["passage"].mean(axis=2)
            values.append(evaluate(passages, None, conf[2])["passage_spearman"])
        out.append(
            {"layer": layer, "prompts_per_call": group, "spearman_mean": float(np.mean(values)),
             "spearman_std": float(np.std(values)), "repeats": len(values)}
        )  # fmt: skip
    return out


def _passage_means(passages: list[Passage], sent: np.ndarray) -> np.ndarray:
    bounds = np.cumsum([0] + [len(p.sentences) for p in passages])
    return np.array([sent[a:b].mean() for a, b in zip(bounds[:-1], bounds[1:], strict=True)])


def sweep_other_scorers(
    passages: list[Passage], device: str | None, show: bool
) -> tuple[list[dict], dict[tuple, np.ndarray]]:
    """Passage-level scores of the lexical and embedding scorers, and their sentence variants
    (as BERTScore's ``sentence`` method: best match in each sample's sentences, mean over them)."""
    rows = []
    confidences: dict[tuple, np.ndarray] = {}
    responses = [p.response for p in passages]
    cos = CosineSimScorer(device=device, dtype="float32")  # as the sweep: machine-independent
    texts = all_texts(passages)
    vecs = dict(zip(texts, cos.embed(texts, show_progress_bars=show), strict=True))
    cosine = lambda a, b: (1 + float(vecs[a.strip()] @ vecs[b.strip()])) / 2  # noqa: E731
    pairs = np.array([[cosine(p.response, t) for t in p.samples] for p in passages])
    direct = cos.score(responses[:2], [p.samples for p in passages[:2]])
    if not np.allclose(direct, pairs[:2].mean(axis=1), atol=1e-6):
        raise SystemExit("cosine_sim parity check failed: cached embeddings disagree with .score")

    def sentence_matrix(pair_fn) -> np.ndarray:  # [sentences, samples]: the best in a sample
        return np.array([[max(pair_fn(sent, t) for t in sents) for sents in p.sample_sentences]
                         for p in passages for sent in p.sentences])  # fmt: skip

    sentence_level = {"rouge_l": rouge_l, "bleu": sentence_bleu, "cosine_sim": cosine}
    sentence_level = {name: sentence_matrix(fn) for name, fn in sentence_level.items()}
    scorers = {"exact_match": ExactMatchScorer(), "rouge_l": RougeLScorer(), "bleu": BleuScorer()}
    for k, s, idx in subsets():
        sampled = [[p.samples[j] for j in idx] for p in passages]
        for name, scorer in [*scorers.items(), ("cosine_sim", None)]:
            pas = scorer.score(responses, sampled) if scorer else pairs[:, idx].mean(axis=1)
            sent = sentence_level[name][:, idx].mean(axis=1) if name in sentence_level else None
            if k == N_SAMPLES:
                confidences[(name, "-", "-", "-", "passage")] = pas
            rows.append({"scorer": name, "method": "passage", "k": k, "subset": s,
                         **evaluate(passages, sent, pas)})  # fmt: skip
    return rows, confidences


#: The layers the combinations average over.
LAYERS = (2, 3, 4, 5, 6)
Pool = Callable[[list[int]], np.ndarray]  # sample indices -> one confidence per passage


def bleu_matrix(passages: list[Passage]) -> np.ndarray:
    """BLEU consistency of each (answer, sample) pair, ``[passages, samples]``."""
    bleu = BleuScorer()
    pair = lambda a, b: bleu._pair(bleu._prepare(a), bleu._prepare(b))  # noqa: E731
    return np.array([[pair(p.response, s) for s in p.samples] for p in passages])


def judge(pool: Pool, degree: np.ndarray) -> dict[str, float]:
    """Spearman x100 of ``-confidence`` against ``degree`` for each sample subset, summarised."""
    cells: dict[int, list[float]] = {}
    for k, _, idx in subsets():
        cells.setdefault(k, []).append(100 * spearman(-pool(idx), degree))
    every = [v for vs in cells.values() for v in vs]
    means = {f"k={k}": float(np.mean(cells[k])) for k in (20, 10, 5)}
    return {**means, "all cells": float(np.mean(every)), "worst": float(np.min(every))}


def candidates(f1: dict[tuple[int, bool], np.ndarray], bleu: np.ndarray) -> dict[str, Pool]:
    """Combinations of passage-level detectors beyond the single settings, each as a pooling of
    per-sample scores: F1 averaged over layers, rank ensembles with BLEU, other poolings."""

    def mean_of(m: np.ndarray) -> Pool:
        return lambda idx: m[:, idx].mean(1)

    best, plain = f1[(5, True)], f1[(5, False)]
    out: dict[str, Pool] = {
        "layer 5, idf, F1, mean over samples (best single setting)": mean_of(best),
        "layer 5, no idf, F1 (the default)": mean_of(plain),
    }
    for idf in (False, True):
        for layers in ((4, 5), (4, 5, 6), (3, 4, 5), (3, 4, 5, 6), (2, 3, 4, 5, 6)):
            name = f"F1 averaged over layers {','.join(map(str, layers))}, {'idf' if idf else 'no idf'}"
            out[name] = mean_of(np.mean([f1[(layer, idf)] for layer in layers], axis=0))
    for w in (0.25, 0.5):
        out[f"rank ensemble: {1 - w:g} x BERTScore (layer 5, idf) + {w:g} x BLEU"] = (
            lambda idx, w=w: (
                (1 - w) * rankdata(best[:, idx].mean(1)) + w * rankdata(bleu[:, idx].mean(1))
            )
        )
    out["rank ensemble: layer 5 with idf + layer 5 without"] = lambda idx: (
        rankdata(best[:, idx].mean(1)) + rankdata(plain[:, idx].mean(1))
    )
    out["layer 5, idf, F1, minimum over samples"] = lambda idx: best[:, idx].min(1)
    drop = lambda idx: np.sort(best[:, idx], 1)[:, :-1].mean(1)  # noqa: E731
    out["layer 5, idf, F1, mean without the best sample"] = drop
    out["BLEU alone"] = mean_of(bleu)
    return out


def combinations(passages: list[Passage], f1: dict[tuple[int, bool], np.ndarray]) -> list[str]:
    """The combinations' report section: passage Spearman x100 of each, as a setting's."""
    degree = np.array([p.degree.mean() for p in passages])
    cols = ("k=20", "k=10", "k=5", "all cells", "worst")
    rows = []
    for name, pool in candidates(f1, bleu_matrix(passages)).items():
        r = judge(pool, degree)
        rows.append([name, *(f"{r[c]:.2f}" for c in cols)])
    title = "## Combinations (idf over all samples; passage Spearman x100)"
    return [title, "", *harness.md_table(["detector", *cols], rows), ""]


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    """One row per setting: k=20 figures, Spearman mean (std) at k=10 and k=5, and over all."""
    df = df.copy()
    df["layer"] = [str(int(v)) if pd.notna(v) else "-" for v in df["layer"]]
    for col in ("idf", "metric"):
        df[col] = df[col].astype(object).where(df[col].notna(), "-")
    out = []
    for key, g in df.groupby(KEYS, sort=False):
        row = dict(zip(KEYS, key, strict=True))
        full = g[g.k == N_SAMPLES].iloc[0]
        row.update({m: full[m] for m in MEASURES})
        for k in (10, 5):
            sp = g[g.k == k]["passage_spearman"]
            text = f"{sp.mean():.2f} ({sp.std(ddof=0):.2f})"
            row[f"spearman_k{k}"] = text if sp.notna().all() else "n/a"
        row["spearman_all_cells"] = g["passage_spearman"].mean()
        row["spearman_worst_cell"] = g["passage_spearman"].min()
        out.append(row)
    return pd.DataFrame(out)


def markdown(summary: pd.DataFrame, df: pd.DataFrame, corpus: pd.DataFrame, bootstrap, top: int):
    """The report: best settings, baselines, spread per factor, idf corpus size, every setting;
    ``bootstrap``: ``(best key, base key, (mean, low, high))`` or None."""
    bs = summary[summary.scorer == "bert_score"].sort_values("spearman_all_cells", ascending=False)
    published = [[n, *v] for n, v in PUBLISHED.items()]
    lines = [
        f"# WikiBio GPT-3 hallucination detection ({df['k'].max()} samples, x100)", "",
        "k=20 columns: all samples; `spearman_k10`, `spearman_k5`: mean (std) of passage Spearman "
        "over 2 and 4 disjoint sample subsets; `spearman_all_cells`: the mean over all 7 subsets "
        "(the ranking), `spearman_worst_cell` the lowest. Sentence AUC-PR n/a for whole-passage "
        "methods.", "",
        f"## Best {top} BERTScore settings", "", _table(bs.head(top)), "",
        "## Other scorers (sentence columns: best match among a sample's sentences)", "",
        _table(summary[summary.scorer != "bert_score"]), "",
        *harness.md_table(["published (238 passages)", *MEASURES], published), "",
    ]  # fmt: skip
    if bootstrap is not None:
        best, base, (mean, lo, hi) = bootstrap
        lines += [
            f"Best minus plain: passage Spearman of `{' / '.join(map(str, best))}` minus "
            f"`{' / '.join(map(str, base))}`, passages resampled 2000 times: mean {mean:.2f}, "
            f"90% interval [{lo:.2f}, {hi:.2f}].", "",
        ]  # fmt: skip
    lines += [
        "## idf over the samples of G prompts scored together (whole-passage F1, k=20)", "",
        _table(corpus), "",
        "## Spread: passage Spearman (k=20) across all other settings, per factor", "",
    ]  # fmt: skip
    full = df[(df.scorer == "bert_score") & (df.k == N_SAMPLES)]
    full = full.assign(layer=full["layer"].astype(int))
    for factor in ("layer", "idf", "metric", "method"):
        g = full.groupby(factor)["passage_spearman"]
        t = pd.DataFrame({"median": g.median(), "min": g.min(), "max": g.max(), "n": g.size()})
        lines += [f"### {factor}", "", _table(t.reset_index()), ""]
    sent = full[full.method != "passage"].groupby(["metric", "layer"])
    aucpr = sent[["nonfact_aucpr", "factual_aucpr"]].median().reset_index()
    lines += ["### sentence level: median AUC-PR per metric and layer", "", _table(aucpr), ""]
    return "\n".join([*lines, "## Every BERTScore setting", "", _table(bs), ""])


def _table(df: pd.DataFrame) -> str:
    def cell(v: object) -> str:
        if isinstance(v, (float, np.floating)):
            return "n/a" if np.isnan(v) else f"{v:.2f}"
        return str(v)

    rows = ([cell(v) for v in row] for row in df.astype(object).itertuples(index=False))
    return "\n".join(harness.md_table([str(c) for c in df.columns], rows))


def bootstrap_difference(
    passages: list[Passage], a: np.ndarray, b: np.ndarray, n: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """Mean and 90% interval of Spearman(a) - Spearman(b), passages resampled ``n`` times."""
    y = np.array([p.degree.mean() for p in passages])
    rng = np.random.default_rng(seed)
    diffs = []
    for _ in range(n):
        i = rng.integers(0, len(y), len(y))
        if np.all(y[i] == y[i][0]) or np.all(a[i] == a[i][0]) or np.all(b[i] == b[i][0]):
            continue
        diffs.append(100 * (spearman(-a[i], y[i]) - spearman(-b[i], y[i])))
    d = np.array(diffs)
    return float(d.mean()), float(np.quantile(d, 0.05)), float(np.quantile(d, 0.95))


def main(argv: Sequence[str] | None = None) -> int:
    ap = harness.parser(__doc__, "device", "data", "out", "no-progress")
    ap.add_argument("--layers", type=int, nargs="+", default=[1, 2, 3, 4, 5, 6])
    ap.add_argument("--top", type=int, default=15, help="rows in the best-settings table")
    ap.add_argument("--no-other-scorers", action="store_true")
    args = ap.parse_args(argv)
    if not harness.have_data(args.data):
        return 0
    show = not args.no_progress
    passages = harness.load_passages(args.data)
    rows, confidences, corpus_rows, pair_f1 = sweep_bertscore(
        passages, args.layers, args.device, show
    )
    if not args.no_other_scorers:
        more_rows, more_conf = sweep_other_scorers(passages, args.device, show)
        rows += more_rows
        confidences.update(more_conf)
    df = pd.DataFrame(rows)
    summary = summarise(df)
    ranked = summary[summary.scorer == "bert_score"]
    ranked = ranked.sort_values("spearman_all_cells", ascending=False)
    best = tuple(ranked.iloc[0][KEYS])
    best_key = (best[0], int(best[1]), *best[2:])
    base_key = ("bert_score", max(args.layers), "none", "F1", "passage")
    bootstrap = None
    if best_key != base_key and base_key in confidences:
        diff = bootstrap_difference(passages, confidences[best_key], confidences[base_key])
        bootstrap = (best_key, base_key, diff)
    text = markdown(summary, df, pd.DataFrame(corpus_rows), bootstrap, args.top)
    if set(LAYERS) <= set(args.layers):
        text += "\n" + "\n".join(combinations(passages, pair_f1))
    harness.write_report(args.out, "wikibio_sweep.md", text)
    df.to_csv(args.out / "wikibio_sweep.csv", index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
