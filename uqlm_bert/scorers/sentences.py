"""Sentence-level consistency, SelfCheckGPT style: which sentences of an answer do the samples support?

A sentence's score is, for each sample, the best BERTScore between the sentence (candidate) and
any one sentence of the sample (reference), averaged over the samples::

    score(s) = (1/m) * sum_j max_{t in sentences(sample_j)} F1(s, t)

High means the samples keep saying something close to that sentence; a sentence that only the
answer contains (a likely hallucination) scores low. All pairs of all responses go to the
BERTScore engine in one call, the max over a sample's sentences being its multi-reference max.

:func:`split_sentences` needs no download: it is a rule-based splitter tuned for English prose.

Example:
    >>> from uqlm_bert.scorers.sentences import split_sentences
    >>> split_sentences("Dr. Smith moved to the U.S. in 1990. He earned $3.5 million. Why? Luck.")
    ['Dr. Smith moved to the U.S. in 1990.', 'He earned $3.5 million.', 'Why?', 'Luck.']
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Sequence
from typing import Any, Literal, Protocol

import numpy as np
import pandas as pd

from uqlm_bert.exceptions import ConfigurationError, InputValidationError
from uqlm_bert.scorers.base import check_scoring_lists, is_missing, mean_by_group

__all__ = ["PairScorer", "score_sentences", "split_sentences"]

SENTENCE_COLUMNS = ["response_index", "sentence_index", "sentence", "bert_score"]
_METRICS = {"precision": 0, "recall": 1, "f1": 2}


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
    split = _response_sentences(responses, sampled_responses, sentences)
    sample_sents = _sample_sentences(sampled_responses)

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
    sampled_responses: Sequence[Sequence[str | None]],
    sentences: Sequence[Sequence[str] | None] | None,
) -> list[list[str]]:
    """Each response's sentences: the caller's, or split here; checks every input's shape."""
    responses, sampled_responses = check_scoring_lists(responses, sampled_responses)
    if sentences is not None:
        sentences = _as_list(sentences, "sentences")
        if len(sentences) != len(responses):
            raise InputValidationError(
                "sentences must have one list of sentences per response "
                f"({len(responses)}), got {len(sentences)} items"
            )
    out: list[list[str]] = []
    for i, resp in enumerate(responses):
        resp = None if is_missing(resp) else resp
        if resp is not None and not isinstance(resp, str):
            raise InputValidationError(
                f"responses[{i}] is a {type(resp).__name__}, expected a string or None"
            )
        given = None if sentences is None else sentences[i]
        if given is None:
            out.append(split_sentences(resp) if resp is not None else [])
            continue
        if isinstance(given, str):
            raise InputValidationError(
                f"sentences[{i}] is a string; it must be the list of that response's sentences"
            )
        for k, s in enumerate(given):
            if not isinstance(s, str):
                raise InputValidationError(
                    f"sentences[{i}][{k}] is a {type(s).__name__}, expected a string"
                )
        out.append(list(given))
    return out


def _as_list(value: Any, name: str) -> list:
    """A positional list copy of a list, tuple, Series or array; a string is an error."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        raise InputValidationError(
            f"{name} must be a list with one item per prompt, got {type(value).__name__}"
        )
    return list(value)


def _sample_sentences(sampled_responses: Sequence[Sequence[str | None]]) -> list[list[list[str]]]:
    """For each prompt, the sentence lists of its present, non-empty samples (split once each)."""
    cache: dict[str, list[str]] = {}
    out: list[list[list[str]]] = []
    for i, samples in enumerate(_as_list(sampled_responses, "sampled_responses")):
        if samples is None:
            samples = []
        if isinstance(samples, str):
            raise InputValidationError(
                f"sampled_responses[{i}] is a string; it must be a list of sampled responses"
            )
        per_prompt: list[list[str]] = []
        for j, s in enumerate(samples):
            if is_missing(s):
                continue
            if not isinstance(s, str):
                raise InputValidationError(
                    f"sampled_responses[{i}][{j}] is a {type(s).__name__}, expected a string or None"
                )
            if s not in cache:
                cache[s] = split_sentences(s)
            if cache[s]:
                per_prompt.append(cache[s])
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

#: Abbreviations after which a period never ends a sentence (titles and the like: a name or a
#: noun always follows them).
NEVER_FINAL = frozenset(
    "mr mrs ms mx dr prof rev fr sr jr sra srta gen col lt maj sgt capt cmdr adm gov sen rep hon "
    "pres supt insp det messrs mme mlle st mt ft vs cf viz approx ca".split()
)

#: Abbreviations that do not end a sentence when a number follows ("No. 5", "Jan. 12",
#: "b. 1820", "pp. 10-12").
BEFORE_NUMBER = frozenset(
    "no nos vol vols pp p fig figs ch chap sec art op ed eds est b d c jan feb mar apr jun jul "
    "aug sep sept oct nov dec".split()
)

#: Words that, after an acronym such as "U.S." or "p.m.", show that a new sentence started.
SENTENCE_STARTERS = frozenset(
    "he she it they we i you his her its their our this that these those there the a an in on "
    "at after before during however but and as when while from since".split()
)

_BOUNDARY = re.compile(r"([.!?…]+)([\"'”’)\]]*)(\s+)")
_BLOCK_BREAK = re.compile(r"\n[ \t]*\n\s*|\n(?=[ \t]*(?:[-*•]|\d+[.)])\s)")
_ACRONYM = re.compile(r"^(?:[A-Za-z]\.)+[A-Za-z]$")
_LEADING_OPENERS = "\"'“‘([{"


def split_sentences(text: str) -> list[str]:
    """Split English text into sentences with rules that need no model or download.

    A sentence ends at ``.``, ``!``, ``?`` or ``…`` (with any closing quotes or brackets after
    it) followed by whitespace, and at a blank line or a line that starts a list item. A period
    does not end a sentence when:

    - no whitespace follows it (``3.5``, ``example.com``, the inner dots of ``U.S.``);
    - the next word starts with a lower-case letter (``etc. and``, ``"Why?" he asked``; this
      holds for ``!``, ``?`` and ``…`` too);
    - it follows a title or similar abbreviation (``Dr.``, ``Mr.``, ``St.``, ``Jr.``, ``vs.``; see
      :data:`NEVER_FINAL`), or one of :data:`BEFORE_NUMBER` and a digit follows (``No. 5``,
      ``Jan. 12``, ``b. 1820``);
    - it follows a single capital letter, an initial (``John F. Kennedy``, ``J. R. R. Tolkien``);
    - it ends an acronym with inner dots (``U.S.``, ``a.m.``, ``Ph.D.``), unless the next word is
      a common sentence opener (``He``, ``The``, ``In``...; see :data:`SENTENCE_STARTERS`).

    Sentences are stripped of surrounding whitespace; empty ones are dropped. Known limit: the
    rules read form, not meaning, so a sentence that really ends with an initial or a listed
    abbreviation ("...served in World War I. Then he...") is not split there.

    Example:
        >>> split_sentences("He met Mr. J. Smith at 5 p.m. The talk ran long! Was it No. 2? Yes.")
        ['He met Mr. J. Smith at 5 p.m.', 'The talk ran long!', 'Was it No. 2?', 'Yes.']
    """
    if not isinstance(text, str):
        raise InputValidationError(f"split_sentences needs a string, got {type(text).__name__}")
    out: list[str] = []
    for block in _BLOCK_BREAK.split(text):
        out.extend(_split_block(block))
    return out


def _split_block(block: str) -> list[str]:
    """Split one paragraph (no blank lines inside) at sentence boundaries."""
    pieces: list[str] = []
    start = 0
    for m in _BOUNDARY.finditer(block):
        end = m.end()
        if end >= len(block):
            break
        if _is_boundary(block, m):
            pieces.append(block[start : m.end(2)])
            start = end
    pieces.append(block[start:])
    return [p.strip() for p in pieces if p.strip()]


def _is_boundary(block: str, m: re.Match[str]) -> bool:
    """Decide whether the punctuation matched by ``m`` ends a sentence."""
    nxt = block[m.end()]
    if nxt.islower():
        return False
    if m.group(1) != ".":
        return True
    before = block[: m.start(1)]
    word = before.split()[-1].lstrip(_LEADING_OPENERS) if before.split() else ""
    lowered = word.lower()
    if lowered in NEVER_FINAL:
        return False
    if lowered in BEFORE_NUMBER and nxt.isdigit():
        return False
    if len(word) == 1 and word.isupper():
        return False
    if _ACRONYM.match(word):
        next_word = re.match(r"[\w']+", block[m.end() :])
        return bool(next_word) and next_word.group(0).lower() in SENTENCE_STARTERS
    return True
