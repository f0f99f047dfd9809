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
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from uqlm_bert.bertscore.encoder import Encoder
from uqlm_bert.bertscore.models import load_encoder, resolve_model
from uqlm_bert.exceptions import ConfigurationError
from uqlm_bert.inputs import text_list
from uqlm_bert.scorers.base import Pairs, PairwiseScorer
from uqlm_bert.scorers.settings import CosineSettings

__all__ = ["CosineSimScorer", "cosine_to_confidence"]

DEFAULT_BATCH_SIZE = CosineSettings.batch_size


class CosineSimScorer(PairwiseScorer):
    """Mean cosine similarity of sentence embeddings, response against each sample, in [0, 1].

    The model comes from the package's one model cache (see
    :mod:`uqlm_bert.bertscore.models`), shared with the BERTScore engine; it loads on first use.

    Its settings are kept as one frozen :class:`~uqlm_bert.scorers.settings.CosineSettings`
    (:attr:`settings`).

    Args:
        model_type: a Hugging Face name or local directory of a sentence-embedding model;
            ``None`` (default) is the embedded all-MiniLM-L6-v2, loaded offline.
        device: ``None`` picks cuda, then mps, then cpu.
        dtype: ``"auto"`` (the fastest safe dtype for the device, see
            :func:`~uqlm_bert.bertscore.resolve.auto_dtype`), ``None``/"float32" (exact),
            "bfloat16" or "float16".
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
        dtype: str | torch.dtype | None = CosineSettings.dtype,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_length: int | None = None,
    ) -> None:
        self._setup(CosineSettings(model_type, device, dtype, batch_size, max_length))

    @classmethod
    def from_settings(cls, settings: CosineSettings) -> CosineSimScorer:
        """The scorer for ``settings``, as given (they were checked when built).

        Example:
            >>> CosineSimScorer.from_settings(CosineSettings(batch_size=8)).batch_size
            8
        """
        if not isinstance(settings, CosineSettings):
            raise ConfigurationError(
                f"settings must be a CosineSettings, got {type(settings).__name__}"
            )
        scorer = cls.__new__(cls)
        scorer._setup(settings)
        return scorer

    def _setup(self, settings: CosineSettings) -> None:
        self.settings = settings
        self._encoder: Encoder | None = None

    @property
    def batch_size(self) -> int:
        """Texts per forward pass."""
        return self.settings.batch_size

    @property
    def encoder(self) -> Encoder:
        """The model (every layer) and tokenizer; loaded on first use."""
        if self._encoder is None:
            _, location = resolve_model(self.settings.model_type)
            self._encoder = load_encoder(
                self.settings,
                all_layers=True,
                prefix_space=False,  # tokenized as sentence-transformers does
                max_length_default=_max_seq_length(location),
            )
        return self._encoder

    @property
    def device(self) -> torch.device:
        """Where the model runs."""
        return self.encoder.device

    @property
    def model_dtype(self) -> str:
        """The dtype the model runs in, by name (what ``dtype`` resolved to)."""
        return str(self.encoder.dtype).removeprefix("torch.")

    def embed(self, texts: Sequence[str], show_progress_bars: bool = False) -> np.ndarray:
        """Unit-length float64 sentence embeddings, one row per text (each text stripped)."""
        texts = text_list(texts, "texts", allow_empty=True)
        enc = self.encoder
        ids = enc.tokenize(texts)
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        dim = int(getattr(enc.loaded.config, "hidden_size", 0) or 0)
        rows: dict[int, np.ndarray] = {}
        starts = range(0, len(order), self.batch_size)
        with enc.reuse_workspace():
            for start in tqdm(starts, desc="cosine_sim", disable=not show_progress_bars):
                idx = order[start : start + self.batch_size]
                for i, states in zip(idx, enc.hidden_states([ids[i] for i in idx]), strict=True):
                    rows[i] = states.mean(dim=0).double().cpu().numpy()  # mean over real tokens
        out = np.stack([rows[i] for i in range(len(ids))]) if rows else np.zeros((0, dim))
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1.0)

    def score_pairs(self, pairs: Pairs) -> np.ndarray:
        """Each pair's cosine mapped to [0, 1]; every distinct text is embedded once."""
        unique = list(dict.fromkeys(pairs.cands + pairs.refs))
        row = {t: i for i, t in enumerate(unique)}
        vecs = self.embed(unique, show_progress_bars=pairs.show_progress_bars)
        a = vecs[[row[c] for c in pairs.cands]]
        b = vecs[[row[r] for r in pairs.refs]]
        return cosine_to_confidence(np.einsum("ij,ij->i", a, b))


# --------------------------------------------------------------------------- pure functions


def cosine_to_confidence(mean_cosine: np.ndarray) -> np.ndarray:
    """Map mean cosines from [-1, 1] to confidences in [0, 1]: ``(1 + c) / 2`` (NaN stays NaN).

    Example:
        >>> cosine_to_confidence(np.array([1.0, 0.0, -1.0])).tolist()
        [1.0, 0.5, 0.0]
    """
    return np.clip((1.0 + np.asarray(mean_cosine, dtype=np.float64)) / 2.0, 0.0, 1.0)


def _max_seq_length(location: str) -> int | None:
    """sentence-transformers' ``max_seq_length`` of a local model directory, if it has one."""
    config_file = Path(location) / "sentence_bert_config.json"
    if not config_file.is_file():
        return None
    try:
        value = json.loads(config_file.read_text(encoding="utf-8")).get("max_seq_length")
    except (OSError, ValueError):
        return None
    return value if isinstance(value, int) and value > 1 else None
