"""exact_match, rouge_l and bleu: hand-worked cases and parity with rouge-score and sacrebleu."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from uqlm_bert import ConfigurationError, InputValidationError
from uqlm_bert.scorers._lexical import (
    BleuScorer,
    ExactMatchScorer,
    RougeLScorer,
    bleu_tokenize,
    lcs_length,
    normalize_text,
    rouge_l,
    rouge_tokenize,
    sentence_bleu,
)
from uqlm_bert.scorers._registry import build_scorer

rouge_scorer = pytest.importorskip("rouge_score.rouge_scorer", reason="rouge-score not installed")
sacrebleu = pytest.importorskip("sacrebleu", reason="sacrebleu not installed")

_WORDS = ["the", "The", "cat", "sat", "on", "a", "mat", "in", "1820", "3.5", "U.S.", "didn't",
          "São", "Paulo", "-", ",", ".", "(born", "1990-91)", "&amp;", "he", "was", "an",
          "English", "judge,", "author."]  # fmt: skip


def _random_texts(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    texts = []
    for _ in range(n):
        k = rng.choice([0, 1, 2, 3, 5, 8, 15, 40])
        texts.append(" ".join(rng.choice(_WORDS) for _ in range(k)))
    return texts


def _lcs_dp(a, b):
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            if a[i - 1] == b[j - 1]:
                table[i][j] = table[i - 1][j - 1] + 1
            else:
                table[i][j] = max(table[i - 1][j], table[i][j - 1])
    return table[-1][-1]


# --------------------------------------------------------------------------- exact_match


def test_normalize_text_hand_cases():
    assert normalize_text("  The  U.S.A.,\tit's BIG! ") == "the usa its big"
    assert normalize_text("Ｐａｒｉｓ") == "paris"  # NFKC folds full-width letters
    assert normalize_text("STRASSE") == normalize_text("straße")  # casefold, not lower
    assert normalize_text("$5") == "$5"  # symbols are not punctuation


def test_exact_match_hand_cases():
    scorer = ExactMatchScorer()
    # 2 of 4 present samples match after normalisation ("paris" and "Paris!"), None skipped
    got = scorer.score(["Paris."], [["paris", "Lyon", None, "Paris!", "Paris is"]])
    assert got.tolist() == [2 / 4]
    raw = ExactMatchScorer(normalize=False)
    assert raw.score(["Paris."], [["paris", "Paris.", "Paris. "]]).tolist() == [1 / 3]


def test_exact_match_normalize_kwarg_through_registry():
    assert build_scorer("exact_match").normalize is True
    assert build_scorer("exact_match", exact_match_normalize=False).normalize is False
    with pytest.raises(
        ConfigurationError, match="'device'.*accepted: exact_match, exact_match_normalize"
    ):
        build_scorer("exact_match", device="cpu")


def test_missing_response_or_samples_give_nan():
    for scorer in (ExactMatchScorer(), RougeLScorer(), BleuScorer()):
        got = scorer.score(["a b", None, "c d", "e"], [["a b"], ["a b"], [None, None], []])
        assert got[0] == 1.0
        assert np.isnan(got[1:]).all()
        assert got.dtype == np.float64


def test_input_errors_come_from_the_shared_checks():
    with pytest.raises(InputValidationError, match="1 items but sampled_responses has 2"):
        RougeLScorer().score(["a"], [["a"], ["b"]])
    with pytest.raises(InputValidationError, match=r"sampled_responses\[0\]\[1\]"):
        BleuScorer().score(["a"], [["a", 3]])


# --------------------------------------------------------------------------- rouge_l


@pytest.mark.parametrize("seed", range(5))
def test_lcs_matches_dynamic_programming(seed):
    rng = random.Random(seed)
    for _ in range(200):
        a = [rng.choice("abcd") for _ in range(rng.randint(0, 70))]
        b = [rng.choice("abcd") for _ in range(rng.randint(0, 70))]
        assert lcs_length(a, b) == _lcs_dp(a, b)


def test_rouge_l_hand_case():
    # LCS("the cat sat", "the cat sat down") = 3: P = 3/3, R = 3/4, F = 2PR/(P+R) = 6/7
    assert rouge_l("the cat sat", "the cat sat down") == pytest.approx(6 / 7)
    # "a b c d" vs "a c d": LCS 3, P = 3/4, R = 1, F = 6/7 ; vs "x": 0 -> mean 3/7
    got = RougeLScorer().score(["a b c d"], [["a c d", "x"]])
    assert got[0] == pytest.approx(3 / 7)
    assert rouge_l("", "") == 0.0  # no tokens: 0, as in rouge-score
    assert rouge_tokenize("Born in 1820, in São Paulo!") == [
        "born", "in", "1820", "in", "s", "o", "paulo"
    ]  # fmt: skip


@pytest.mark.parametrize("seed", range(3))
def test_rouge_l_matches_rouge_score_package(seed):
    ref_scorer = rouge_scorer.RougeScorer(["rougeL"])
    texts = _random_texts(seed, 60)
    for cand, ref in zip(texts, reversed(texts), strict=True):
        expected = ref_scorer.score(ref, cand)["rougeL"].fmeasure  # score(target, prediction)
        assert rouge_l(cand, ref) == pytest.approx(expected, abs=1e-12)


def test_rouge_l_scorer_is_mean_of_pairs():
    ref_scorer = rouge_scorer.RougeScorer(["rougeL"])
    texts = _random_texts(7, 12)
    responses = texts[:3]
    samples = [texts[3:7], texts[7:9] + [None], texts[9:12]]
    got = RougeLScorer().score(responses, samples)
    for i, resp in enumerate(responses):
        present = [s for s in samples[i] if s is not None]
        expected = np.mean([ref_scorer.score(s, resp)["rougeL"].fmeasure for s in present])
        assert got[i] == pytest.approx(expected, abs=1e-12)


# --------------------------------------------------------------------------- bleu


def test_bleu_hand_cases():
    # 6 tokens each. Clipped matches: 1-grams 5/6 ("a" unmatched), 2-grams 3/5, 3-grams 2/4,
    # 4-grams 1/3; BP = 1 -> BLEU = (5/6 * 3/5 * 2/4 * 1/3) ** (1/4)
    expected = (5 / 6 * 3 / 5 * 2 / 4 * 1 / 3) ** 0.25
    assert sentence_bleu("the cat sat on a mat", "the cat sat on the mat") == pytest.approx(
        expected
    )
    # 3 tokens: effective order 3; 1-grams 2/3, 2-grams 1/2, 3-grams 0/1 smoothed to 1/(2*1)
    assert sentence_bleu("a b c", "a b d") == pytest.approx((2 / 3 * 1 / 2 * 1 / 2) ** (1 / 3))
    # brevity: c = 2 < r = 4 -> BP = exp(1 - 4/2); precisions 1 and 1 at effective order 2
    assert sentence_bleu("a b", "a b c d") == pytest.approx(math.exp(-1))
    # two zero-match orders: 1-grams 3/3, 2-grams 0/2 -> 1/(2*2), 3-grams 0/1 -> 1/(4*1)
    assert sentence_bleu("a c e", "a e c") == pytest.approx((1 * 1 / 4 * 1 / 4) ** (1 / 3))
    assert sentence_bleu("x y", "a b") == 0.0  # no unigram match
    assert sentence_bleu("", "a b") == 0.0


def test_bleu_tokenize_hand_case():
    assert bleu_tokenize("He won $1,500.50 in 1990-91, didn't he?") == [
        "He", "won", "$", "1,500.50", "in", "1990", "-", "91", ",", "didn't", "he", "?"
    ]  # fmt: skip


@pytest.mark.parametrize("seed", range(3))
def test_bleu_matches_sacrebleu(seed):
    texts = _random_texts(seed + 10, 80)
    for hyp, ref in zip(texts, texts[1:] + texts[:1], strict=True):
        expected = sacrebleu.sentence_bleu(hyp, [ref]).score / 100
        assert sentence_bleu(hyp, ref) == pytest.approx(expected, abs=1e-9), (hyp, ref)


def test_bleu_scorer_is_mean_of_pairs_with_response_as_hypothesis():
    responses = ["the cat sat on the mat", "a b"]
    samples = [["the cat sat on a mat", "the cat"], ["a b c d", None]]
    got = BleuScorer().score(responses, samples, show_progress_bars=True)
    for i, resp in enumerate(responses):
        present = [s for s in samples[i] if s is not None]
        expected = np.mean([sacrebleu.sentence_bleu(resp, [s]).score / 100 for s in present])
        assert got[i] == pytest.approx(expected, abs=1e-9)
    # BLEU is asymmetric: the response is the hypothesis, the sample the reference
    assert got[1] == pytest.approx(math.exp(-1))


def test_caller_lists_are_not_mutated():
    responses = ["a b", None]
    samples = [["a b", None], ["c"]]
    before = (list(responses), [list(s) for s in samples])
    for scorer in (ExactMatchScorer(), RougeLScorer(), BleuScorer()):
        scorer.score(responses, samples)
    assert (responses, samples) == before


@pytest.mark.parametrize("name", ["exact_match", "rouge_l", "bleu"])
def test_progress_bar_reaches_its_end_and_closes(name, capsys):
    scorer = build_scorer(name)
    scorer.score(["a b c", "d e"], [["a b c", "a b", None], ["d e", "x"]], show_progress_bars=True)
    err = capsys.readouterr().err
    last = err.replace("\r", "\n").strip().splitlines()[-1]
    assert "100%" in last and "4/4" in last  # four present pairs
