"""The BERTScore engine: settings, model loading, embedding, greedy matching, idf and baselines.

=============================================  ==========================================================
what                                           names
=============================================  ==========================================================
every setting that changes a number            :class:`BERTScoreSettings`
the ``bert_score``-compatible engine           :class:`BERTScorer`
loading a settings object's model, tokenizer   :func:`load_encoder`, :func:`load_tokenizer`,
                                               :func:`resolve_device`, :func:`clear_model_cache`
greedy matching: P, R, F1 from similarities    :func:`greedy_match`, :func:`greedy_match_padded`
idf weights                                    :class:`IdfWeights`, :func:`idf_from_token_ids`
rescaling baselines                            :func:`find_baseline`, :func:`read_baseline`,
                                               :func:`compute_baseline`, :func:`rescale`
published layers, the embedded model           :data:`MODEL_LAYERS`, :data:`EMBEDDED_MODEL_NAME`,
                                               :data:`LANG_MODELS`
where an answer is unsupported                 :class:`TokenSupport`, :data:`WEAK_SUPPORT`,
                                               :data:`SENTENCE_THRESHOLD`
=============================================  ==========================================================

The modules behind them are private (``_engine``, ``_settings``, ``_loading``, ...; see
docs/architecture.md). Names are imported on first use (torch and transformers load only then).

Example:
    >>> from uqlm_bert.bertscore import BERTScorer, MODEL_LAYERS
    >>> MODEL_LAYERS["distilbert-base-uncased"]
    5
"""

from uqlm_bert._lazy import lazy_exports

__all__ = [
    "BERTScoreSettings",
    "BERTScorer",
    "EMBEDDED_MODEL_NAME",
    "LANG_MODELS",
    "MODEL_LAYERS",
    "SENTENCE_THRESHOLD",
    "TokenSupport",
    "WEAK_SUPPORT",
    "IdfWeights",
    "clear_model_cache",
    "compute_baseline",
    "find_baseline",
    "greedy_match",
    "greedy_match_padded",
    "idf_from_token_ids",
    "load_encoder",
    "load_tokenizer",
    "read_baseline",
    "rescale",
    "resolve_device",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "BERTScoreSettings": "uqlm_bert.bertscore._settings",
        "BERTScorer": "uqlm_bert.bertscore._engine",
        "EMBEDDED_MODEL_NAME": "uqlm_bert.bertscore._known_models",
        "LANG_MODELS": "uqlm_bert.bertscore._known_models",
        "MODEL_LAYERS": "uqlm_bert.bertscore._known_models",
        "SENTENCE_THRESHOLD": "uqlm_bert.bertscore._token_support",
        "TokenSupport": "uqlm_bert.bertscore._token_support",
        "WEAK_SUPPORT": "uqlm_bert.bertscore._token_support",
        "IdfWeights": "uqlm_bert.bertscore._idf",
        "clear_model_cache": "uqlm_bert.bertscore._cache",
        "compute_baseline": "uqlm_bert.bertscore._baseline",
        "find_baseline": "uqlm_bert.bertscore._baseline",
        "greedy_match": "uqlm_bert.bertscore._matching",
        "greedy_match_padded": "uqlm_bert.bertscore._matching",
        "idf_from_token_ids": "uqlm_bert.bertscore._idf",
        "load_encoder": "uqlm_bert.bertscore._loading",
        "load_tokenizer": "uqlm_bert.bertscore._loading",
        "read_baseline": "uqlm_bert.bertscore._baseline",
        "rescale": "uqlm_bert.bertscore._baseline",
        "resolve_device": "uqlm_bert.bertscore._resolve",
    },
)
