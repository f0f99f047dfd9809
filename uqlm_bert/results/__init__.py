"""What a run gives back: :class:`UQResult`, one table shape per level.

- answers: ``result.flag()`` (``to_df()`` with ``flagged``), ``filter()``, ``calibrate()`` (a
  result with each answer's probability of being correct as a column), ``refine()`` (each
  answer with its unsupported sentences removed);
- sentences: ``result.sentences()``, each sentence with its support and whether it is flagged
  (``BlackBoxUQ.score_sentences`` gives the same table);
- words: ``result.words()``, each word of every answer with its support and whether it is
  flagged;
- one answer: ``result.answer(prompt_index)``, an :class:`Answer` shown with its weak words
  marked and its unsupported sentences struck through (or, for a failed call, its error);
- the failed calls, grouped by kind: ``result.failures()``, a :class:`Failures`;
- as plain data and back: ``result.to_dict()``, ``UQResult.from_dict(...)``.

Every table starts with ``prompt_index``, the row's label (its prompt's index in the run), then
for sentences and words ``start`` and ``end`` into the scored text; each has its score column(s)
and ``flagged``. Every method that applies a threshold takes it as ``threshold=``, None being
the result's default for that level and scorer.

Example:
    >>> from uqlm_bert.results import UQResult
    >>> UQResult({"prompts": ["q"], "bert_score": [0.9]}).flag(threshold=0.5)["flagged"].tolist()
    [False]
"""

from __future__ import annotations

from uqlm_bert.results._answers import Answer
from uqlm_bert.results._failures import Failures
from uqlm_bert.results._result import UQResult

__all__ = ["Answer", "Failures", "UQResult"]
