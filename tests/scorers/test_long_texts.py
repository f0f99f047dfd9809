"""Long answers: scored whole by the scorers' default, cut as the reference cuts them on request,
and never at a cost that grows with a runaway answer.

- ``long_texts="window"`` is the default of every model-based scorer built by the registry or
  ``BlackBoxUQ`` (``BERTScorer`` keeps ``"truncate"``, the reference's behaviour), and it reaches
  sentence scores, ``use_best`` and ``cosine_sim``, whose vector is the mean over a long text's
  tokens, each the mean of its states in the windows that hold it.
- An LLM that loops can answer with megabytes of text. No string much longer than the most
  tokens scored of one text (the window in truncate mode, 32,768 tokens in window mode) is ever
  handed to the tokenizer, and the score is the one of the text cut to its first characters.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from tests.helpers.company import in_company
from tests.helpers.texts import LONG, OVERLONG, SHORT
from uqlm_bert import (
    BERTScorer,
    BERTScoreSettings,
    BlackBoxUQ,
    ConfigurationError,
    ScoringSettings,
)
from uqlm_bert.bertscore._settings import ENGINE_DEFAULTS, SCORER_DEFAULTS
from uqlm_bert.bertscore._windows import MAX_TOKENS, MIN_OVERLAP, plan_windows
from uqlm_bert.scorers import build_scorers
from uqlm_bert.scorers._cosine import CosineSimScorer
from uqlm_bert.scorers._registry import build_scorer

MB = 1024 * 1024
SENTENCE = "The quick brown fox jumps over the lazy dog near the river bank. "
SAMPLES = ["The quick brown fox jumps over the lazy dog.", "A fox and a dog by a river."]
TAIL_A = OVERLONG[0] + " " + LONG[2]  # past the window, the two differ
TAIL_B = OVERLONG[0] + " " + LONG[3]


# -- the setting and its defaults -----------------------------------------------------------------


def test_the_scorers_read_long_texts_in_windows_and_bertscorer_truncates():
    assert BERTScoreSettings().long_texts is None  # not set: whoever scores fills it in
    assert ENGINE_DEFAULTS.long_texts == "truncate"
    assert BERTScorer(show_progress_bars=False).settings.long_texts == "truncate"
    assert BERTScorer.from_settings(BERTScoreSettings()).settings.long_texts == "truncate"
    assert SCORER_DEFAULTS.long_texts == "window"
    assert build_scorer("bert_score").engine.settings.long_texts == "window"
    assert CosineSimScorer().settings.long_texts == "window"
    assert BlackBoxUQ(show_progress_bars=False).bertscore_settings.long_texts == "window"


def test_one_flat_keyword_sets_every_model_based_scorer():
    built = build_scorers(["bert_score", "cosine_sim"], long_texts="truncate")
    assert [
        s.settings.long_texts if hasattr(s, "settings") else s.engine.settings.long_texts
        for s in built
    ] == ["truncate", "truncate"]
    uq = BlackBoxUQ(
        scorers=["bert_score", "cosine_sim"],
        scoring=ScoringSettings(scorer_settings={"long_texts": "truncate"}),
        show_progress_bars=False,
    )
    assert uq.bertscore_settings.long_texts == "truncate"
    assert uq.scorers[1].settings.long_texts == "truncate"


def test_the_default_threshold_holds_in_both_modes():
    """It was chosen on answers that fit the window, which score the same in both modes."""
    from uqlm_bert.scorers._bertscore import DEFAULT_THRESHOLD

    for mode in ("window", "truncate"):
        assert build_scorer("bert_score", long_texts=mode).default_threshold == DEFAULT_THRESHOLD


@pytest.mark.parametrize("bad", ["windows", "", None, True])
def test_a_bad_value_names_the_choices(bad):
    if bad is not None:  # None is "not set" for BERTScoreSettings
        with pytest.raises(ConfigurationError, match="long_texts must be 'window'.*or 'truncate'"):
            BERTScoreSettings(long_texts=bad)
    with pytest.raises(ConfigurationError, match="long_texts must be"):
        CosineSimScorer(long_texts=bad)


def test_the_setting_is_refused_where_no_scorer_takes_it():
    with pytest.raises(ConfigurationError, match="long_texts"):
        build_scorers(["rouge_l"], long_texts="window")


# -- where the engine is used -------------------------------------------------------------------


@pytest.fixture(scope="module")
def engines():
    return {
        mode: BERTScorer.from_settings(
            SCORER_DEFAULTS.replace(long_texts=mode), show_progress_bars=False
        )
        for mode in ("window", "truncate")
    }


def test_bert_score_sees_the_tail_of_a_long_answer():
    responses, samples = [TAIL_A, TAIL_B], [[TAIL_A], [TAIL_A]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cut = build_scorer("bert_score", long_texts="truncate").score(responses, samples)
    whole = build_scorer("bert_score").score(responses, samples)
    assert cut[0] == cut[1]  # blind past the window
    assert whole[0] == pytest.approx(1.0, abs=1e-5) and whole[1] < whole[0] - 1e-3


@pytest.mark.slow
def test_sentence_scores_of_a_long_sentence_follow_the_setting(engines):
    # a "sentence" longer than the window (an answer with no full stop, say), given as the split
    sentences = [[TAIL_B, SHORT[0]]]
    samples = [[TAIL_A, SHORT[0] + " " + SHORT[1]]]
    per_mode = {}
    for mode in ("window", "truncate"):
        uq = BlackBoxUQ(bertscore=BERTScoreSettings(long_texts=mode), show_progress_bars=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            df = uq.score_sentences(
                [TAIL_B + " " + SHORT[0]], samples, sentences=sentences, method="reembed"
            )
        per_mode[mode] = df["support"].to_numpy()
    # the long sentence against each sample's best sentence, by the engine of that mode
    from uqlm_bert.scorers._sentences import split_sentences

    refs = [split_sentences(s) for s in samples[0]]
    for mode, got in per_mode.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            F = engines[mode].score([TAIL_B] * len(refs), refs)[2]
        assert got[0] == pytest.approx(float(F.mean()), abs=1e-6)
    assert per_mode["window"][0] != pytest.approx(per_mode["truncate"][0], abs=1e-4)
    assert per_mode["window"][1] == pytest.approx(per_mode["truncate"][1], abs=1e-6)


def test_use_best_scores_long_candidates_whole():
    samples = [[TAIL_A, TAIL_A, TAIL_A, TAIL_B]]
    for mode, best in (("window", 0), ("truncate", -1)):
        uq = BlackBoxUQ(
            use_best=True, bertscore=BERTScoreSettings(long_texts=mode), show_progress_bars=False
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = uq.score([TAIL_B], samples)
        # whole, the first sample is the one the others agree with most; cut, all candidates
        # look alike and the tie goes to the original answer
        assert res.to_df()["best_response_index"].tolist() == [best]


# -- cosine_sim pools over its windows --------------------------------------------------------------


@pytest.fixture(scope="module")
def cosines():
    return {mode: CosineSimScorer(device="cpu", long_texts=mode) for mode in ("window", "truncate")}


def test_cosine_texts_that_fit_embed_the_same_in_both_modes(cosines):
    texts = SHORT + LONG[:3]
    np.testing.assert_array_equal(cosines["window"].embed(texts), cosines["truncate"].embed(texts))


def test_cosine_of_a_long_text_is_the_mean_over_its_windows(cosines):
    scorer = cosines["window"]
    enc = scorer.encoder
    text = LONG[4] + " " + LONG[3]  # about 800 tokens: windows of 256
    ids = enc.tokenize([text], 10**6)[0]
    own = ids[1:-1]
    windows = plan_windows(len(own), enc.max_length - 2, MIN_OVERLAP)
    states = [enc.embed_packed([[ids[0], *own[a:b], ids[-1]]], normalize=False) for a, b in windows]
    rows = [states[0][0]]
    for p in range(len(own)):
        rows.append(
            torch.stack(
                [states[j][1 + p - a] for j, (a, b) in enumerate(windows) if a <= p < b]
            ).mean(dim=0)
        )
    rows.append(states[-1][-1])
    vec = torch.stack(rows).mean(dim=0).double().numpy()
    np.testing.assert_allclose(
        scorer.embed([text])[0], vec / np.linalg.norm(vec), atol=in_company(1e-5)
    )


def test_cosine_sees_the_tail_only_in_window_mode(cosines):
    whole = cosines["window"].score([TAIL_B], [[TAIL_A]])
    cut = cosines["truncate"].score([TAIL_B], [[TAIL_A]])
    assert cut[0] == pytest.approx(1.0, abs=1e-6)
    assert whole[0] < 1 - 1e-4


# -- a 50 MB answer ---------------------------------------------------------------------------------


class RecordingTokenizer:
    """Stands in for a tokenizer: refuses any text over ``most`` characters (where the
    unbounded code would spend minutes and gigabytes), records the rest and delegates."""

    def __init__(self, inner, most: int) -> None:
        self._inner = inner
        self._most = most
        self.lengths: list[int] = []

    def __call__(self, texts, *args, **kwargs):
        batch = [texts] if isinstance(texts, str) else list(texts)
        longest = max((len(t) for t in batch), default=0)
        assert longest <= self._most, f"a text of {longest:,} characters was tokenized"
        self.lengths += [len(t) for t in batch]
        return self._inner(texts, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._inner, name)


def huge(kind: str) -> str:
    if kind == "sentences":
        return (SENTENCE * (50 * MB // len(SENTENCE) + 1))[: 50 * MB]
    if kind == "one word":  # a loop on one character: no whitespace at all
        return "a" * (50 * MB)
    return "Paris" + " " * (50 * MB) + "Lyon"  # whitespace, then a word at the very end


@pytest.fixture(scope="module")
def long_text_scorers(tiny_bert):
    """The truncating long_text_scorers on the embedded model; the windowed ones on the tiny model."""
    return {
        ("bert_score", "truncate"): build_scorer("bert_score", device="cpu", long_texts="truncate"),
        ("cosine_sim", "truncate"): build_scorer("cosine_sim", device="cpu", long_texts="truncate"),
        ("bert_score", "window"): build_scorer(
            "bert_score", device="cpu", model_type=tiny_bert, num_layers=2
        ),
        ("cosine_sim", "window"): build_scorer("cosine_sim", device="cpu", model_type=tiny_bert),
    }


def encoder_of(scorer):
    return scorer.engine.encoder if hasattr(scorer, "engine") else scorer.encoder


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["truncate", "window"])
@pytest.mark.parametrize("name", ["bert_score", "cosine_sim"])
@pytest.mark.parametrize("kind", ["sentences", "one word", "whitespace"])
def test_a_50_mb_answer_is_scored_from_its_first_characters(
    long_text_scorers, monkeypatch, name, mode, kind
):
    scorer = long_text_scorers[name, mode]
    encoder = encoder_of(scorer)
    limit = encoder.max_length if mode == "truncate" else MAX_TOKENS
    most = limit * 128  # 64 KiB for 512 tokens, 4 MiB for 32,768
    recording = RecordingTokenizer(encoder.tokenizer, most)
    text = huge(kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "texts truncated to the model's maximum"
        cut = scorer.score([text[: limit * 16], "Paris"], [SAMPLES, SAMPLES])
        monkeypatch.setattr(encoder, "tokenizer", recording)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            whole = scorer.score([text, "Paris"], [SAMPLES, SAMPLES])
    assert recording.lengths and max(recording.lengths) <= most
    assert not math.isnan(whole[0])
    assert list(whole) == pytest.approx(list(cut), abs=1e-6)
    if name == "bert_score" and mode == "window" and kind == "sentences":
        # cut even in window mode, and said so
        assert any("Split such texts" in str(w.message) for w in caught)
