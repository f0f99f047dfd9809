"""The BERTScore engine: settings, model loading, embedding, greedy matching, idf and baselines.

==========================  ========================================================================
module                      what it holds
==========================  ========================================================================
``settings``                :class:`BERTScoreSettings`, every setting that changes a number
``engine``                  :class:`BERTScorer`, the ``bert_score``-compatible engine
``models``                  loading a settings object's model and tokenizer: :func:`load_encoder`
``resolve``                 the resolver: settings, machine and model into decisions, once (plans)
``cache``                   the one cache of loaded models and tokenizers
``layer_stack``             where a model keeps its layers: counting them, keeping the first k
``encoder``                 tokenizing and embedding with a loaded model, which carries its plans
``batching``                the one way texts reach the model: windows, batches, out of memory
``packed``                  the packed BERT/RoBERTa forward pass
``matching``                greedy matching: P, R, F1 from token similarities
``idf``, ``fixed_idf``      idf weights: from documents, from a mapping, the shipped fixed table
``baseline``                rescaling baselines: files, lookup, computing new ones
``layers``                  published default layers, the embedded model, models per language
==========================  ========================================================================

Names are imported on first use (torch and transformers load only then).

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
