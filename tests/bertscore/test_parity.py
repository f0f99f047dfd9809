"""BERTScorer agrees with the reference bert_score package within 1e-5 on the embedded model.

Every expected number here comes from ``bert_score.BERTScorer`` run on the same model, layer,
idf and baseline settings in the same process.

The reference pads a batch's similarity matrices with 0 before taking maxima, so a token whose
similarities are all negative scores 0 or its true best depending on which other pairs share its
batch. Our engine never lets padding win. Expected values therefore come from the reference
scoring each pair on its own (no padding), which is its batch-independent answer;
``test_reference_batch_dependence_is_not_copied`` pins the difference.
"""

from __future__ import annotations

import pytest
import torch

from tests.helpers.reference import reference_scorer as _ref
from tests.helpers.reference import scored_alone as _ref_alone
from tests.helpers.reference import stack as _stack
from tests.helpers.texts import LONG, OVERLONG, SHORT
from uqlm_bert import BERTScorer

bert_score = pytest.importorskip("bert_score")

TOL = 1e-5


def _pairs():
    texts = SHORT + LONG
    cands = texts
    refs = texts[1:] + texts[:1]  # each text against a different one
    cands = cands + texts[:4]
    refs = refs + texts[:4]  # and a few identical pairs
    return cands, refs


@pytest.fixture(scope="module")
def baseline_file(tmp_path_factory) -> str:
    """A baseline in the reference format with distinct values per layer and metric."""
    path = tmp_path_factory.mktemp("baseline") / "minilm.tsv"
    rows = ["LAYER,P,R,F"] + [
        f"{layer},{0.30 + 0.05 * layer},{0.32 + 0.05 * layer},{0.31 + 0.05 * layer}"
        for layer in range(7)
    ]
    path.write_text("\n".join(rows) + "\n")
    return str(path)


def grid_case(
    model_path: str, baseline_file: str, layer: int, idf: bool, rescale: bool, device=None
) -> tuple[BERTScorer, torch.Tensor, torch.Tensor]:
    """One point of the parity grid: our scorer on ``device``, its P/R/F of :func:`_pairs`, and
    the reference's for the same settings (each pair scored alone)."""
    cands, refs = _pairs()
    idf_key = tuple(refs) if idf else None
    baseline = baseline_file if rescale else None
    ours = BERTScorer(
        num_layers=layer,
        idf=idf,
        idf_sents=list(idf_key) if idf else None,
        rescale_with_baseline=rescale,
        baseline_path=baseline,
        device=device,
        show_progress_bars=False,
    )
    expected = _ref_alone(_ref(model_path, layer, idf_key, baseline), cands, refs)
    return ours, _stack(ours.score(cands, refs)), expected


@pytest.mark.slow
@pytest.mark.parametrize("layer", [1, 3, 6])
@pytest.mark.parametrize("idf", [False, True])
@pytest.mark.parametrize("rescale", [False, True])
def test_single_reference_grid(embedded_model_path, baseline_file, layer, idf, rescale):
    _, got, expected = grid_case(embedded_model_path, baseline_file, layer, idf, rescale)
    assert got.shape == expected.shape == (3, len(_pairs()[0]))
    assert torch.allclose(got, expected, atol=TOL, rtol=0), (got - expected).abs().max()


@pytest.mark.slow
@pytest.mark.parametrize("layer", [2, 6])
@pytest.mark.parametrize("idf", [False, True])
def test_multi_reference(embedded_model_path, layer, idf):
    cands = SHORT[:6] + LONG[:2]
    refs = [
        [SHORT[(i + 1) % len(SHORT)], SHORT[(i + 3) % len(SHORT)], LONG[i % len(LONG)]][: 1 + i % 3]
        for i in range(len(cands))
    ]
    flat = [r for group in refs for r in group]
    idf_key = tuple(flat) if idf else None
    ref = _ref(embedded_model_path, layer, idf_key, None)
    ours = BERTScorer(
        num_layers=layer, idf=idf, idf_sents=flat if idf else None, show_progress_bars=False
    )
    expected = _ref_alone(ref, cands, refs)
    got = _stack(ours.score(cands, refs))
    assert torch.allclose(got, expected, atol=TOL, rtol=0), (got - expected).abs().max()


@pytest.mark.slow
def test_long_texts_are_truncated_like_the_reference(embedded_model_path):
    cands = OVERLONG + [LONG[-1]]
    refs = [LONG[-1], OVERLONG[0], OVERLONG[1]]
    ref = _ref(embedded_model_path, 6, None, None)
    ours = BERTScorer(num_layers=6, show_progress_bars=False)
    with pytest.warns(UserWarning, match="truncated"):
        got = _stack(ours.score(cands, refs))
    expected = _ref_alone(ref, cands, refs)
    assert torch.allclose(got, expected, atol=TOL, rtol=0)


@pytest.mark.slow
def test_idf_over_references_matches_reference_score_function(embedded_model_path):
    """idf=True with no idf_sents weights by each call's references, as bert_score.score does."""
    cands, refs = _pairs()
    # bert_score.score(idf=True) computes idf over the references; a reference scorer given the
    # same references as idf_sents holds the same weights and can score pairs one by one.
    expected = _ref_alone(_ref(embedded_model_path, 5, tuple(refs), None), cands, refs)
    got = _stack(BERTScorer(num_layers=5, idf=True, show_progress_bars=False).score(cands, refs))
    assert torch.allclose(got, expected, atol=TOL, rtol=0)


@pytest.mark.slow
def test_batch_size_and_chunking_do_not_change_scores(embedded_model_path):
    cands, refs = _pairs()
    base = _stack(BERTScorer(num_layers=4, show_progress_bars=False).score(cands, refs))
    small = BERTScorer(num_layers=4, batch_size=3, chunk_size=5, show_progress_bars=False)
    assert torch.allclose(_stack(small.score(cands, refs)), base, atol=TOL, rtol=0)
    reversed_scores = _stack(
        BERTScorer(num_layers=4, show_progress_bars=False).score(cands[::-1], refs[::-1])
    )
    assert torch.allclose(reversed_scores.flip(1), base, atol=TOL, rtol=0)


@pytest.mark.slow
def test_packaged_baseline_rescales_like_reference(embedded_model_path):
    ours = BERTScorer(rescale_with_baseline=True, show_progress_bars=False)
    path = str(ours.baseline_path)
    ref = _ref(embedded_model_path, ours.num_layers, None, path)
    cands, refs = _pairs()
    assert torch.allclose(
        _stack(ours.score(cands, refs)), _ref_alone(ref, cands, refs), atol=TOL, rtol=0
    )


def test_reference_batch_dependence_is_not_copied(embedded_model_path):
    """At layer 1, 'x' against a long passage has a reference token whose similarities are all
    negative: the reference's batched call lets padding (0) win there, its single call does not.
    Ours gives the single-call value whatever the batch."""
    cand, long_ref = "x", LONG[0]
    filler_c, filler_r = SHORT[0], LONG[-1]  # a longer pair in the same batch forces padding
    ref = _ref(embedded_model_path, 1, None, None)
    batched = _stack(ref.score([cand, filler_c], [long_ref, filler_r]))[:, 0]
    alone = _stack(ref.score([cand], [long_ref]))[:, 0]
    ours = BERTScorer(num_layers=1, show_progress_bars=False)
    ours_batched = _stack(ours.score([cand, filler_c], [long_ref, filler_r]))[:, 0]
    ours_alone = _stack(ours.score([cand], [long_ref]))[:, 0]
    assert torch.allclose(ours_batched, alone, atol=TOL, rtol=0)
    assert torch.allclose(ours_alone, alone, atol=TOL, rtol=0)
    # the reference itself moves by more than the tolerance between the two calls
    assert (batched - alone).abs().max() > TOL
