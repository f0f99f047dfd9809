"""Bad input gets a typed error naming the problem; empty texts score 0 with a warning."""

from __future__ import annotations

import warnings
from collections import defaultdict
from math import log

import pytest
import torch

from uqlm_bert import BaselineNotFoundError, BERTScorer, ConfigurationError, InputValidationError
from uqlm_bert.bertscore._baseline import read_baseline


@pytest.fixture(scope="module")
def inputs_engine() -> BERTScorer:
    return BERTScorer(show_progress_bars=False)


@pytest.mark.parametrize(
    "cands, refs, message",
    [
        ([], [], r"cands is empty"),
        ("a text", ["b"], r"cands must be a list"),
        (["a", None], ["b", "c"], r"cands\[1\] is None"),
        (["a", 3], ["b", "c"], r"cands\[1\] is a int"),
        (["a", "b"], ["c"], r"cands has 2 items but refs has 1"),
        (["a"], "b", r"refs must be a list"),
        (["a", "b"], ["c", None], r"refs\[1\] is None"),
        (["a", "b"], ["c", 4.5], r"refs\[1\] is a float"),
        (["a", "b"], ["c", []], r"refs\[1\] is an empty list"),
        (["a", "b"], ["c", ["d", None]], r"refs\[1\]\[1\] is None"),
    ],
)
def test_bad_inputs_name_the_index(inputs_engine, cands, refs, message):
    with pytest.raises(InputValidationError, match=message):
        inputs_engine.score(cands, refs)


def test_input_errors_are_value_errors(inputs_engine):
    with pytest.raises(ValueError):
        inputs_engine.score(["a"], [])


@pytest.mark.parametrize("empty", ["", "   ", "\n\t "])
def test_empty_candidate_or_reference_scores_zero_with_warning(inputs_engine, empty):
    with pytest.warns(UserWarning, match=r"empty candidate text .* at index 1"):
        P, R, F = inputs_engine.score(["A cat.", empty], ["A cat.", "A dog."])
    assert (float(P[1]), float(R[1]), float(F[1])) == (0.0, 0.0, 0.0)
    assert float(F[0]) > 0.99  # the other pair is untouched
    with pytest.warns(UserWarning, match=r"empty reference text .* index 0"):
        P, R, F = inputs_engine.score(["A cat.", "A dog."], [empty, "A dog."])
    assert (float(P[0]), float(R[0]), float(F[0])) == (0.0, 0.0, 0.0)


def test_empty_text_rescaled_from_raw_zero():
    inputs_engine = BERTScorer(rescale_with_baseline=True, show_progress_bars=False)
    b = read_baseline(inputs_engine.baseline_path, inputs_engine.num_layers)
    with pytest.warns(UserWarning, match="empty"):
        P, R, F = inputs_engine.score([""], ["Some reference."])
    # raw 0 rescaled: (0 - b) / (1 - b)
    assert [float(P[0]), float(R[0]), float(F[0])] == pytest.approx(
        [-b[0] / (1 - b[0]), -b[1] / (1 - b[1]), -b[2] / (1 - b[2])], abs=1e-6
    )


def test_rescale_without_baseline_is_clear(tmp_path, embedded_model_path):
    with pytest.raises(BaselineNotFoundError, match="compute_baseline"):
        BERTScorer(model_type=embedded_model_path, rescale_with_baseline=True, lang="xx")
    with pytest.raises(BaselineNotFoundError, match="does not exist"):
        BERTScorer(rescale_with_baseline=True, baseline_path=tmp_path / "missing.tsv")
    bad = tmp_path / "bad.tsv"
    bad.write_text("LAYER,P,R\n6,0.1,0.2\n")
    with pytest.raises(ConfigurationError, match="lacks columns"):
        BERTScorer(rescale_with_baseline=True, baseline_path=bad)
    short = tmp_path / "short.tsv"
    short.write_text("LAYER,P,R,F\n0,0.1,0.2,0.3\n")
    with pytest.raises(ConfigurationError, match="no single row for layer 6"):
        BERTScorer(num_layers=6, rescale_with_baseline=True, baseline_path=short)


def test_bad_settings():
    with pytest.raises(ConfigurationError, match="batch_size"):
        BERTScorer(batch_size=0)
    with pytest.raises(ConfigurationError, match="idf must be"):
        BERTScorer(idf="yes")
    with pytest.raises(ConfigurationError, match="model_type"):
        BERTScorer(model_type="   ")
    with pytest.warns(UserWarning, match="idf_sents is ignored"):
        BERTScorer(idf=False, idf_sents=["a"], show_progress_bars=False)
    with pytest.raises(InputValidationError, match=r"idf_sents\[0\] is None"):
        BERTScorer(idf=True, idf_sents=[None])


def test_idf_mapping(inputs_engine):
    tok = inputs_engine.encoder.tokenizer
    cand, ref = "the cat sat", "the dog sat"
    ids_c = tok(cand)["input_ids"]
    cat_id = tok.convert_tokens_to_ids("cat")
    # With weight only on "cat", precision is cat's best match alone.
    only_cat = defaultdict(float, {cat_id: 1.0})
    weighted = BERTScorer(idf=only_cat, show_progress_bars=False)
    # "the dog sat" has no token with weight: its recall is 0 (the reference gives NaN), so F is 0
    with pytest.warns(UserWarning, match=r"reference whose idf weights are all 0 at index 0"):
        P_w, R_w, F_w = weighted.score([cand], [ref])
    assert (float(R_w[0]), float(F_w[0])) == (0.0, 0.0)
    emb_c = inputs_engine.encoder.embed_packed([ids_c])
    emb_r = inputs_engine.encoder.embed_packed([tok(ref)["input_ids"]])
    pos = ids_c.index(cat_id)
    expected = float((emb_c[pos] @ emb_r.T).max())
    assert float(P_w[0]) == pytest.approx(expected, abs=1e-6)
    with pytest.raises(InputValidationError, match="token ids"):
        BERTScorer(idf={"cat": 1.0})


def test_idf_sents_weights_follow_the_formula(inputs_engine):
    sents = ["the cat sat", "the dog sat", "a bird flew"]
    s = BERTScorer(idf=True, idf_sents=sents, show_progress_bars=False)
    tok = s.encoder.tokenizer
    w = s._idf_weights
    m = len(sents)
    assert w[tok.convert_tokens_to_ids("the")] == pytest.approx(log((m + 1) / (2 + 1)))
    assert w[tok.convert_tokens_to_ids("bird")] == pytest.approx(log((m + 1) / (1 + 1)))
    assert w[tok.cls_token_id] == pytest.approx(0.0)
    assert w[tok.convert_tokens_to_ids("zebra")] == pytest.approx(log(m + 1))


def test_inputs_are_not_mutated(inputs_engine):
    cands = [" A cat. ", "B"]
    refs = [["A cat.", "C"], "B"]
    before = (list(cands), [list(r) if isinstance(r, list) else r for r in refs])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inputs_engine.score(cands, refs)
    assert (cands, refs) == before


def test_identical_texts_score_one(inputs_engine):
    P, R, F = inputs_engine.score(["The same text here."], ["The same text here."])
    assert torch.allclose(torch.stack([P, R, F]), torch.ones(3, 1), atol=1e-5)
