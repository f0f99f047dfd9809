"""``cosine_sim``: agreement of the answer with its samples in a sentence-embedding space.

Each text becomes one vector: the mean of the model's last-layer token embeddings over the real
(non-padding) tokens, as sentence-transformers computes it for all-MiniLM-L6-v2 (texts stripped,
the model reading at most its ``max_seq_length``, 256 tokens for that model). A longer text is
read in overlapping windows (:mod:`uqlm_bert.bertscore.windows`) and its vector is the mean over
all its tokens, each token's state the mean over the windows that hold it; with
``long_texts="truncate"`` it is cut at the window, as sentence-transformers does. The confidence is the
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

from uqlm_bert.bertscore.batching import plan_batches
from uqlm_bert.bertscore.encoder import Encoder
from uqlm_bert.bertscore.models import load_encoder, resolve_model
from uqlm_bert.bertscore.windows import MAX_TOKENS, Frame, embed_in_windows
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
        max_length: the most tokens the model reads at once; ``None`` for the model's
            ``max_seq_length`` (from its sentence-transformers config) or else its maximum.
        long_texts: ``"window"`` reads a longer text in overlapping windows and averages over
            all its tokens; ``"truncate"`` cuts it at ``max_length``, as sentence-transformers
            does.

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
        long_texts: str = "window",
    ) -> None:
        self._setup(CosineSettings(model_type, device, dtype, batch_size, max_length, long_texts))

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
        self._frame: Frame | None = None

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
            if self.settings.long_texts == "window":
                self._frame = Frame.of(self._encoder.tokenizer, self._encoder.max_length)
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
        frame = self._frame
        ids = enc.tokenize(texts, MAX_TOKENS if frame is not None else None)
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        rows: dict[int, np.ndarray] = {}
        # at most batch_size texts, and no more padded tokens than batch_size texts that fit
        # the window: long texts (read in windows) come fewer to a batch
        size = self.batch_size
        batches = plan_batches([len(ids[i]) for i in order], size, size * enc.max_length)
        with enc.reuse_workspace():
            for start, stop in tqdm(batches, desc="cosine_sim", disable=not show_progress_bars):
                idx = order[start:stop]
                batch = [ids[i] for i in idx]
                if frame is None:
                    states = enc.hidden_states(batch)
                else:  # a long text's windows, stitched: one state per token
                    states = embed_in_windows(batch, frame, self._states, normalize=False)
                for i, text_states in zip(idx, states, strict=True):
                    rows[i] = text_states.mean(dim=0).double().cpu().numpy()  # over its tokens
        out = (
            np.stack([rows[i] for i in range(len(ids))]) if rows else np.zeros((0, enc.hidden_size))
        )
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1.0)

    def _states(self, seqs: list[np.ndarray]) -> list[torch.Tensor]:
        """Hidden states of sequences, ``batch_size`` per forward pass."""
        enc, size = self.encoder, self.batch_size
        return [h for b in range(0, len(seqs), size) for h in enc.hidden_states(seqs[b : b + size])]

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
