"""Black-box confidence scorers over (response, sampled responses), and their registry.

==================  ===================================================================
module              what it holds
==================  ===================================================================
``base``            the :class:`Scorer` contract, the :class:`PairwiseScorer` template
                    and :func:`score_all`
``registry``        names in ``scorers=[...]``: registering and building scorers, and
                    building their settings objects once
``settings``        the settings objects of ``cosine_sim`` and ``exact_match``, and the
                    shape every scorer family's settings class has
``bert``            ``bert_score``, ``bert_score_precision``, ``bert_score_recall``
``cosine``          ``cosine_sim``: sentence-embedding cosine
``text``            ``exact_match``, ``rouge_l``, ``bleu``: no model needed
``sentences``       sentence-level scores, SelfCheckGPT style, and sentence splitting
==================  ===================================================================

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
