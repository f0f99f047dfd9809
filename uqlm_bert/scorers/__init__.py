"""Black-box confidence scorers over (response, sampled responses).

Example:
    >>> from uqlm_bert.scorers import build_scorer
    >>> scorer = build_scorer("bert_score")
    >>> conf = scorer.score(["Paris is the capital of France."],
    ...                     [["The capital of France is Paris.", None]])
    >>> conf.shape
    (1,)
"""

from uqlm_bert.scorers.base import (
    Scorer,
    available_scorers,
    build_scorer,
    build_scorers,
    mean_by_group,
    present_pairs,
    register_scorer,
    scorer_factory,
)

__all__ = [
    "Scorer",
    "available_scorers",
    "build_scorer",
    "build_scorers",
    "mean_by_group",
    "present_pairs",
    "register_scorer",
    "scorer_factory",
]
