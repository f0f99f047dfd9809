"""Tiny transformer models built by the tests themselves (random weights, no download)."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from tests.helpers.texts import LONG, SHORT

#: what every tiny model shares: a width of 32 in two heads
SMALL = {"hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 64}
#: the special tokens' ids of the RoBERTa and MPNet vocabularies built here
SPECIAL_IDS = {"pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2}


def build_tiny_bert(directory: Path, vocab_dir: str, layers: int = 3) -> Path:
    """A 3-layer BERT with the embedded model's WordPiece vocabulary and random weights."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(vocab_dir)
    config = BertConfig(
        vocab_size=tok.vocab_size, num_hidden_layers=layers, max_position_embeddings=64, **SMALL
    )
    BertModel(config).save_pretrained(directory)
    tok.model_max_length = 64
    tok.save_pretrained(directory)
    return directory


def build_tiny_roberta(directory: Path, layers: int = 3) -> Path:
    """A 3-layer RoBERTa with a byte-level BPE vocabulary trained on the test texts."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaConfig, RobertaModel, RobertaTokenizer

    directory.mkdir(parents=True, exist_ok=True)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        SHORT + LONG,
        vocab_size=400,
        min_frequency=1,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
    )
    bpe.save_model(str(directory))
    tok = RobertaTokenizer.from_pretrained(str(directory))
    tok.model_max_length = 128
    tok.save_pretrained(directory)
    torch.manual_seed(0)
    config = RobertaConfig(
        vocab_size=len(json.loads((directory / "vocab.json").read_text())),
        num_hidden_layers=layers,
        max_position_embeddings=130,
        **SMALL,
        **SPECIAL_IDS,
    )
    RobertaModel(config).save_pretrained(directory)
    return directory


def build_tiny_mpnet(directory: Path, vocab_dir: str, layers: int = 3) -> Path:
    """A 3-layer MPNet (relative position bias, positions from ``padding_idx + 1``) with random
    weights and an MPNet tokenizer over the embedded model's WordPiece vocabulary, read up to 130
    tokens at once: long enough for the bias's far buckets."""
    from transformers import MPNetConfig, MPNetModel, MPNetTokenizer

    directory.mkdir(parents=True, exist_ok=True)
    words = (Path(vocab_dir) / "vocab.txt").read_text(encoding="utf-8").splitlines()
    specials = ["<s>", "<pad>", "</s>", "<unk>"]
    vocab = [*specials, *words, "<mask>"]  # the tokenizer's unknown token stays [UNK]
    (directory / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tok = MPNetTokenizer(str(directory / "vocab.txt"), do_lower_case=True)
    tok.model_max_length = 130
    tok.save_pretrained(directory)
    torch.manual_seed(0)
    config = MPNetConfig(
        vocab_size=len(vocab),
        num_hidden_layers=layers,
        max_position_embeddings=132,
        **SMALL,
        **SPECIAL_IDS,
    )
    model = MPNetModel(config)
    with torch.no_grad():  # a bias that matters: random, as large as the scores
        model.encoder.relative_attention_bias.weight.normal_(0.0, 1.0)
    model.save_pretrained(directory)
    return directory
