"""Token support: which parts of an answer its samples support, from BERTScore's own matching.

BERTScore precision of an answer (the candidate) against a sample (the reference) is a weighted
mean, over the answer's tokens, of each token's best cosine similarity with any token of the
sample. The engine keeps those per-token values instead of throwing them away
(:meth:`~uqlm_bert.BERTScorer.score_matches` gives them as :class:`PairMatches`), and a
token's **support** is their mean over the answer's samples. So, for each answer::

    sum_t weight[t] * support[t] == mean over the samples of BERTScore precision

(exactly, up to float rounding, at ``dtype="float32"`` without baseline rescaling; with
rescaling, the mean rescaled precision is ``(that sum - b) / (1 - b)`` for the baseline's
precision ``b``). A token that the samples keep saying something close to has a support near
1; a token of a claim that only this answer makes has a low one.

:class:`TokenSupport` holds one answer's token supports with each token's characters in the
answer, its word and its weight, and gives

- **word rows** (:meth:`TokenSupport.word_rows`): word pieces merged into words, each word's
  support the weighted mean of its pieces' (the plain mean where they all weigh 0), so that the
  weighted mean of the word supports is still the precision; a word whose pieces all weigh 0
  (the prompt's own words, punctuation) is listed with ``counted=False``;
- **sentence supports** (:meth:`TokenSupport.sentence_support`): for character spans of the
  answer, an aggregate of the supports of the tokens that start inside each span, by
  :data:`SENTENCE_AGGREGATION` (chosen by measurement: see docs/supports.md).

This module needs numpy only.

Example:
    >>> import numpy as np
    >>> text = "Lima is in Peru."
    >>> ts = TokenSupport(
    ...     text,
    ...     starts=np.array([0, 5, 8, 11, 15]), ends=np.array([4, 7, 10, 15, 16]),
    ...     words=np.array([0, 1, 2, 3, 4]),
    ...     weights=np.array([0.4, 0.2, 0.2, 0.2, 0.0], dtype=np.float32),
    ...     support=np.array([0.9, 0.8, 0.8, 0.3, 0.95], dtype=np.float32),
    ...     num_samples=2)
    >>> round(ts.precision, 4)
    0.74
    >>> rows = ts.word_rows()
    >>> rows.text, rows.counted.tolist()
    (['Lima', 'is', 'in', 'Peru', '.'], [True, True, True, True, False])
    >>> [round(float(x), 2) for x in ts.sentence_support([(0, 16)])]
    [0.3]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from uqlm_bert._exceptions import InputValidationError

__all__ = [
    "SENTENCE_AGGREGATION",
    "SENTENCE_THRESHOLD",
    "WEAK_SUPPORT",
    "PairMatches",
    "TokenSupport",
    "WordRows",
    "aggregate",
    "is_weak",
    "pooled",
]

#: How a sentence's support is computed from its tokens' supports (its counted tokens: weight
#: above 0): the mean of their lowest tenth (at least one token), ``"trim10"`` (see
#: :func:`aggregate`). The rule that chose it, among percentiles, the minimum, means, trimmed
#: means, soft minima and the share of tokens below a level, at the scorers' default settings:
#: on the 30 WikiBio development passages (SelfCheckGPT's sentence measures, NonFact and Factual
#: AUC-PR), the best mean of the two measures over the four disjoint sets of 5 samples, among
#: the aggregations that beat re-embedded sentences (``score_sentences``' old method, precision)
#: on both at 20 samples, ties within 0.1 point going to the best mean at 20 samples. The table
#: is in docs/supports.md.
SENTENCE_AGGREGATION = "trim10"

#: Words whose support is below this are "weakly supported": marked in the views of a result
#: (Jupyter, ``--explain``) and ``weak`` in its serialised words. It holds for the scorers' default
#: encoder and layer only; a result scored with another says so instead of marking by it.
#:
#: The rule that chose it, at the scorers' default settings: on the 30 WikiBio development
#: passages, with the four disjoint sets of 5 samples (the default ``num_responses``) pooled,
#: the sentence support (:data:`SENTENCE_AGGREGATION`) threshold that maximises Youden's J of
#: ``support < threshold`` against the sentences labelled inaccurate (minor or major), rounded
#: to two decimals, marks words: a sentence is weak when its least supported tenth of tokens
#: averages below it, a word when its own support is below it. ``benchmarks/eval_sentences.py``
#: applies the rule and checks this value; the figures are in benchmarks/RESULTS.md.
WEAK_SUPPORT = 0.59

#: Sentences whose support is below this are unsupported: ``UQResult.refine()`` removes them,
#: ``sentences()`` flags them, and a result's views strike them through. Like
#: :data:`WEAK_SUPPORT`, it holds for the scorers' default encoder and layer only.
#:
#: The rule that chose it, at the scorers' default settings: on the 30 WikiBio development
#: passages, with the four disjoint sets of 5 samples pooled, removing the sentences below the
#: threshold should do two things at once: the sentences removed should be inaccurate (minor or
#: major) more often than sentences are on the whole, and the sentences kept less often. The
#: threshold, to two decimals, that maximises the smaller of the two gains in points (the
#: inaccurate share among the removed minus the base rate, and the base rate minus the inaccurate
#: share among the kept). ``benchmarks/eval_sentences.py`` applies the rule and checks this
#: value; Youden's J, the rule of :data:`WEAK_SUPPORT`, is flat around it, and the figures of
#: both are in benchmarks/RESULTS.md.
SENTENCE_THRESHOLD = 0.52


@dataclass(frozen=True)
class PairMatches:
    """BERTScore of (candidate, reference) pairs with each candidate token's best match.

    Attributes:
        scores: ``[pairs, 3]`` float32 P, R and F1 of each pair (rescaled where the scorer
            rescales with a baseline), as :meth:`~uqlm_bert.BERTScorer.score` gives them.
        ids: per pair, the candidate's token ids as the engine scored them (special tokens
            included; one array shared by the pairs of one candidate).
        weights: per pair, the candidate's normalised token weights (sum 1, or all 0).
        best: float32, pair after pair: each candidate token's best cosine similarity with any
            token of the reference (0 for every token of a pair with an empty side).
        offsets: int64 ``[pairs + 1]``: pair ``k``'s values are ``best[offsets[k]:offsets[k + 1]]``.

    Example:
        >>> m = PairMatches(np.zeros((1, 3), np.float32), [np.array([101, 7, 102])],
        ...                 [np.array([0, 1, 0], np.float32)],
        ...                 np.array([0.5, 0.9, 0.4], np.float32), np.array([0, 3]))
        >>> m.best_of(0).tolist()
        [0.5, 0.8999999761581421, 0.4000000059604645]
    """

    scores: np.ndarray
    ids: list[np.ndarray]
    weights: list[np.ndarray]
    best: np.ndarray
    offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)

    def best_of(self, pair: int) -> np.ndarray:
        """Pair ``pair``'s candidate-token best similarities."""
        return self.best[self.offsets[pair] : self.offsets[pair + 1]]

    def take(self, pairs: Sequence[int]) -> PairMatches:
        """These matches for ``pairs`` only, in that order (a subset of the samples, say).

        Example:
            >>> m = PairMatches(np.zeros((2, 3), np.float32), [np.array([7]), np.array([8, 9])],
            ...                 [np.ones(1, np.float32), np.full(2, 0.5, np.float32)],
            ...                 np.array([0.5, 0.25, 0.75], np.float32), np.array([0, 1, 3]))
            >>> m.take([1]).best.tolist(), m.take([1]).offsets.tolist()
            ([0.25, 0.75], [0, 2])
        """
        index = np.asarray(pairs, dtype=np.int64)
        lens = self.offsets[index + 1] - self.offsets[index]
        rows = [np.arange(self.offsets[k], self.offsets[k + 1]) for k in index.tolist()]
        return PairMatches(
            self.scores[index],
            [self.ids[k] for k in index.tolist()],
            [self.weights[k] for k in index.tolist()],
            self.best[np.concatenate(rows)] if rows else self.best[:0],
            np.concatenate(([0], np.cumsum(lens))).astype(np.int64),
        )

    def mean_best(self, pairs: Sequence[int]) -> np.ndarray:
        """The mean over ``pairs`` (pairs of one candidate) of their best similarities.

        Raises:
            InputValidationError: no pairs, or pairs whose candidates differ in length.
        """
        if len(pairs) == 0:
            raise InputValidationError("mean_best needs at least one pair")
        lengths = {int(self.offsets[k + 1] - self.offsets[k]) for k in pairs}
        if len(lengths) != 1:
            raise InputValidationError("mean_best takes pairs of one candidate (one length)")
        rows = np.stack([self.best_of(k) for k in pairs]).astype(np.float64)
        return rows.mean(axis=0).astype(np.float32)


@dataclass(frozen=True)
class WordRows:
    """One answer's words (see :meth:`TokenSupport.word_rows`).

    Attributes:
        start, end: int64 character offsets of each word in the answer (``text[start:end]``).
        text: each word's characters.
        support: float32 support of each word.
        weight: float32 each word's weight (the sum of its pieces').
        counted: whether the word weighs anything (False for the prompt's words and
            punctuation, which weigh 0).
    """

    start: np.ndarray
    end: np.ndarray
    text: list[str]
    support: np.ndarray
    weight: np.ndarray
    counted: np.ndarray


@dataclass(frozen=True)
class TokenSupport:
    """One answer's token supports: each token's characters, word, weight and support.

    Attributes:
        text: the answer text the spans index, exactly as given to the scorer (not stripped).
        starts: int64 ``[T]``: each token's start offset in ``text`` (special tokens such as
            [CLS] and [SEP] left out).
        ends: int64 ``[T]``: end offsets; ``text[starts[t]:ends[t]]`` is the token's text.
        words: int64 ``[T]``: each token's word index, 0, 1, ...: the pieces of one word (as
            the tokenizer splits words: at whitespace and punctuation for BERT's) share it.
        weights: float32 ``[T]``: the scorer's normalised weight of each token (idf, with the
            prompt's tokens and punctuation at 0 in the confidence scorers).
        support: float32 ``[T]``: the mean over the samples of the token's best cosine
            similarity with any token of that sample (0 against an empty sample); at most 1.
        num_samples: how many samples the mean is over.

    Tokens past the most tokens one text is scored on (the model's window, or 32,768 tokens
    where long texts are read in windows) are not scored and have no row.

    Raises:
        InputValidationError: the arrays differ in length, or a span lies outside ``text``.
    """

    text: str
    starts: np.ndarray
    ends: np.ndarray
    words: np.ndarray
    weights: np.ndarray
    support: np.ndarray
    num_samples: int

    def __post_init__(self) -> None:
        n = len(self.starts)
        arrays = (self.ends, self.words, self.weights, self.support)
        if any(len(a) != n for a in arrays):
            raise InputValidationError("TokenSupport arrays must all have one value per token")
        if n and (
            self.starts.min() < 0
            or self.ends.max() > len(self.text)
            or (self.ends < self.starts).any()
        ):
            raise InputValidationError("TokenSupport spans must lie inside the text")

    def __len__(self) -> int:
        return len(self.starts)

    def to_dict(self) -> dict[str, Any]:
        """The token supports as plain data (``UQResult.to_dict()``'s form): the text and the
        arrays as lists, each value exact, so :meth:`from_dict` gives back equal supports.

        Example:
            >>> ts = TokenSupport("Hi", np.array([0]), np.array([2]), np.array([0]),
            ...                   np.array([1.0], np.float32), np.array([0.5], np.float32), 2)
            >>> ts.to_dict()
            {'text': 'Hi', 'starts': [0], 'ends': [2], 'words': [0], 'weights': [1.0], 'support': [0.5], 'num_samples': 2}
            >>> TokenSupport.from_dict(ts.to_dict()).support.dtype
            dtype('float32')
        """
        return {
            "text": self.text,
            "starts": self.starts.tolist(),
            "ends": self.ends.tolist(),
            "words": self.words.tolist(),
            "weights": self.weights.astype(np.float64).tolist(),
            "support": self.support.astype(np.float64).tolist(),
            "num_samples": int(self.num_samples),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TokenSupport:
        """The token supports :meth:`to_dict` gave (float32 values, as scored).

        Raises:
            InputValidationError: a field is missing, or the arrays do not fit the text.
        """
        missing = [
            k for k in ("text", "starts", "ends", "words", "weights", "support") if k not in data
        ]
        if missing:
            raise InputValidationError(f"token supports without {', '.join(missing)}")
        return cls(
            str(data["text"]),
            np.asarray(data["starts"], dtype=np.int64),
            np.asarray(data["ends"], dtype=np.int64),
            np.asarray(data["words"], dtype=np.int64),
            np.asarray(data["weights"], dtype=np.float32),
            np.asarray(data["support"], dtype=np.float32),
            int(data.get("num_samples", 0)),
        )

    @property
    def precision(self) -> float:
        """``sum(weights * support)``: the mean BERTScore precision over the samples (raw)."""
        return float(np.dot(self.weights.astype(np.float64), self.support.astype(np.float64)))

    def word_rows(self) -> WordRows:
        """The answer's words, in order: word pieces merged.

        A word's span runs from its first piece's start to its last piece's end; its support is
        the weighted mean of its pieces' supports by their weights (the plain mean where they
        all weigh 0), and its weight their sum, so ``sum(weight * support)`` over the words is
        still the precision. ``counted`` is False for a word that weighs 0.
        """
        n_words = int(self.words.max()) + 1 if len(self.words) else 0
        w = self.weights.astype(np.float64)
        s = self.support.astype(np.float64)
        weight = np.bincount(self.words, weights=w, minlength=n_words)
        weighted = np.bincount(self.words, weights=w * s, minlength=n_words)
        count = np.bincount(self.words, minlength=n_words)
        plain = np.bincount(self.words, weights=s, minlength=n_words) / np.maximum(count, 1)
        counted = weight > 0
        support = np.where(counted, weighted / np.where(counted, weight, 1.0), plain)
        start = np.full(n_words, len(self.text), dtype=np.int64)
        end = np.zeros(n_words, dtype=np.int64)
        np.minimum.at(start, self.words, self.starts)
        np.maximum.at(end, self.words, self.ends)
        return WordRows(
            start,
            end,
            [self.text[a:b] for a, b in zip(start.tolist(), end.tolist(), strict=True)],
            support.astype(np.float32),
            weight.astype(np.float32),
            counted,
        )

    def sentence_support(
        self, spans: Sequence[tuple[int, int]], how: str = SENTENCE_AGGREGATION
    ) -> np.ndarray:
        """The support of each character span ``(start, end)`` of the text (a sentence): the
        aggregate (``how``, see :func:`aggregate`) of the supports of its counted tokens
        (weight above 0) that start inside it; of all its tokens where none is counted; NaN
        where no token starts inside it.

        Example:
            >>> ts = TokenSupport("a b", np.array([0, 2]), np.array([1, 3]), np.array([0, 1]),
            ...                   np.array([0.5, 0.5], np.float32),
            ...                   np.array([0.9, 0.1], np.float32), 1)
            >>> ts.sentence_support([(0, 1), (2, 3), (1, 2)], how="mean").round(2).tolist()
            [0.9, 0.1, nan]
        """
        out = np.full(len(spans), np.nan)
        for i, (a, b) in enumerate(spans):
            inside = (self.starts >= a) & (self.starts < b)
            if not inside.any():
                continue
            counted = inside & (self.weights > 0)
            at = counted if counted.any() else inside
            out[i] = aggregate(self.support[at], self.weights[at], how)
        return out


def pooled(first: TokenSupport | None, second: TokenSupport | None) -> TokenSupport | None:
    """One answer's token supports over the samples of both (samples drawn in two rounds, say):
    each token's support the mean of the two weighted by their samples, as one pass over all the
    samples gives it; the other where one is None (no sample scored).

    Raises:
        InputValidationError: the two are of different texts or tokens.

    Example:
        >>> a = TokenSupport("Hi", np.array([0]), np.array([2]), np.array([0]),
        ...                  np.array([1.0], np.float32), np.array([0.9], np.float32), 1)
        >>> b = TokenSupport("Hi", np.array([0]), np.array([2]), np.array([0]),
        ...                  np.array([1.0], np.float32), np.array([0.3], np.float32), 2)
        >>> both = pooled(a, b)
        >>> round(float(both.support[0]), 4), both.num_samples
        (0.5, 3)
    """
    if first is None or second is None:
        return second if first is None else first
    if first.text != second.text or not np.array_equal(first.starts, second.starts):
        raise InputValidationError("pooled token supports must be of one answer's tokens")
    total = first.num_samples + second.num_samples
    support = (
        first.support.astype(np.float64) * first.num_samples
        + second.support.astype(np.float64) * second.num_samples
    ) / max(total, 1)
    return replace(first, support=support.astype(np.float32), num_samples=total)


def is_weak(words: Any, threshold: float) -> np.ndarray:
    """The one rule of a weakly supported word: it counts in the confidence (the prompt's own
    words and punctuation do not) and its support is below ``threshold``.

    Example:
        >>> is_weak({"support": [0.2, 0.2, 0.9], "counted": [True, False, True]}, 0.5).tolist()
        [True, False, False]
    """
    support = np.asarray(words["support"], dtype=np.float64)
    return np.asarray(words["counted"], dtype=bool) & (support < threshold)


def aggregate(support: np.ndarray, weights: np.ndarray, how: str = SENTENCE_AGGREGATION) -> float:
    """One number from some tokens' supports (and weights).

    ``how``: ``"pNN"`` (the NN-th percentile, linear interpolation: ``"p10"``), ``"min"``,
    ``"mean"``, ``"wmean"`` (weighted by ``weights``; the plain mean where they sum to 0),
    ``"trimNN"`` (the mean of the lowest NN% of the values, at least one), ``"softminT"``
    (``-T * log(mean(exp(-support / T)))`` for a temperature ``T`` such as ``0.05``) or
    ``"belowL"`` (one minus the share of values below level ``L``, such as ``"below0.5"``).

    Raises:
        InputValidationError: an unknown ``how``, or no values.

    Example:
        >>> v = np.array([0.2, 0.6, 0.8, 1.0])
        >>> [round(aggregate(v, np.ones(4), h), 3) for h in ("min", "p50", "mean", "trim50")]
        [0.2, 0.7, 0.65, 0.4]
    """
    values = np.asarray(support, dtype=np.float64)
    if values.size == 0:
        raise InputValidationError("aggregate needs at least one value")
    if how == "min":
        return float(values.min())
    if how == "mean":
        return float(values.mean())
    if how == "wmean":
        w = np.asarray(weights, dtype=np.float64)
        return float(np.dot(w, values) / w.sum()) if w.sum() > 0 else float(values.mean())
    try:
        if how.startswith("p"):
            return float(np.percentile(values, float(how[1:])))
        if how.startswith("trim"):
            k = max(1, int(np.ceil(float(how[4:]) / 100 * values.size)))
            return float(np.sort(values)[:k].mean())
        if how.startswith("softmin"):
            t = float(how[7:])
            return float(-t * np.log(np.mean(np.exp(-(values - values.min()) / t))) + values.min())
        if how.startswith("below"):
            return float(1.0 - np.mean(values < float(how[5:])))
    except ValueError:
        pass
    raise InputValidationError(
        f"unknown aggregation {how!r}: use 'pNN', 'min', 'mean', 'wmean', 'trimNN', "
        "'softminT' or 'belowL' (e.g. 'p10', 'trim25', 'softmin0.05', 'below0.5')"
    )
