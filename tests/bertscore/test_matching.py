"""Greedy matching as a pure function, checked against hand computations."""

from __future__ import annotations

import pytest
import torch

from uqlm_bert.bertscore._matching import f1_from_pr, greedy_match, greedy_match_padded

# candidate: A cat is sitting on a mat ; reference: The cat sat on the mat
SIM = torch.tensor(
    [
        [0.1, 0.2, 0.1, 0.3, 0.1, 0.1],  # A
        [0.1, 1.0, 0.2, 0.4, 0.1, 0.2],  # cat
        [0.2, 0.3, 0.2, 0.2, 0.2, 0.1],  # is
        [0.3, 0.4, 0.9, 0.5, 0.3, 0.4],  # sitting
        [0.3, 0.4, 0.3, 1.0, 0.3, 0.3],  # on
        [0.2, 0.3, 0.2, 0.2, 0.2, 0.1],  # a
        [0.2, 0.3, 0.2, 0.2, 0.2, 1.0],  # mat
    ],
    dtype=torch.float64,
)

# By hand. Row maxima (each candidate token's best match):
#   A 0.3, cat 1.0, is 0.3, sitting 0.9, on 1.0, a 0.3, mat 1.0  -> sum 4.8 over 7 tokens
# Column maxima (each reference token's best match):
#   The 0.3, cat 1.0, sat 0.9, on 1.0, the 0.3, mat 1.0          -> sum 4.5 over 6 tokens
HAND_P = 4.8 / 7
HAND_R = 4.5 / 6
HAND_F = 2 * HAND_P * HAND_R / (HAND_P + HAND_R)  # = 7.2 / 10.05


def test_hand_worked_example_uniform_weights():
    P, R, F = greedy_match(
        SIM, torch.ones(7, dtype=torch.float64), torch.ones(6, dtype=torch.float64)
    )
    assert float(P) == pytest.approx(HAND_P, abs=1e-12)
    assert float(R) == pytest.approx(HAND_R, abs=1e-12)
    assert float(F) == pytest.approx(HAND_F, abs=1e-12)
    assert float(F) == pytest.approx(7.2 / 10.05, abs=1e-12)


def test_hand_worked_example_with_weights():
    # Weight 'cat' and 'mat' double on both sides, and drop 'A' from the candidate.
    wc = torch.tensor([0, 2, 1, 1, 1, 1, 2], dtype=torch.float64)
    wr = torch.tensor([1, 2, 1, 1, 1, 2], dtype=torch.float64)
    P, R, F = greedy_match(SIM, wc, wr)
    hand_p = (2 * 1.0 + 0.3 + 0.9 + 1.0 + 0.3 + 2 * 1.0) / 8  # 6.5 / 8
    hand_r = (0.3 + 2 * 1.0 + 0.9 + 1.0 + 0.3 + 2 * 1.0) / 8  # 6.5 / 8
    assert float(P) == pytest.approx(hand_p, abs=1e-12)
    assert float(R) == pytest.approx(hand_r, abs=1e-12)
    assert float(F) == pytest.approx(hand_p, abs=1e-12)  # P == R, so F == P


def test_padded_batch_equals_single_and_padding_never_wins():
    # Pair 0: the example. Pair 1: a 2x2 block whose similarities are all negative; padding to
    # 7x6 must not let the padded zeros become the maximum.
    g = torch.Generator().manual_seed(0)
    d = 8
    c0 = torch.nn.functional.normalize(torch.randn(7, d, generator=g, dtype=torch.float64), dim=-1)
    r0 = torch.nn.functional.normalize(torch.randn(6, d, generator=g, dtype=torch.float64), dim=-1)
    c1 = torch.nn.functional.normalize(torch.ones(2, d, dtype=torch.float64), dim=-1)
    r1 = -c1
    cand = torch.zeros(2, 7, d, dtype=torch.float64)
    ref = torch.zeros(2, 6, d, dtype=torch.float64)
    cand[0], ref[0] = c0, r0
    cand[1, :2], ref[1, :2] = c1, r1
    wc = torch.zeros(2, 7, dtype=torch.float64)
    wr = torch.zeros(2, 6, dtype=torch.float64)
    wc[0], wr[0] = 1 / 7, 1 / 6
    wc[1, :2], wr[1, :2] = 0.5, 0.5
    P, R, F = greedy_match_padded(cand, wc, ref, wr, torch.tensor([7, 2]), torch.tensor([6, 2]))
    p0, r0_, f0 = greedy_match(
        c0 @ r0.T, torch.ones(7, dtype=torch.float64), torch.ones(6, dtype=torch.float64)
    )
    assert float(P[0]) == pytest.approx(float(p0), abs=1e-12)
    assert float(R[0]) == pytest.approx(float(r0_), abs=1e-12)
    assert float(F[0]) == pytest.approx(float(f0), abs=1e-12)
    # every similarity of pair 1 is exactly -1 (opposite vectors)
    assert float(P[1]) == pytest.approx(-1.0, abs=1e-12)
    assert float(R[1]) == pytest.approx(-1.0, abs=1e-12)


def test_f1_is_zero_where_p_plus_r_is_zero():
    P = torch.tensor([0.0, 0.5, 0.25])
    R = torch.tensor([0.0, 0.5, -0.25])
    F = f1_from_pr(P, R)
    assert float(F[0]) == 0.0
    assert float(F[1]) == pytest.approx(0.5)
    assert float(F[2]) == 0.0
