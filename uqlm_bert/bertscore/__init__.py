"""The BERTScore engine: settings, the ``bert_score``-compatible scorer, known models, baselines.

- every setting that changes a number: :class:`BERTScoreSettings`;
- the ``bert_score``-compatible engine: :class:`BERTScorer` (both also from ``uqlm_bert``);
- the published layer of each known model: :data:`MODEL_LAYERS`;
- a rescaling baseline for a model that has none, in the ``bert_score`` format:
  :func:`compute_baseline`;
- the loaded models, freed: :func:`clear_model_cache`.

The modules behind them are private (model loading, the packed encoder, greedy matching, idf,
windows, token supports, ...; see docs/architecture.md). Names are imported on first use (torch
and transformers load only then).

Example:
    >>> from uqlm_bert.bertscore import BERTScorer, MODEL_LAYERS
    >>> MODEL_LAYERS["distilbert-base-uncased"]
    5
"""

from uqlm_bert._lazy import lazy_exports

__all__ = [
    "BERTScoreSettings",
    "BERTScorer",
    "MODEL_LAYERS",
    "clear_model_cache",
    "compute_baseline",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "BERTScoreSettings": "uqlm_bert.bertscore._settings",
        "BERTScorer": "uqlm_bert.bertscore._engine",
        "MODEL_LAYERS": "uqlm_bert.bertscore._known_models",
        "clear_model_cache": "uqlm_bert.bertscore._cache",
        "compute_baseline": "uqlm_bert.bertscore._baseline",
    },
)
