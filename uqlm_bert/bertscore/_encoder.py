"""Turning texts into token ids and token embeddings with one loaded model.

:class:`Encoder` pairs a cached model (a :class:`LoadedModel`, see
:mod:`uqlm_bert.bertscore._loading`) with its tokenizer and the plans the resolver made for it
(:mod:`uqlm_bert.bertscore._resolve`): how the model runs (:class:`~.resolve.ComputePlan`) and
how texts reach it (:class:`~.resolve.ReadingPlan`: the model's window, whether longer texts
are read in windows, the most tokens of a text that are scored). It carries those decisions for
every module that acts on them. It tokenizes exactly as the reference ``bert_score`` package
does (the text is stripped; RoBERTa and GPT-2 tokenizers get a leading space; truncation at the
limit) and embeds batches of token-id lists: BERT, RoBERTa and MPNet run the packed forward of
:mod:`uqlm_bert.bertscore._packed_forward`, other architectures the transformers forward.

Work is bounded by what is scored: a text far longer than the limit is tokenized from a prefix
long enough to give the first ``max_length`` tokens, cut at whitespace, so a 50 MB answer costs
what its first few thousand characters cost (the tokens are the ones the whole text would give;
a text with less than one token per 128 characters is cut at ``max_length * 128`` characters).

Example:
    >>> from uqlm_bert.bertscore._loading import load_encoder
    >>> from uqlm_bert.bertscore._settings import BERTScoreSettings
    >>> enc = load_encoder(BERTScoreSettings(num_layers=5, device="cpu"))
    >>> ids = enc.tokenize(["Hello world", "hello  world  "])
    >>> ids[0] == ids[1], enc.embed_packed(ids).shape
    (True, torch.Size([8, 384]))
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from uqlm_bert.bertscore._packed_forward import PackedEncoder, to_device
from uqlm_bert.bertscore._resolve import ComputePlan, ReadingPlan
from uqlm_bert.bertscore._windows import Frame

__all__ = ["Encoder", "LoadedModel", "TokenSpans", "token_spans", "tokenize_texts"]

# A text longer than this many characters per allowed token is tokenized from a prefix.
_CHARS_PER_TOKEN = 16
# A prefix is long enough when it gives this many tokens beyond the limit.
_PREFIX_MARGIN = 8
# A prefix grows to at most this many characters per allowed token: a text with fewer tokens in
# that much (mostly whitespace, or words thousands of characters long) is tokenized from it.
_MAX_CHARS_PER_TOKEN = 128


@dataclass
class LoadedModel:
    """One loaded model, truncated to ``num_layers``, with what the encoder needs beside it."""

    name: str
    location: str
    model: torch.nn.Module
    config: Any
    num_layers: int
    compute: ComputePlan
    packed: PackedEncoder | None

    @property
    def device(self) -> torch.device:
        """Where the model runs."""
        return self.compute.device

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of its weights."""
        return self.compute.dtype


class Encoder:
    """A loaded model with its tokenizer and the plan of how texts reach it.

    Args:
        loaded: the cached model (from :func:`~uqlm_bert.bertscore._loading.load_model`).
        tokenizer: its tokenizer.
        reading: how texts reach the model (:func:`~uqlm_bert.bertscore._resolve.plan_reading`).
        float32: loads the same model in float32 (for a model in a reduced dtype: see
            :meth:`in_float32`).
    """

    def __init__(
        self,
        loaded: LoadedModel,
        tokenizer: Any,
        reading: ReadingPlan,
        float32: Callable[[], LoadedModel] | None = None,
    ) -> None:
        self.loaded = loaded
        self._float32 = float32
        self.tokenizer = tokenizer
        self.reading = reading
        self.special_ids: frozenset[int] = frozenset(
            int(i) for i in getattr(tokenizer, "all_special_ids", [])
        )

    @property
    def name(self) -> str:
        """The model's name in the layer table and the baseline files."""
        return self.loaded.name

    @property
    def location(self) -> str:
        """What transformers loaded: a hub name or a local path."""
        return self.loaded.location

    @property
    def model(self) -> torch.nn.Module:
        """The model, truncated to :attr:`num_layers`."""
        return self.loaded.model

    @property
    def num_layers(self) -> int:
        """The layer whose output is used."""
        return self.loaded.num_layers

    @property
    def device(self) -> torch.device:
        """Where the model runs."""
        return self.loaded.device

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of the model's weights."""
        return self.loaded.compute.dtype

    @property
    def match_dtype(self) -> torch.dtype:
        """The dtype long pairs' best matches are found in (see
        :class:`~uqlm_bert.bertscore._resolve.ComputePlan`)."""
        return self.loaded.compute.match_dtype

    @property
    def max_length(self) -> int:
        """The most tokens the model reads at once, special tokens included."""
        return self.reading.max_length

    @property
    def frame(self) -> Frame | None:
        """The frame in which texts longer than :attr:`max_length` are read in windows, or
        ``None`` where they are cut at :attr:`max_length`."""
        return self.reading.frame

    @property
    def token_limit(self) -> int:
        """The most tokens of one text that are scored (see
        :attr:`~uqlm_bert.bertscore._resolve.ReadingPlan.token_limit`)."""
        return self.reading.token_limit

    @property
    def hidden_size(self) -> int:
        """The width of the model's token states."""
        cfg = self.loaded.config
        return int(getattr(cfg, "hidden_size", None) or getattr(cfg, "d_model", None) or 1024)

    # -- tokenization ---------------------------------------------------------------------------

    def tokenize(self, texts: Sequence[str], limit: int | None = None) -> list[list[int]]:
        """Token ids of each text (stripped, special tokens added, truncated to ``limit``
        tokens: by default :attr:`token_limit`, the most of one text that are scored)."""
        return tokenize_texts(self.tokenizer, texts, limit or self.token_limit)[0]

    def tokenize_checked(
        self, texts: Sequence[str], limit: int | None = None
    ) -> tuple[list[list[int]], list[bool]]:
        """Token ids of each text, and whether each was truncated (see :meth:`tokenize`)."""
        return tokenize_texts(self.tokenizer, texts, limit or self.token_limit)

    # -- embedding ------------------------------------------------------------------------------

    def reuse_workspace(self) -> contextlib.AbstractContextManager[None]:
        """Let the batches embedded in this block (in this thread) share one scratch buffer."""
        packed = self.loaded.packed
        return packed.reuse_workspace() if packed is not None else contextlib.nullcontext()

    def in_float32(self) -> Encoder:
        """This encoder with its model in float32 (itself when it is float32 already): what
        texts whose embeddings in a reduced dtype are not finite are embedded again with."""
        if self.dtype == torch.float32 or self._float32 is None:
            return self
        return Encoder(self._float32(), self.tokenizer, self.reading)

    def release_memory(self) -> None:
        """Free what this thread's batches keep on the device between passes (the packed pass's
        workspace) and hand the allocator's unused blocks back: after an out-of-memory error."""
        packed = self.loaded.packed
        if packed is not None:
            packed.release_workspace()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        elif self.device.type == "mps":
            torch.mps.empty_cache()

    def embed_packed(self, batch: Sequence[Sequence[int]], normalize: bool = True) -> torch.Tensor:
        """The texts' token embeddings, packed: one float32 ``[sum of lengths, dim]`` tensor,
        text after text, on the model's device: the output of the model's last kept layer,
        L2-normalised per token with ``normalize`` (what BERTScore matches).

        Example:
            >>> from uqlm_bert.bertscore._loading import load_encoder
            >>> from uqlm_bert.bertscore._settings import BERTScoreSettings
            >>> enc = load_encoder(BERTScoreSettings(num_layers=5, device="cpu"))
            >>> enc.embed_packed(enc.tokenize(["Hello world", "A cat."])).shape
            torch.Size([9, 384])
        """
        states = self._forward(batch)
        if states.dtype != torch.float32:
            states = states.float()
        return F.normalize(states, dim=-1, eps=0.0) if normalize else states

    @torch.inference_mode()
    def layer_states(self, batch: Sequence[Sequence[int]]) -> list[torch.Tensor]:
        """Hidden states of every layer, from the embeddings (0) to the last kept one: one
        packed float32 ``[sum of lengths, dim]`` tensor per layer (what baselines are made of)."""
        packed = self.loaded.packed
        if packed is not None:
            with _autocast_off(self.device):
                return [h.float() for h in packed(batch, all_layers=True)]
        input_ids, mask, rows = self._padded_inputs(batch)
        with _autocast_off(self.device):
            out = self.model(input_ids, attention_mask=mask, output_hidden_states=True)
        return [h.float().flatten(0, 1).index_select(0, rows) for h in out.hidden_states]

    @torch.inference_mode()
    def _forward(self, batch: Sequence[Sequence[int]]) -> torch.Tensor:
        """The last kept layer's states of the texts, packed ``[sum of lengths, dim]``, in the
        model's dtype: BERT, RoBERTa and MPNet run packed, other architectures padded."""
        packed = self.loaded.packed
        with _autocast_off(self.device):
            if packed is not None:
                return packed(batch)
            input_ids, mask, rows = self._padded_inputs(batch)
            out = self.model(input_ids, attention_mask=mask)
        hidden = out[0] if isinstance(out, (tuple, list)) else out.last_hidden_state
        return hidden.flatten(0, 1).index_select(0, rows)

    def _padded_inputs(
        self, batch: Sequence[Sequence[int]]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Padded input ids, attention mask and each token's row in the flattened padded layout,
        on the model's device: built in numpy and copied over once, not one copy per text."""
        lens = np.fromiter((len(ids) for ids in batch), dtype=np.int64, count=len(batch))
        width = int(lens.max())
        pad_id = self.tokenizer.pad_token_id
        valid = np.arange(width)[None, :] < lens[:, None]
        ids = np.full((3, len(batch), width), 0 if pad_id is None else pad_id, dtype=np.int64)
        ids[0][valid] = np.concatenate([np.asarray(i, dtype=np.int64) for i in batch])
        ids[1] = valid
        rows = np.flatnonzero(valid)
        ids[2].flat[: len(rows)] = rows
        on_device = to_device(torch.from_numpy(ids), self.device)
        return on_device[0], on_device[1], on_device[2].flatten()[: len(rows)]

    def __repr__(self) -> str:
        return (
            f"Encoder({self.name!r}, num_layers={self.num_layers}, device={str(self.device)!r}, "
            f"dtype={self.dtype}, max_length={self.max_length})"
        )


def tokenize_texts(
    tokenizer: Any, texts: Sequence[str], max_length: int
) -> tuple[list[list[int]], list[bool]]:
    """Token ids of each text as BERTScore takes them, and whether each was truncated.

    Each text is stripped, gets the special tokens and is truncated to ``max_length`` tokens. A
    text longer than ``max_length * 16`` characters is tokenized from a prefix cut at whitespace
    that yields more than ``max_length`` tokens (the same tokens the whole text gives), so the
    cost is bounded by what is kept. The prefix is at most ``max_length * 128`` characters: a
    text with fewer tokens than that in them (mostly whitespace, or words thousands of
    characters long) is scored on that prefix, and counts as truncated.

    Example:
        >>> from uqlm_bert.bertscore._loading import load_tokenizer
        >>> ids, cut = tokenize_texts(load_tokenizer(None), ["a b c", "x " * 5000], 8)
        >>> [len(i) for i in ids], cut
        ([5, 8], [False, True])
    """
    stripped = [t.strip() for t in texts]
    out: list[list[int] | None] = [None] * len(stripped)
    truncated = [False] * len(stripped)
    budget = max_length * _CHARS_PER_TOKEN
    short = [i for i, t in enumerate(stripped) if len(t) <= budget]
    for i, ids in zip(
        short, _ids(tokenizer, [stripped[i] for i in short], max_length), strict=True
    ):
        out[i] = ids
    for i in short:
        if len(out[i]) >= max_length:  # type: ignore[arg-type]  # cheap: the text is short
            truncated[i] = len(_ids(tokenizer, [stripped[i]], None)[0]) > max_length
    for i, t in enumerate(stripped):
        if out[i] is None:
            out[i], truncated[i], _ = _tokenize_long(tokenizer, t, max_length, budget)
    return [list(ids) for ids in out], truncated  # type: ignore[arg-type]


@dataclass(frozen=True)
class TokenSpans:
    """One text's tokens as :func:`tokenize_texts` gives them, with where each lies in the text.

    Attributes:
        ids: the token ids, special tokens included (those of :func:`tokenize_texts`).
        lead: how many characters of leading whitespace the text lost to stripping.
        offsets: ``[tokens, 2]`` int64 ``(start, end)`` of each token in the original text
            (its leading whitespace counted); ``(lead, lead)`` for the special tokens the
            tokenizer added.
        words: each token's word index as the tokenizer's pre-tokenizer splits words (-1 for
            the special tokens it added).
    """

    ids: np.ndarray
    lead: int
    offsets: np.ndarray
    words: np.ndarray


def token_spans(tokenizer: Any, texts: Sequence[str], max_length: int) -> list[TokenSpans]:
    """Each text's tokens (the ids of :func:`tokenize_texts` with the same ``max_length``) with
    their character spans in the text as given (not stripped) and their words: what maps a
    token's score back onto the text. Needs a fast tokenizer (one that reports offsets).

    Raises:
        ConfigurationError: the tokenizer cannot report where its tokens lie.

    Example:
        >>> from uqlm_bert.bertscore._loading import load_tokenizer
        >>> (spans,) = token_spans(load_tokenizer(None), ["  Paris, France"], 512)
        >>> spans.offsets.tolist(), spans.words.tolist()
        ([[2, 2], [2, 7], [7, 8], [9, 15], [2, 2]], [-1, 0, 1, 2, -1])
    """
    from uqlm_bert._exceptions import ConfigurationError

    if not getattr(tokenizer, "is_fast", False):
        raise ConfigurationError(
            f"token supports need a fast tokenizer, which reports where each token lies in the "
            f"text; {type(tokenizer).__name__} does not (load the model's tokenizer.json, or "
            "use a model that has one)"
        )
    out = []
    budget = max_length * _CHARS_PER_TOKEN
    for text in texts:
        stripped = text.strip()
        lead = len(text) - len(text.lstrip())
        if len(stripped) > budget:
            _, _, cut = _tokenize_long(tokenizer, stripped, max_length, budget)
            stripped = stripped[:cut]
        enc = _encode(tokenizer, [stripped], max_length, offsets=True)
        ids = np.asarray(enc["input_ids"][0], dtype=np.int64)
        offsets = np.asarray(enc["offset_mapping"][0], dtype=np.int64).reshape(-1, 2) + lead
        words = np.array([-1 if w is None else w for w in enc.word_ids(0)], dtype=np.int64)
        out.append(TokenSpans(ids, lead, offsets, words))
    return out


def _tokenize_long(
    tokenizer: Any, text: str, max_length: int, window: int
) -> tuple[list[int], bool, int]:
    """Tokenize a long text from a prefix cut at whitespace, growing it until it yields more
    tokens than the limit, up to ``max_length * _MAX_CHARS_PER_TOKEN`` characters (the whole
    text when it is no longer): the cost is bounded whatever the text. Returns the ids, whether
    they were truncated, and the length of the prefix tokenized."""
    most = max_length * _MAX_CHARS_PER_TOKEN
    while window < len(text):
        cut = window
        space = _last_whitespace(text, window)
        if space > window // 2:
            cut = space
        if (
            window >= most
            or len(_ids(tokenizer, [text[:cut]], None)[0]) > max_length + _PREFIX_MARGIN
        ):
            return _ids(tokenizer, [text[:cut]], max_length)[0], True, cut
        window = min(window * 2, most)
    ids = _ids(tokenizer, [text], max_length)[0]
    cut = len(ids) >= max_length and len(_ids(tokenizer, [text], None)[0]) > max_length
    return ids, cut, len(text)


def _ids(tokenizer: Any, texts: list[str], max_length: int | None) -> list[list[int]]:
    if not texts:
        return []
    return _encode(tokenizer, texts, max_length)["input_ids"]


def _encode(tokenizer: Any, texts: list[str], max_length: int | None, offsets: bool = False) -> Any:
    """The tokenizer's encoding of ``texts`` as BERTScore takes them (with the token offsets
    where ``offsets``)."""
    extra = {"return_offsets_mapping": True} if offsets else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "sequence longer than the model" when untruncated
        return tokenizer(
            texts,
            add_special_tokens=True,
            truncation=max_length is not None,
            max_length=max_length,
            return_attention_mask=False,
            return_token_type_ids=False,
            verbose=False,
            **extra,
        )


def _last_whitespace(text: str, end: int) -> int:
    """Index of the last whitespace character in the 4 KiB of ``text`` before ``end``, or -1."""
    start = max(0, end - 4096)
    return max(text.rfind(c, start, end) for c in " \t\n\r\f\v\xa0\u3000")


@contextlib.contextmanager
def _autocast_off(device: torch.device) -> Iterator[None]:
    """Run the model in its own dtype, whatever autocast state the caller has set."""
    if device.type in ("cuda", "cpu"):
        with torch.autocast(device_type=device.type, enabled=False):
            yield
    else:
        yield
