"""Scoring's torch calls grow with its batches, not with its texts or pairs.

Every torch call gives up the GIL and must take it back; while another thread runs Python (the
event loop of generate_and_score), that costs up to the interpreter's switch interval each, so
per-text calls (one index range or one copy per text and layer) made scoring beside generation
several times slower than the same work alone. On a GPU, per-text calls are per-text kernel
launches and copies.
"""

from __future__ import annotations

import pytest
import torch

from tests.helpers.devices import DEVICES
from tests.helpers.texts import SHORT, passage
from uqlm_bert import BERTScorer


def _torch_calls(fn):
    """``(number of torch calls made from Python, result)`` of ``fn()``."""
    from torch.overrides import TorchFunctionMode

    class Count(TorchFunctionMode):
        calls = 0

        def __torch_function__(self, func, types, args=(), kwargs=None):
            Count.calls += 1
            return func(*args, **(kwargs or {}))

    with Count():
        result = fn()
    return Count.calls, result


@pytest.mark.parametrize("device", DEVICES)
def test_packed_forward_makes_as_many_torch_calls_for_forty_texts_as_for_two(device):
    from uqlm_bert.bertscore._loading import load_encoder
    from uqlm_bert.bertscore._settings import BERTScoreSettings

    enc = load_encoder(BERTScoreSettings(num_layers=6, device=device))
    packed = enc.loaded.packed
    ids = enc.tokenize((SHORT * 10)[:40])
    counts = [_torch_calls(lambda batch=batch: packed(batch))[0] for batch in (ids[:2], ids)]
    assert counts[0] == counts[1], counts


@pytest.mark.parametrize("device", DEVICES)
def test_matching_makes_as_many_torch_calls_for_forty_pairs_as_for_two(device):
    """Matching fills its scores a block of pairs at a time, not with torch calls per pair. The
    40 pairs share one candidate, so that both calls embed one forward batch.

    A pair's scores do not depend on the other pairs of the call, up to float rounding (see
    "Batch invariance" in docs/bertscore.md): within 1e-6 in float32 on the CPU, 1e-5 on a GPU,
    whose kernels pick their algorithms by the shape of the batch."""
    scorer = BERTScorer(device=device, show_progress_bars=False)
    refs = [f"The {word} number {i} sat on a mat." for i, word in enumerate(["cat", "dog"] * 20)]
    counts, scores = [], []
    for n in (2, 40):
        cands = ["A cat sat on the mat."] * n
        calls, (P, R, F) = _torch_calls(lambda c=cands, r=refs[:n]: scorer.score(c, r))
        counts.append(calls)
        scores.append(F)
    assert counts[0] == counts[1], counts
    tol = 1e-6 if device == "cpu" else 1e-5
    assert torch.allclose(scores[0], scores[1][:2], atol=tol, rtol=0)


@pytest.mark.slow
def test_scoring_480_distinct_texts_makes_at_most_one_torch_call_per_text():
    """80 answers of WikiBio length with 5 samples each (480 distinct texts), at the engine's
    defaults on the CPU: the torch calls of the whole call, forward passes, matching and all,
    are at most one per text."""
    scorer = BERTScorer(device="cpu", show_progress_bars=False)
    texts = [passage(1000 + i, 110 + (37 * i) % 90) for i in range(480)]
    cands = [texts[6 * p] for p in range(80) for _ in range(5)]
    refs = [texts[6 * p + 1 + k] for p in range(80) for k in range(5)]
    calls, (P, R, F) = _torch_calls(lambda: scorer.score(cands, refs))
    assert calls <= 480, calls
    # and the scores are the engine's own, as computed in smaller pieces
    P2, R2, F2 = scorer.score(cands[:50], refs[:50])
    assert torch.allclose(F[:50], F2, atol=1e-6, rtol=0)
