"""A packed forward pass for BERT, RoBERTa and MPNet encoders: no work on padding outside attention.

The transformers forward pads every text of a batch to the longest one and runs every layer on
the padding too. Here the texts of a batch are concatenated ("packed") into one ``[tokens, dim]``
matrix: the embeddings, the fused query/key/value projection, the attention output projection,
the feed-forward layers and the layer norms all run on real tokens only. Only attention needs a
``[batch, length]`` layout, so each layer scatters its query/key/value rows into a padded buffer,
runs PyTorch's fused scaled-dot-product attention with a padding mask, and gathers the real rows
back.

MPNet differs from BERT in two places, both reproduced: its position embeddings are numbered
from ``padding_idx + 1`` as RoBERTa's (and it has no token type), and every layer adds a
relative position bias to the attention scores, one ``[heads, query, key]`` table per batch
from the encoder's own bucketing, shared by the layers. That bias goes to the attention kernel
as a float mask together with the padding (``-inf`` on padded keys); the mask is ``heads``
times the size of a boolean padding mask, so it is built for a group of texts at a time
(``_MASK_ELEMENTS`` at most), once per batch where every group's mask fits in
``_MASKS_KEPT`` elements together, else again in each layer.

The layers write into one preallocated workspace (``out=`` GEMMs, in-place activation) rather
than into fresh tensors: fresh tensors of tens of MB cost a page fault per 4 KiB on first touch,
which cost about a tenth of this pass's time on CPU before the workspace. Wrap several batches in
:meth:`PackedEncoder.reuse_workspace` to share the workspace between them too.

The arithmetic is the model's own (same weights, same operations, same order within each token),
so the output equals the transformers forward up to float rounding; the tests check the BERTScore
numbers against the reference package within 1e-5.

Example:
    >>> import torch
    >>> from uqlm_bert.bertscore._loading import load_encoder
    >>> from uqlm_bert.bertscore._packed_forward import PackedEncoder
    >>> from uqlm_bert.bertscore._settings import BERTScoreSettings
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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

__all__ = ["PackedEncoder", "to_device"]

_WIDTH_MULTIPLE = 16
# Where the compute plan says so (bfloat16 on the CPU), the row-wise GEMMs of a batch of at least
# _ROW_ROUNDING_FROM tokens run on a multiple of _ROW_MULTIPLE rows: oneDNN's bfloat16 GEMM is
# much slower per row for some row counts than for the next multiple of 256, and the at most
# 255 spare rows are under 1.6% of such a batch. Float32 GEMMs have no such counts, and on
# smaller batches the spare rows cost more than they save (the measurements are in
# benchmarks/RESULTS.md).
_ROW_MULTIPLE = 256
_ROW_ROUNDING_FROM = 1 << 14
# MPNet's float attention masks (relative position bias plus padding): at most this many
# elements per group of texts (32 MiB in bfloat16), and the groups' masks are kept from layer to
# layer where they hold at most _MASKS_KEPT elements together (else made again in each layer).
_MASK_ELEMENTS = 1 << 24
_MASKS_KEPT = 1 << 26

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
        if hasattr(layer.attention, "attn"):  # MPNet: q, k, v and o beside the attention's norm
            att = layer.attention.attn
            q, k, v, out = att.q, att.k, att.v, att.o
            norm1 = layer.attention.LayerNorm
        else:  # BERT, RoBERTa
            att = layer.attention.self
            q, k, v = att.query, att.key, att.value
            out, norm1 = layer.attention.output.dense, layer.attention.output.LayerNorm
        inter, output = layer.intermediate.dense, layer.output.dense
        return cls(
            qkv_weight_t=torch.cat([q.weight, k.weight, v.weight]).t(),
            qkv_bias=torch.cat([q.bias, k.bias, v.bias]),
            out_weight_t=out.weight.t(),
            out_bias=out.bias,
            norm1=norm1,
            inter_weight_t=inter.weight.t(),
            inter_bias=inter.bias,
            output_weight_t=output.weight.t(),
            output_bias=output.bias,
            norm2=layer.output.LayerNorm,
        )


class PackedEncoder:
    """Runs a (layer-truncated) ``BertModel``, ``RobertaModel`` or ``MPNetModel`` on packed
    token sequences.

    Args:
        model: the model, on its device and in its dtype.
        round_rows: run a big batch's row-wise steps on a multiple of 256 rows (what the
            compute plan decides: :attr:`~uqlm_bert.bertscore._resolve.ComputePlan.round_rows`).
    """

    def __init__(self, model: torch.nn.Module, round_rows: bool = False) -> None:
        cfg = model.config
        emb = model.embeddings
        self.word = emb.word_embeddings.weight
        # the position embeddings with the (only) token type's added once, not in every batch
        token_type = getattr(emb, "token_type_embeddings", None)
        self.pos_type = emb.position_embeddings.weight
        if token_type is not None:
            self.pos_type = self.pos_type + token_type.weight[0]
        self.norm = emb.LayerNorm
        # read once: every attribute of a tensor read per batch is a torch call
        self.device, self.dtype = self.word.device, self.word.dtype
        self.round_rows = round_rows
        self.dim = int(cfg.hidden_size)
        self.ffn = int(cfg.intermediate_size)
        self.heads = cfg.num_attention_heads
        self.act_ = _ACTIVATIONS[cfg.hidden_act]
        # RoBERTa and MPNet number positions from padding_idx + 1.
        self.position_offset = 0
        if cfg.model_type == "roberta":
            self.position_offset = cfg.pad_token_id + 1
        elif cfg.model_type == "mpnet":
            self.position_offset = emb.padding_idx + 1
        # MPNet: the encoder whose relative position bias every layer adds to its scores
        self.relative = model.encoder if cfg.model_type == "mpnet" else None
        self._local = threading.local()  # per-thread workspace, see reuse_workspace()
        self.layers = [_Layer.of(layer) for layer in model.encoder.layer]

    @classmethod
    def supports(cls, model: torch.nn.Module) -> bool:
        """Whether ``model`` is a plain BERT/RoBERTa/MPNet encoder this pass reproduces exactly."""
        cfg = getattr(model, "config", None)
        kind = (type(model).__name__, getattr(cfg, "model_type", None))
        if kind == ("MPNetModel", "mpnet"):
            enc = getattr(model, "encoder", None)
            return (
                getattr(cfg, "hidden_act", None) in _ACTIVATIONS
                and hasattr(model, "embeddings")
                and isinstance(getattr(model.embeddings, "padding_idx", None), int)
                and hasattr(enc, "compute_position_bias")
                and hasattr(enc, "relative_attention_bias")
            )
        return (
            kind in (("BertModel", "bert"), ("RobertaModel", "roberta"))
            and getattr(cfg, "position_embedding_type", "absolute") == "absolute"
            and getattr(cfg, "hidden_act", None) in _ACTIVATIONS
            and not getattr(cfg, "is_decoder", False)
            and not getattr(cfg, "add_cross_attention", False)
            and hasattr(model, "embeddings")
            and hasattr(model.embeddings, "token_type_embeddings")
        )

    @classmethod
    def from_model(cls, model: torch.nn.Module, round_rows: bool = False) -> PackedEncoder | None:
        """A packed encoder for ``model``, or None when its architecture is not supported."""
        return cls(model, round_rows) if cls.supports(model) else None

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

    def release_workspace(self) -> None:
        """Drop this thread's shared workspace now (the next batch allocates a fresh one)."""
        self._local.buffer = None

    def _workspace(self, numel: int) -> torch.Tensor:
        """A flat buffer of at least ``numel`` elements (the shared one within
        :meth:`reuse_workspace`); its size is tracked here so that checking it costs no torch
        call."""
        local = self._local
        if getattr(local, "depth", 0) == 0:
            return torch.empty(numel, dtype=self.dtype, device=self.device)
        buf = getattr(local, "buffer", None)
        if buf is None or local.size < numel:
            # batches come sorted by length, so grow with headroom for the next ones (at most
            # a quarter above this batch's need, so long texts do not hold much spare memory)
            size = numel if buf is None else max(numel, min(local.size * 3 // 2, numel * 5 // 4))
            local.buffer = None  # free the old buffer before taking the new one
            buf = local.buffer = torch.empty(size, dtype=self.dtype, device=self.device)
            local.size = size
        return buf

    @torch.inference_mode()
    def __call__(
        self, batch: Sequence[Sequence[int]], all_layers: bool = False
    ) -> torch.Tensor | list[torch.Tensor]:
        """Last-layer hidden states of the token-id lists, packed: ``[sum of lengths, dim]``
        (split with ``torch.split(out, lengths)``); with ``all_layers``, a list of them, one per
        layer from the embeddings (0) to the last."""
        device = self.device
        lens = np.fromiter((len(ids) for ids in batch), dtype=np.int64, count=len(batch))
        # The attention layout is padded to a multiple of 16 positions: PyTorch's CPU attention
        # kernel runs about 30% faster on such widths than on the ragged ones in between (190
        # keys take longer than 192), and the extra keys are masked out.
        n, width = len(lens), -(-int(lens.max()) // _WIDTH_MULTIPLE) * _WIDTH_MULTIPLE
        tokens, padded = int(lens.sum()), n * width
        # The row-wise steps (GEMMs, norms, activation) run on ``m`` rows: the tokens and, in a
        # big batch, a few spare rows up to a multiple of _ROW_MULTIPLE (see there); spare rows
        # read token 0 at position 0 and are dropped at the end.
        m = tokens
        if self.round_rows and tokens >= _ROW_ROUNDING_FROM:
            m = -(-tokens // _ROW_MULTIPLE) * _ROW_MULTIPLE
        # Everything the pass indexes with is built in numpy and reaches the device as one array
        # (and one mask): a fixed number of torch calls and host-to-device copies per batch,
        # whatever its number of texts. Each torch call gives up the GIL, and waits up to the
        # switch interval (5 ms) to take it back while another thread runs Python (the event
        # loop of generate_and_score); on a GPU each copy is a transfer of its own.
        valid_np = np.arange(width)[None, :] < lens[:, None]  # [n, width]
        rows_np = np.flatnonzero(valid_np)  # each token's row in the padded [n * width] layout
        flat = np.zeros(3 * m + (padded - tokens), dtype=np.int64)  # spare rows: all 0
        np.concatenate([np.asarray(ids, dtype=np.int64) for ids in batch], out=flat[:tokens])
        flat[m : m + tokens] = rows_np
        # each token's position id: its place in its text, from RoBERTa's offset
        np.add(rows_np % width, self.position_offset, out=flat[2 * m : 2 * m + tokens])
        flat[2 * m + tokens : 3 * m] = self.position_offset
        flat[3 * m :] = np.flatnonzero(~valid_np)  # the padding slots
        ints = to_device(torch.from_numpy(flat), device)
        flat_ids, rows_m, pos, pad_rows = ints.split([m, m, m, padded - tokens])
        rows = rows_m[:tokens]
        # [n, 1, 1, width]: the keys a query may attend to
        mask = to_device(torch.from_numpy(valid_np.reshape(n, 1, 1, width)), device)
        attend = self._attention(mask, n, width)

        x = self.norm(F.embedding(flat_ids, self.word) + F.embedding(pos, self.pos_type))
        states = [x[:tokens]]
        if not self.layers:  # layer 0: the embeddings themselves
            return states if all_layers else x[:tokens]
        dim, ffn, heads = self.dim, self.ffn, self.heads
        head_dim = dim // heads
        # One workspace for every layer (and, under reuse_workspace, every batch): the GEMMs
        # write into it (``out=``) rather than into fresh tensors, whose pages would each cost a
        # page fault on first touch, once per operation and layer. It holds q/k/v in the padded
        # attention layout, then one region shared by the packed q/k/v, the attention output
        # and the feed-forward's intermediate (each is dead before the next is written), then
        # the residual stream. The views are cut with as_strided, one torch call each.
        shared = m * max(3 * dim, ffn)
        buf = self._workspace(padded * 3 * dim + shared + m * dim)
        at = 0  # a buffer of its own, from its first element
        qkv_pad = torch.as_strided(buf, (padded, 3 * dim), (3 * dim, 1), at)
        # q, k and v of the padded layout as [3, n, heads, width, head_dim] views
        q, k, v = torch.as_strided(
            buf,
            (3, n, heads, width, head_dim),
            (dim, width * 3 * dim, head_dim, 3 * dim, 1),
            at,
        ).unbind(0)
        at += padded * 3 * dim
        qkv = torch.as_strided(buf, (m, 3 * dim), (3 * dim, 1), at)
        qkv_tokens = qkv[:tokens]
        att = torch.as_strided(buf, (m, dim), (dim, 1), at)
        inter = torch.as_strided(buf, (m, ffn), (ffn, 1), at)
        hidden = torch.as_strided(buf, (m, dim), (dim, 1), at + shared)
        # Padded slots are never written after this: they stay 0 (finite, so masked keys add
        # exactly nothing) from layer to layer.
        qkv_pad.index_fill_(0, pad_rows, 0.0)
        for layer in self.layers:
            # one indexed copy into the attention layout, not one torch call per text (see above)
            torch.addmm(layer.qkv_bias, x, layer.qkv_weight_t, out=qkv)
            qkv_pad.index_put_((rows,), qkv_tokens)
            out = attend(q, k, v)  # [n, heads, width, head_dim]
            # spare rows take slot 0's output: finite, and read by no real token
            torch.index_select(out.transpose(1, 2).reshape(padded, dim), 0, rows_m, out=att)
            torch.addmm(layer.out_bias, att, layer.out_weight_t, out=hidden).add_(x)
            x = layer.norm1(hidden)
            torch.addmm(layer.inter_bias, x, layer.inter_weight_t, out=inter)
            self.act_(inter)
            torch.addmm(layer.output_bias, inter, layer.output_weight_t, out=hidden).add_(x)
            x = layer.norm2(hidden)  # a new tensor: safe to keep while the workspace is reused
            if all_layers:
                states.append(x[:tokens])
        return states if all_layers else x[:tokens]

    def _attention(
        self, mask: torch.Tensor, n: int, width: int
    ) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]:
        """The attention of a batch, ``(q, k, v) -> [n, heads, width, head_dim]``: fused
        scaled-dot-product attention under the padding mask; for MPNet under float masks of the
        relative position bias and the padding, a group of texts at a time (see the module
        doc)."""
        if self.relative is None:
            return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        # [1, heads, width, width], by the encoder's own bucketing, in the model's dtype
        bias = self.relative.compute_position_bias(
            torch.empty((1, width, 0), dtype=self.dtype, device=self.device)
        )
        keys = torch.zeros((n, 1, 1, width), dtype=self.dtype, device=self.device)
        keys.masked_fill_(~mask, float("-inf"))
        per_text = self.heads * width * width
        group = max(1, _MASK_ELEMENTS // per_text)
        starts = range(0, n, group)

        def masks() -> Iterator[torch.Tensor]:
            return (bias + keys[s : s + group] for s in starts)

        kept = list(masks()) if n * per_text <= _MASKS_KEPT else None

        def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            outs = [
                F.scaled_dot_product_attention(
                    q[s : s + group], k[s : s + group], v[s : s + group], attn_mask=m
                )
                for s, m in zip(starts, kept if kept is not None else masks(), strict=True)
            ]
            return outs[0] if len(outs) == 1 else torch.cat(outs)

        return attend


def to_device(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host tensor on ``device``: as it is on the CPU; on a GPU through pinned memory, so the
    copy is queued behind the work already issued instead of waiting for it."""
    if device.type == "cpu":
        return t
    if device.type == "cuda":
        t = t.pin_memory()
    return t.to(device, non_blocking=True)
