"""The BERTScore engine: model loading, embedding, greedy matching, idf and baselines.

Example:
    >>> from uqlm_bert.bertscore import BERTScorer, MODEL_LAYERS
    >>> MODEL_LAYERS["distilbert-base-uncased"]
    5
"""

from uqlm_bert.bertscore.baseline import compute_baseline, find_baseline, read_baseline, rescale
from uqlm_bert.bertscore.encoder import clear_encoder_cache, load_encoder, resolve_device
from uqlm_bert.bertscore.idf import IdfWeights, idf_from_token_ids
from uqlm_bert.bertscore.layers import EMBEDDED_MODEL_NAME, MODEL_LAYERS
from uqlm_bert.bertscore.matching import greedy_match, greedy_match_padded
from uqlm_bert.bertscore.scorer import BERTScorer

__all__ = [
    "BERTScorer",
    "EMBEDDED_MODEL_NAME",
    "MODEL_LAYERS",
    "IdfWeights",
    "clear_encoder_cache",
    "compute_baseline",
    "find_baseline",
    "greedy_match",
    "greedy_match_padded",
    "idf_from_token_ids",
    "load_encoder",
    "read_baseline",
    "rescale",
    "resolve_device",
]
