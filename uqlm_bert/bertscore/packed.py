"""A packed forward pass for BERT and RoBERTa encoders: no work on padding outside attention.

The transformers forward pads every text of a batch to the longest one and runs every layer on
the padding too. Here the texts of a batch are concatenated ("packed") into one ``[tokens, dim]``
matrix: the embeddings, the fused query/key/value projection, the attention output projection,
the feed-forward layers and the layer norms all run on real tokens only. Only attention needs a
``[batch, length]`` layout, so each layer scatters its query/key/value rows into a padded buffer,
runs PyTorch's fused scaled-dot-product attention with a padding mask, and gathers the real rows
back.

The arithmetic is the model's own (same weights, same operations, same order within each token),
so the output equals the transformers forward up to float rounding; the tests check the BERTScore
numbers against the reference package within 1e-5.

Example:
    >>> import torch
    >>> from uqlm_bert.bertscore.encoder import load_encoder
    >>> from uqlm_bert.bertscore.packed import PackedEncoder
    >>> enc = load_encoder(None, num_layers=6, device="cpu")
    >>> packed = PackedEncoder.from_model(enc.model)
    >>> ids = enc.tokenize(["A short text.", "A somewhat longer text than that one."])
    >>> out = packed(ids)
    >>> tuple(out.shape) == (sum(len(i) for i in ids), 384)
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

__all__ = ["PackedEncoder"]

_ACTIVATIONS = {
    "gelu": lambda x: F.gelu(x),
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
}


@dataclass
class _Layer:
    qkv_weight: torch.Tensor
    qkv_bias: torch.Tensor
    out: torch.nn.Linear
    norm1: torch.nn.LayerNorm
    inter: torch.nn.Linear
    output: torch.nn.Linear
    norm2: torch.nn.LayerNorm


class PackedEncoder:
    """Runs a (layer-truncated) ``BertModel`` or ``RobertaModel`` on packed token sequences."""

    def __init__(self, model: torch.nn.Module) -> None:
        cfg = model.config
        emb = model.embeddings
        self.word = emb.word_embeddings
        self.position = emb.position_embeddings
        self.token_type = emb.token_type_embeddings
        self.norm = emb.LayerNorm
        self.heads = cfg.num_attention_heads
        self.act = _ACTIVATIONS[cfg.hidden_act]
        # RoBERTa numbers positions from padding_idx + 1.
        self.position_offset = (cfg.pad_token_id + 1) if cfg.model_type == "roberta" else 0
        self.layers = []
        for layer in model.encoder.layer:
            att = layer.attention.self
            self.layers.append(
                _Layer(
                    qkv_weight=torch.cat([att.query.weight, att.key.weight, att.value.weight]),
                    qkv_bias=torch.cat([att.query.bias, att.key.bias, att.value.bias]),
                    out=layer.attention.output.dense,
                    norm1=layer.attention.output.LayerNorm,
                    inter=layer.intermediate.dense,
                    output=layer.output.dense,
                    norm2=layer.output.LayerNorm,
                )
            )

    @classmethod
    def supports(cls, model: torch.nn.Module) -> bool:
        """Whether ``model`` is a plain BERT/RoBERTa encoder this pass reproduces exactly."""
        cfg = getattr(model, "config", None)
        return (
            type(model).__name__ in ("BertModel", "RobertaModel")
            and getattr(cfg, "model_type", None) in ("bert", "roberta")
            and getattr(cfg, "position_embedding_type", "absolute") == "absolute"
            and getattr(cfg, "hidden_act", None) in _ACTIVATIONS
            and not getattr(cfg, "is_decoder", False)
            and not getattr(cfg, "add_cross_attention", False)
            and hasattr(model, "embeddings")
            and hasattr(model.embeddings, "token_type_embeddings")
        )

    @classmethod
    def from_model(cls, model: torch.nn.Module) -> PackedEncoder | None:
        """A packed encoder for ``model``, or None when its architecture is not supported."""
        return cls(model) if cls.supports(model) else None

    @torch.inference_mode()
    def __call__(self, batch: Sequence[Sequence[int]]) -> torch.Tensor:
        """Last-layer hidden states of the token-id lists, packed: ``[sum of lengths, dim]``
        (split with ``torch.split(out, lengths)``)."""
        device = self.word.weight.device
        lens = [len(ids) for ids in batch]
        n, width = len(lens), max(lens)
        flat_ids = torch.from_numpy(
            np.concatenate([np.asarray(ids, dtype=np.int64) for ids in batch])
        ).to(device)
        pos = torch.cat([torch.arange(k) for k in lens]).to(device)
        seq = torch.repeat_interleave(torch.arange(n), torch.tensor(lens)).to(device)
        valid = torch.arange(width, device=device)[None, :] < torch.tensor(lens, device=device)[:, None]
        mask = valid[:, None, None, :]  # [n, 1, 1, width]: keys a query may attend to

        x = self.word(flat_ids) + self.position(pos + self.position_offset)
        x = self.norm(x + self.token_type.weight[0])
        dim = x.shape[-1]
        head_dim = dim // self.heads
        # q, k and v of every layer go into one zero-initialised [3, n, heads, width, head_dim]
        # buffer: padded slots are never written, so they stay 0 from layer to layer.
        qkv_buf = x.new_zeros((3, n, self.heads, width, head_dim))
        for layer in self.layers:
            qkv = F.linear(x, layer.qkv_weight, layer.qkv_bias)
            qkv_buf[:, seq, :, pos, :] = qkv.view(-1, 3, self.heads, head_dim)
            att = F.scaled_dot_product_attention(qkv_buf[0], qkv_buf[1], qkv_buf[2], attn_mask=mask)
            att = att[seq, :, pos, :].reshape(-1, dim)  # real rows back, [tokens, dim]
            x = layer.norm1(layer.out(att) + x)
            x = layer.norm2(layer.output(self.act(layer.inter(x))) + x)
        return x
