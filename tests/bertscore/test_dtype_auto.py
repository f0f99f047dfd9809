"""``dtype="auto"``: the scorers' default, resolved per device and model; BERTScorer stays exact."""

from __future__ import annotations

import math
import types
import warnings

import numpy as np
import pytest
import torch

from tests.helpers.texts import LONG, SHORT, passage
from uqlm_bert import BERTScorer, BlackBoxUQ, ConfigurationError
from uqlm_bert.bertscore import _resolve as resolve
from uqlm_bert.bertscore._resolve import auto_dtype, resolve_dtype
from uqlm_bert.bertscore._settings import SCORER_DEFAULTS, BERTScoreSettings

BERT = types.SimpleNamespace(model_type="bert")
T5 = types.SimpleNamespace(model_type="t5")


def test_auto_picks_by_device_and_model(monkeypatch):
    monkeypatch.setattr(resolve, "cpu_prefers_bfloat16", lambda: True)
    assert auto_dtype(torch.device("cpu"), BERT) == torch.bfloat16
    monkeypatch.setattr(resolve, "cpu_prefers_bfloat16", lambda: False)
    assert auto_dtype(torch.device("cpu"), BERT) == torch.float32  # emulated bf16 is slower
    assert auto_dtype(torch.device("cuda"), BERT) == torch.float16
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert auto_dtype(torch.device("cuda:1"), T5) == torch.bfloat16  # T5 overflows float16
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert auto_dtype(torch.device("cuda"), T5) == torch.float32
    assert auto_dtype(torch.device("mps"), BERT) == torch.float16
    assert auto_dtype(torch.device("mps"), T5) == torch.float32
    assert auto_dtype(torch.device("meta"), BERT) == torch.float32
    # resolve_dtype hands "auto" to it, and still refuses float16 on the CPU when asked for
    assert resolve_dtype("auto", torch.device("cuda"), BERT) == torch.float16
    with pytest.raises(ConfigurationError, match="bfloat16"):
        resolve_dtype("float16", torch.device("cpu"))


def test_bertscorer_stays_exact_and_the_scorers_default_to_auto():
    assert BERTScoreSettings().dtype is None  # BERTScorer: the reference's float32
    assert SCORER_DEFAULTS.dtype == "auto"
    assert BERTScoreSettings.for_scorers(dtype=None).dtype == "auto"
    assert BERTScoreSettings(dtype="AUTO".lower()).dtype == "auto"
    exact = BERTScorer(device="cpu", show_progress_bars=False)
    assert exact.dtype == torch.float32
    auto = BERTScorer(device="cpu", dtype="auto", show_progress_bars=False)
    assert auto.dtype == auto_dtype(torch.device("cpu"), auto.encoder.loaded.config)
    # "auto" and the dtype it resolves to share one cached model
    same = BERTScorer(
        device="cpu", dtype=str(auto.dtype).removeprefix("torch."), show_progress_bars=False
    )
    assert same.encoder.loaded is auto.encoder.loaded


def test_results_say_which_dtype_ran():
    uq = BlackBoxUQ(scorers=["bert_score", "cosine_sim"], device="cpu", show_progress_bars=False)
    result = uq.score(["Paris is in France."], [["France's capital is Paris.", "Lyon is big."]])
    expected = str(auto_dtype(torch.device("cpu"))).removeprefix("torch.")
    assert result.metadata["model_dtypes"] == {"bert_score": expected, "cosine_sim": expected}
    exact = BlackBoxUQ(
        scorers=["bert_score"],
        bertscore=BERTScoreSettings(dtype="float32", device="cpu"),
        show_progress_bars=False,
    )
    result = exact.score(["Paris is in France."], [["France's capital is Paris."]])
    assert result.metadata["model_dtypes"] == {"bert_score": "float32"}


def test_texts_whose_reduced_precision_embeddings_are_not_finite_are_redone_in_float32(
    overflow_in_bfloat16,
):
    """A text whose bfloat16 embeddings overflow (forced here) is embedded again in float32: its
    pairs get float32's scores, the others keep bfloat16's, and the call warns once."""
    fast = BERTScorer(device="cpu", dtype="bfloat16", show_progress_bars=False)
    exact = BERTScorer(device="cpu", show_progress_bars=False)
    cands = SHORT[:6] + LONG[:2]
    refs = [LONG[2]] * 3 + SHORT[8:13]
    P0, R0, F0 = fast.score(cands, refs)
    Pe, Re, Fe = exact.score(cands, refs)
    overflow_in_bfloat16(fast.encoder.tokenize([LONG[2]])[0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        P, R, F = fast.score(cands, refs)
    messages = [str(w.message) for w in caught if "not finite" in str(w.message)]
    assert len(messages) == 1 and "1 text(s)" in messages[0] and "float32" in messages[0]
    assert torch.isfinite(F).all()
    hit = torch.tensor([r == LONG[2] for r in refs])
    # pairs with the poisoned reference: its embeddings are float32's now (the candidates'
    # stay bfloat16), so they move towards exact and away from nothing else
    assert torch.allclose(F[~hit], F0[~hit], atol=0, rtol=0)
    assert (F[hit] - Fe[hit]).abs().max() <= 5e-3
    assert not torch.equal(F[hit], F0[hit])


@pytest.mark.parametrize("dtype, tol", [("float32", 1e-6), ("bfloat16", 1e-3)])
def test_the_other_pairs_of_a_call_move_a_score_only_by_float_rounding(dtype, tol):
    """Each prompt scored alone against its scores within the whole call. The texts' company
    changes the attention layout's width, and with it the order of float sums inside the
    kernel: in float32 that is rounding (measured 2.4e-7 at most on WikiBio), in bfloat16 it can
    flip the last bit of some activations (1.5e-4 at most on WikiBio, 3.7e-4 on these texts)."""
    scorer = BERTScorer(device="cpu", dtype=dtype, show_progress_bars=False)
    texts = SHORT + LONG + [passage(50 + i, 30 + 11 * i) for i in range(12)]
    cands = [texts[(3 * p) % len(texts)] for p in range(12) for _ in range(3)]
    refs = [texts[(3 * p + 1 + k) % len(texts)] for p in range(12) for k in range(3)]
    together = torch.stack(scorer.score(cands, refs))
    for p in range(12):
        alone = torch.stack(scorer.score(cands[3 * p : 3 * p + 3], refs[3 * p : 3 * p + 3]))
        assert torch.allclose(alone, together[:, 3 * p : 3 * p + 3], atol=tol, rtol=0)


@pytest.fixture(scope="module")
def dev_passages(shared_data_dir):
    import json

    lines = (shared_data_dir / "wikibio_gpt3_dev.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


@pytest.mark.slow
def test_default_confidences_on_the_dev_passages_stay_within_2e3_of_float32(dev_passages):
    """BlackBoxUQ at its defaults (dtype="auto": bfloat16 on this kind of CPU) against the same
    scorer in float32, on the 30 WikiBio passages with 5 samples each."""
    responses = [p["response"] for p in dev_passages]
    samples = [p["sampled_responses"][:5] for p in dev_passages]
    default = BlackBoxUQ(scorers=["bert_score"], show_progress_bars=False)
    exact = BlackBoxUQ(
        scorers=["bert_score"],
        bertscore=BERTScoreSettings(dtype="float32"),
        show_progress_bars=False,
    )
    conf = np.asarray(default.score(responses, samples).to_df()["bert_score"])
    conf32 = np.asarray(exact.score(responses, samples).to_df()["bert_score"])
    assert np.abs(conf - conf32).max() <= 2e-3
    assert _spearman(conf, conf32) >= 0.999


def test_the_cpu_choice_of_bfloat16_is_measured_where_only_avx512_bf16_offers_it(monkeypatch):
    calls = []

    def gain(value):
        def measure() -> float:
            calls.append(value)
            return value

        return measure

    def choice(units: bool, amx: bool, measured: float) -> bool:
        monkeypatch.setattr(resolve, "cpu_has_bfloat16_units", lambda: units)
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx, raising=False)
        monkeypatch.setattr(resolve, "_bfloat16_matmul_gain", gain(measured))
        resolve.cpu_prefers_bfloat16.cache_clear()
        try:
            return resolve.cpu_prefers_bfloat16()
        finally:
            resolve.cpu_prefers_bfloat16.cache_clear()

    assert choice(units=False, amx=False, measured=3.0) is False  # emulated: never
    assert calls == []
    assert choice(units=True, amx=True, measured=0.5) is True  # AMX tiles: always
    assert calls == []
    assert choice(units=True, amx=False, measured=0.55) is False  # slower than float32's units
    assert choice(units=True, amx=False, measured=resolve.BFLOAT16_MIN_GAIN) is True
    assert choice(units=True, amx=False, measured=resolve.BFLOAT16_MIN_GAIN - 0.01) is False
    assert calls == [0.55, resolve.BFLOAT16_MIN_GAIN, resolve.BFLOAT16_MIN_GAIN - 0.01]


def test_the_bfloat16_gain_is_a_ratio_of_real_timings():
    gain = resolve._bfloat16_matmul_gain(rows=128, reps=2)
    assert math.isfinite(gain) and gain > 0
