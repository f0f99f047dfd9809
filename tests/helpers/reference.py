"""The ``bert_score`` package as the tests' reference: one scorer per setting, and its scores of
each pair on its own.

The reference pads a batch's similarity matrices with 0 before taking maxima, so a token whose
similarities are all negative scores 0 or its true best depending on which other pairs share its
batch; each pair scored on its own is its batch-independent answer (``test_parity.py`` pins the
difference). A test module that imports this is skipped where ``bert_score`` is not installed.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence
from typing import Any

import pytest
import torch

bert_score = pytest.importorskip("bert_score")


def stack(prf) -> torch.Tensor:
    """P, R and F (tensors or lists) as one float64 tensor of shape (3, n)."""
    return torch.stack([torch.as_tensor(x, dtype=torch.float64) for x in prf])


@functools.cache
def reference_scorer(
    location: str,
    layer: int,
    idf_sents: tuple[str, ...] | None = None,
    baseline: str | None = None,
    device: str | None = None,
) -> Any:
    """``bert_score.BERTScorer`` on ``location`` at ``layer``, with idf from ``idf_sents`` and
    rescaled with the ``baseline`` file where given; built once per setting."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bert_score.BERTScorer(
            model_type=location,
            num_layers=layer,
            idf=idf_sents is not None,
            idf_sents=list(idf_sents) if idf_sents else None,
            lang="en",
            rescale_with_baseline=baseline is not None,
            baseline_path=baseline,
            device=device,
        )


def scored_alone(
    ref: Any, cands: Sequence[str], refs: Sequence[str | Sequence[str]]
) -> torch.Tensor:
    """The reference's P, R and F, shape (3, n), with each (candidate, reference) pair scored on
    its own; for several references, the best per measure (the reference's multi-reference
    rule)."""
    cols = []
    for c, r in zip(cands, refs, strict=True):
        group = [r] if isinstance(r, str) else r
        per_ref = torch.stack([stack(ref.score([c], [x]))[:, 0] for x in group], dim=1)
        cols.append(per_ref.max(dim=1).values)
    return torch.stack(cols, dim=1)
