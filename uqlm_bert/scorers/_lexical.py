"""Lexical consistency scorers: exact match, ROUGE-L and BLEU of the answer against each sample.

Each scorer compares the response with every present sample (response = candidate, sample =
reference), scores each pair in [0, 1], and averages over the samples. No model is loaded, so
they are fast, and they make a useful floor to compare ``bert_score`` against: an answer that
the samples repeat word for word is usually stable.

- ``exact_match``: 1 if the texts are equal (after optional normalisation of case, punctuation
  and whitespace), else 0. The mean is the fraction of samples that repeat the answer exactly.
- ``rouge_l``: F-measure of the longest common token subsequence, tokenised as the
  ``rouge-score`` package does (same numbers as ``RougeScorer(["rougeL"])``).
- ``bleu``: smoothed sentence BLEU-4 as ``sacrebleu.sentence_bleu`` computes it (13a
  tokenisation, exponential smoothing, effective order), divided by 100.

Example:
    >>> from uqlm_bert.scorers._lexical import ExactMatchScorer, RougeLScorer
    >>> ExactMatchScorer().score(["Paris."], [["paris", "Lyon", None]]).tolist()
    [0.5]
    >>> RougeLScorer().score(["the cat sat"], [["the cat sat down"]]).round(4).tolist()
    [0.8571]
"""

from __future__ import annotations

import abc
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from uqlm_bert._exceptions import ConfigurationError
from uqlm_bert.scorers._base import Pairs, PairwiseScorer
from uqlm_bert.scorers._settings import ExactMatchSettings

__all__ = [
    "BleuScorer",
    "ExactMatchScorer",
    "RougeLScorer",
    "bleu_tokenize",
    "lcs_length",
    "normalize_text",
    "rouge_l",
    "rouge_tokenize",
    "sentence_bleu",
]

MAX_NGRAM_ORDER = 4


class _PairwiseTextScorer(PairwiseScorer):
    """Pair scores computed on preprocessed texts, each distinct text prepared once per call."""

    def _prepare(self, text: str) -> Any:
        """Turn one text into what :meth:`_pair` compares (tokens, a normalised string...)."""
        return text

    @abc.abstractmethod
    def _pair(self, response: Any, sample: Any) -> float:
        """Score one prepared (response, sample) pair in [0, 1]."""

    def score_pairs(self, pairs: Pairs) -> np.ndarray:
        """One score in [0, 1] per (response, sample) pair."""
        prepared: dict[str, Any] = {}

        def prep(text: str) -> Any:
            if text not in prepared:
                prepared[text] = self._prepare(text)
            return prepared[text]

        n = len(pairs.cands)
        values = np.empty(n, dtype=np.float64)
        with tqdm(total=n, desc=self.name, disable=not pairs.show_progress_bars) as bar:
            for k, (c, r) in enumerate(zip(pairs.cands, pairs.refs, strict=True)):
                values[k] = self._pair(prep(c), prep(r))
                bar.update(1)
        return values


class ExactMatchScorer(_PairwiseTextScorer):
    """Fraction of samples identical to the response.

    Args:
        normalize: compare :func:`normalize_text` forms (case, punctuation and whitespace
            ignored) instead of the raw strings. Default True.

    Example:
        >>> ExactMatchScorer(normalize=False).score(["Paris."], [["paris", "Paris."]]).tolist()
        [0.5]
    """

    name = "exact_match"

    def __init__(self, normalize: bool = True) -> None:
        self.settings = ExactMatchSettings(normalize=normalize)

    @classmethod
    def from_settings(cls, settings: ExactMatchSettings) -> ExactMatchScorer:
        """The scorer for ``settings``, as given (they were checked when built).

        Example:
            >>> ExactMatchScorer.from_settings(ExactMatchSettings(normalize=False)).normalize
            False
        """
        if not isinstance(settings, ExactMatchSettings):
            raise ConfigurationError(
                f"settings must be an ExactMatchSettings, got {type(settings).__name__}"
            )
        scorer = cls.__new__(cls)
        scorer.settings = settings
        return scorer

    @property
    def normalize(self) -> bool:
        """Whether normalised forms are compared."""
        return self.settings.normalize

    def _prepare(self, text: str) -> str:
        return normalize_text(text) if self.normalize else text

    def _pair(self, response: str, sample: str) -> float:
        return 1.0 if response == sample else 0.0


class RougeLScorer(_PairwiseTextScorer):
    """Mean ROUGE-L F-measure between the response and each sample.

    Example:
        >>> RougeLScorer().score(["a b c d"], [["a c d", "x"]]).round(4).tolist()
        [0.4286]
    """

    name = "rouge_l"

    def _prepare(self, text: str) -> list[str]:
        return rouge_tokenize(text)

    def _pair(self, response: list[str], sample: list[str]) -> float:
        return _rouge_l_tokens(response, sample)


class BleuScorer(_PairwiseTextScorer):
    """Mean smoothed sentence BLEU of the response (hypothesis) against each sample (reference).

    Example:
        >>> BleuScorer().score(["the cat sat on the mat"], [["the cat sat on the mat"]]).tolist()
        [1.0]
    """

    name = "bleu"

    def _prepare(self, text: str) -> tuple[Counter, int]:
        tokens = bleu_tokenize(text)
        return _ngram_counts(tokens), len(tokens)

    def _pair(self, response: tuple[Counter, int], sample: tuple[Counter, int]) -> float:
        return _bleu_from_counts(*response, *sample)


# --------------------------------------------------------------------------- pure functions


def normalize_text(text: str) -> str:
    """The form ``exact_match`` compares: NFKC, case-folded, punctuation removed, spaces collapsed.

    Punctuation is every character in a Unicode punctuation category (``P*``), removed without a
    trace (so ``"U.S."`` becomes ``"us"``); runs of whitespace become one space, and leading and
    trailing whitespace goes.

    Example:
        >>> normalize_text("  The  U.S.A.,\\tit's BIG! ")
        'the usa its big'
    """
    text = unicodedata.normalize("NFKC", text).casefold()
    text = "".join(ch for ch in text if not unicodedata.category(ch).startswith("P"))
    return " ".join(text.split())


_NON_ALPHANUM = re.compile(r"[^a-z0-9]+")


def rouge_tokenize(text: str) -> list[str]:
    """Tokens as the ``rouge-score`` package makes them (without stemming).

    Lower-case the text, replace every run of characters other than ``a-z`` and ``0-9`` by a
    space, split on whitespace. Letters outside ``a-z`` (accented or non-Latin) are dropped, as
    there; a text in a non-Latin script therefore has no tokens and scores 0.

    Example:
        >>> rouge_tokenize("Born in 1820, in São Paulo!")
        ['born', 'in', '1820', 'in', 's', 'o', 'paulo']
    """
    return _NON_ALPHANUM.sub(" ", text.lower()).split()


def rouge_l(candidate: str, reference: str) -> float:
    """ROUGE-L F-measure of two texts.

    With ``L`` the length of the longest common subsequence of the two token lists,
    ``P = L / len(candidate)``, ``R = L / len(reference)`` and ``F = 2PR / (P + R)``
    (0 when ``L = 0`` or either text has no tokens). F is symmetric in its arguments.

    Example:
        >>> round(rouge_l("the cat sat", "the cat sat down"), 4)
        0.8571
    """
    return _rouge_l_tokens(rouge_tokenize(candidate), rouge_tokenize(reference))


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of two token sequences.

    Bit-parallel (Allison and Dix, 1986; Crochemore et al., 2001): one bit per token of ``b``,
    a few big-integer operations per token of ``a``, so long answers stay fast in pure Python.

    Example:
        >>> lcs_length("a b c d".split(), "a c x d".split())
        3
    """
    if not a or not b:
        return 0
    masks: dict[str, int] = {}
    for j, tok in enumerate(b):
        masks[tok] = masks.get(tok, 0) | (1 << j)
    full = (1 << len(b)) - 1
    v = full
    for tok in a:
        u = v & masks.get(tok, 0)
        v = ((v + u) | (v - u)) & full
    return len(b) - v.bit_count()


_BLEU_RULES = [
    (re.compile(r"([\{-\~\[-\` -\&\(-\+\:-\@\/])"), r" \1 "),
    (re.compile(r"([^0-9])([\.,])"), r"\1 \2 "),
    (re.compile(r"([\.,])([^0-9])"), r" \1 \2"),
    (re.compile(r"([0-9])(-)"), r"\1 \2 "),
]


def bleu_tokenize(text: str) -> list[str]:
    """Tokens as BLEU's standard ``13a`` tokeniser (mteval-v13a, sacrebleu's default) makes them.

    Drop ``<skipped>`` markers, join words hyphenated across lines, turn newlines into spaces,
    unescape ``&quot; &amp; &lt; &gt;``; then put spaces around ASCII punctuation and symbols,
    around periods and commas unless they sit between digits (``3.5`` stays one token), and
    after a dash that follows a digit. Apostrophes and non-ASCII characters stay inside words;
    case is kept.

    Example:
        >>> bleu_tokenize("He won $1,500.50 in 1990-91, didn't he?")
        ['He', 'won', '$', '1,500.50', 'in', '1990', '-', '91', ',', "didn't", 'he', '?']
    """
    line = text.rstrip()
    line = line.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    if "&" in line:
        line = (
            line.replace("&quot;", '"')
            .replace("&amp;", "&")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
        )
    line = f" {line} "
    for pattern, repl in _BLEU_RULES:
        line = pattern.sub(repl, line)
    return line.split()


def sentence_bleu(hypothesis: str, reference: str) -> float:
    """Smoothed sentence BLEU-4 of ``hypothesis`` against one ``reference``, in [0, 1].

    With :func:`bleu_tokenize` tokens, ``c`` and ``r`` the hypothesis and reference lengths,
    ``m_n`` the clipped n-gram matches (each hypothesis n-gram counted at most as often as it
    occurs in the reference) and ``t_n = max(0, c - n + 1)`` the hypothesis n-grams:

    - 0 if no unigram matches (this covers an empty hypothesis or reference);
    - effective order ``N`` = the largest ``n <= 4`` with ``t_n > 0`` (a 2-token hypothesis is
      judged on 1- and 2-grams only);
    - ``p_n = m_n / t_n``, or, where ``m_n = 0``, ``1 / (2^k * t_n)`` for the k-th such order
      (exponential smoothing, "method 3" of Chen and Cherry, 2014, as in mteval-v13a);
    - brevity penalty ``BP = exp(1 - r / c)`` if ``c < r``, else 1;
    - ``BLEU = BP * exp(mean_{n <= N} log p_n)``.

    This is ``sacrebleu.sentence_bleu(hypothesis, [reference]).score / 100`` with its defaults.

    Example:
        >>> round(sentence_bleu("the cat sat on a mat", "the cat sat on the mat"), 4)
        0.5373
    """
    h = bleu_tokenize(hypothesis)
    r = bleu_tokenize(reference)
    return _bleu_from_counts(_ngram_counts(h), len(h), _ngram_counts(r), len(r))


def _rouge_l_tokens(cand: list[str], ref: list[str]) -> float:
    """ROUGE-L F-measure of two token lists."""
    lcs = lcs_length(cand, ref)
    if lcs == 0:
        return 0.0
    p = lcs / len(cand)
    r = lcs / len(ref)
    return 2 * p * r / (p + r)


def _ngram_counts(tokens: list[str]) -> Counter:
    """Counts of every n-gram of order 1..4 (tuples of tokens)."""
    return Counter(
        tuple(tokens[i : i + n])
        for n in range(1, MAX_NGRAM_ORDER + 1)
        for i in range(len(tokens) - n + 1)
    )


def _bleu_from_counts(hyp: Counter, hyp_len: int, ref: Counter, ref_len: int) -> float:
    """Smoothed sentence BLEU from n-gram counts (see :func:`sentence_bleu`)."""
    matches = [0] * MAX_NGRAM_ORDER
    for gram, count in hyp.items():
        in_ref = ref.get(gram)
        if in_ref:
            matches[len(gram) - 1] += min(count, in_ref)
    if matches[0] == 0:
        return 0.0
    log_sum = 0.0
    order = 0
    halvings = 1.0
    for n in range(1, MAX_NGRAM_ORDER + 1):
        total = hyp_len - n + 1
        if total <= 0:
            break
        order = n
        if matches[n - 1] == 0:
            halvings *= 2.0
            log_sum += math.log(1.0 / (halvings * total))
        else:
            log_sum += math.log(matches[n - 1] / total)
    bp = math.exp(1.0 - ref_len / hyp_len) if hyp_len < ref_len else 1.0
    return bp * math.exp(log_sum / order)
