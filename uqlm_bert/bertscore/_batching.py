"""Embedding many token-id sequences in forward batches, and surviving out-of-memory errors.

:func:`embed_texts` is the one place texts reach the model while scoring, for BERTScore and
``cosine_sim`` alike: a text longer than the model's window is read in windows where the
encoder's reading plan says so (see :mod:`uqlm_bert.bertscore._windows`), and every sequence
goes through :func:`embed_in_batches`. Give that token-id sequences sorted by length and it
runs them in batches sized by a count of texts and a budget of padded tokens
(:func:`plan_batches`), returns their packed embeddings in order, and splits any batch that
runs out of device memory into halves, down to a single sequence. A sequence that does not fit
alone raises :class:`~uqlm_bert.DeviceOutOfMemoryError`, which names its length and
what to change. Nothing computed before the split is lost, and the ``on_embedded`` callback
hears of each sequence exactly once, when its embeddings exist.

Example:
    >>> from uqlm_bert.bertscore._loading import load_encoder
    >>> from uqlm_bert.bertscore._settings import BERTScoreSettings
    >>> enc = load_encoder(BERTScoreSettings(num_layers=5, device="cpu"))
    >>> ids = sorted(enc.tokenize(["A cat.", "The cat sat on the mat.", "Hi"]), key=len)
    >>> plan_batches([len(i) for i in ids], max_texts=2, max_tokens=None)
    [(0, 2), (2, 3)]
    >>> [tuple(t.shape) for t in embed_in_batches(enc, ids, max_texts=2)]
    [(8, 384), (9, 384)]
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import torch

from uqlm_bert._exceptions import DeviceOutOfMemoryError
from uqlm_bert.bertscore._windows import split_in_windows

if TYPE_CHECKING:
    import numpy as np

    from uqlm_bert.bertscore._encoder import Encoder

__all__ = [
    "default_token_budget",
    "embed_in_batches",
    "embed_texts",
    "is_out_of_memory",
    "plan_batches",
    "too_long_message",
]

logger = logging.getLogger("uqlm_bert")

# Padded tokens per forward pass on the CPU: big enough that the per-batch torch calls are few
# per text (each waits for the GIL beside generate_and_score's event loop), small enough that
# the workspace stays a few hundred MB.
CPU_TOKEN_BUDGET = 1 << 15
# On the CPU a batch also stops growing before its padded attention (texts times width squared)
# exceeds its texts' own by more than this share: attention is the one step of the packed pass
# that works on padding, and one batch of texts from 50 to 400 tokens spends most of its
# attention on it (the time this saves is in benchmarks/RESULTS.md).
CPU_ATTENTION_PADDING = 0.25
# On an accelerator: the most padded tokens per forward pass, and the share of the device's free
# memory (when it can be read) that one pass's activations may take.
ACCELERATOR_TOKEN_BUDGET = 1 << 17
_FREE_MEMORY_SHARE = 0.25
# Activations of one token in one pass, in elements of hidden size: the packed pass's workspace
# (padded q/k/v, one shared region, the residual), the attention output and the layer norms'
# outputs, with headroom.
_ELEMENTS_PER_TOKEN_PER_DIM = 16


def default_token_budget(device: torch.device, hidden_size: int, element_size: int) -> int:
    """Padded tokens per forward pass by default on ``device``.

    The CPU gets :data:`CPU_TOKEN_BUDGET`; a CUDA device :data:`ACCELERATOR_TOKEN_BUDGET`,
    lowered so that one pass's activations take at most a quarter of its free memory; other
    accelerators :data:`ACCELERATOR_TOKEN_BUDGET` (an out-of-memory error splits the batch).

    Example:
        >>> default_token_budget(torch.device("cpu"), 384, 4)
        32768
    """
    if device.type == "cpu":
        return CPU_TOKEN_BUDGET
    budget = ACCELERATOR_TOKEN_BUDGET
    if device.type == "cuda":
        try:
            free, _ = torch.cuda.mem_get_info(device)
        except (RuntimeError, AssertionError):  # no driver to ask: the split is the guard
            return budget
        per_token = _ELEMENTS_PER_TOKEN_PER_DIM * hidden_size * element_size
        budget = min(budget, max(1024, int(free * _FREE_MEMORY_SHARE) // per_token))
    return budget


def plan_batches(
    lengths: Sequence[int],
    max_texts: int | None,
    max_tokens: int | None,
    max_attention_padding: float | None = None,
) -> list[tuple[int, int]]:
    """Consecutive ``(start, stop)`` batches of sequences of these lengths (sorted, either way,
    so that batches pad little).

    A batch holds at most ``max_texts`` sequences and at most ``max_tokens`` padded tokens
    (its count times its longest length, rounded up to a multiple of 16 as the packed pass
    pads attention); a sequence longer than the budget gets a batch of its own. With
    ``max_attention_padding`` p, a batch also stops growing before its padded attention (count
    times width squared) exceeds ``1 + p`` times what its texts would have alone (the sum of
    their squared widths, each rounded up to 16): attention is the one step that works on
    padding. ``None`` lifts a limit.

    Example:
        >>> plan_batches([10, 20, 30, 40], max_texts=None, max_tokens=64)
        [(0, 2), (2, 3), (3, 4)]
        >>> plan_batches([16, 16, 32, 32], None, None, max_attention_padding=0.5)
        [(0, 2), (2, 4)]
        >>> plan_batches([11, 12, 13, 16], None, None, max_attention_padding=0.25)
        [(0, 4)]
    """

    def rounded(length: int) -> int:  # the width the packed pass gives a text alone
        return -(-length // 16) * 16

    out: list[tuple[int, int]] = []
    start, n = 0, len(lengths)
    while start < n:
        stop, longest, area = start + 1, lengths[start], rounded(lengths[start]) ** 2
        while stop < n and (max_texts is None or stop - start < max_texts):
            longest = max(longest, lengths[stop])
            width, count = rounded(longest), stop - start + 1
            if max_tokens is not None and count * width > max_tokens:
                break
            own = area + rounded(lengths[stop]) ** 2
            if (
                max_attention_padding is not None
                and count * width * width > (1 + max_attention_padding) * own
            ):
                break
            area = own
            stop += 1
        out.append((start, stop))
        start = stop
    return out


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` says a device ran out of memory (CUDA's typed error, or the message of
    MPS's and the CPU allocator's ``RuntimeError``)."""
    if isinstance(exc, torch.OutOfMemoryError):
        return True
    message = str(exc).lower()
    return isinstance(exc, RuntimeError) and (
        "out of memory" in message or "can't allocate memory" in message
    )


def too_long_message(what: str, device: torch.device) -> str:
    """What to say when ``what`` does not fit in ``device``'s memory even alone.

    Example:
        >>> too_long_message("a text of 900 tokens", torch.device("cuda:0"))
        "a text of 900 tokens does not fit in the memory of cuda:0 even alone; pass a smaller max_length, use a smaller model, or score on device='cpu'"
    """
    remedy = "pass a smaller max_length or use a smaller model"
    if device.type != "cpu":
        remedy = "pass a smaller max_length, use a smaller model, or score on device='cpu'"
    return f"{what} does not fit in the memory of {device} even alone; {remedy}"


def embed_texts(
    encoder: Encoder,
    ids_list: Sequence[Sequence[int] | np.ndarray],
    max_texts: int | None = None,
    max_tokens: int | None = None,
    on_embedded: Callable[[int], None] | None = None,
    normalize: bool = True,
) -> list[torch.Tensor]:
    """Packed embeddings of texts' token ids (sorted by length), as :func:`embed_in_batches`
    gives them: tensors whose rows, concatenated, are every text's tokens in order.

    Where the encoder's reading plan reads long texts in windows (its ``frame``), a text longer
    than the model's window is read as windows (batched with the other sequences) whose rows
    are stitched back, each row held by several windows their mean (L2-normalised again with
    ``normalize``); ``on_embedded`` then counts texts, each once all its windows are embedded.

    Example:
        >>> from uqlm_bert.bertscore._loading import load_encoder
        >>> from uqlm_bert.bertscore._settings import BERTScoreSettings
        >>> enc = load_encoder(BERTScoreSettings(num_layers=2, long_texts="window"))
        >>> ids = enc.tokenize(["A cat.", "word " * 600])
        >>> [len(i) for i in ids], torch.cat(embed_texts(enc, ids)).shape
        ([5, 602], torch.Size([607, 384]))
    """
    frame = encoder.frame
    if frame is None or all(len(ids) <= frame.window for ids in ids_list):
        return embed_in_batches(encoder, ids_list, max_texts, max_tokens, on_embedded, normalize)
    split = split_in_windows(ids_list, frame)
    progress = None
    if on_embedded is not None:
        done = [0, 0]  # sequences, texts

        def progress(count: int) -> None:
            done[0] += count
            now = split.texts_done(done[0])
            if now > done[1]:
                on_embedded(now - done[1])
                done[1] = now

    embs = embed_in_batches(encoder, split.sequences, max_texts, max_tokens, progress, normalize)
    return [split.stitch_packed(torch.cat(embs), normalize)]


def embed_in_batches(
    encoder: Encoder,
    seqs: Sequence[Sequence[int]],
    max_texts: int | None = None,
    max_tokens: int | None = None,
    on_embedded: Callable[[int], None] | None = None,
    normalize: bool = True,
) -> list[torch.Tensor]:
    """Packed embeddings of token-id sequences, batch after batch.

    Args:
        encoder: the loaded model and tokenizer.
        seqs: token-id sequences, sorted by length (shortest first) so that batches pad little.
        max_texts: sequences per forward pass at most (``None``: no count limit).
        max_tokens: padded tokens per forward pass at most (``None``: the device's default,
            :func:`default_token_budget`).
        on_embedded: called with the number of sequences each time some are embedded (each
            sequence is counted once, whatever splits happen).
        normalize: L2-normalise each token's embedding (what BERTScore matches); else the
            model's states as they are.

    Returns:
        float32 ``[tokens, dim]`` tensors on the model's device whose rows are the sequences'
        tokens, in order (their concatenation is every sequence's embeddings, one after the
        other).

    Raises:
        DeviceOutOfMemoryError: a single sequence does not fit in the device's memory.
    """
    if max_tokens is None:
        max_tokens = default_token_budget(
            encoder.device, encoder.hidden_size, encoder.dtype.itemsize
        )
    lengths = [len(s) for s in seqs]
    out: list[torch.Tensor] = []
    with encoder.reuse_workspace():
        padding = CPU_ATTENTION_PADDING if encoder.device.type == "cpu" else None
        for start, stop in plan_batches(lengths, max_texts, max_tokens, padding):
            _embed_splitting(encoder, seqs, start, stop, out, on_embedded, normalize)
    return out


def _embed_splitting(
    encoder: Encoder,
    seqs: Sequence[Sequence[int]],
    start: int,
    stop: int,
    out: list[torch.Tensor],
    on_embedded: Callable[[int], None] | None,
    normalize: bool,
) -> None:
    """Embed ``seqs[start:stop]`` into ``out``; on out-of-memory, free what can be freed and
    embed each half in turn (the first half's result is kept if the second runs out too)."""
    pending = [(start, stop)]
    while pending:
        lo, hi = pending.pop()
        try:
            emb = encoder.embed_packed(seqs[lo:hi], normalize)
        except Exception as exc:
            if not is_out_of_memory(exc):
                raise
            emb = None
        if emb is None:
            # outside the except block, so that the error's frames (and the tensors they hold)
            # are gone before the cache is emptied
            encoder.release_memory()
            if hi - lo == 1:
                raise DeviceOutOfMemoryError(
                    too_long_message(f"a text of {len(seqs[lo])} tokens", encoder.device)
                    + f" ({encoder.name} in {encoder.dtype})"
                )
            mid = (lo + hi) // 2
            logger.info(
                "out of memory on %s embedding %d texts; retrying as %d and %d",
                encoder.device,
                hi - lo,
                mid - lo,
                hi - mid,
            )
            pending += [(mid, hi), (lo, mid)]  # the first half runs first
            continue
        out.append(emb)
        if on_embedded is not None:
            on_embedded(hi - lo)
