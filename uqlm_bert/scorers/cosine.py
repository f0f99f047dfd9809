"""``cosine_sim``: agreement of the answer with its samples in a sentence-embedding space.

Each text becomes one vector: the mean of the model's last-layer token embeddings over the real
(non-padding) tokens, as sentence-transformers computes it for all-MiniLM-L6-v2 (texts stripped,
truncated at the model's ``max_seq_length``, 256 tokens for that model). The confidence is the
mean cosine between the response's vector and each present sample's vector, mapped from [-1, 1]
to [0, 1] as uqlm's normalised cosine similarity does::

    cosine_sim = (1 + mean_j cos(V(response), V(sample_j))) / 2

Every distinct text is embedded once, in length-sorted batches, across all responses.

Example:
    >>> from uqlm_bert.scorers.cosine import CosineSimScorer
    >>> scorer = CosineSimScorer(device="cpu")
    >>> conf = scorer.score(["Paris is the capital of France."],
    ...                     [["The capital of France is Paris.", None]])
    >>> bool(0.9 < conf[0] <= 1.0)
    True
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from uqlm_bert.bertscore.encoder import resolve_device, resolve_dtype, resolve_model
from uqlm_bert.exceptions import ConfigurationError, ModelLoadError
from uqlm_bert.scorers.base import Scorer, mean_by_group, present_pairs, register_scorer

__all__ = ["CosineSimScorer", "cosine_to_confidence", "mean_pool"]

logger = logging.getLogger("uqlm_bert")

DEFAULT_BATCH_SIZE = 64


class CosineSimScorer(Scorer):
    """Mean cosine similarity of sentence embeddings, response against each sample, in [0, 1].

    The model loads on first use and is shared by every scorer with the same model, device and
    dtype.

    Args:
        model_type: a Hugging Face name or local directory of a sentence-embedding model;
            ``None`` (default) is the embedded all-MiniLM-L6-v2, loaded offline.
        device: ``None`` picks cuda, then mps, then cpu.
        dtype: ``None``/"float32" (exact), "bfloat16" or "float16".
        batch_size: texts per forward pass.
        max_length: truncate texts to this many tokens; ``None`` for the model's
            ``max_seq_length`` (from its sentence-transformers config) or else its maximum.

    Example:
        >>> scorer = CosineSimScorer(device="cpu")
        >>> vecs = scorer.embed(["a cat", "a cat"])
        >>> vecs.shape, round(float(vecs[0] @ vecs[1]), 5)
        ((2, 384), 1.0)
    """

    name = "cosine_sim"

    def __init__(
        self,
        model_type: str | os.PathLike[str] | None = None,
        device: str | torch.device | None = None,
        dtype: str | torch.dtype | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_length: int | None = None,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigurationError(f"batch_size must be a positive int, got {batch_size!r}")
        if max_length is not None and (
            isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 2
        ):
            raise ConfigurationError(f"max_length must be an int >= 2, got {max_length!r}")
        _, self._location = resolve_model(model_type)
        self.device = resolve_device(device)
        self.dtype = resolve_dtype(dtype, self.device)
        self.batch_size = batch_size
        self._max_length = max_length

    def embed(self, texts: Sequence[str], show_progress_bars: bool = False) -> np.ndarray:
        """Unit-length float64 sentence embeddings, one row per text (each text stripped)."""
        model = _load(self._location, self.device, self.dtype)
        limit = self._max_length or model.max_length
        stripped = [t.strip() for t in texts]
        order = sorted(range(len(stripped)), key=lambda i: -len(stripped[i]))
        out = np.zeros((len(stripped), model.dim), dtype=np.float64)
        starts = range(0, len(order), self.batch_size)
        for start in tqdm(starts, desc="cosine_sim", disable=not show_progress_bars):
            idx = order[start : start + self.batch_size]
            batch = model.tokenizer(
                [stripped[i] for i in idx],
                padding=True,
                truncation=True,
                max_length=limit,
                return_tensors="pt",
            ).to(self.device)
            with torch.inference_mode():
                hidden = model.model(**batch).last_hidden_state
            pooled = mean_pool(hidden.float(), batch["attention_mask"])
            out[idx] = pooled.double().cpu().numpy()
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1.0)

    def score(
        self,
        responses: Sequence[str | None],
        sampled_responses: Sequence[Sequence[str | None]],
        show_progress_bars: bool = False,
    ) -> np.ndarray:
        """One confidence per response in [0, 1]; NaN where the response or every sample is missing."""
        group, cands, refs = present_pairs(responses, sampled_responses)
        if not cands:
            return np.full(len(responses), np.nan)
        unique = list(dict.fromkeys(cands + refs))
        row = {t: i for i, t in enumerate(unique)}
        vecs = self.embed(unique, show_progress_bars=show_progress_bars)
        a = vecs[[row[c] for c in cands]]
        b = vecs[[row[r] for r in refs]]
        cos = np.einsum("ij,ij->i", a, b)
        return cosine_to_confidence(mean_by_group(cos, group, len(responses)))


def _make_cosine_sim(**kwargs: Any) -> CosineSimScorer:
    wanted = ("model_type", "device", "dtype", "batch_size", "max_length")
    return CosineSimScorer(**{k: kwargs[k] for k in wanted if kwargs.get(k) is not None})


register_scorer("cosine_sim", _make_cosine_sim)


class _Loaded:
    """A tokenizer and model in eval mode, with the embedding size and length limit."""

    def __init__(self, tokenizer: Any, model: torch.nn.Module, max_length: int, dim: int) -> None:
        self.tokenizer = tokenizer
        self.model = model
        self.max_length = max_length
        self.dim = dim


_CACHE: dict[tuple[str, str, torch.dtype], _Loaded] = {}
_CACHE_LOCK = threading.Lock()
_CACHE_SIZE = 2


def _load(location: str, device: torch.device, dtype: torch.dtype) -> _Loaded:
    """Load (or reuse) the sentence-embedding model at ``location``."""
    key = (location, str(device), dtype)
    with _CACHE_LOCK:
        if key in _CACHE:
            return _CACHE[key]
        from transformers import AutoModel, AutoTokenizer

        local = Path(location).is_dir()
        try:
            tokenizer = AutoTokenizer.from_pretrained(location, local_files_only=local)
            model = AutoModel.from_pretrained(location, local_files_only=local)
        except (OSError, ValueError, KeyError, ImportError) as exc:
            raise ModelLoadError(
                f"could not load the sentence-embedding model {location!r}: {exc}. Give a "
                "Hugging Face model name that is in the local cache, a local directory, or "
                "model_type=None for the embedded all-MiniLM-L6-v2."
            ) from exc
        model.eval()
        model.to(device=device, dtype=dtype)
        loaded = _Loaded(tokenizer, model, _max_seq_length(location, tokenizer, model), _dim(model))
        logger.debug("loaded sentence-embedding model %s on %s", location, device)
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = loaded
        return loaded


# --------------------------------------------------------------------------- pure functions


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Mean of token vectors over the positions where ``attention_mask`` is 1.

    ``hidden`` is (batch, tokens, dim); the result is (batch, dim). Rows with no tokens give
    zeros, as the 1e-9 floor on the count in sentence-transformers does.

    Example:
        >>> h = torch.tensor([[[1.0, 0.0], [3.0, 2.0], [9.0, 9.0]]])
        >>> mean_pool(h, torch.tensor([[1, 1, 0]])).tolist()
        [[2.0, 1.0]]
    """
    mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)


def cosine_to_confidence(mean_cosine: np.ndarray) -> np.ndarray:
    """Map mean cosines from [-1, 1] to confidences in [0, 1]: ``(1 + c) / 2`` (NaN stays NaN).

    Example:
        >>> cosine_to_confidence(np.array([1.0, 0.0, -1.0])).tolist()
        [1.0, 0.5, 0.0]
    """
    return np.clip((1.0 + np.asarray(mean_cosine, dtype=np.float64)) / 2.0, 0.0, 1.0)


def _max_seq_length(location: str, tokenizer: Any, model: torch.nn.Module) -> int:
    """sentence-transformers' ``max_seq_length`` if the model has one, else the model's limit."""
    config_file = Path(location) / "sentence_bert_config.json"
    if config_file.is_file():
        try:
            value = json.loads(config_file.read_text(encoding="utf-8")).get("max_seq_length")
        except (OSError, ValueError):
            value = None
        if isinstance(value, int) and value > 1:
            return value
    limit = getattr(tokenizer, "model_max_length", None)
    if isinstance(limit, int) and 1 < limit < 1_000_000:
        return limit
    pos = getattr(model.config, "max_position_embeddings", None)
    if isinstance(pos, int) and pos > 1:
        return pos
    raise ConfigurationError(
        f"the model {location!r} does not say how long its inputs may be; pass max_length"
    )


def _dim(model: torch.nn.Module) -> int:
    """The width of the model's hidden states."""
    dim = getattr(model.config, "hidden_size", None) or getattr(model.config, "d_model", None)
    if not isinstance(dim, int):
        raise ModelLoadError("cannot tell the model's hidden size from its config")
    return dim
