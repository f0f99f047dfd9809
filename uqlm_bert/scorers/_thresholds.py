"""The default thresholds of a run's scorers, in one table: per scorer, per level.

A threshold says where "flagged" starts at each level of a result: an answer whose confidence is
below its scorer's ``"answer"`` threshold, a sentence whose support is below the ``"sentence"``
threshold, a word (one that counts) whose support is below the ``"word"`` threshold. Each
default holds for the settings it was chosen at (the rule is written at its constant: the
``bert_score`` scorer's at its default settings, the supports' at the default encoder and
layer), and is None where a scorer, with its settings, has none.

:func:`thresholds_of` builds the table from the scorers (their ``default_threshold`` and, for
those that give token supports, their ``support_thresholds``); every result keeps it in
``metadata["thresholds"]``, so a result read back from a file flags as the run did.
:func:`first_threshold` is the one lookup of a level's default.

Example:
    >>> from uqlm_bert.scorers._lexical import ExactMatchScorer
    >>> table = thresholds_of([ExactMatchScorer()])
    >>> table
    {'exact_match': {'answer': None, 'sentence': None, 'word': None}}
    >>> first_threshold({"a": {"answer": None}, "b": {"answer": 0.7}}, "answer")
    ('b', 0.7)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from uqlm_bert.scorers._base import Scorer

__all__ = ["LEVELS", "Thresholds", "first_threshold", "thresholds_of"]

#: The levels of a result, each with its threshold: answers, sentences and words.
LEVELS = ("answer", "sentence", "word")

#: ``{scorer name: {level: threshold or None}}``, the levels of :data:`LEVELS`.
Thresholds = dict[str, dict[str, float | None]]


def thresholds_of(scorers: Sequence[Scorer], threshold: float | None = None) -> Thresholds:
    """The default thresholds of ``scorers``, one row per scorer in their order: the
    ``"answer"`` threshold of its confidence (``Scorer.default_threshold``; for the first
    scorer ``threshold`` where one is given, as ``ScoringSettings(threshold=...)`` sets it),
    and the ``"sentence"`` and ``"word"`` thresholds of the token supports it gives
    (``support_thresholds``, the ``bert_score`` scorers'); None where it has none at its
    settings.

    Example:
        >>> from uqlm_bert.scorers import build_scorers
        >>> thresholds_of(build_scorers(["bert_score"]))
        {'bert_score': {'answer': 0.72, 'sentence': 0.52, 'word': 0.59}}
        >>> thresholds_of(build_scorers(["bert_score"]), threshold=0.8)["bert_score"]["answer"]
        0.8
    """
    table: Thresholds = {}
    for k, scorer in enumerate(scorers):
        supports = getattr(scorer, "support_thresholds", None) or {}
        answer = threshold if k == 0 and threshold is not None else scorer.default_threshold
        table[scorer.name] = {
            "answer": None if answer is None else float(answer),
            **{level: _number(supports.get(level)) for level in LEVELS[1:]},
        }
    return table


def first_threshold(
    table: Mapping[str, Mapping[str, float | None]], level: str
) -> tuple[str, float] | None:
    """``(scorer, threshold)`` of the first scorer of ``table`` with a default at ``level``, or
    None where none has one. The supports of a result come from its ``bert_score`` scorers,
    which share their settings, so this is the sentence and word default of a result; at the
    answer level it is the first scorer that can say when an answer is settled.

    Example:
        >>> first_threshold({"exact_match": {"answer": None}}, "answer") is None
        True
    """
    for name, row in table.items():
        value = row.get(level)
        if value is not None:
            return name, float(value)
    return None


def _number(value: float | None) -> float | None:
    return None if value is None else float(value)
