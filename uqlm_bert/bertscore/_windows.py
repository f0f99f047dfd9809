"""Long texts in overlapping windows: how a text is cut, and one embedding per token again.

A model reads at most ``max_length`` tokens at once (512 for the embedded model). With
``long_texts="window"`` a longer text is not cut there: its tokens (special tokens aside) are
split into overlapping windows, each window gets the text's special tokens around it ([CLS] ...
[SEP]) and goes through the model like any other text, in the same batches, and the windows'
outputs are stitched back into one ``[tokens, dim]`` embedding of the whole text. Matching then
works on it as on any text: every token of one text against every token of the other, with the
same weights.

- **How long a window is**: at most :data:`WINDOW_TOKENS` tokens with its special tokens (256;
  the model's window when that is smaller). A text is read in windows only when it is longer
  than the model's window (512 tokens for the embedded model); up to there it is read whole, as
  in ``"truncate"`` mode. Windows shorter than the model's are cheaper per token, since
  attention's cost per token grows with the window's length, at a small cost in agreement with
  the whole-text embeddings (both measured with ``benchmarks/bench_long_texts.py`` and
  ``benchmarks/eval_long_texts.py``: see benchmarks/RESULTS.md).
- **Where windows start** (:func:`plan_windows`): as few windows as overlap by at least
  :data:`MIN_OVERLAP` tokens, all of one length, spread evenly from the first token to the last.
  The model reads about ``n + MIN_OVERLAP * (k - 1)`` tokens for ``k`` windows over ``n``, so
  the cost grows linearly with length.
- **Which window gives a token its embedding**: every window that holds it, averaged (and, for
  BERTScore, L2-normalised again). The special tokens at the start come from the first window,
  those at the end from the last.

The overlap and the rule were chosen by measurement (``benchmarks/eval_long_texts.py``, see
benchmarks/RESULTS.md): texts the model reads whole were also read in smaller windows, and the
windowed embeddings compared with the whole-text ones. The mean over windows changed BERTScore F1 least (against
the window where the token has the most context on both sides, and the first window that holds
it), and an overlap of 32 tokens gave most of what 64 gives at about half the extra cost.

A text of :data:`MAX_TOKENS` tokens or more is cut there even in window mode, so that the cost of
a text stays bounded (an answer that loops for 50 MB costs what its first 32,768 tokens cost).

Example:
    >>> plan_windows(900, capacity=510, min_overlap=32)
    [(0, 466), (434, 900)]
    >>> plan_windows(400, capacity=510, min_overlap=32)
    [(0, 400)]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from uqlm_bert._checks import check_int
from uqlm_bert.bertscore._packed_forward import to_device

__all__ = [
    "MAX_TOKENS",
    "MIN_OVERLAP",
    "WINDOW_TOKENS",
    "Frame",
    "WindowSplit",
    "plan_windows",
    "split_in_windows",
]

#: The fewest tokens two neighbouring windows share (chosen by measurement, see the module doc).
MIN_OVERLAP = 32
#: The most tokens of one window, special tokens included, when a text longer than the model's
#: window is read in windows (chosen by measurement, see the module doc).
WINDOW_TOKENS = 256
#: The most tokens of one text that are scored in window mode (special tokens included).
MAX_TOKENS = 1 << 15


def plan_windows(n: int, capacity: int, min_overlap: int = MIN_OVERLAP) -> list[tuple[int, int]]:
    """``(start, stop)`` of each window over ``n`` tokens, at most ``capacity`` tokens each.

    One window when the text fits; else the fewest windows of one length that overlap by at
    least ``min_overlap`` tokens (a quarter of ``capacity`` at most), spread evenly over the
    text (the first starts at 0, the last ends at ``n``).

    Example:
        >>> plan_windows(10, capacity=4, min_overlap=1)
        [(0, 4), (3, 7), (6, 10)]
    """
    check_int("n", n, 0, numpy_ok=True)
    check_int("capacity", capacity, 1, numpy_ok=True)
    check_int("min_overlap", min_overlap, 0)
    if n <= capacity:
        return [(0, n)]
    overlap = min(min_overlap, capacity // 4)  # small windows: at most a quarter of each
    k = -(-(n - overlap) // (capacity - overlap))  # k windows: k * capacity >= n + (k-1) overlap
    length = -(-(n + (k - 1) * overlap) // k)  # the shortest length that keeps the overlap
    span = n - length
    return [((j * span) // (k - 1), (j * span) // (k - 1) + length) for j in range(k)]


@dataclass(frozen=True)
class Frame:
    """What a model's input looks like around a text's tokens: the special tokens before and
    after them, and how many tokens the model reads at once.

    Attributes:
        prefix: the token ids before the text ([CLS] for BERT, ``<s>`` for RoBERTa).
        suffix: the token ids after it ([SEP], ``</s>``).
        window: the most tokens per pass, special tokens included (the encoder's
            ``max_length``).
    """

    prefix: tuple[int, ...]
    suffix: tuple[int, ...]
    window: int

    def __post_init__(self) -> None:
        check_int("window", self.window, 1)

    @classmethod
    def of(cls, tokenizer: Any, window: int) -> Frame:
        """The frame of ``tokenizer``'s inputs, found by tokenizing one word with and without
        its special tokens (no frame where they cannot be told apart).

        Example:
            >>> from uqlm_bert.bertscore._loading import load_tokenizer
            >>> Frame.of(load_tokenizer(None), 512)
            Frame(prefix=(101,), suffix=(102,), window=512)
        """
        probe = "hello"
        framed = list(tokenizer(probe, add_special_tokens=True)["input_ids"])
        bare = list(tokenizer(probe, add_special_tokens=False)["input_ids"])
        for i in range(len(framed) - len(bare) + 1):
            if bare and framed[i : i + len(bare)] == bare:
                frame = cls(tuple(framed[:i]), tuple(framed[i + len(bare) :]), window)
                if frame.capacity >= 2:
                    return frame
                break
        return cls((), (), window)

    @property
    def capacity(self) -> int:
        """How many of a text's own tokens the model's window holds."""
        return self.window - len(self.prefix) - len(self.suffix)

    @property
    def window_length(self) -> int:
        """The most tokens of one window, special tokens included, when a longer text is read
        in windows: :data:`WINDOW_TOKENS`, or the model's window when that is smaller."""
        return min(self.window, WINDOW_TOKENS)

    @property
    def window_capacity(self) -> int:
        """How many of a text's own tokens one window holds (:attr:`window_length` less the
        special tokens).

        Example:
            >>> Frame((101,), (102,), window=512).window_capacity
            254
            >>> Frame((101,), (102,), window=64).window_capacity
            62
        """
        return self.window_length - len(self.prefix) - len(self.suffix)

    def content(self, ids: np.ndarray) -> tuple[int, int]:
        """``(first, stop)``: where a tokenized text's own tokens lie (between the frame's special
        tokens, when the text has them; else all of it)."""
        p, s = len(self.prefix), len(self.suffix)
        if (
            len(ids) >= p + s
            and tuple(ids[:p].tolist()) == self.prefix
            and tuple(ids[len(ids) - s :].tolist()) == self.suffix
        ):
            return p, len(ids) - s
        return 0, len(ids)


@dataclass
class WindowSplit:
    """Texts as the sequences the model reads, and how to stitch their outputs back.

    Attributes:
        sequences: token ids of each sequence the model reads: the texts that fit the window
            as they are, in the order given, then the windows of the longer ones, shortest
            first.
        pieces: for each text, ``(sequence, first row, stop row, text row)``: rows
            ``[first, stop)`` of a sequence's output are the text's rows from ``text row`` on.
            A text that fits has one piece; a row held by several windows is their mean.
        lengths: each text's length in tokens.
        sequence_texts: the text each sequence belongs to.
    """

    sequences: list[np.ndarray]
    pieces: list[list[tuple[int, int, int, int]]]
    lengths: list[int]
    sequence_texts: np.ndarray

    def stitch_packed(self, packed: torch.Tensor, normalize: bool) -> torch.Tensor:
        """Every text's ``[tokens, dim]`` output from the sequences' outputs: ``packed`` holds
        every sequence's rows one after the other (``[sum of sequence lengths, dim]``); the
        result holds every text's rows one after the other, in the texts' order. A text that
        fits gets its sequence's rows as they are; a windowed text, per token the mean over
        the windows that hold it, L2-normalised again with ``normalize``."""
        seq_lens = np.fromiter((len(s) for s in self.sequences), np.int64, len(self.sequences))
        seq_start = np.concatenate(([0], np.cumsum(seq_lens)[:-1]))
        text_start = np.concatenate(([0], np.cumsum(self.lengths)[:-1])).astype(np.int64)
        src, dst = [], []
        for t, pieces in enumerate(self.pieces):
            for s, a, b, d in pieces:
                src.append(np.arange(seq_start[s] + a, seq_start[s] + b))
                dst.append(np.arange(text_start[t] + d, text_start[t] + d + b - a))
        if not src:
            return packed.new_zeros((0, packed.shape[1]))
        rows = packed.index_select(
            0, to_device(torch.from_numpy(np.concatenate(src)), packed.device)
        )
        return _mean_rows(rows, np.concatenate(dst), int(sum(self.lengths)), normalize)

    def texts_done(self, sequences_done: int) -> int:
        """How many texts have all their sequences among the first ``sequences_done``."""
        check_int("sequences_done", sequences_done, 0, numpy_ok=True)
        last = np.full(len(self.pieces), -1, dtype=np.int64)
        np.maximum.at(last, self.sequence_texts, np.arange(len(self.sequence_texts)))
        return int((last < sequences_done).sum())


def _mean_rows(rows: torch.Tensor, where: np.ndarray, n: int, normalize: bool) -> torch.Tensor:
    """``[n, dim]``: row ``i`` the mean of the ``rows`` whose ``where`` is ``i``. A row given once
    is copied as it is; a mean of several is L2-normalised again with ``normalize``."""
    device = rows.device
    count = np.bincount(where, minlength=n)
    out = rows.new_zeros((n, rows.shape[1]))
    out.index_add_(0, to_device(torch.from_numpy(where), device), rows)
    shared = np.flatnonzero(count > 1)
    if len(shared):
        at = to_device(torch.from_numpy(shared), device)
        counts = to_device(torch.from_numpy(count[shared].astype(np.float32)), device)
        mean = out.index_select(0, at) / counts.to(out.dtype)[:, None]
        out.index_copy_(0, at, F.normalize(mean, dim=-1, eps=0.0) if normalize else mean)
    return out


def split_in_windows(
    ids_list: Sequence[Sequence[int] | np.ndarray], frame: Frame, min_overlap: int = MIN_OVERLAP
) -> WindowSplit:
    """The sequences the model reads for these texts' token ids (see :class:`WindowSplit`).

    A text of at most ``frame.window`` tokens is one sequence, its ids unchanged. A longer one
    is cut into the windows of :func:`plan_windows` over its own tokens (at most
    :attr:`Frame.window_capacity` each), each framed by its special tokens; the special tokens
    at its start come from the first window, those at its end from the last (a text without
    them, which the tokenizer would not give, is cut as it is).

    Example:
        >>> frame = Frame((101,), (102,), window=6)
        >>> split = split_in_windows([[101, 1, 2, 3, 4, 5, 6, 102], [101, 7, 102]], frame, 1)
        >>> [s.tolist() for s in split.sequences]
        [[101, 7, 102], [101, 1, 2, 3, 4, 102], [101, 3, 4, 5, 6, 102]]
        >>> split.pieces
        [[(1, 0, 5, 0), (2, 1, 6, 3)], [(0, 0, 3, 0)]]
    """
    check_int("min_overlap", min_overlap, 0)
    seqs: list[np.ndarray] = []
    owner: list[int] = []
    raw: list[list[tuple[int, int, int, int]]] = []
    for t, ids in enumerate(ids_list):
        ids = np.asarray(ids, dtype=np.int64)
        if len(ids) <= frame.window:
            raw.append([(len(seqs), 0, len(ids), 0)])
            seqs.append(ids)
            owner.append(t)
            continue
        first, stop = frame.content(ids)
        framed = (first, stop) != (0, len(ids))
        head = ids[:first] if framed else ids[:0]
        tail = ids[stop:] if framed else ids[:0]
        own = ids[first:stop]
        capacity = frame.window_capacity if framed else frame.window_length
        windows = plan_windows(len(own), capacity, min_overlap)
        pieces = []
        for j, (a, b) in enumerate(windows):
            # rows of the window [head, own[a:b], tail] that go to the text: its own tokens,
            # and the head in the first window, the tail in the last
            lo = 0 if j == 0 else len(head)
            hi = len(head) + (b - a) + (len(tail) if j == len(windows) - 1 else 0)
            pieces.append((len(seqs), lo, hi, a + lo))
            seqs.append(np.concatenate((head, own[a:b], tail)))
            owner.append(t)
        raw.append(pieces)
    # whole texts first, in the order they came (the caller's, shortest first as a rule), then
    # windows by length: texts that fit share their forward passes with the same texts as when
    # nothing is read in windows, so they get the same numbers
    whole = [i for i in range(len(seqs)) if len(raw[owner[i]]) == 1]
    order = whole + sorted(
        (i for i in range(len(seqs)) if len(raw[owner[i]]) > 1), key=lambda i: len(seqs[i])
    )
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return WindowSplit(
        [seqs[i] for i in order],
        [[(int(rank[s]), a, b, d) for s, a, b, d in pieces] for pieces in raw],
        [len(np.asarray(ids)) for ids in ids_list],
        np.asarray([owner[i] for i in order], dtype=np.int64),
    )
