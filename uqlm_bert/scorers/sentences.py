"""Sentence-level consistency, SelfCheckGPT style: which sentences of an answer do the samples support?

A sentence's score is, for each sample, the best BERTScore between the sentence (candidate) and
any one sentence of the sample (reference), averaged over the samples::

    score(s) = (1/m) * sum_j max_{t in sentences(sample_j)} F1(s, t)

High means the samples keep saying something close to that sentence; a sentence that only the
answer contains (a likely hallucination) scores low. All pairs of all responses go to the
BERTScore engine in one call, the max over a sample's sentences being its multi-reference max.

:func:`split_sentences` needs no download: it is pySBD's rule-based segmenter (Golden Rules
of sentence boundaries, 22 languages), which also ends sentences at the full-width marks of
Chinese and Japanese.

Example:
    >>> from uqlm_bert.scorers.sentences import split_sentences
    >>> split_sentences("Dr. Smith moved to the U.S. in 1990. He earned $3.5 million. Why? Luck.")
    ['Dr. Smith moved to the U.S. in 1990.', 'He earned $3.5 million.', 'Why?', 'Luck.']
    >>> split_sentences("東京は日本の首都です。人口は多い。")
    ['東京は日本の首都です。', '人口は多い。']
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence
from typing import Any, Literal, Protocol

import numpy as np
import pandas as pd

from uqlm_bert.exceptions import ConfigurationError, InputValidationError
from uqlm_bert.inputs import repair_text, scoring_lists
from uqlm_bert.scorers.base import mean_by_group

__all__ = ["PairScorer", "score_sentences", "split_sentences"]

SENTENCE_COLUMNS = ["response_index", "sentence_index", "sentence", "bert_score"]
_METRICS = {"precision": 0, "recall": 1, "f1": 2}
# Text is segmented in windows of this many characters: pySBD's time grows faster than linearly
# with the length of what it is given, and no sentence of prose is this long.
_WINDOW = 4000


class PairScorer(Protocol):
    """What :func:`score_sentences` needs: ``uqlm_bert.BERTScorer`` or ``bert_score.BERTScorer``."""

    def score(
        self, cands: Sequence[str], refs: Sequence[Sequence[str]], *args: Any, **kwargs: Any
    ) -> tuple[Any, Any, Any]: ...


def score_sentences(
    responses: Sequence[str | None],
    sampled_responses: Sequence[Sequence[str | None]],
    bert_scorer: PairScorer,
    sentences: Sequence[Sequence[str] | None] | None = None,
    show_progress_bars: bool = False,
    metric: Literal["f1", "precision", "recall"] = "f1",
    language: str = "en",
) -> pd.DataFrame:
    """Score every sentence of every response against the samples (see the module docstring).

    Args:
        responses: one answer per prompt (a list, tuple or pandas Series, read by position);
            ``None`` (or NaN) marks a failed call: no rows unless its sentences are given.
        sampled_responses: one list of samples per prompt; ``None`` (or NaN) samples, from
            failed calls, and samples with no text are skipped.
        bert_scorer: a loaded ``uqlm_bert.BERTScorer`` (its model, layer, idf and rescaling
            settings apply) or anything with the same ``score(cands, refs)`` method.
        sentences: the split to use, one list of sentences per response; ``None`` (or ``None``
            for one response) splits the response with :func:`split_sentences`.
        show_progress_bars: show the engine's progress bar.
        metric: which BERTScore component to take per (sentence, sample sentence) pair:
            ``"f1"`` (default), ``"precision"`` (averaged over the answer sentence's tokens: how
            much of the sentence the sample covers) or ``"recall"``.
        language: the language of the texts, for :func:`split_sentences`.

    Returns:
        DataFrame with one row per sentence: ``response_index``, ``sentence_index`` (position in
        its response), ``sentence`` and ``bert_score`` (NaN where no sample could be scored or
        the sentence is empty).

    Raises:
        InputValidationError: lengths differ, or an item has the wrong type (the message names
            its index).
        ConfigurationError: unknown ``metric``.

    Example:
        >>> from uqlm_bert import BERTScorer
        >>> scorer = BERTScorer(device="cpu", show_progress_bars=False)
        >>> df = score_sentences(
        ...     ["Paris is in France. It has ten moons."],
        ...     [["Paris is the capital of France.", "Paris is a city in France."]],
        ...     scorer)
        >>> df["sentence"].tolist()
        ['Paris is in France.', 'It has ten moons.']
        >>> bool(df["bert_score"][0] > df["bert_score"][1])
        True
    """
    if metric not in _METRICS:
        raise ConfigurationError(f"metric must be one of {', '.join(_METRICS)}, got {metric!r}")
    inputs = scoring_lists(responses, sampled_responses)
    split = _response_sentences(inputs.responses, sentences, language)
    sample_sents = _sample_sentences(inputs.samples, language)

    rows: list[tuple[int, int, str]] = []
    row_of_pair: list[int] = []
    cands: list[str] = []
    refs: list[list[str]] = []
    for i, sents in enumerate(split):
        for k, sent in enumerate(sents):
            row = len(rows)
            rows.append((i, k, sent))
            if not sent.strip():
                continue
            for ref_sents in sample_sents[i]:
                row_of_pair.append(row)
                cands.append(sent)
                refs.append(ref_sents)

    scores = np.full(len(rows), np.nan)
    if cands:
        values = _call_scorer(bert_scorer, cands, refs, show_progress_bars)[_METRICS[metric]]
        scores = mean_by_group(values, row_of_pair, len(rows))
    return pd.DataFrame(
        {
            "response_index": np.array([r[0] for r in rows], dtype=np.int64),
            "sentence_index": np.array([r[1] for r in rows], dtype=np.int64),
            "sentence": pd.Series([r[2] for r in rows], dtype=object),
            "bert_score": scores,
        },
        columns=SENTENCE_COLUMNS,
    )


def _response_sentences(
    responses: Sequence[str | None],
    sentences: Sequence[Sequence[str] | None] | None,
    language: str,
) -> list[list[str]]:
    """Each response's sentences: the caller's, or split here."""
    if sentences is not None:
        if isinstance(sentences, (str, bytes)) or not hasattr(sentences, "__len__"):
            raise InputValidationError(
                "sentences must be a list with one list of sentences per response, got "
                f"{type(sentences).__name__}"
            )
        sentences = list(sentences)
        if len(sentences) != len(responses):
            raise InputValidationError(
                "sentences must have one list of sentences per response "
                f"({len(responses)}), got {len(sentences)} items"
            )
    out: list[list[str]] = []
    for i, resp in enumerate(responses):
        given = None if sentences is None else sentences[i]
        if given is None:
            out.append(split_sentences(resp, language) if resp is not None else [])
            continue
        if isinstance(given, str):
            raise InputValidationError(
                f"sentences[{i}] is a string; it must be the list of that response's sentences"
            )
        for k, sent in enumerate(given):
            if not isinstance(sent, str):
                raise InputValidationError(
                    f"sentences[{i}][{k}] is a {type(sent).__name__}, expected a string"
                )
        out.append([repair_text(sent)[0] for sent in given])
    return out


def _sample_sentences(samples: list[list[str | None]], language: str) -> list[list[list[str]]]:
    """For each prompt, the sentence lists of its present, non-empty samples (split once each)."""
    cache: dict[str, list[str]] = {}
    out: list[list[list[str]]] = []
    for group in samples:
        per_prompt: list[list[str]] = []
        for sample in group:
            if sample is None:
                continue
            if sample not in cache:
                cache[sample] = split_sentences(sample, language)
            if cache[sample]:
                per_prompt.append(cache[sample])
        out.append(per_prompt)
    return out


def _call_scorer(
    scorer: PairScorer, cands: list[str], refs: list[list[str]], show: bool
) -> np.ndarray:
    """``scorer.score`` with the progress flag it understands; returns a (3, n) float64 array."""
    try:
        params = inspect.signature(scorer.score).parameters
    except (TypeError, ValueError):
        params = {}
    if "show_progress_bars" in params:
        out = scorer.score(cands, refs, show_progress_bars=show)
    elif "verbose" in params:
        out = scorer.score(cands, refs, verbose=show)
    else:
        out = scorer.score(cands, refs)
    return np.stack([_to_numpy(t) for t in out[:3]])


def _to_numpy(values: Any) -> np.ndarray:
    if hasattr(values, "detach"):
        values = values.detach().cpu().numpy()
    return np.asarray(values, dtype=np.float64)


# --------------------------------------------------------------------------- sentence splitting


def split_sentences(text: str, language: str = "en") -> list[str]:
    """Split text into sentences with pySBD's rules (no model, no download).

    pySBD implements the "Golden Rules" of sentence boundaries: abbreviations (``Dr.``,
    ``U.S.``, ``No. 5``), initials, numbers (``3.5``), quotations, lists and ellipses do not end a
    sentence. ``language`` is an ISO 639-1 code of the languages pySBD supports (``en``, ``de``,
    ``fr``, ``es``, ``it``, ``ru``, ``zh``, ``ja``, ...); the English rules also end sentences at
    ``。！？``. Sentences are stripped of surrounding whitespace; empty ones are dropped. Long
    texts are segmented window by window, so time grows linearly with length. Known limits of
    the rules: "c." before a year and "Jr." before a capitalised word end a sentence there; pass
    your own split as ``sentences=`` where that matters.

    Raises:
        InputValidationError: ``text`` is not a string.
        ConfigurationError: pySBD has no rules for ``language``.

    Example:
        >>> split_sentences("He met Mr. J. Smith at 5 p.m. The talk ran long! Was it No. 2? Yes.")
        ['He met Mr. J. Smith at 5 p.m.', 'The talk ran long!', 'Was it No. 2?', 'Yes.']
    """
    if not isinstance(text, str):
        raise InputValidationError(f"split_sentences needs a string, got {type(text).__name__}")
    segmenter = _segmenter(language)
    text = repair_text(text)[0]
    pieces: list[str] = []
    start = 0
    while len(text) - start > _WINDOW:
        spans = segmenter.segment(text[start : start + _WINDOW])
        if len(spans) < 2:  # one "sentence" fills the window: cut it there
            pieces.append(text[start : start + _WINDOW])
            start += _WINDOW
            continue
        pieces.extend(span.sent for span in spans[:-1])
        start += spans[-1].start  # the last sentence may run past the window: segment it again
    pieces.extend(span.sent for span in segmenter.segment(text[start:]))
    return [p.strip() for p in pieces if p.strip()]


@functools.lru_cache(maxsize=8)
def _segmenter(language: str) -> Any:
    import pysbd

    try:
        return pysbd.Segmenter(language=language, clean=False, char_span=True)
    except ValueError as exc:
        raise ConfigurationError(
            f"sentence splitting has no rules for language {language!r}: {exc}"
        ) from exc
