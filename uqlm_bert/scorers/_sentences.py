"""Sentence-level consistency, SelfCheckGPT style: which sentences of an answer do the samples support?

Two methods; high means the samples keep saying something close to that sentence, and a
sentence that only the answer contains (a likely hallucination) scores low.

- ``"support"`` (the default): the whole answer is scored against each whole sample once, as
  the confidence is, keeping each answer token's best cosine with any token of the sample
  (:mod:`uqlm_bert.bertscore._token_support`); a token's support is the mean over the samples, and a
  sentence's score the mean of the lowest tenth of its tokens' supports
  (:data:`~uqlm_bert.bertscore._token_support.SENTENCE_AGGREGATION`; punctuation left out). Each token
  is embedded in its whole answer, and nothing is embedded twice. The better detector on WikiBio
  (docs/supports.md).
- ``"reembed"``: for each sample, the best BERTScore between the sentence (candidate) and any
  one sentence of the sample (reference), averaged over the samples::

      score(s) = (1/m) * sum_j max_{t in sentences(sample_j)} F1(s, t)

  Every sentence is embedded again on its own. All pairs of all responses go to the BERTScore
  engine in one call, the max over a sample's sentences being its multi-reference max.

:func:`split_sentences` needs no download: it is pySBD's rule-based segmenter (Golden Rules
of sentence boundaries, 22 languages), which also ends sentences at the full-width marks of
Chinese and Japanese.

Example:
    >>> from uqlm_bert.scorers._sentences import split_sentences
    >>> split_sentences("Dr. Smith moved to the U.S. in 1990. He earned $3.5 million. Why? Luck.")
    ['Dr. Smith moved to the U.S. in 1990.', 'He earned $3.5 million.', 'Why?', 'Luck.']
    >>> split_sentences("東京は日本の首都です。人口は多い。")
    ['東京は日本の首都です。', '人口は多い。']
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np
import pandas as pd

from uqlm_bert._exceptions import ConfigurationError, InputValidationError
from uqlm_bert._inputs import ScoringInputs, present_pairs, repair_text, scoring_lists
from uqlm_bert.scorers._base import mean_by_group

if TYPE_CHECKING:
    from uqlm_bert.bertscore._token_support import TokenSupport

__all__ = [
    "SENTENCE_COLUMNS",
    "PairScorer",
    "locate_sentences",
    "score_sentences",
    "sentence_spans",
    "split_sentences",
]

#: The columns of a sentence table, :func:`score_sentences`' and ``UQResult.sentences()``'s
#: (which adds ``flagged`` after ``support``): the answer's label and the sentence's offsets
#: first, as at every level of a result.
SENTENCE_COLUMNS = [
    "prompt_index",
    "start",
    "end",
    "sentence",
    "support",
    "sentence_index",
    "method",
]
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
    metric: Literal["f1", "precision", "recall"] | None = None,
    language: str = "en",
    method: Literal["support", "reembed"] | None = None,
) -> pd.DataFrame:
    """Score every sentence of every response against the samples (see the module docstring).

    Args:
        responses: one answer per prompt (a list, tuple or pandas Series, read by position);
            ``None`` (or NaN) marks a failed call: it has no sentence rows.
        sampled_responses: one list of samples per prompt; ``None`` (or NaN) samples, from
            failed calls, and samples with no text are skipped.
        bert_scorer: a loaded ``uqlm_bert.BERTScorer`` (its model, layer, idf, dtype and
            ``long_texts`` settings apply); with ``method="reembed"`` also anything with the same
            ``score(cands, refs)`` method (``bert_score.BERTScorer``).
        sentences: the split to use, one list of sentences per response; ``None`` (or ``None``
            for one response) splits the response with :func:`split_sentences`. Each given
            sentence is looked for in the response, after the one before it, verbatim or up to
            whitespace (:func:`locate_sentences`); one that is not there is an error.
        show_progress_bars: show the engine's progress bar.
        metric: ``"reembed"`` only: which BERTScore component to take per (sentence, sample
            sentence) pair: ``"f1"`` (its default), ``"precision"`` (averaged over the answer
            sentence's tokens: how much of the sentence the sample covers) or ``"recall"``.
            ``"support"`` is precision's own per-token form: it takes ``None`` or
            ``"precision"``.
        language: the language of the texts, for :func:`split_sentences`.
        method: ``"support"`` (token supports from one pass over the whole answers) or
            ``"reembed"`` (each sentence embedded again, against each sample's sentences).
            ``None``: ``"support"``, unless a ``metric`` is named (then ``"reembed"``, what
            naming a metric always meant).

    Returns:
        The sentence table (:data:`SENTENCE_COLUMNS`), one row per sentence: ``prompt_index``
        (the response's position), ``start`` and ``end`` (``sentence ==
        response[start:end]``), ``sentence``, ``support`` (its score; NaN where no sample could
        be scored or the sentence is empty or lies past the text's token limit),
        ``sentence_index`` (the sentence's position in its response) and ``method``.

    Raises:
        InputValidationError: lengths differ, an item has the wrong type (the message names
            its index), or a given sentence is not in its response.
        ConfigurationError: unknown ``metric`` or ``method``, a metric other than precision
            with ``"support"``, or ``"support"`` with a scorer that is not a
            ``uqlm_bert.BERTScorer``.

    Example:
        >>> from uqlm_bert import BERTScorer
        >>> scorer = BERTScorer(device="cpu", show_progress_bars=False)
        >>> df = score_sentences(
        ...     ["Paris is in France. It has ten moons."],
        ...     [["Paris is the capital of France.", "Paris is a city in France."]],
        ...     scorer)
        >>> df["sentence"].tolist()
        ['Paris is in France.', 'It has ten moons.']
        >>> bool(df["support"][0] > df["support"][1])
        True
        >>> old = score_sentences(["Paris is in France."], [["Paris is in France."]], scorer,
        ...                       method="reembed", metric="precision")
        >>> round(float(old["support"][0]), 4), old["method"][0]
        (1.0, 'reembed')
    """
    if metric is not None and metric not in _METRICS:
        raise ConfigurationError(f"metric must be one of {', '.join(_METRICS)}, got {metric!r}")
    if method is None:
        method = "support" if metric is None else "reembed"
    if method not in ("support", "reembed"):
        raise ConfigurationError(f"method must be 'support' or 'reembed', got {method!r}")
    inputs = scoring_lists(responses, sampled_responses)
    spans = _response_spans(inputs.responses, sentences, language)
    if method == "support":
        if metric not in (None, "precision"):
            raise ConfigurationError(
                f"metric={metric!r} applies to method='reembed'; method='support' scores each "
                "sentence by its tokens' precision matches (pass method='reembed' for F1 or "
                "recall of re-embedded sentences)"
            )
        scores = _from_supports(inputs, spans, bert_scorer, show_progress_bars)
    else:
        scores = _reembedded(inputs, spans, bert_scorer, show_progress_bars, metric, language)
    rows = [
        (i, k, a, b, inputs.responses[i][a:b])
        for i, found in enumerate(spans)
        for k, (a, b) in enumerate(found)
    ]
    return pd.DataFrame(
        {
            "prompt_index": np.array([r[0] for r in rows], dtype=np.int64),
            "start": np.array([r[2] for r in rows], dtype=np.int64),
            "end": np.array([r[3] for r in rows], dtype=np.int64),
            "sentence": pd.Series([r[4] for r in rows], dtype=object),
            "support": np.asarray(scores, dtype=np.float64),
            "sentence_index": np.array([r[1] for r in rows], dtype=np.int64),
            "method": pd.Series([method] * len(rows), dtype=object),
        },
        columns=SENTENCE_COLUMNS,
    )


def _from_supports(
    inputs: ScoringInputs, spans: list[list[tuple[int, int]]], bert_scorer: PairScorer, show: bool
) -> np.ndarray:
    """Each sentence's score by the ``"support"`` method, sentence after sentence."""
    from uqlm_bert.scorers._bertscore import punctuation_ids, supports_from_matches

    if not callable(getattr(bert_scorer, "score_matches", None)):
        raise ConfigurationError(
            f"method='support' needs a uqlm_bert.BERTScorer (one that keeps token matches), "
            f"got {type(bert_scorer).__name__}; pass method='reembed' to score with it"
        )
    # samples with no text are skipped, as the reembedding method skips them
    kept = [[x if x is not None and x.strip() else None for x in xs] for xs in inputs.samples]
    group, cands, refs = present_pairs(ScoringInputs(inputs.responses, kept))
    supports: list[TokenSupport | None] = [None] * len(inputs)
    if cands:
        engine: Any = bert_scorer
        zero = [punctuation_ids(engine.encoder.tokenizer)] * len(cands)
        matches = engine.score_matches(cands, refs, show_progress_bars=show, zero_weight=zero)
        supports = supports_from_matches(engine, matches, group, inputs.responses)
    scores = [
        np.full(len(found), np.nan) if ts is None else ts.sentence_support(found)
        for ts, found in zip(supports, spans, strict=True)
    ]
    return np.concatenate(scores) if scores else np.zeros(0)


def _reembedded(
    inputs: ScoringInputs,
    spans: list[list[tuple[int, int]]],
    bert_scorer: PairScorer,
    show_progress_bars: bool,
    metric: str | None,
    language: str,
) -> np.ndarray:
    """Each sentence's score by the ``"reembed"`` method, sentence after sentence."""
    sample_sents = _sample_sentences(inputs.samples, language)
    n_rows = 0
    row_of_pair: list[int] = []
    cands: list[str] = []
    refs: list[list[str]] = []
    for i, found in enumerate(spans):
        for a, b in found:
            row, n_rows = n_rows, n_rows + 1
            sent = inputs.responses[i][a:b]
            if not sent.strip():
                continue
            for ref_sents in sample_sents[i]:
                row_of_pair.append(row)
                cands.append(sent)
                refs.append(ref_sents)
    scores = np.full(n_rows, np.nan)
    if cands:
        component = _METRICS[metric or "f1"]
        values = _call_scorer(bert_scorer, cands, refs, show_progress_bars)[component]
        scores = mean_by_group(values, row_of_pair, n_rows)
    return scores


def _response_spans(
    responses: Sequence[str | None],
    sentences: Sequence[Sequence[str] | None] | None,
    language: str,
) -> list[list[tuple[int, int]]]:
    """Each response's sentences as character spans: the caller's split located in it, or
    split here; none for a missing response."""
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
    out: list[list[tuple[int, int]]] = []
    for i, resp in enumerate(responses):
        given = None if sentences is None else sentences[i]
        if resp is None:
            out.append([])
            continue
        if given is None:
            out.append(sentence_spans(resp, language))
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
        out.append(locate_sentences(resp, [repair_text(sent)[0] for sent in given]))
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
    text = repair_text(text)[0]
    return [text[a:b] for a, b in sentence_spans(text, language)]


def sentence_spans(text: str, language: str = "en") -> list[tuple[int, int]]:
    """Where the sentences of :func:`split_sentences` lie in ``text``: ``(start, end)`` of each,
    so that ``text[start:end]`` is the sentence (surrounding whitespace left out).

    Raises:
        InputValidationError: ``text`` is not a string.
        ConfigurationError: pySBD has no rules for ``language``.

    Example:
        >>> text = "  It rained. Then it snowed!  "
        >>> [(a, b, text[a:b]) for a, b in sentence_spans(text)]
        [(2, 12, 'It rained.'), (13, 28, 'Then it snowed!')]
    """
    if not isinstance(text, str):
        raise InputValidationError(f"sentence_spans needs a string, got {type(text).__name__}")
    segmenter = _segmenter(language)
    pieces: list[tuple[int, int]] = []
    start = 0
    while len(text) - start > _WINDOW:
        window = text[start : start + _WINDOW]
        spans = segmenter.segment(window)
        if len(spans) < 2:  # one "sentence" fills the window: cut it there
            pieces.append((start, start + _WINDOW))
            start += _WINDOW
            continue
        found = _located(window, [span.sent for span in spans])
        pieces.extend((start + a, start + b) for a, b in found[:-1])
        start += found[-1][0]  # the last sentence may run past the window: segment it again
    window = text[start:]
    pieces.extend((start + a, start + b) for a, b in _located(window, segmenter.segment(window)))
    out = []
    for a, b in pieces:
        piece = text[a:b]
        a2, b2 = a + len(piece) - len(piece.lstrip()), b - len(piece) + len(piece.rstrip())
        if a2 < b2:
            out.append((a2, b2))
    return out


def locate_sentences(text: str, sentences: Sequence[str]) -> list[tuple[int, int]]:
    """``(start, end)`` of each of ``sentences`` in ``text``, in order: each is looked for after
    the end of the one before, as it is (surrounding whitespace left out) and, where it is not
    there verbatim, with each run of whitespace in it matching any run of whitespace in the text
    (a sentence whose line breaks were turned into spaces, say). ``text[start:end]`` is then
    the text's own characters. A blank sentence gets an empty span where the search stands.

    Raises:
        InputValidationError: a sentence is in neither form in the rest of the text (the
            message names it and where the search stood).

    Example:
        >>> locate_sentences("One.  Two   words. Three.", ["One.", "Two words.", "Three."])
        [(0, 4), (6, 18), (19, 25)]
    """
    pos = 0
    out = []
    for k, sentence in enumerate(sentences):
        span = _find(text, sentence.strip(), pos)
        if span is None:
            raise InputValidationError(
                f"sentence {k} ({sentence[:60]!r}) is not in the response after character "
                f"{pos} (the end of the sentence before it), verbatim or up to whitespace: give "
                "sentences that are pieces of the response, in order, or leave sentences out "
                "to have the response split here"
            )
        out.append(span)
        pos = span[1]
    return out


def _located(window: str, sents: Sequence[Any]) -> list[tuple[int, int]]:
    """Spans of pySBD's consecutive sentences (strings, or its spans) in ``window``."""
    out = []
    pos = 0
    for sent in sents:
        piece = sent if isinstance(sent, str) else sent.sent
        span = _find(window, piece, pos)
        if span is None:  # pySBD changed the text: trust its own offsets
            span = (sent.start, sent.end) if not isinstance(sent, str) else (pos, pos)
        out.append(span)
        pos = span[1]
    return out


def _find(text: str, piece: str, pos: int) -> tuple[int, int] | None:
    """The first ``(start, end)`` of ``piece`` in ``text`` from ``pos`` on: verbatim, else with
    each whitespace run of ``piece`` matching any whitespace run; None where neither is there."""
    if not piece.strip():
        return (pos, pos)
    at = text.find(piece, pos)
    if at >= 0:
        return (at, at + len(piece))
    words = piece.split()
    pattern = re.compile(r"\s+".join(re.escape(w) for w in words))
    found = pattern.search(text, pos)
    return None if found is None else (found.start(), found.end())


@functools.lru_cache(maxsize=8)
def _segmenter(language: str) -> Any:
    import pysbd

    try:
        return pysbd.Segmenter(language=language, clean=False, char_span=True)
    except ValueError as exc:
        raise ConfigurationError(
            f"sentence splitting has no rules for language {language!r}: {exc}"
        ) from exc
