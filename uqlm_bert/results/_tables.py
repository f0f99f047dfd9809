"""Token supports as tables: one row per word, or one per sentence, of every answer; and the one
serialised form of an answer's words (:func:`word_records`).

Both tables take one :class:`~uqlm_bert.bertscore._token_support.TokenSupport` per response (``None`` where
there is nothing to show: a failed answer, or one without samples) and give a pandas DataFrame
whose first column is ``prompt_index`` (here the position in the list; a result puts its own row
labels there). Every row's text is the answer's own characters: ``word == response[start:end]``
and ``sentence == response[start:end]``.

Example:
    >>> from uqlm_bert.scorers._registry import build_scorer
    >>> from uqlm_bert.scorers._base import score_with_supports
    >>> _, supports = score_with_supports(
    ...     [build_scorer("bert_score")], ["Lima is in Peru. It has 9 moons."],
    ...     [["Lima is the capital of Peru.", "Lima, in Peru, is a big city."]])
    >>> words = word_frame(supports)
    >>> words.columns.tolist()
    ['prompt_index', 'start', 'end', 'word', 'support', 'counted']
    >>> sentences = sentence_frame(supports)
    >>> sentences["sentence"].tolist()
    ['Lima is in Peru.', 'It has 9 moons.']
    >>> bool(sentences["support"][0] > sentences["support"][1])
    True
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from uqlm_bert._exceptions import InputValidationError
from uqlm_bert.bertscore._token_support import SENTENCE_AGGREGATION, TokenSupport
from uqlm_bert.scorers._sentences import SENTENCE_COLUMNS, locate_sentences, sentence_spans

__all__ = [
    "SENTENCE_FRAME_COLUMNS",
    "SUPPORT_METHOD",
    "WORD_FRAME_COLUMNS",
    "sentence_frame",
    "word_frame",
    "word_records",
]

#: The columns of :func:`word_frame` (``UQResult.words()`` adds ``flagged`` after ``support``).
WORD_FRAME_COLUMNS = ["prompt_index", "start", "end", "word", "support", "counted"]
#: The columns of :func:`sentence_frame`, the sentence table's before its flags (as
#: :func:`~uqlm_bert.scorers._sentences.score_sentences` gives it).
SENTENCE_FRAME_COLUMNS = SENTENCE_COLUMNS
#: The ``method`` of sentence supports read from the confidence's own pass.
SUPPORT_METHOD = "support"


def word_frame(supports: Sequence[TokenSupport | None]) -> pd.DataFrame:
    """One row per word of every answer (see
    :meth:`~uqlm_bert.bertscore._token_support.TokenSupport.word_rows`): ``prompt_index``, ``start``, ``end``
    (character offsets into the answer), ``word`` (the answer's characters there), ``support``
    (float, 0 to 1) and ``counted`` (False for words that weigh 0: the prompt's own words and
    punctuation). No rows for a ``None``.

    Example:
        >>> import numpy as np
        >>> ts = TokenSupport("Hi there", np.array([0, 3]), np.array([2, 8]), np.array([0, 1]),
        ...                   np.array([0.5, 0.5], np.float32), np.array([0.9, 0.4], np.float32), 3)
        >>> word_frame([None, ts])[["prompt_index", "word"]].values.tolist()
        [[1, 'Hi'], [1, 'there']]
    """
    parts = []
    for i, ts in enumerate(_checked(supports)):
        if ts is None:
            continue
        w = ts.word_rows()
        parts.append(
            {
                "prompt_index": np.full(len(w.start), i, dtype=np.int64),
                "start": w.start,
                "end": w.end,
                "word": w.text,
                "support": w.support.astype(np.float64),
                "counted": w.counted,
            }
        )
    return _frame(parts, WORD_FRAME_COLUMNS)


def sentence_frame(
    supports: Sequence[TokenSupport | None],
    sentences: Sequence[Sequence[str] | None] | None = None,
    language: str = "en",
    how: str = SENTENCE_AGGREGATION,
) -> pd.DataFrame:
    """One row per sentence of every answer: ``prompt_index``, ``start``, ``end`` (character
    offsets into the answer), ``sentence`` (the answer's characters there), ``support`` (the
    aggregate ``how`` of its counted tokens' supports, see
    :meth:`~uqlm_bert.bertscore._token_support.TokenSupport.sentence_support`; NaN for a
    sentence with no scored token), ``sentence_index`` (its place in the answer) and ``method``
    (:data:`SUPPORT_METHOD`). No rows for a ``None``.

    Args:
        supports: one token support per response, or None.
        sentences: your own split, one list of sentences per response (``None`` for one
            response: split here): each is looked for in the answer after the one before it,
            verbatim or up to whitespace
            (:func:`~uqlm_bert.scorers._sentences.locate_sentences`). Default: each answer split
            with :func:`~uqlm_bert.scorers._sentences.split_sentences`.
        language: the answers' language, for splitting.
        how: the aggregation (default
            :data:`~uqlm_bert.bertscore._token_support.SENTENCE_AGGREGATION`).

    Raises:
        InputValidationError: ``sentences`` does not hold one item per response, or a given
            sentence is not in its answer.

    Example:
        >>> import numpy as np
        >>> ts = TokenSupport("A b. C d.", np.array([0, 2, 3, 5, 7, 8]),
        ...                   np.array([1, 3, 4, 6, 8, 9]), np.arange(6),
        ...                   np.array([.25, .25, 0, .25, .25, 0], np.float32),
        ...                   np.array([.9, .8, .9, .3, .2, .9], np.float32), 2)
        >>> df = sentence_frame([ts], how="min")
        >>> df[["sentence", "support"]].round(2).values.tolist()
        [['A b.', 0.8], ['C d.', 0.2]]
    """

    supports = _checked(supports)
    if sentences is not None and (
        isinstance(sentences, (str, bytes)) or len(sentences) != len(supports)
    ):
        raise InputValidationError(
            f"sentences must hold one list of sentences (or None) per response ({len(supports)})"
        )
    parts = []
    for i, ts in enumerate(supports):
        if ts is None:
            continue
        given = None if sentences is None else sentences[i]
        if isinstance(given, str):
            raise InputValidationError(
                f"sentences[{i}] is a string; it must be the list of that response's sentences"
            )
        spans = (
            sentence_spans(ts.text, language) if given is None else locate_sentences(ts.text, given)
        )
        parts.append(
            {
                "prompt_index": np.full(len(spans), i, dtype=np.int64),
                "sentence_index": np.arange(len(spans), dtype=np.int64),
                "start": np.array([a for a, _ in spans], dtype=np.int64),
                "end": np.array([b for _, b in spans], dtype=np.int64),
                "sentence": [ts.text[a:b] for a, b in spans],
                "support": ts.sentence_support(spans, how),
                "method": [SUPPORT_METHOD] * len(spans),
            }
        )
    return _frame(parts, SENTENCE_FRAME_COLUMNS)


def word_records(words: pd.DataFrame) -> list[dict]:
    """One answer's counted words as plain data, the one serialised form of word supports (the
    command's ``words`` column and the web services' ``"words"`` field): ``start``, ``end``
    (character offsets into the answer), ``word``, ``support`` (rounded to 4 places) and
    ``weak`` (the word's ``flagged`` in ``UQResult.words()``: below the word threshold; None
    where there is no threshold). The prompt's own words and punctuation, which do not count,
    are left out.

    Example:
        >>> words = pd.DataFrame({"start": [0, 5, 9], "end": [4, 8, 10], "word": ["Lima", "yes", "."],
        ...                       "support": [0.91234, 0.3, 0.2], "counted": [True, True, False],
        ...                       "flagged": pd.array([False, True, False], dtype="boolean")})
        >>> word_records(words)
        [{'start': 0, 'end': 4, 'word': 'Lima', 'support': 0.9123, 'weak': False}, {'start': 5, 'end': 8, 'word': 'yes', 'support': 0.3, 'weak': True}]
    """
    counted = np.asarray(words["counted"], dtype=bool)
    return [
        {
            "start": int(start),
            "end": int(end),
            "word": str(word),
            "support": round(float(support), 4),
            "weak": None if flag is pd.NA else bool(flag),
        }
        for start, end, word, support, flag, c in zip(
            words["start"],
            words["end"],
            words["word"],
            words["support"],
            words["flagged"],
            counted,
            strict=True,
        )
        if c
    ]


def _checked(supports: Sequence[TokenSupport | None]) -> list[TokenSupport | None]:
    if isinstance(supports, (str, bytes)) or not hasattr(supports, "__len__"):
        raise InputValidationError(
            f"supports must be a list of TokenSupport or None, got {type(supports).__name__}"
        )
    out = list(supports)
    for i, ts in enumerate(out):
        if ts is not None and not isinstance(ts, TokenSupport):
            raise InputValidationError(
                f"supports[{i}] is a {type(ts).__name__}, expected a TokenSupport or None"
            )
    return out


def _frame(parts: list[dict], columns: list[str]) -> pd.DataFrame:
    """The rows of ``parts`` in one frame (typed columns, also when empty)."""
    dtypes = {
        "prompt_index": np.int64,
        "sentence_index": np.int64,
        "start": np.int64,
        "end": np.int64,
        "support": np.float64,
        "counted": bool,
        "word": object,
        "sentence": object,
        "method": object,
    }
    data = {}
    for col in columns:
        values = [v for p in parts for v in p[col]] if parts else []
        if dtypes[col] is object:
            data[col] = pd.Series(values, dtype=object)
        else:
            data[col] = pd.Series(
                np.concatenate([np.asarray(p[col]) for p in parts]) if parts else [],
                dtype=dtypes[col],
            )
    return pd.DataFrame(data, columns=columns)
