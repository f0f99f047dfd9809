"""What a run gives back: :class:`UQResult` (answers, samples, confidences and failures) and
:class:`SentenceUQResult`; the failed calls grouped by kind (:mod:`~uqlm_bert.results._failures`)
and the warning for samples that are all identical
(:mod:`~uqlm_bert.results._identical_samples`).

Example:
    >>> from uqlm_bert.results import UQResult
    >>> UQResult({"prompts": ["q"], "bert_score": [0.9]}).flag(0.5)["flagged"].tolist()
    [False]
"""

from __future__ import annotations

from uqlm_bert.results._result import SentenceUQResult, UQResult

__all__ = ["SentenceUQResult", "UQResult"]
