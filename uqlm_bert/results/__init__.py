"""What a run gives back: :class:`UQResult`, one shape per level, each keyed by ``prompt_index``.

- answers: ``result.to_df()`` (indexed by ``prompt_index``), ``flag()``, ``filter()``,
  ``calibrate()`` (a result of the same type and columns), ``refine()`` (each answer with its
  unsupported sentences removed);
- words: ``result.words()``, each word of every answer with how well its samples support it;
- sentences: ``result.sentences()``, each sentence with its support and whether it is flagged
  (``BlackBoxUQ.score_sentences`` gives the same table);
- one answer: ``result.answer(prompt_index)`` (or ``answer(position=...)``), an :class:`Answer`
  shown with its weak words marked and its unsupported sentences struck through;
- the failed calls, grouped by kind: ``result.failures()``, a :class:`Failures`.

Example:
    >>> from uqlm_bert.results import UQResult
    >>> UQResult({"prompts": ["q"], "bert_score": [0.9]}).flag(0.5)["flagged"].tolist()
    [False]
"""

from __future__ import annotations

from typing import Any

from uqlm_bert._warn import warn_user
from uqlm_bert.results._answers import Answer
from uqlm_bert.results._failures import FailureGroup, Failures
from uqlm_bert.results._result import UQResult

__all__ = ["Answer", "FailureGroup", "Failures", "UQResult"]


def __getattr__(name: str) -> Any:
    if name == "SentenceUQResult":  # earlier releases' result of score_sentences
        import pandas as pd

        warn_user(
            "SentenceUQResult is gone: BlackBoxUQ.score_sentences returns the sentence table (a "
            "pandas DataFrame, the columns of UQResult.sentences())",
            FutureWarning,
        )
        return pd.DataFrame
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
