"""Black-box confidence scorers over (response, sampled responses), and their registry.

- the contract and the template: :class:`Scorer`, :class:`PairwiseScorer`, :func:`score_all`,
  :func:`score_with_supports`, :func:`mean_by_group`;
- the names accepted in ``scorers=[...]``: :func:`available_scorers`, :func:`register_scorer`,
  :func:`build_scorer`, :func:`build_scorers`, :class:`ScorerSpec`, :func:`check_scorer_names`,
  and :class:`ScorerPlan`, an entry point's scorers read once (:data:`DEFAULT_SCORERS` when none
  are named), with their settings built once (:func:`scorer_settings`);
- the settings of ``cosine_sim`` and ``exact_match``: :class:`CosineSettings`,
  :class:`ExactMatchSettings` (the BERTScore scorers': :class:`~uqlm_bert.BERTScoreSettings`);
- the ``bert_score`` scorer's default threshold at its default settings: :data:`DEFAULT_THRESHOLD`.

The scorers themselves (``bert_score``, ``bert_score_precision``, ``bert_score_recall``,
``cosine_sim``, ``exact_match``, ``rouge_l``, ``bleu``) are built by name; their modules are
private.

Example:
    >>> from uqlm_bert.scorers import build_scorer
    >>> scorer = build_scorer("bert_score")
    >>> conf = scorer.score(["Paris is the capital of France."],
    ...                     [["The capital of France is Paris.", None]])
    >>> conf.shape
    (1,)
"""

from uqlm_bert.scorers._base import (
    PairwiseScorer,
    Scorer,
    mean_by_group,
    score_all,
    score_with_supports,
)
from uqlm_bert.scorers._bertscore import DEFAULT_THRESHOLD
from uqlm_bert.scorers._registry import (
    DEFAULT_SCORERS,
    ScorerPlan,
    ScorerSpec,
    available_scorers,
    build_scorer,
    build_scorers,
    check_scorer_names,
    register_scorer,
    scorer_settings,
    scorer_spec,
)
from uqlm_bert.scorers._settings import CosineSettings, ExactMatchSettings

__all__ = [
    "DEFAULT_SCORERS",
    "DEFAULT_THRESHOLD",
    "ScorerPlan",
    "CosineSettings",
    "ExactMatchSettings",
    "PairwiseScorer",
    "Scorer",
    "ScorerSpec",
    "available_scorers",
    "build_scorer",
    "build_scorers",
    "check_scorer_names",
    "mean_by_group",
    "register_scorer",
    "score_all",
    "score_with_supports",
    "scorer_settings",
    "scorer_spec",
]
