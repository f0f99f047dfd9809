"""The unique texts of one scoring call: token ids, token weights, and when each is last needed.

A call's pairs are scored in chunks (see :mod:`uqlm_bert.bertscore._pair_scoring`); each chunk
needs the texts that first appear in it. :class:`CallTexts` tokenizes them group by group, in the
order the chunks need them, and weighs their tokens a group at a time in numpy (one lookup over
the group's concatenated ids, not a Python loop per token). On an accelerator the groups are
tokenized in a background thread, ahead of the forward passes (the fast tokenizer releases the
GIL while it works), so the device does not wait for the tokenizer after the first group.

Example:
    >>> from uqlm_bert.bertscore._loading import load_encoder
    >>> from uqlm_bert.bertscore._settings import BERTScoreSettings
    >>> enc = load_encoder(BERTScoreSettings(num_layers=5, device="cpu"))
    >>> uniform = weight_lookup(None, set(enc.special_ids))
    >>> texts = CallTexts(enc, ["a cat", "a cat"], ["the cat", "a dog"], 1, uniform)
    >>> texts.wait(0); sorted(texts)
    ['a cat', 'the cat']
    >>> texts["a cat"].weights.tolist(), texts["a cat"].last_use
    ([0.0, 0.5, 0.5, 0.0], 1)
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from uqlm_bert.bertscore._encoder import Encoder
    from uqlm_bert.bertscore._idf import IdfWeights

__all__ = ["CallTexts", "TextInfo", "weight_lookup"]

#: Maps a flat array of token ids to their float32 weights (before normalisation).
WeightLookup = Callable[[np.ndarray], np.ndarray]

# Texts tokenized per call of the tokenizer (its per-text objects are dropped in between).
_TOKENIZE_CHUNK = 4096


@dataclass
class TextInfo:
    """One unique (stripped) text of a call."""

    ids: np.ndarray  # int64 token ids, special tokens included
    weights: np.ndarray | None  # float32, normalised to sum 1 (all 0 when they sum to 0)
    empty: bool  # no tokens but special ones: the pair's raw scores are 0
    zero_weight: bool  # tokens, but all weights 0: its side (P or R) is 0
    last_use: int  # index of the last pair that needs it


def weight_lookup(idf: IdfWeights | None, zero_ids: set[int]) -> WeightLookup:
    """Token weights before normalisation: 1 (``idf`` None) or the idf weight, and 0 for
    ``zero_ids`` ([CLS]/[SEP]) unless a given idf mapping names them.

    Example:
        >>> import numpy as np
        >>> weight_lookup(None, {101, 102})(np.array([101, 7, 102])).tolist()
        [0.0, 1.0, 0.0]
    """
    if idf is None:
        zero = np.fromiter(zero_ids, dtype=np.int64, count=len(zero_ids))
        return lambda ids: np.where(np.isin(ids, zero), 0.0, 1.0).astype(np.float32)
    keys = np.fromiter(idf.weights, dtype=np.int64, count=len(idf.weights))
    size = int(max([*keys.tolist(), *zero_ids, 0])) + 1
    # [CLS]/[SEP] occur in every document, so computed idf gives them 0; a user's mapping that
    # leaves them out gives them 0 too, not its unseen default
    table = np.full(size, idf.default, dtype=np.float64)
    table[[i for i in zero_ids if i not in idf.weights]] = 0.0
    table[keys] = np.fromiter(idf.weights.values(), dtype=np.float64, count=len(keys))
    table32 = table.astype(np.float32)
    default = np.float32(idf.default)

    def lookup(ids: np.ndarray) -> np.ndarray:
        inside = ids < size
        return np.where(inside, table32[np.where(inside, ids, 0)], default)

    return lookup


class CallTexts:
    """The unique texts of a call's pairs, tokenized in groups: group ``k`` holds the texts that
    first appear in pairs ``[k * chunk_size, (k + 1) * chunk_size)``.

    Args:
        encoder: tokenizer and model.
        keys_c, keys_r: each pair's candidate and reference, stripped.
        chunk_size: pairs per group.
        weights: the token weights (:func:`weight_lookup`), or ``None`` to weigh later with
            :meth:`weigh_all` (idf computed from the call's own references).
        ahead: tokenize in a background thread, ahead of :meth:`wait`.
        zero_sets: token ids that weigh 0, per context; the keys are then ``(text, context)``
            pairs, a text weighed apart in each context it appears in.

    A text keeps at most the encoder's :attr:`~uqlm_bert.bertscore._encoder.Encoder.token_limit`
    tokens (more than the model's window where long texts are read in windows).

    ``texts[key]`` is a text's :class:`TextInfo` once its group is ready (:meth:`wait`).
    """

    def __init__(
        self,
        encoder: Encoder,
        keys_c: list[str],
        keys_r: list[str],
        chunk_size: int,
        weights: WeightLookup | None = None,
        ahead: bool = False,
        zero_sets: Sequence[np.ndarray] | None = None,
    ) -> None:
        self._encoder = encoder
        self._zero_sets = zero_sets
        self._special = np.fromiter(
            encoder.special_ids, dtype=np.int64, count=len(encoder.special_ids)
        )
        self._weights = weights
        self._texts: dict[str, TextInfo] = {}
        #: the texts the tokenizer truncated, in the order met
        self.truncated: list[str] = []
        last_use: dict[str, int] = {}
        groups: list[list[str]] = []
        for k, (c, r) in enumerate(zip(keys_c, keys_r, strict=True)):
            if k % chunk_size == 0:
                groups.append([])
            for key in (c, r):
                if key not in last_use:
                    groups[-1].append(key)
                last_use[key] = k
        self._last_use = last_use
        self._groups = groups
        self._pool: ThreadPoolExecutor | None = None
        self._futures: list[Future[None]] = []
        if ahead and len(groups) > 0:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="uqlm_bert-tokenize")
            self._futures = [self._pool.submit(self._add, g) for g in groups]
        self._ready = [False] * len(groups)

    def __getitem__(self, key: str) -> TextInfo:
        return self._texts[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._texts)

    def __len__(self) -> int:
        return len(self._last_use)

    def wait(self, group: int) -> None:
        """Return once the texts of ``group`` (and of every group before it) are ready."""
        if self._ready[group]:
            return
        for g in range(group + 1):
            if not self._ready[g]:
                if self._futures:
                    self._futures[g].result()
                else:
                    self._add(self._groups[g])
                self._ready[g] = True

    def group(self, group: int) -> list[str]:
        """The texts that first appear in the pairs of ``group``."""
        return self._groups[group]

    def wait_all(self) -> None:
        """Return once every text is tokenized."""
        if self._groups:
            self.wait(len(self._groups) - 1)

    def weigh_all(self, weights: WeightLookup) -> None:
        """Weigh every text with ``weights`` (after :meth:`wait_all`)."""
        self._weigh(list(self._texts), weights)

    def close(self) -> None:
        """Stop tokenizing ahead (groups not started are dropped) and wait for the thread."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> CallTexts:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals --------------------------------------------------------------------------

    def _add(self, keys: list[str]) -> None:
        """Tokenize ``keys`` and (with weights known) weigh them."""
        enc = self._encoder
        for start in range(0, len(keys), _TOKENIZE_CHUNK):
            part = keys[start : start + _TOKENIZE_CHUNK]
            strings = [k[0] for k in part] if self._zero_sets is not None else part
            ids_list, cut = enc.tokenize_checked(strings)
            lens = np.fromiter(map(len, ids_list), dtype=np.int64, count=len(ids_list))
            flat = np.fromiter(
                itertools.chain.from_iterable(ids_list), dtype=np.int64, count=int(lens.sum())
            )
            ends = np.cumsum(lens)
            special = _segment_sums(np.isin(flat, self._special).astype(np.int64), lens, ends)
            empty = special == lens
            for i, (key, ids) in enumerate(zip(part, np.split(flat, ends[:-1]), strict=True)):
                if cut[i]:
                    self.truncated.append(strings[i])
                self._texts[key] = TextInfo(ids, None, bool(empty[i]), False, self._last_use[key])
            if self._weights is not None:
                self._weigh(part, self._weights, flat, lens, ends)

    def _weigh(
        self,
        keys: list[str],
        weights: WeightLookup,
        flat: np.ndarray | None = None,
        lens: np.ndarray | None = None,
        ends: np.ndarray | None = None,
    ) -> None:
        """Give ``keys`` their weights, normalised to sum 1 per text, in one pass over their
        concatenated ids."""
        infos = [self._texts[k] for k in keys]
        if flat is None or lens is None or ends is None:
            lens = np.fromiter((len(t.ids) for t in infos), dtype=np.int64, count=len(infos))
            flat = np.concatenate([t.ids for t in infos]) if infos else np.zeros(0, np.int64)
            ends = np.cumsum(lens)
        w = weights(flat)
        # zero_weight flags the texts the weights alone leave without weight; a text made only
        # of its context's tokens is not flagged: it scores 0 on purpose
        flagged = _segment_sums(w, lens, ends)
        if self._zero_sets is not None:  # the context's tokens weigh 0 in each text
            context = np.repeat([k[1] for k in keys], lens)
            for c in np.unique(context):
                at = context == c
                w[at] = np.where(np.isin(flat[at], self._zero_sets[c]), 0.0, w[at])
        totals = _segment_sums(w, lens, ends) if self._zero_sets is not None else flagged
        scale = np.divide(1.0, totals, out=np.zeros_like(totals), where=totals > 0)
        w = (w * np.repeat(scale, lens)).astype(np.float32)
        for info, tw, total in zip(infos, np.split(w, ends[:-1]), flagged, strict=True):
            info.weights = tw
            info.zero_weight = not info.empty and not total > 0


def _segment_sums(values: np.ndarray, lens: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Sums of consecutive segments of ``values`` of lengths ``lens`` (0 for empty ones), in
    float64 for floats."""
    acc = np.concatenate([[0], np.cumsum(values, dtype=np.float64)])
    return acc[ends] - acc[ends - lens]
