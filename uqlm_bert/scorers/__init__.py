"""Black-box confidence scorers over (response, sampled responses), and their registry.

- the names accepted in ``scorers=[...]``: :func:`available_scorers`; building them:
  :func:`build_scorers`;
- a scorer of your own: subclass :class:`Scorer` (or the pairwise template,
  :class:`PairwiseScorer`) and :func:`register_scorer` it;
- the settings of ``cosine_sim`` and ``exact_match``: :class:`CosineSettings`,
  :class:`ExactMatchSettings` (the BERTScore scorers': :class:`~uqlm_bert.BERTScoreSettings`).

The scorers themselves (``bert_score``, ``bert_score_precision``, ``bert_score_recall``,
``cosine_sim``, ``exact_match``, ``rouge_l``, ``bleu``) are built by name; their modules are
private.

Example:
    >>> from uqlm_bert.scorers import build_scorers
    >>> (scorer,) = build_scorers(["bert_score"])
    >>> conf = scorer.score(["Paris is the capital of France."],
    ...                     [["The capital of France is Paris.", None]])
    >>> conf.shape
    (1,)
"""

from uqlm_bert.scorers._base import PairwiseScorer, Scorer
from uqlm_bert.scorers._registry import available_scorers, build_scorers, register_scorer
from uqlm_bert.scorers._settings import CosineSettings, ExactMatchSettings

__all__ = [
    "CosineSettings",
    "ExactMatchSettings",
    "PairwiseScorer",
    "Scorer",
    "available_scorers",
    "build_scorers",
    "register_scorer",
]
