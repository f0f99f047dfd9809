"""MPNet through the packed pass: the transformers forward's states, the reference's BERTScore.

A tiny random MPNet built here covers what CI can run (its relative position bias drawn as large
as the attention scores, texts long enough for the bias's far buckets); the same checks on
all-mpnet-base-v2 itself, the accurate preset's model, run where a copy is on the machine (see
``conftest.py``) and skip elsewhere. Every expected number comes from transformers' own forward
or from the ``bert_score`` package on the same model, layer and idf, in float32, on the CPU and,
where there is one, on a CUDA GPU.
"""

from __future__ import annotations

import pytest
import torch

from tests.helpers.devices import DEVICES
from tests.helpers.reference import reference_scorer, scored_alone
from tests.helpers.reference import stack as _stack
from tests.helpers.texts import LONG, SHORT
from tests.helpers.tiny_models import build_tiny_mpnet
from uqlm_bert import BERTScorer
from uqlm_bert.bertscore import _packed_forward as packed_module
from uqlm_bert.bertscore._loading import load_encoder
from uqlm_bert.bertscore._settings import BERTScoreSettings

bert_score = pytest.importorskip("bert_score")
TOL = 1e-5


@pytest.fixture(scope="module")
def tiny_mpnet(tmp_path_factory, embedded_model_path) -> str:
    return str(build_tiny_mpnet(tmp_path_factory.mktemp("tiny") / "mpnet", embedded_model_path))


def _encoder(location: str, layers: int | None, device: str = "cpu"):
    return load_encoder(
        BERTScoreSettings(model_type=location, num_layers=layers, device=device),
        all_layers=layers is None,
    )


def _transformers_states(enc, ids) -> list[torch.Tensor]:
    """Every layer's states of each text by the transformers forward, padded: [layer][text]."""
    input_ids, mask, _ = enc._padded_inputs(ids)
    with torch.inference_mode():
        out = enc.model(input_ids, attention_mask=mask, output_hidden_states=True)
    return [[h[i, : len(t)].float() for i, t in enumerate(ids)] for h in out.hidden_states]


def _padded_last(enc, ids) -> list[torch.Tensor]:
    """The last kept layer's states of each text by the transformers forward, normalised."""
    return [h / h.norm(dim=-1, keepdim=True) for h in _transformers_states(enc, ids)[-1]]


def _embedded(enc, ids) -> list[torch.Tensor]:
    """The encoder's packed embeddings of each text."""
    return list(enc.embed_packed(ids).split([len(t) for t in ids]))


def _max_difference(xs, ys) -> float:
    return max(float((x - y).abs().max()) for x, y in zip(xs, ys, strict=True))


def _ours(location: str, refs: list[str], idf: bool, device: str, layer: int | None = None):
    """Our scorer on ``location`` (at its own layer unless ``layer``), idf from ``refs``; it runs
    in float32 on ``device``, as the reference does."""
    ours = BERTScorer(
        model_type=location,
        num_layers=layer,
        idf=idf,
        idf_sents=list(refs) if idf else None,
        device=device,
        show_progress_bars=False,
    )
    assert ours.device.type == device and ours.dtype == torch.float32
    return ours


def _pairs():
    texts = SHORT[:10] + LONG[:4]
    return texts + texts[:2], texts[1:] + texts[:1] + texts[:2]  # and two identical pairs


# -- the tiny model: what CI runs -----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
def test_a_tiny_mpnet_runs_packed_and_gives_every_layer_of_the_transformers_forward(
    tiny_mpnet, device
):
    enc = _encoder(tiny_mpnet, None, device)
    assert enc.device.type == device
    assert enc.loaded.packed is not None and enc.loaded.packed.relative is not None
    ids = enc.tokenize(SHORT + LONG)
    assert max(map(len, ids)) == enc.max_length == 130  # far buckets: distances up to 129
    packed = enc.layer_states(ids)
    expected = _transformers_states(enc, ids)
    assert len(packed) == len(expected) == 4
    for layer, want in zip(packed, expected, strict=True):
        got = layer.split([len(t) for t in ids])
        assert _max_difference(got, want) < TOL


@pytest.mark.parametrize("layers", [0, 1, 3])
def test_a_truncated_tiny_mpnet_embeds_as_its_transformers_forward(tiny_mpnet, layers):
    enc = _encoder(tiny_mpnet, layers)
    ids = enc.tokenize(SHORT + LONG[:3])
    assert _max_difference(_embedded(enc, ids), _padded_last(enc, ids)) < TOL


@pytest.mark.slow
def test_attention_in_groups_of_texts_and_masks_made_in_each_layer_change_nothing(
    tiny_mpnet, monkeypatch
):
    """The float masks of MPNet's attention are made for a group of texts at a time, and made
    again in each layer when all of them would not fit: neither changes a number."""
    enc = _encoder(tiny_mpnet, 3)
    ids = enc.tokenize(SHORT + LONG[:3])
    whole = _embedded(enc, ids)
    monkeypatch.setattr(packed_module, "_MASK_ELEMENTS", 1)  # one text per group
    one_each = _embedded(enc, ids)
    monkeypatch.setattr(packed_module, "_MASKS_KEPT", 0)  # and made again in every layer
    rebuilt = _embedded(enc, ids)
    assert _max_difference(one_each, whole) < 1e-6
    assert _max_difference(rebuilt, one_each) == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layer", [1, 3])
@pytest.mark.parametrize("idf", [False, True])
def test_a_tiny_mpnet_scores_as_the_reference_package(tiny_mpnet, layer, idf, device):
    cands, refs = _pairs()
    idf_sents = tuple(refs) if idf else None
    ours = _ours(tiny_mpnet, refs, idf, device, layer)
    expected = scored_alone(
        reference_scorer(tiny_mpnet, layer, idf_sents, device=device), cands, refs
    )
    with pytest.warns(UserWarning, match="truncated, as the reference does"):
        got = _stack(ours.score(cands, refs))  # texts over 130 tokens cut there by both
    assert got.shape == expected.shape
    assert torch.allclose(got, expected, atol=TOL, rtol=0), (got - expected).abs().max()


# -- all-mpnet-base-v2, where a copy is on the machine ---------------------------------------------


@pytest.mark.parametrize("layers", [11, 12])
def test_all_mpnet_base_v2_embeds_as_its_transformers_forward(accurate_model_dir, layers):
    enc = _encoder(accurate_model_dir, layers)
    assert enc.loaded.packed is not None
    ids = enc.tokenize(SHORT + LONG)
    assert _max_difference(_embedded(enc, ids), _padded_last(enc, ids)) < TOL


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("idf", [False, True])
def test_all_mpnet_base_v2_scores_as_the_reference_package_in_float32(
    accurate_model_dir, idf, device
):
    cands, refs = _pairs()
    ours = _ours(accurate_model_dir, refs, idf, device)
    # a directory named as the model keeps the model's measured layer
    assert (ours.model_type, ours.num_layers) == ("sentence-transformers/all-mpnet-base-v2", 11)
    ref = reference_scorer(accurate_model_dir, 11, tuple(refs) if idf else None, device=device)
    expected = scored_alone(ref, cands, refs)
    got = _stack(ours.score(cands, refs))
    assert torch.allclose(got, expected, atol=TOL, rtol=0), (got - expected).abs().max()
