"""Best matches found in bfloat16, similarities taken in float32 (long pairs, bfloat16 on the CPU).

``greedy_match_rows_found_in`` must give what ``greedy_match_rows`` gives wherever the best match
is clear, never more than it (it takes a real similarity, which the best bounds), at most the
rounding bound less at a near tie, 1 for a text against itself, the same for a pair alone or
padded among others, and a score that is not finite where an embedding is not (the float32
retry depends on it). The engine uses it for long pairs only, and only in bfloat16 on the CPU.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from uqlm_bert.bertscore import _pair_scoring as pair_scoring
from uqlm_bert.bertscore import _resolve as resolve
from uqlm_bert.bertscore import clear_model_cache
from uqlm_bert.bertscore._loading import load_encoder
from uqlm_bert.bertscore._matching import greedy_match_rows, greedy_match_rows_found_in
from uqlm_bert.bertscore._pair_scoring import FIND_IN_REDUCED_FROM, _aux_table, _block_rows

DIM = 384
# bfloat16 keeps 8 significant bits: a unit vector's entries are rounded within u = 2**-8 of
# themselves, which moves a dot product of two unit vectors by at most 2u + u**2; the result,
# similarity minus 1 (at most 2 in size), is rounded within 2u. Two matches can swap only when
# their float32 similarities are within twice the sum.
U = 2.0**-8
SWAP_BOUND = 2 * ((2 * U + U * U) + 2 * U)


def _unit(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.normalize(x, dim=-1)


def _layout(texts: list[torch.Tensor], pairs: list[tuple[int, int]]):
    """The table, weights and block rows of ``pairs`` of ``texts`` as the engine lays them out
    (uniform weights)."""
    lens = np.array([len(t) for t in texts], dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(lens)[:-1]))
    emb = torch.cat([*texts, torch.zeros(1, texts[0].shape[1])])
    weights = np.concatenate([np.full(n, 1 / n, dtype=np.float32) for n in lens])
    aux = torch.from_numpy(_aux_table(weights))
    c = np.array([p[0] for p in pairs])
    r = np.array([p[1] for p in pairs])
    rows, lc = _block_rows(starts[c], lens[c], starts[r], lens[r], emb.shape[0] - 1)
    return emb, aux, torch.from_numpy(rows), lc


def _both(texts, pairs):
    emb, aux, rows, lc = _layout(texts, pairs)
    exact = greedy_match_rows(emb, aux, rows, lc).reshape(-1, 2)
    found = greedy_match_rows_found_in(emb, aux, rows, lc).reshape(-1, 2)
    return exact, found


def _planted(n: int, ref: torch.Tensor, g: torch.Generator, spread: float) -> torch.Tensor:
    """``n`` tokens each close to a token of ``ref`` (noise of ``spread``)."""
    picks = torch.randint(0, len(ref), (n,), generator=g)
    return _unit(ref[picks] + spread * torch.randn(n, ref.shape[1], generator=g))


def test_clear_best_matches_give_the_float32_scores():
    g = torch.Generator().manual_seed(0)
    ref = _unit(torch.randn(600, DIM, generator=g))
    # each token has one token of the other text near it, and every other far
    cand = _unit(ref[torch.randperm(600, generator=g)] + 0.03 * torch.randn(600, DIM, generator=g))
    exact, found = _both([cand, ref], [(0, 1), (1, 0)])
    assert torch.allclose(found, exact, atol=1e-6, rtol=0)


@pytest.mark.slow
def test_a_near_tie_costs_at_most_the_rounding_bound_and_never_adds():
    g = torch.Generator().manual_seed(1)
    base = _unit(torch.randn(300, DIM, generator=g))
    # every reference token has a twin a hair away: best matches tie within bfloat16 rounding
    ref = torch.cat([base, _unit(base + 1e-3 * torch.randn(300, DIM, generator=g))])
    cand = _planted(400, base, g, 0.02)
    exact, found = _both([cand, ref, _unit(torch.randn(520, DIM, generator=g))], [(0, 1), (2, 1)])
    assert (found <= exact + 1e-6).all()  # a real similarity is never above the best
    assert (exact - found <= SWAP_BOUND).all()
    # and the rounding rarely swaps: far less than the bound on average
    assert float((exact - found).max()) < SWAP_BOUND / 10


def test_a_text_against_itself_scores_one():
    g = torch.Generator().manual_seed(2)
    text = _unit(torch.randn(700, DIM, generator=g))
    exact, found = _both([text], [(0, 0)])
    assert torch.allclose(found, exact, atol=1e-6, rtol=0)
    # 700 weights of 1/700 summed in float32: each sum of n terms errs by at most n * 2**-24
    assert torch.allclose(found, torch.ones_like(found), atol=700 * 2.0**-24, rtol=0)


def test_a_pair_scores_the_same_alone_and_padded_among_others_and_padding_never_wins():
    g = torch.Generator().manual_seed(3)
    a = _unit(torch.randn(530, DIM, generator=g))
    b = _unit(torch.randn(610, DIM, generator=g))
    c = _unit(torch.ones(3, DIM))  # against -c every similarity is -1: below padding's 0
    texts = [a, b, c, -c]
    pairs = [(0, 1), (2, 3), (1, 0)]
    _, together = _both(texts, pairs)
    # the same arithmetic: only float32 rounding may differ, where a multi-threaded product
    # splits its sums by the block's shape (a sum of n terms errs by at most n * 2**-24)
    for k, pair in enumerate(pairs):
        _, alone = _both(texts, [pair])
        assert torch.allclose(together[k], alone[0], atol=610 * 2.0**-24, rtol=0)
    assert together[1].tolist() == pytest.approx([-1.0, -1.0], abs=1e-6)


def test_an_embedding_that_is_not_finite_gives_a_score_that_is_not():
    g = torch.Generator().manual_seed(4)
    a, b, c = (_unit(torch.randn(n, DIM, generator=g)) for n in (520, 540, 560))
    b[7] = float("nan")
    _, found = _both([a, b, c], [(0, 1), (0, 2)])
    assert not torch.isfinite(found[0]).all()
    assert torch.isfinite(found[1]).all()


def _long_pairs(n_tokens: int):
    from tests.helpers.texts import LONG

    text = " ".join(LONG)
    words = text.split()
    cands = [" ".join(words[i : i + n_tokens]) for i in (0, 40)]
    refs = [" ".join(words[i : i + n_tokens]) for i in (15, 70)]
    return cands, refs


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_the_engine_finds_in_bfloat16_for_long_pairs_only_and_only_in_bfloat16(monkeypatch, dtype):
    from uqlm_bert import BERTScorer

    used = []
    real = pair_scoring.greedy_match_rows_found_in

    def spy(emb, aux, rows, lc, dtype):
        used.append((dtype, lc, rows.shape[2] - lc))
        return real(emb, aux, rows, lc, dtype)

    monkeypatch.setattr(pair_scoring, "greedy_match_rows_found_in", spy)
    # as on a CPU with bfloat16 matrix instructions, wherever the test runs (the plan is made
    # when the model is loaded: from a fresh cache)
    monkeypatch.setattr(resolve, "cpu_prefers_bfloat16", lambda: True)
    clear_model_cache()
    scorer = BERTScorer(device="cpu", dtype=dtype, long_texts="window", show_progress_bars=False)
    short_c, short_r = _long_pairs(60)
    long_c, long_r = _long_pairs(700)
    got = torch.stack(scorer.score(short_c + long_c, short_r + long_r), dim=1)
    if dtype == "float32":
        assert used == []
        return
    assert used and all(d == torch.bfloat16 for d, _, _ in used)
    assert all(lc * lr >= FIND_IN_REDUCED_FROM * (lc + lr) for _, lc, lr in used)
    # the same embeddings matched in float32 throughout: short pairs are, long ones near it
    loaded = scorer.encoder.loaded
    monkeypatch.setattr(
        loaded, "compute", dataclasses.replace(loaded.compute, match_dtype=torch.float32)
    )
    f32 = torch.stack(scorer.score(short_c + long_c, short_r + long_r), dim=1)
    assert torch.equal(got[:2], f32[:2])
    assert (got[2:] <= f32[2:] + 1e-6).all() and (f32[2:] - got[2:] <= SWAP_BOUND).all()


def test_bfloat16_finding_needs_the_cpu_s_bfloat16_instructions(monkeypatch):
    from uqlm_bert.bertscore._settings import BERTScoreSettings

    bf16 = BERTScoreSettings(device="cpu", dtype="bfloat16")
    monkeypatch.setattr(resolve, "cpu_prefers_bfloat16", lambda: True)
    assert resolve.plan_compute(bf16).match_dtype == torch.bfloat16
    monkeypatch.setattr(resolve, "cpu_prefers_bfloat16", lambda: False)  # emulated: slower
    assert resolve.plan_compute(bf16).match_dtype == torch.float32
    monkeypatch.setattr(resolve, "cpu_prefers_bfloat16", lambda: True)
    f32 = BERTScoreSettings(device="cpu", dtype="float32")
    assert resolve.plan_compute(f32).match_dtype == torch.float32
    # what the model is loaded with is what the encoder carries
    clear_model_cache()
    enc = load_encoder(bf16.replace(num_layers=1))
    assert enc.match_dtype == torch.bfloat16 and enc.loaded.packed.round_rows
