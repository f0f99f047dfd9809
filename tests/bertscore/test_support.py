"""Token support: the engine keeps each candidate token's best match, and the pure module reads it.

The invariant that ties the map to the score: the candidate's weights dotted with its tokens'
best similarities is the pair's precision, on every matching path (short blocks, best matches
found in bfloat16, tiled long pairs, texts read in windows, the float32 redo of embeddings that
are not finite, empty texts). The best similarities themselves are checked against a brute-force
maximum over the embeddings, and the pure module's rows against hand computations.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from tests.helpers.spies import spy
from tests.helpers.texts import LONG, OVERLONG, SHORT
from uqlm_bert import BERTScorer, ConfigurationError, InputValidationError
from uqlm_bert.bertscore import _pair_scoring as pair_scoring
from uqlm_bert.bertscore import _resolve as resolve
from uqlm_bert.bertscore import clear_model_cache
from uqlm_bert.bertscore._encoder import token_spans
from uqlm_bert.bertscore._token_support import PairMatches, TokenSupport, aggregate


def _dot(m: PairMatches) -> np.ndarray:
    """Each pair's weights dotted with its best similarities, in float64."""
    return np.array(
        [
            np.dot(m.weights[k].astype(np.float64), m.best_of(k).astype(np.float64))
            for k in range(len(m))
        ]
    )


def _assert_invariant(m: PairMatches, tol: float = 1e-6) -> None:
    assert len(m.best) == sum(len(i) for i in m.ids)  # one float per candidate token per pair
    assert np.abs(_dot(m) - m.scores[:, 0]).max() <= tol


@pytest.fixture(scope="module")
def exact():
    return BERTScorer(device="cpu", show_progress_bars=False)


def test_kept_matches_are_the_best_cosines_and_give_precision(exact):
    cands = SHORT[:8] + ["", "   ", LONG[1]]
    refs = SHORT[8:16] + ["A cat.", "", LONG[2]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # empty texts
        m = exact.score_matches(cands, refs)
        P, R, F = exact.score(cands, refs)
    assert np.array_equal(m.scores, torch.stack((P, R, F), dim=1).numpy())
    _assert_invariant(m)
    enc = exact.encoder
    for k, (c, r) in enumerate(zip(cands, refs, strict=True)):
        ids_c, ids_r = enc.tokenize([c, r])
        assert m.ids[k].tolist() == ids_c
        if len(ids_c) <= 2 or len(ids_r) <= 2:  # an empty side: 0 by construction
            assert not m.best_of(k).any()
            continue
        sim = enc.embed_packed([ids_c]) @ enc.embed_packed([ids_r]).T
        brute = sim.max(dim=1).values.numpy()
        assert np.abs(m.best_of(k) - brute).max() <= 1e-5


def test_zero_weights_and_prompt_contexts_keep_the_invariant(exact):
    tok = exact.encoder.tokenizer
    prompt_ids = set(exact.encoder.tokenize(["What is the capital of France?"])[0])
    cands = ["The capital of France is Paris.", "The capital of France?", "Paris!"]
    refs = ["Paris is the capital.", "It is Paris.", "Lyon."]
    zero = [prompt_ids, prompt_ids, set(tok.convert_tokens_to_ids(["!"]))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = exact.score_matches(cands, refs, zero_weight=zero)
    _assert_invariant(m)
    assert m.scores[1, 0] == 0 and not m.weights[1].any()  # only the prompt's words: weighs 0
    assert m.best_of(1).min() > 0  # its tokens are still matched


def test_idf_and_rescaling(exact):
    idf = BERTScorer(device="cpu", idf="auto", show_progress_bars=False)
    m = idf.score_matches(SHORT[:6], SHORT[6:12])
    _assert_invariant(m)
    rescaled = BERTScorer(device="cpu", rescale_with_baseline=True, show_progress_bars=False)
    m = rescaled.score_matches(SHORT[:6], SHORT[6:12])
    b = rescaled._baseline[0]  # the baseline's precision at the layer
    assert np.abs((_dot(m) - b) / (1 - b) - m.scores[:, 0]).max() <= 1e-5


def test_windowed_and_tiled_long_pairs(monkeypatch):
    scorer = BERTScorer(device="cpu", long_texts="window", show_progress_bars=False)
    cands = [OVERLONG[0], OVERLONG[0], SHORT[0]]
    refs = [OVERLONG[1], LONG[3], OVERLONG[1]]
    blocks = scorer.score_matches(cands, refs)
    _assert_invariant(blocks)
    assert len(blocks.ids[0]) > scorer.encoder.max_length  # read whole, in windows
    tiled = spy(monkeypatch, pair_scoring, "greedy_match_tiled")
    monkeypatch.setattr(pair_scoring, "MATCH_BUDGET_CPU", 50_000)  # no long pair fits a block
    small = scorer.score_matches(cands, refs)
    assert tiled
    _assert_invariant(small)
    assert np.abs(small.best - blocks.best).max() <= 1e-6


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_best_matches_found_in_bfloat16(monkeypatch, dtype):
    used = spy(monkeypatch, pair_scoring, "greedy_match_rows_found_in")
    monkeypatch.setattr(resolve, "cpu_prefers_bfloat16", lambda: True)
    clear_model_cache()
    try:
        scorer = BERTScorer(
            device="cpu", dtype=dtype, long_texts="window", show_progress_bars=False
        )
        m = scorer.score_matches([OVERLONG[0], SHORT[1]], [OVERLONG[1], SHORT[2]])
    finally:
        clear_model_cache()
    assert bool(used) == (dtype == "bfloat16")
    _assert_invariant(m)


def test_embeddings_redone_in_float32_give_their_matches(overflow_in_bfloat16):
    fast = BERTScorer(device="cpu", dtype="bfloat16", show_progress_bars=False)
    cands, refs = SHORT[:4], [LONG[2]] * 2 + SHORT[8:10]
    overflow_in_bfloat16(fast.encoder.tokenize([LONG[2]])[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = fast.score_matches(cands, refs)
    assert np.isfinite(m.best).all()
    _assert_invariant(m)


def test_score_matches_checks_its_input(exact):
    with pytest.raises(InputValidationError, match="one reference per candidate"):
        exact.score_matches(["a", "b"], ["a"])
    with pytest.raises(InputValidationError):
        exact.score_matches(["a"], [["a", "b"]])


def test_take_and_mean_best_select_pairs(exact):
    m = exact.score_matches([SHORT[0]] * 3, SHORT[1:4])
    part = m.take([2, 0])
    assert np.array_equal(part.best_of(0), m.best_of(2))
    assert np.array_equal(part.scores, m.scores[[2, 0]])
    mean = m.mean_best([0, 1, 2])
    by_hand = (m.best_of(0).astype(np.float64) + m.best_of(1) + m.best_of(2)) / 3
    assert np.abs(mean - by_hand).max() <= 1e-7
    other = exact.score_matches([SHORT[0], SHORT[5]], SHORT[1:3])
    with pytest.raises(InputValidationError, match="one candidate"):
        other.mean_best([0, 1])


# --------------------------------------------------------------------------- token spans


def test_token_spans_match_the_engine_ids_and_the_text(exact):
    tok = exact.encoder.tokenizer
    texts = ["  Unbelievability, said she.  ", "x" * 20_000, "[CLS] a [MASK]", ""]
    spans = token_spans(tok, texts, exact.encoder.token_limit)
    for text, sp in zip(texts, spans, strict=True):
        assert sp.ids.tolist() == exact.encoder.tokenize([text])[0]
        assert sp.lead == len(text) - len(text.lstrip())
        assert (sp.offsets[:, 0] >= 0).all() and (sp.offsets[:, 1] <= len(text)).all()
    first = spans[0]
    word = first.words == first.words[1]  # the pieces of the first word
    assert word.sum() > 1
    assert "".join(texts[0][a:b] for a, b in first.offsets[word].tolist()) == "Unbelievability"


def test_a_slow_tokenizer_cannot_place_tokens():
    from types import SimpleNamespace

    slow = SimpleNamespace(is_fast=False)  # a Python tokenizer: no offsets
    with pytest.raises(ConfigurationError, match="fast tokenizer"):
        token_spans(slow, ["a b"], 512)


# --------------------------------------------------------------------------- the pure module


def _support(text, spans, words, weights, support, n=2):
    return TokenSupport(
        text,
        np.array([a for a, _ in spans], dtype=np.int64),
        np.array([b for _, b in spans], dtype=np.int64),
        np.array(words, dtype=np.int64),
        np.array(weights, dtype=np.float32),
        np.array(support, dtype=np.float32),
        n,
    )


def test_word_rows_merge_pieces_by_weight():
    # "Zorblat ran." with "Zorblat" in two pieces
    ts = _support(
        "Zorblat ran.",
        [(0, 4), (4, 7), (8, 11), (11, 12)],
        [0, 0, 1, 2],
        [0.2, 0.3, 0.5, 0.0],
        [0.5, 0.25, 0.75, 0.9],
    )
    rows = ts.word_rows()
    assert rows.text == ["Zorblat", "ran", "."]
    assert rows.start.tolist() == [0, 8, 11] and rows.end.tolist() == [7, 11, 12]
    # (0.2 * 0.5 + 0.3 * 0.25) / 0.5 = 0.35; the full stop weighs 0: its own support
    assert np.allclose(rows.support, [0.35, 0.75, 0.9])
    assert rows.counted.tolist() == [True, True, False]
    assert np.isclose(np.dot(rows.weight, rows.support), ts.precision)


def test_sentence_support_by_hand():
    text = "Aa bb cc. Dd ee."
    ts = _support(
        text,
        [(0, 2), (3, 5), (6, 8), (8, 9), (10, 12), (13, 15), (15, 16)],
        [0, 1, 2, 3, 4, 5, 6],
        [0.2, 0.2, 0.2, 0.0, 0.2, 0.2, 0.0],
        [0.8, 0.4, 0.6, 0.95, 0.3, 0.5, 0.95],
    )
    spans = [(0, 9), (10, 16)]
    # counted tokens only (the full stops weigh 0): [0.8, 0.4, 0.6] and [0.3, 0.5]
    assert np.allclose(ts.sentence_support(spans, "min"), [0.4, 0.3])
    assert np.allclose(ts.sentence_support(spans, "mean"), [0.6, 0.4])
    # 10th percentile, linear: 0.4 + 0.2 * (0.6 - 0.4) and 0.3 + 0.1 * (0.5 - 0.3)
    assert np.allclose(ts.sentence_support(spans, "p10"), [0.44, 0.32])
    assert np.isnan(ts.sentence_support([(9, 10)])[0])  # no token starts there
    only_stop = ts.sentence_support([(8, 9)], "mean")  # none counted: all its tokens
    assert np.allclose(only_stop, [0.95])


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        ("min", 0.2),
        ("mean", 0.65),
        ("wmean", (0.2 * 1 + 0.6 * 1 + 0.8 * 2 + 1.0 * 0) / 4),
        ("p50", 0.7),
        ("trim25", 0.2),
        ("trim50", 0.4),
        ("below0.7", 0.5),
        ("softmin0.1", 0.2 - 0.1 * np.log(np.mean(np.exp(-(np.array([0, 0.4, 0.6, 0.8])) / 0.1)))),
    ],
)
def test_aggregations_by_hand(how, expected):
    v = np.array([0.2, 0.6, 0.8, 1.0])
    w = np.array([1.0, 1.0, 2.0, 0.0])
    assert aggregate(v, w, how) == pytest.approx(expected, abs=1e-12)


def test_aggregation_errors():
    with pytest.raises(InputValidationError, match="unknown aggregation"):
        aggregate(np.ones(2), np.ones(2), "median")
    with pytest.raises(InputValidationError, match="unknown aggregation"):
        aggregate(np.ones(2), np.ones(2), "pxx")
    with pytest.raises(InputValidationError, match="at least one"):
        aggregate(np.zeros(0), np.zeros(0), "min")


def test_token_support_checks_its_arrays():
    with pytest.raises(InputValidationError, match="one value per token"):
        _support("ab", [(0, 1)], [0, 1], [1.0], [0.5])
    with pytest.raises(InputValidationError, match="inside the text"):
        _support("ab", [(0, 3)], [0], [1.0], [0.5])
