"""Fast modes (bfloat16 / float16) stay within their documented accuracy of exact mode."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.helpers.texts import LONG, SHORT
from uqlm_bert import BERTScorer


def _fast_modes():
    modes = []
    if torch.ops.mkldnn._is_mkldnn_bf16_supported():
        modes.append(("cpu", "bfloat16"))
    gpu = pytest.mark.gpu
    if torch.cuda.is_available():
        if torch.cuda.is_bf16_supported():
            modes.append(pytest.param("cuda", "bfloat16", marks=gpu))
        modes.append(pytest.param("cuda", "float16", marks=gpu))
        modes.append(pytest.param("cuda", "auto", marks=gpu))
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        modes.append(pytest.param("mps", "float16", marks=gpu))
    return modes or [
        pytest.param(
            None,
            None,
            marks=pytest.mark.skip(
                reason="no bfloat16-capable CPU and no GPU: no fast mode on this machine"
            ),
        )
    ]


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


@pytest.mark.parametrize("device, dtype", _fast_modes())
def test_fast_mode_f1_within_5e3_and_same_ranking(device, dtype):
    texts = SHORT + LONG
    # every text as an answer against four others as its samples
    cands = [t for t in texts for _ in range(4)]
    refs = [texts[(i + k) % len(texts)] for i in range(len(texts)) for k in (1, 2, 5, 7)]
    exact = BERTScorer(device="cpu", show_progress_bars=False)
    fast = BERTScorer(device=device, dtype=dtype, show_progress_bars=False)
    F_exact = exact.score(cands, refs)[2].double().numpy()
    F_fast = fast.score(cands, refs)[2].double().numpy()
    assert np.abs(F_fast - F_exact).max() <= 5e-3
    conf_exact = F_exact.reshape(-1, 4).mean(axis=1)
    conf_fast = F_fast.reshape(-1, 4).mean(axis=1)
    assert _spearman(conf_fast, conf_exact) >= 0.995


def test_fast_and_exact_models_are_cached_separately():
    exact = BERTScorer(show_progress_bars=False)
    if not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        pytest.skip("this CPU has no bfloat16 support")
    fast = BERTScorer(dtype="bfloat16", show_progress_bars=False)
    assert exact.encoder is not fast.encoder
    assert next(fast.encoder.model.parameters()).dtype == torch.bfloat16
    assert next(exact.encoder.model.parameters()).dtype == torch.float32
