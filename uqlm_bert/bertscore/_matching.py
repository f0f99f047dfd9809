"""Greedy matching: BERTScore precision, recall and F1 from token similarities.

Pure functions on tensors. Precision averages, over the candidate's tokens, each token's best
cosine similarity with any reference token; recall does the same over the reference's tokens.
Both are weighted (idf, or 1 with [CLS]/[SEP] at 0) and F1 is their harmonic mean, 0 where
P + R = 0.

Example (the worked example of the tests, by hand):
    >>> import torch
    >>> from uqlm_bert.bertscore._matching import greedy_match
    >>> sim = torch.tensor([[0.9, 0.1], [0.2, 0.5]])
    >>> P, R, F = greedy_match(sim, torch.ones(2), torch.ones(2))
    >>> round(float(P), 4), round(float(R), 4), round(float(F), 4)
    (0.7, 0.7, 0.7)
"""

from __future__ import annotations

import torch
from torch.nn.functional import embedding

__all__ = [
    "greedy_match",
    "greedy_match_padded",
    "greedy_match_rows",
    "greedy_match_rows_found_in",
    "greedy_match_tiled",
    "f1_from_pr",
]


def f1_from_pr(P: torch.Tensor, R: torch.Tensor) -> torch.Tensor:
    """Harmonic mean of P and R, 0 where P + R = 0 (the reference's rule)."""
    denom = P + R
    F = 2 * P * R / denom
    return torch.where(denom == 0, torch.zeros_like(F), F)


def greedy_match(
    sim: torch.Tensor, cand_weights: torch.Tensor, ref_weights: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """P, R and F1 for one candidate/reference pair.

    Args:
        sim: ``[len_cand, len_ref]`` cosine similarities between token embeddings.
        cand_weights: ``[len_cand]`` non-negative importance weight of each candidate token.
        ref_weights: ``[len_ref]`` weight of each reference token.

    Returns:
        Scalar tensors ``(P, R, F)``: ``P = sum_i w_i max_j sim_ij / sum_i w_i``,
        ``R = sum_j v_j max_i sim_ij / sum_j v_j``, ``F = 2PR / (P + R)``.
    """
    P = (sim.max(dim=1).values * cand_weights).sum() / cand_weights.sum()
    R = (sim.max(dim=0).values * ref_weights).sum() / ref_weights.sum()
    return P, R, f1_from_pr(P, R)


def greedy_match_padded(
    cand_emb: torch.Tensor,
    cand_weights: torch.Tensor,
    ref_emb: torch.Tensor,
    ref_weights: torch.Tensor,
    cand_lens: torch.Tensor,
    ref_lens: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Batched :func:`greedy_match` over padded, L2-normalised embeddings.

    Args:
        cand_emb: ``[B, Lc, D]`` candidate token embeddings (rows past ``cand_lens`` are padding).
        cand_weights: ``[B, Lc]`` weights, already normalised to sum to 1 per row (0 on padding).
        ref_emb: ``[B, Lr, D]``; ref_weights: ``[B, Lr]``, likewise.
        cand_lens, ref_lens: ``[B]`` true lengths.

    Padding never wins a max: padded similarities are set to -inf before the max, so a pair's
    scores do not depend on what else is in the batch.
    """
    sim = torch.bmm(cand_emb, ref_emb.transpose(1, 2))
    Lc, Lr = cand_emb.shape[1], ref_emb.shape[1]
    cand_valid = torch.arange(Lc, device=sim.device)[None, :] < cand_lens[:, None]
    ref_valid = torch.arange(Lr, device=sim.device)[None, :] < ref_lens[:, None]
    neg = torch.finfo(sim.dtype).min
    # Rows of padded candidate tokens stay finite (their weight is 0); only columns are masked
    # for precision, and rows for recall.
    best_p = sim.masked_fill(~ref_valid[:, None, :], neg).max(dim=2).values
    best_r = sim.masked_fill(~cand_valid[:, :, None], neg).max(dim=1).values
    P = (best_p.masked_fill(~cand_valid, 0) * cand_weights).sum(dim=1)
    R = (best_r.masked_fill(~ref_valid, 0) * ref_weights).sum(dim=1)
    return P, R, f1_from_pr(P, R)


def greedy_match_rows(
    emb: torch.Tensor,
    aux: torch.Tensor,
    rows: torch.Tensor,
    cand_width: int,
    *,
    best: list[torch.Tensor] | None = None,
) -> torch.Tensor:
    """Batched greedy matching over token rows gathered from one packed table.

    Args:
        emb: ``[T, D]`` L2-normalised token embeddings of many texts, one row per token; its
            last row is the padding row (all 0).
        aux: ``[2 * T, 3]``: for each row of ``emb``, ``(weight, 0, bias)`` and then, from row
            ``T`` on, ``(0, weight, bias)``: a token's weight (normalised to sum 1 over its
            text) in the column of its side, and its mask bias, 0 for a real token and the
            dtype's lowest value for the padding row (whose weight is 0).
        rows: ``[2, B, Lc + Lr]`` int64: each pair's candidate token rows in the first
            ``cand_width`` columns and its reference token rows in the rest, padded with the
            padding row; ``rows[0]`` indexes ``emb``, ``rows[1]`` indexes ``aux`` (the
            reference columns ``T`` further on).
        cand_width: ``Lc``.
        best: where given, each candidate token's best similarity with any reference token,
            ``[B, Lc]`` (what P weighs; its padding columns hold 0), is appended to it.

    Returns:
        ``[B, 1, 2]``: each pair's P and R. Padding never wins a max and weighs 0, so a pair's
        scores do not depend on the other pairs of the batch.

    The whole batch is a fixed number of torch calls, however many pairs it holds.

    Example (the worked example of the tests, tokens as unit vectors):
        >>> import torch
        >>> emb = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])  # a, b, padding
        >>> aux = torch.tensor([[1.0, 0, 0], [1.0, 0, 0], [0, 0, -3e38],
        ...                     [0, 1.0, 0], [0, 1.0, 0], [0, 0, -3e38]])
        >>> rows = torch.tensor([[[0, 1]], [[0, 4]]])  # candidate "a", reference "b"
        >>> greedy_match_rows(emb, aux, rows, 1).flatten().tolist()
        [0.0, 0.0]
    """
    lc = cand_width
    rows_e, rows_a = rows.unbind(0)
    cand, ref = embedding(rows_e, emb).split([lc, rows_e.shape[1] - lc], dim=1)
    weight, bias = embedding(rows_a, aux).split([2, 1], dim=2)  # [B, L, 2], [B, L, 1]
    sim = torch.bmm(cand, ref.transpose(1, 2))  # [B, Lc, Lr]
    best_p = (sim + bias[:, None, lc:, 0]).amax(dim=2)  # each candidate token's best match
    best_r = (sim + bias[:, :lc]).amax(dim=1)  # each reference token's best match
    if best is not None:
        best.append(best_p)
    return _weighted_sums(best_p, best_r, weight)


def greedy_match_rows_found_in(
    emb: torch.Tensor,
    aux: torch.Tensor,
    rows: torch.Tensor,
    cand_width: int,
    dtype: torch.dtype = torch.bfloat16,
    *,
    best: list[torch.Tensor] | None = None,
) -> torch.Tensor:
    """:func:`greedy_match_rows` with each token's best match found in a reduced ``dtype`` and
    its similarity then computed in ``emb``'s (float32).

    The similarity matrices, where the time goes, are computed from the pairs' rows rounded to
    ``dtype`` (bfloat16, whose matrix products a CPU with AVX512-BF16 or AMX units runs several
    times as fast as float32's), as similarity minus 1: the subtraction happens in the float32
    accumulator, before the result is rounded, and near 0 bfloat16 numbers lie far closer than
    near 1 (0.004 apart), where best matches lie, so the rounding does not tie a token's best
    match with the next ones. Each candidate token's best reference token there, and each
    reference token's best candidate token, then get their similarity from ``emb``: one float32
    dot product per token. Where the bfloat16 best is the float32 best, the result is
    :func:`greedy_match_rows`'s up to float32 rounding. Rounding the embeddings to bfloat16 can
    swap two matches whose similarities are close (the slightly lower one then counts): within
    0.03 at most (2**-8 relative rounding of each entry, and of the result), within 2.3e-5 in
    F1 on WikiBio texts of 1,500 tokens (benchmarks/RESULTS.md). A text scored against itself
    still gets 1.

    Args:
        emb, aux, rows, cand_width, best: as for :func:`greedy_match_rows` (``best`` gets
            the float32 similarity of each candidate token with the match found).
        dtype: the dtype best matches are found in.

    Returns:
        ``[B, 1, 2]``: each pair's P and R, as :func:`greedy_match_rows` gives them.

    Example (tokens as unit vectors):
        >>> import torch
        >>> emb = torch.tensor([[1.0, 0.0], [0.6, 0.8], [0.0, 0.0]])  # a, b, padding
        >>> aux = torch.tensor([[1.0, 0, 0], [1.0, 0, 0], [0, 0, -3e38],
        ...                     [0, 1.0, 0], [0, 1.0, 0], [0, 0, -3e38]])
        >>> rows = torch.tensor([[[0, 1]], [[0, 4]]])  # candidate "a", reference "b"
        >>> out = greedy_match_rows_found_in(emb, aux, rows, 1)
        >>> [round(x, 6) for x in out.flatten().tolist()]
        [0.6, 0.6]
    """
    lc = cand_width
    rows_e, rows_a = rows.unbind(0)
    rows_c, rows_r = rows_e.split([lc, rows_e.shape[1] - lc], dim=1)
    gathered = embedding(rows_e, emb)  # [B, Lc + Lr, D] float32, rounded once below
    cand, ref = gathered.split([lc, rows_r.shape[1]], dim=1)
    cand_low, ref_low = gathered.to(dtype).split([lc, rows_r.shape[1]], dim=1)
    weight, bias = embedding(rows_a, aux).split([2, 1], dim=2)
    # float32's lowest is past bfloat16's range: the reduced dtype's own lowest masks padding
    bias = bias.clamp(min=torch.finfo(dtype).min).to(dtype)
    minus_one = torch.full((), -1.0, dtype=dtype, device=emb.device)
    shape = (rows_e.shape[0], lc, rows_r.shape[1])
    shifted = torch.baddbmm(minus_one.expand(shape), cand_low, ref_low.transpose(1, 2))
    best_ref = (shifted + bias[:, None, lc:, 0]).max(dim=2).indices  # [B, Lc]
    best_cand = (shifted + bias[:, :lc]).max(dim=1).indices  # [B, Lr]
    # each token against its best match, in float32: the match's table row, one dot product
    best_p = torch.linalg.vecdot(cand, embedding(rows_r.gather(1, best_ref), emb))
    best_r = torch.linalg.vecdot(ref, embedding(rows_c.gather(1, best_cand), emb))
    if best is not None:
        best.append(best_p)
    return _weighted_sums(best_p, best_r, weight)


def _weighted_sums(
    best_p: torch.Tensor, best_r: torch.Tensor, weight: torch.Tensor
) -> torch.Tensor:
    """``[B, 1, 2]`` P and R: the best matches weighted and summed (the weights sit in column 0
    for candidate tokens, 1 for reference ones), in float64 where the device has it: exact up
    to one rounding to float32 however long the texts and however wide their block, so a pair
    gets the same P and R in any block, and P is the weighted mean of the kept best matches
    within a float32 rounding (a float32 product's running sum drifts by 1e-6 over 800 tokens)."""
    wide = torch.float32 if best_p.device.type == "mps" else torch.float64
    terms = torch.cat((best_p, best_r), dim=1)[:, None, :].to(wide) * weight.transpose(1, 2).to(
        wide
    )
    return terms.sum(dim=2)[:, None, :].to(best_p.dtype)


def greedy_match_tiled(
    cand_emb: torch.Tensor,
    cand_weights: torch.Tensor,
    ref_emb: torch.Tensor,
    ref_weights: torch.Tensor,
    budget: int,
    *,
    best: list[torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`greedy_match` of one pair of L2-normalised embeddings whose similarity matrix is
    too big to hold (two long texts read in windows): it is built ``budget`` similarities at a
    time, a block of candidate rows against every reference token, keeping each row's and each
    column's best so far.

    Args:
        cand_emb: ``[Lc, D]``; ref_emb: ``[Lr, D]``.
        cand_weights, ref_weights: ``[Lc]`` and ``[Lr]``, normalised to sum to 1.
        budget: the most similarities held at once (at least one row of them).
        best: where given, each candidate token's best similarity, ``[Lc]``, is appended to it.

    Example:
        >>> import torch
        >>> c = torch.nn.functional.normalize(torch.randn(7, 4), dim=-1)
        >>> r = torch.nn.functional.normalize(torch.randn(5, 4), dim=-1)
        >>> wc, wr = torch.full((7,), 1 / 7), torch.full((5,), 1 / 5)
        >>> whole = greedy_match(c @ r.T, wc, wr)
        >>> tiled = greedy_match_tiled(c, wc, r, wr, budget=10)
        >>> all(torch.allclose(a, b) for a, b in zip(whole, tiled))
        True
    """
    rows = max(1, budget // max(1, ref_emb.shape[0]))
    best_p = torch.empty(cand_emb.shape[0], dtype=cand_emb.dtype, device=cand_emb.device)
    best_r = torch.full(
        (ref_emb.shape[0],),
        torch.finfo(cand_emb.dtype).min,
        dtype=cand_emb.dtype,
        device=cand_emb.device,
    )
    ref_t = ref_emb.T
    tile = torch.empty(
        (min(rows, cand_emb.shape[0]), ref_emb.shape[0]),
        dtype=cand_emb.dtype,
        device=cand_emb.device,
    )
    for start in range(0, cand_emb.shape[0], rows):
        block = cand_emb[start : start + rows]
        sim = torch.mm(block, ref_t, out=tile[: block.shape[0]])
        torch.amax(sim, dim=1, out=best_p[start : start + block.shape[0]])
        torch.maximum(best_r, torch.amax(sim, dim=0), out=best_r)
    if best is not None:
        best.append(best_p)
    wide = torch.float32 if best_p.device.type == "mps" else torch.float64  # as for blocks
    P = (best_p.to(wide) * cand_weights.to(wide)).sum().to(best_p.dtype)
    R = (best_r.to(wide) * ref_weights.to(wide)).sum().to(best_r.dtype)
    return P, R, f1_from_pr(P, R)
