"""A packed forward pass for BERT and RoBERTa encoders: no work on padding outside attention.

The transformers forward pads every text of a batch to the longest one and runs every layer on
the padding too. Here the texts of a batch are concatenated ("packed") into one ``[tokens, dim]``
matrix: the embeddings, the fused query/key/value projection, the attention output projection,
the feed-forward layers and the layer norms all run on real tokens only. Only attention needs a
``[batch, length]`` layout, so each layer scatters its query/key/value rows into a padded buffer,
runs PyTorch's fused scaled-dot-product attention with a padding mask, and gathers the real rows
back.

The layers write into one preallocated workspace (``out=`` GEMMs, in-place activation) rather
than into fresh tensors: fresh tensors of tens of MB cost a page fault per 4 KiB on first touch,
which cost about a tenth of this pass's time on CPU before the workspace. Wrap several batches in
:meth:`PackedEncoder.reuse_workspace` to share the workspace between them too.

The arithmetic is the model's own (same weights, same operations, same order within each token),
so the output equals the transformers forward up to float rounding; the tests check the BERTScore
numbers against the reference package within 1e-5.

Example:
    >>> import torch
    >>> from uqlm_bert.bertscore.models import load_encoder
    >>> from uqlm_bert.bertscore.packed import PackedEncoder
    >>> from uqlm_bert.bertscore.settings import BERTScoreSettings
    >>> enc = load_encoder(BERTScoreSettings(num_layers=6, device="cpu"))
    >>> packed = PackedEncoder.from_model(enc.model)
    >>> ids = enc.tokenize(["A short text.", "A somewhat longer text than that one."])
    >>> out = packed(ids)
    >>> tuple(out.shape) == (sum(len(i) for i in ids), 384)
    True
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

__all__ = ["PackedEncoder"]

_WIDTH_MULTIPLE = 16

# In-place activations: the feed-forward's intermediate buffer is overwritten.
_ACTIVATIONS = {
    "gelu": lambda x: torch.ops.aten.gelu_(x),
    "gelu_new": lambda x: torch.ops.aten.gelu_(x, approximate="tanh"),
    "gelu_pytorch_tanh": lambda x: torch.ops.aten.gelu_(x, approximate="tanh"),
    "relu": torch.relu_,
}


@dataclass
class _Layer:
    """One layer's weights; the linear ones transposed once (views), not in every batch: each
    torch call counts (see the GIL note in :meth:`PackedEncoder.__call__`)."""

    qkv_weight_t: torch.Tensor  # [dim, 3 * dim]: the query, key and value weights, transposed
    qkv_bias: torch.Tensor
    out_weight_t: torch.Tensor
    out_bias: torch.Tensor
    norm1: torch.nn.LayerNorm
    inter_weight_t: torch.Tensor
    inter_bias: torch.Tensor
    output_weight_t: torch.Tensor
    output_bias: torch.Tensor
    norm2: torch.nn.LayerNorm

    @classmethod
    def of(cls, layer: torch.nn.Module) -> _Layer:
        att = layer.attention.self
        out, inter = layer.attention.output.dense, layer.intermediate.dense
        output = layer.output.dense
        return cls(
            qkv_weight_t=torch.cat([att.query.weight, att.key.weight, att.value.weight]).t(),
            qkv_bias=torch.cat([att.query.bias, att.key.bias, att.value.bias]),
            out_weight_t=out.weight.t(),
            out_bias=out.bias,
            norm1=layer.attention.output.LayerNorm,
            inter_weight_t=inter.weight.t(),
            inter_bias=inter.bias,
            output_weight_t=output.weight.t(),
            output_bias=output.bias,
            norm2=layer.output.LayerNorm,
        )


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
        self.act_ = _ACTIVATIONS[cfg.hidden_act]
        # RoBERTa numbers positions from padding_idx + 1.
        self.position_offset = (cfg.pad_token_id + 1) if cfg.model_type == "roberta" else 0
        self._local = threading.local()  # per-thread workspace, see reuse_workspace()
        self.layers = [_Layer.of(layer) for layer in model.encoder.layer]

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

    @contextlib.contextmanager
    def reuse_workspace(self) -> Iterator[None]:
        """Within this block, the batches this thread runs share one workspace, freed on exit.

        Fresh large buffers cost a page fault per 4 KiB on first touch; reusing one across the
        batches of a scoring call saves that. Outside the block each batch allocates its own.
        """
        local = self._local
        depth = getattr(local, "depth", 0)
        local.depth = depth + 1
        try:
            yield
        finally:
            local.depth = depth
            if depth == 0:
                local.buffer = None

    def _workspace(self, numel: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        local = self._local
        if getattr(local, "depth", 0) == 0:
            return torch.empty(numel, dtype=dtype, device=device)
        buf = getattr(local, "buffer", None)
        if buf is None or buf.numel() < numel or buf.dtype != dtype or buf.device != device:
            # batches come sorted by length, so grow with headroom for the next ones (at most
            # a quarter above this batch's need, so long texts do not hold much spare memory)
            size = numel if buf is None else max(numel, min(buf.numel() * 3 // 2, numel * 5 // 4))
            local.buffer = None  # free the old buffer before taking the new one
            buf = local.buffer = torch.empty(size, dtype=dtype, device=device)
        return buf[:numel]

    @torch.inference_mode()
    def __call__(
        self, batch: Sequence[Sequence[int]], all_layers: bool = False
    ) -> torch.Tensor | list[torch.Tensor]:
        """Last-layer hidden states of the token-id lists, packed: ``[sum of lengths, dim]``
        (split with ``torch.split(out, lengths)``); with ``all_layers``, a list of them, one per
        layer from the embeddings (0) to the last."""
        device = self.word.weight.device
        lens = [len(ids) for ids in batch]
        # The attention layout is padded to a multiple of 16 positions: PyTorch's CPU attention
        # kernel runs about 30% faster on such widths than on the ragged ones in between (190
        # keys take longer than 192), and the extra keys are masked out.
        n, width = len(lens), -(-max(lens) // _WIDTH_MULTIPLE) * _WIDTH_MULTIPLE
        # The index arrays are built in numpy, in a fixed number of torch calls: each torch call
        # gives up the GIL, and waits up to the switch interval (5 ms) to take it back while
        # another thread runs Python (the event loop of generate_and_score).
        flat_ids = torch.from_numpy(
            np.concatenate([np.asarray(ids, dtype=np.int64) for ids in batch])
        ).to(device)
        valid_np = np.arange(width)[None, :] < np.asarray(lens)[:, None]  # [n, width]
        rows_np = np.flatnonzero(valid_np)  # each token's row in the padded [n * width] layout
        rows = torch.from_numpy(rows_np).to(device)
        # each token's position id: its place in its text, from RoBERTa's offset
        pos = torch.from_numpy(rows_np % width + self.position_offset).to(device)
        valid = torch.from_numpy(valid_np).to(device)
        mask = valid[:, None, None, :]  # [n, 1, 1, width]: keys a query may attend to

        x = self.word(flat_ids) + self.position(pos)
        x = self.norm(x + self.token_type.weight[0])
        states = [x]
        if not self.layers:  # layer 0: the embeddings themselves
            return states if all_layers else x
        tokens, dim = x.shape
        heads, head_dim = self.heads, dim // self.heads
        ffn = self.layers[0].inter_bias.shape[0]
        padded = n * width
        # One workspace for every layer (and, under reuse_workspace, every batch): the GEMMs
        # write into it (``out=``) rather than into fresh tensors, whose pages would each cost a
        # page fault on first touch, once per operation and layer.
        sizes = (padded * 3 * dim, tokens * 3 * dim, tokens * dim, tokens * dim, tokens * ffn)
        parts = self._workspace(sum(sizes), x.dtype, device).split(sizes)
        qkv_pad = parts[0].view(padded, 3 * dim)  # q, k, v in the padded layout
        qkv = parts[1].view(tokens, 3 * dim)
        att = parts[2].view(tokens, dim)
        hidden = parts[3].view(tokens, dim)
        inter = parts[4].view(tokens, ffn)
        # Padded slots are never written after this: they stay 0 (finite, so masked keys add
        # exactly nothing) from layer to layer.
        qkv_pad.index_fill_(0, torch.from_numpy(np.flatnonzero(~valid_np)).to(device), 0.0)
        q, k, v = (
            qkv_pad.view(n, width, 3, heads, head_dim)[:, :, i].transpose(1, 2) for i in range(3)
        )
        for layer in self.layers:
            # one indexed copy into the attention layout, not one torch call per text (see above)
            torch.addmm(layer.qkv_bias, x, layer.qkv_weight_t, out=qkv)
            qkv_pad.index_put_((rows,), qkv)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # [n, heads, width, hd]
            torch.index_select(out.transpose(1, 2).reshape(padded, dim), 0, rows, out=att)
            torch.addmm(layer.out_bias, att, layer.out_weight_t, out=hidden).add_(x)
            x = layer.norm1(hidden)
            torch.addmm(layer.inter_bias, x, layer.inter_weight_t, out=inter)
            self.act_(inter)
            torch.addmm(layer.output_bias, inter, layer.output_weight_t, out=hidden).add_(x)
            x = layer.norm2(hidden)  # a new tensor: safe to keep while the workspace is reused
            if all_layers:
                states.append(x)
        return states if all_layers else x
