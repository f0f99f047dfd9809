"""Scoring a call's (candidate, reference) pairs: embed each unique text once, match in blocks.

Pairs are taken in chunks of ``chunk_size``. For each chunk, the texts that first appear in it
are embedded (:func:`~uqlm_bert.bertscore._batching.embed_in_batches`, shortest first) and join
the texts kept from earlier chunks in one packed table of token rows on the device
(:class:`_Table`); a text leaves the table after its last pair, so memory is bounded by the
chunk, not the call. The chunk's pairs are then matched in blocks of similar lengths: each
block's token rows are gathered from the table by one index array built in numpy
(:func:`~uqlm_bert.bertscore._matching.greedy_match_rows`), and the chunk's P and R come back to
the host in one copy. The number of torch calls and host-device copies grows with the number of
batches and blocks, not with the number of texts or pairs.

A text longer than the model's window, when the encoder's reading plan reads long texts whole
(its ``frame``, see :mod:`uqlm_bert.bertscore._windows`), is embedded as overlapping windows stitched back into
one row per token, and is matched like any other text. Chunks then hold at most the tokens of
``2 * chunk_size`` texts of the window's length (fewer pairs when texts are long), and a pair too
long for one matching block is matched a block of rows at a time
(:func:`~uqlm_bert.bertscore._matching.greedy_match_tiled`), so memory stays bounded.

With the model in a reduced dtype (float16, bfloat16), a text whose embeddings come out not
finite (activations past float16's range) gives scores that are not finite; such texts are
embedded again in float32, the chunk is matched again, and the call warns once.

Matching compares every token with every token of the other text, so its share of the time
grows with length. So where the compute plan says so (the model in bfloat16 on a CPU with
bfloat16 matrix instructions: :attr:`~uqlm_bert.bertscore._resolve.ComputePlan.match_dtype`), a
pair of long texts (both of 512 tokens or more, say: see :data:`FIND_IN_REDUCED_FROM`) has each
token's best match found in bfloat16, whose matrix products run several times as fast, and its
similarity computed in float32
(:func:`~uqlm_bert.bertscore._matching.greedy_match_rows_found_in`). Shorter pairs are matched in
float32 as before, where the float32 dot products that finding needs would cost more than they
save, and so is a pair too long for one matching block (matched a block of rows at a time). The
measured times are in benchmarks/RESULTS.md.

Example:
    >>> from uqlm_bert.bertscore._loading import load_encoder
    >>> from uqlm_bert.bertscore._settings import BERTScoreSettings
    >>> from uqlm_bert.bertscore._call_texts import CallTexts, weight_lookup
    >>> enc = load_encoder(BERTScoreSettings(num_layers=5, device="cpu"))
    >>> cands, refs = ["A cat sat.", "A cat sat."], ["A cat sat.", "Dogs bark."]
    >>> texts = CallTexts(enc, cands, refs, 1024, weight_lookup(None, {101, 102}))
    >>> prf = score_pairs(enc, texts, cands, refs, chunk_size=1024)
    >>> [round(float(x), 4) for x in prf[0]]
    [1.0, 1.0, 1.0]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from uqlm_bert._exceptions import DeviceOutOfMemoryError
from uqlm_bert._warn import warn_user
from uqlm_bert.bertscore._batching import embed_texts, is_out_of_memory, too_long_message
from uqlm_bert.bertscore._call_texts import CallTexts
from uqlm_bert.bertscore._encoder import Encoder
from uqlm_bert.bertscore._matching import (
    greedy_match_rows,
    greedy_match_rows_found_in,
    greedy_match_tiled,
)
from uqlm_bert.bertscore._packed_forward import to_device
from uqlm_bert.bertscore._windows import Frame

__all__ = [
    "score_pairs",
    "FIND_IN_REDUCED_FROM",
    "MATCH_BUDGET_CPU",
    "MATCH_BUDGET_ACCELERATOR",
]

# Where long pairs' best matches are found in bfloat16, a pair's are when its lengths have
# lc * lr >= FIND_IN_REDUCED_FROM * (lc + lr) (both texts of 512 tokens, say): the measured cost
# per pair of float32 matching and of finding in bfloat16 (benchmarks/RESULTS.md) cross at two
# texts of about 430 tokens.
FIND_IN_REDUCED_FROM = 256

# Matching works on blocks of pairs whose similarities [pairs, Lc, Lr] (three times: the product
# and the two masked copies) and gathered rows [pairs, Lc + Lr, dim] hold at most this many
# floats together: 128 MB on the CPU, 512 MB on an accelerator (an out-of-memory error there
# halves the block).
MATCH_BUDGET_CPU = 1 << 25
MATCH_BUDGET_ACCELERATOR = 1 << 27


def score_pairs(
    encoder: Encoder,
    texts: CallTexts,
    keys_c: list[str],
    keys_r: list[str],
    chunk_size: int,
    max_texts: int | None = None,
    max_tokens: int | None = None,
    on_embedded: Callable[[int], None] | None = None,
    match_budget: int | None = None,
    best: list[np.ndarray] | None = None,
) -> np.ndarray:
    """Raw P, R and F (``[pairs, 3]`` float32) of each pair of stripped texts.

    Args:
        encoder: the loaded model and tokenizer.
        texts: the call's texts (their groups are waited for chunk by chunk).
        keys_c, keys_r: each pair's candidate and reference, stripped.
        chunk_size: pairs per chunk (the groups of ``texts`` must use the same).
        max_texts, max_tokens: forward-pass limits, see
            :func:`~uqlm_bert.bertscore._batching.embed_in_batches`.
        on_embedded: told how many texts were embedded, as they are.
        match_budget: floats per matching block (default: by device).
        best: where given, gets each candidate token's best similarity with any token of its
            reference (what P weighs), as float32 arrays whose concatenation holds pair after
            pair, each candidate's tokens in order (special tokens included; 0 for a pair with
            an empty side): one array per chunk, at most a float per candidate token per pair.

    Texts longer than the model's window are read in windows where the encoder's reading plan
    says so (its :attr:`~uqlm_bert.bertscore._encoder.Encoder.frame`), and long pairs' best
    matches are found in its compute plan's ``match_dtype``.
    """
    n = len(keys_c)
    out = np.zeros((n, 3), dtype=np.float32)
    device = encoder.device
    if match_budget is None:
        match_budget = MATCH_BUDGET_CPU if device.type == "cpu" else MATCH_BUDGET_ACCELERATOR
    table = _Table(device, encoder.hidden_size)
    matching, frame = encoder.match_dtype, encoder.frame
    redone = 0  # texts embedded again in float32
    for group, group_start in enumerate(range(0, n, chunk_size)):
        texts.wait(group)
        group_stop = min(n, group_start + chunk_size)
        for start, stop, first in _chunks(
            texts, keys_c, keys_r, (group_start, group_stop), texts.group(group), frame, chunk_size
        ):
            new = sorted(
                (k for k in first if len(texts[k].ids) > 0), key=lambda k: len(texts[k].ids)
            )
            embs = embed_texts(
                encoder, [texts[k].ids for k in new], max_texts, max_tokens, on_embedded
            )
            if len(first) > len(new) and on_embedded is not None:
                on_embedded(len(first) - len(new))
            table.update(texts, start, new, embs)
            chunk_c, chunk_r = keys_c[start:stop], keys_r[start:stop]
            keep = best is not None
            scores, found = _match_chunk(
                table, texts, chunk_c, chunk_r, match_budget, matching, keep
            )
            if encoder.dtype != torch.float32 and not np.isfinite(scores[:, :2]).all():
                fixed = _redo_in_float32(encoder, table, texts, new, max_texts, max_tokens)
                if fixed:
                    redone += fixed
                    scores, found = _match_chunk(
                        table, texts, chunk_c, chunk_r, match_budget, matching, keep
                    )
            out[start:stop] = scores
            if best is not None and found is not None:
                best.append(found)
    if redone:
        name = str(encoder.dtype).removeprefix("torch.")
        warn_user(
            f"the {name} embeddings of {redone} text(s) were not finite (the model's "
            f"activations overflow {name}); those texts were embedded again in float32. Pass "
            "dtype='float32' (or 'bfloat16' instead of 'float16') to avoid the second pass.",
            UserWarning,
        )
    return out


def _chunks(
    texts: CallTexts,
    keys_c: list[str],
    keys_r: list[str],
    pairs: tuple[int, int],
    first: list[str],
    frame: Frame | None,
    chunk_size: int,
) -> list[tuple[int, int, list[str]]]:
    """``(start, stop, new)`` of the chunks the ``pairs`` range is scored in, with the texts
    each chunk needs first (``first``: those of the whole range). One chunk, unless texts are
    read in windows and ``first`` holds more tokens than ``2 * chunk_size`` texts of the
    window's length: then a chunk ends before its new texts would (one pair at least), so that
    it holds no more than a chunk of texts that fit does, however long its texts."""
    start, stop = pairs
    if frame is None or all(len(texts[k].ids) <= frame.window for k in first):
        return [(start, stop, first)]
    limit = 2 * chunk_size * frame.window
    pending = set(first)
    out: list[tuple[int, int, list[str]]] = []
    lo, tokens, new = start, 0, []
    for k in range(start, stop):
        pair_new = [t for t in dict.fromkeys((keys_c[k], keys_r[k])) if t in pending]
        more = sum(len(texts[t].ids) for t in pair_new)
        if k > lo and tokens + more > limit:
            out.append((lo, k, new))
            lo, tokens, new = k, 0, []
        pending.difference_update(pair_new)
        new += pair_new
        tokens += more
    out.append((lo, stop, new))
    return out


def _redo_in_float32(
    encoder: Encoder,
    table: _Table,
    texts: CallTexts,
    new: list[str],
    max_texts: int | None,
    max_tokens: int | None,
) -> int:
    """Embed again in float32 those of the chunk's ``new`` texts whose embeddings in the table
    are not finite, in place; how many there were."""
    finite = torch.isfinite(table.emb).all(dim=1).cpu().numpy()
    bad = [k for k in new if not finite[table.rows[k] : table.rows[k] + len(texts[k].ids)].all()]
    if not bad:
        return 0
    embs = embed_texts(encoder.in_float32(), [texts[k].ids for k in bad], max_texts, max_tokens)
    rows = np.concatenate(
        [np.arange(table.rows[k], table.rows[k] + len(texts[k].ids)) for k in bad]
    )
    table.emb.index_copy_(0, to_device(torch.from_numpy(rows), table.device), torch.cat(embs))
    return len(bad)


class _Table:
    """The packed embeddings of the texts a chunk needs, one row per token and a last row for
    padding (all 0); and their weights and mask biases in the layout
    :func:`~uqlm_bert.bertscore._matching.greedy_match_rows` reads."""

    def __init__(self, device: torch.device, dim: int) -> None:
        self.device = device
        self.rows: dict[str, int] = {}  # a text's first row
        self.emb = torch.zeros((1, dim), dtype=torch.float32, device=device)
        self.aux = to_device(torch.from_numpy(_aux_table(np.zeros(0, np.float32))), device)

    @property
    def pad_row(self) -> int:
        return self.emb.shape[0] - 1

    def update(
        self, texts: CallTexts, start: int, new: list[str], embs: list[torch.Tensor]
    ) -> None:
        """Keep the texts still needed from pair ``start`` on, and add ``new`` (embedded as
        ``embs``, in order)."""
        kept = [k for k in self.rows if texts[k].last_use >= start]
        keys = kept + new
        lens = np.fromiter((len(texts[k].ids) for k in keys), dtype=np.int64, count=len(keys))
        ends = np.cumsum(lens)
        parts: list[torch.Tensor] = []
        if kept:
            old = np.concatenate(
                [np.arange(self.rows[k], self.rows[k] + len(texts[k].ids)) for k in kept]
            )
            parts.append(self.emb.index_select(0, to_device(torch.from_numpy(old), self.device)))
        parts += embs
        parts.append(self.emb[-1:])  # the padding row
        self.emb = torch.cat(parts)
        weights = np.concatenate([texts[k].weights for k in keys]) if keys else np.zeros(0)
        self.aux = to_device(torch.from_numpy(_aux_table(weights)), self.device)
        self.rows = dict(zip(keys, (ends - lens).tolist(), strict=True))


def _aux_table(weights: np.ndarray) -> np.ndarray:
    """``[2 * (T + 1), 3]`` float32: ``(weight, 0, bias)`` per row then ``(0, weight, bias)``
    per row, the padding row last in each half (weight 0, bias the lowest float32)."""
    t = len(weights) + 1
    aux = np.zeros((2 * t, 3), dtype=np.float32)
    aux[: t - 1, 0] = weights
    aux[t : 2 * t - 1, 1] = weights
    aux[[t - 1, 2 * t - 1], 2] = np.finfo(np.float32).min
    return aux


def _match_chunk(
    table: _Table,
    texts: CallTexts,
    keys_c: list[str],
    keys_r: list[str],
    budget: int,
    dtype: torch.dtype,
    keep: bool = False,
) -> tuple[np.ndarray, np.ndarray | None]:
    """``[pairs, 3]`` P/R/F of pairs whose texts are all in ``table``, in blocks of similar
    lengths, similarities in ``dtype``; one copy back to the host for the whole chunk. With
    ``keep``, also each candidate token's best similarity, pair after pair (``None`` without)."""
    m = len(keys_c)
    pad = table.pad_row
    info_c = [texts[k] for k in keys_c]
    info_r = [texts[k] for k in keys_r]
    len_c = np.fromiter((len(t.ids) for t in info_c), dtype=np.int64, count=m)
    len_r = np.fromiter((len(t.ids) for t in info_r), dtype=np.int64, count=m)
    row_c = np.fromiter((table.rows.get(k, pad) for k in keys_c), dtype=np.int64, count=m)
    row_r = np.fromiter((table.rows.get(k, pad) for k in keys_r), dtype=np.int64, count=m)
    empty = np.fromiter(
        (c.empty or r.empty for c, r in zip(info_c, info_r, strict=True)), dtype=bool, count=m
    )
    # pairs with an empty side score 0 by construction: only the others are matched
    order = np.lexsort((len_r, len_c))
    order = order[~empty[order]]
    n_matched = len(order)
    # pairs matched in float32 first, then those whose best matches are found in ``dtype``
    switch = n_matched
    if dtype != table.emb.dtype:
        found = (len_c * len_r >= FIND_IN_REDUCED_FROM * (len_c + len_r))[order]
        order = np.concatenate((order[~found], order[found]))
        switch -= int(found.sum())
    dim = table.emb.shape[1]
    blocks: list[torch.Tensor] = []
    found: list[torch.Tensor] | None = [] if keep else None  # per block, [B, Lc] flattened
    widths: list[int] = []  # per block, its Lc
    pos = 0
    while pos < n_matched:
        finding = pos >= switch
        end = _block_end(len_c[order[pos:]], len_r[order[pos:]], dim, budget, finding) + pos
        if pos < switch:
            end = min(end, switch)
        sel = order[pos:end]
        try:
            if end - pos == 1 and _pair_cost(len_c[sel[0]], len_r[sel[0]], dim, finding) > budget:
                # one pair of long texts: its similarities a block of rows at a time
                i = int(sel[0])
                block_best: list[torch.Tensor] = []
                blocks.append(_match_tiled(table, texts, keys_c[i], keys_r[i], budget, block_best))
                lc = int(len_c[i])
            else:
                rows, lc = _block_rows(row_c[sel], len_c[sel], row_r[sel], len_r[sel], pad)
                rows_t = to_device(torch.from_numpy(rows), table.device)
                block_best = []
                kept = {"best": block_best} if keep else {}  # only asked for where kept
                if finding:
                    blocks.append(
                        greedy_match_rows_found_in(table.emb, table.aux, rows_t, lc, dtype, **kept)
                    )
                else:
                    blocks.append(greedy_match_rows(table.emb, table.aux, rows_t, lc, **kept))
            if found is not None:
                found.append(block_best[0].reshape(-1))
                widths.append(lc)
        except Exception as exc:
            if not is_out_of_memory(exc):
                raise
            failed = True
        else:
            failed = False
            pos = end
        if failed:
            if end - pos == 1 and budget <= _pair_cost(1, len_r[sel[0]], dim):
                raise DeviceOutOfMemoryError(
                    too_long_message(
                        f"a pair of {len_c[sel][0]} and {len_r[sel][0]} tokens", table.device
                    )
                )
            budget = max(1, budget // 4)  # a smaller block, and smaller ones from here on
    pr = np.zeros((m, 2), dtype=np.float32)
    kept_best = None
    if found is not None:
        kept_best = _unpack_best(found, widths, order, len_c)
    if blocks:
        pr[order] = torch.cat(blocks).cpu().numpy().reshape(n_matched, 2)
    P, R = pr[:, 0], pr[:, 1]
    with np.errstate(invalid="ignore", divide="ignore"):
        F = 2 * P * R / (P + R)
    F[(P + R) == 0] = 0.0
    return np.stack((P, R, F), axis=1), kept_best


def _unpack_best(
    found: list[torch.Tensor], widths: list[int], order: np.ndarray, len_c: np.ndarray
) -> np.ndarray:
    """Each pair's candidate-token best similarities, pair after pair in the chunk's order
    (``len_c[k]`` values for pair ``k``; 0 for pairs not matched), from the blocks' padded
    ``[B, Lc]`` rows (flattened, blocks in matching order over the pairs of ``order``): one
    copy to the host, then one numpy gather."""
    offsets = np.concatenate(([0], np.cumsum(len_c)))
    flat = np.zeros(int(offsets[-1]), dtype=np.float32)
    if not found:
        return flat
    host = torch.cat(found).cpu().numpy()
    sizes = [int(t.numel()) for t in found]
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    src_parts, dst_parts = [], []
    pos = 0
    for start, size, lc in zip(starts, sizes, widths, strict=True):
        b = size // lc
        sel = order[pos : pos + b]
        pos += b
        col = np.arange(lc)
        valid = col[None, :] < len_c[sel][:, None]  # [b, lc]
        row, c = np.nonzero(valid)
        src_parts.append(start + row * lc + c)
        dst_parts.append(offsets[sel][row] + c)
    flat[np.concatenate(dst_parts)] = host[np.concatenate(src_parts)]
    return flat


def _pair_cost(len_c: Any, len_r: Any, dim: int, finding: bool = False) -> Any:
    """Floats a pair of these lengths takes in a matching block: its similarities (the product
    and two masked copies) and its gathered rows with their weights and biases. When its best
    matches are found in bfloat16 (``finding``), the three matrices are bfloat16 (half a float
    each) and the rows are gathered in float32, rounded to bfloat16, and gathered once more in
    float32 with a product of the two for the dot products. Lengths may be ints or arrays."""
    if finding:
        return 3 * len_c * len_r // 2 + (len_c + len_r) * (4 * dim + 2)
    return 3 * len_c * len_r + (len_c + len_r) * (dim + 2)


def _match_tiled(
    table: _Table,
    texts: CallTexts,
    key_c: str,
    key_r: str,
    budget: int,
    best: list[torch.Tensor] | None = None,
) -> torch.Tensor:
    """``[1, 1, 2]`` P and R of one pair too long for a matching block (texts read in
    windows): :func:`~uqlm_bert.bertscore._matching.greedy_match_tiled` over its rows (its
    candidate tokens' best similarities appended to ``best``, as ``[1, Lc]``)."""
    c, r = texts[key_c], texts[key_r]
    start_c, start_r = table.rows[key_c], table.rows[key_r]
    emb_c = table.emb[start_c : start_c + len(c.ids)]
    emb_r = table.emb[start_r : start_r + len(r.ids)]
    w_c = to_device(torch.from_numpy(c.weights), table.device)
    w_r = to_device(torch.from_numpy(r.weights), table.device)
    found: list[torch.Tensor] = []
    P, R, _ = greedy_match_tiled(emb_c, w_c, emb_r, w_r, max(1, budget // 2), best=found)
    if best is not None:
        best.append(found[0][None, :])
    return torch.stack((P, R)).reshape(1, 1, 2)


def _block_end(
    len_c: np.ndarray, len_r: np.ndarray, dim: int, budget: int, finding: bool = False
) -> int:
    """How many of these pairs (sorted by candidate length) one block takes within ``budget``
    floats (at least one); ``finding``: see :func:`_pair_cost`."""
    lc = np.maximum.accumulate(len_c)
    lr = np.maximum.accumulate(len_r)
    cost = np.arange(1, len(lc) + 1) * _pair_cost(lc, lr, dim, finding)
    return max(1, int(np.searchsorted(cost, budget, side="right")))


def _block_rows(
    row_c: np.ndarray, len_c: np.ndarray, row_r: np.ndarray, len_r: np.ndarray, pad: int
) -> tuple[np.ndarray, int]:
    """``[2, B, Lc + Lr]`` rows of each pair's candidate then reference tokens, padded (at least
    one column each), in the table's embeddings and in its weights (see
    :func:`~uqlm_bert.bertscore._matching.greedy_match_rows`); and ``Lc``."""
    lc, lr = max(1, int(len_c.max())), max(1, int(len_r.max()))
    ar_c, ar_r = np.arange(lc), np.arange(lr)
    rows = np.empty((2, len(len_c), lc + lr), dtype=np.int64)
    rows[0, :, :lc] = np.where(ar_c < len_c[:, None], row_c[:, None] + ar_c, pad)
    rows[0, :, lc:] = np.where(ar_r < len_r[:, None], row_r[:, None] + ar_r, pad)
    rows[1] = rows[0]
    rows[1, :, lc:] += pad + 1  # the reference side's weights sit in the second half
    return rows, lc
