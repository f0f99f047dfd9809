"""``cosine_sim``: agreement of the answer with its samples in a sentence-embedding space.

Each text becomes one vector: the mean of the model's last-layer token embeddings over the real
(non-padding) tokens, as sentence-transformers computes it for all-MiniLM-L6-v2 (texts stripped,
the model reading at most its ``max_seq_length``, 256 tokens for that model). A longer text is
read in overlapping windows (:mod:`uqlm_bert.bertscore._windows`) and its vector is the mean over
all its tokens, each token's state the mean over the windows that hold it; with
``long_texts="truncate"`` it is cut at the window, as sentence-transformers does. The
confidence is the mean cosine between the response's vector and each present sample's vector,
mapped from [-1, 1] to [0, 1] as uqlm's normalised cosine similarity does::

    cosine_sim = (1 + mean_j cos(V(response), V(sample_j))) / 2

Every distinct text is embedded once, across all responses, through the engine's one batching
function (:func:`~uqlm_bert.bertscore._batching.embed_texts`): length-sorted batches, windows
where the reading plan says so, and a batch that runs out of device memory split in halves.

Example:
    >>> from uqlm_bert.scorers._cosine import CosineSimScorer
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

from uqlm_bert._exceptions import ConfigurationError
from uqlm_bert._inputs import text_list
from uqlm_bert.bertscore._batching import embed_texts
from uqlm_bert.bertscore._encoder import Encoder
from uqlm_bert.bertscore._loading import load_encoder, resolve_model
from uqlm_bert.bertscore._packed_forward import to_device
from uqlm_bert.scorers._base import Pairs, PairwiseScorer
from uqlm_bert.scorers._settings import CosineSettings

__all__ = ["CosineSimScorer", "cosine_to_confidence"]

DEFAULT_BATCH_SIZE = CosineSettings.batch_size

# Texts are embedded in groups of at most this many tokens, each group's token states reduced
# to its texts' vectors before the next: memory stays bounded however many texts a call has.
_GROUP_TOKENS = 1 << 17


class CosineSimScorer(PairwiseScorer):
    """Mean cosine similarity of sentence embeddings, response against each sample, in [0, 1].

    The model comes from the package's one model cache (see
    :mod:`uqlm_bert.bertscore._loading`), shared with the BERTScore engine; it loads on first use.

    Its settings are kept as one frozen :class:`~uqlm_bert.scorers._settings.CosineSettings`
    (:attr:`settings`).

    Args:
        model_type: a Hugging Face name or local directory of a sentence-embedding model;
            ``None`` (default) is the embedded all-MiniLM-L6-v2, loaded offline.
        device: ``None`` picks cuda, then mps, then cpu.
        dtype: ``"auto"`` (the default: the fastest safe dtype for the device, see
            :func:`~uqlm_bert.bertscore._resolve.auto_dtype`), "float32" (exact), "bfloat16" or
            "float16".
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
        ids = enc.tokenize(texts)  # up to the reading plan's token limit
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        out = np.zeros((len(ids), enc.hidden_size))
        size, hidden = self.batch_size, not show_progress_bars
        with tqdm(total=len(ids), desc="cosine_sim", unit="text", delay=1.0, disable=hidden) as bar:
            for group in _groups([len(ids[i]) for i in order]):
                idx = [order[k] for k in group]
                seqs = [ids[i] for i in idx]
                # at most batch_size texts, and no more padded tokens than batch_size texts
                # that fit the window: long texts (read in windows) come fewer to a batch
                states = embed_texts(
                    enc, seqs, size, size * enc.max_length, bar.update, normalize=False
                )
                out[idx] = _token_means(torch.cat(states), [len(s) for s in seqs])
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


def _groups(lengths: list[int]) -> list[range]:
    """Consecutive groups of texts of these lengths, each of at most ``_GROUP_TOKENS`` tokens
    (a longer text alone)."""
    groups: list[range] = []
    start, tokens = 0, 0
    for k, n in enumerate(lengths):
        if k > start and tokens + n > _GROUP_TOKENS:
            groups.append(range(start, k))
            start, tokens = k, 0
        tokens += n
    if start < len(lengths):
        groups.append(range(start, len(lengths)))
    return groups


def _token_means(rows: torch.Tensor, lengths: list[int]) -> np.ndarray:
    """``[texts, dim]`` float64: each text's mean over its rows (``rows`` holds every text's
    rows, text after text)."""
    owner = np.repeat(np.arange(len(lengths)), lengths)
    sums = rows.new_zeros((len(lengths), rows.shape[1]), dtype=torch.float64)
    sums.index_add_(0, to_device(torch.from_numpy(owner), rows.device), rows.double())
    return sums.cpu().numpy() / np.asarray(lengths, dtype=np.float64)[:, None]


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
