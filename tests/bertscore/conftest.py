"""Where the tests of the accurate preset find its model: not shipped, so they skip without it.

A local copy of sentence-transformers/all-mpnet-base-v2 (config, tokenizer and weights) is found
through ``$UQLM_BERT_ACCURATE_MODEL_DIR`` (its directory, named ``all-mpnet-base-v2`` as the
model's folder, so that the model is recognised by its path), else in the Hugging Face cache
under its hub name.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ACCURATE_MODEL_ENV = "UQLM_BERT_ACCURATE_MODEL_DIR"


@pytest.fixture(scope="session")
def accurate_model_dir() -> str:
    """The directory of a local copy of the accurate preset's model; skips when there is none."""
    from uqlm_bert.bertscore._known_models import ACCURATE_MODEL_NAME, known_name
    from uqlm_bert.bertscore._presets import cached_copy

    given = os.environ.get(ACCURATE_MODEL_ENV)
    if given:
        if not (Path(given) / "config.json").is_file():
            pytest.skip(f"{ACCURATE_MODEL_ENV}={given} holds no model (no config.json there)")
        if known_name(given) != ACCURATE_MODEL_NAME:
            pytest.skip(f"{ACCURATE_MODEL_ENV}={given}: name the directory all-mpnet-base-v2")
        return given
    cached = cached_copy(ACCURATE_MODEL_NAME)
    if cached is None:
        pytest.skip(
            f"{ACCURATE_MODEL_NAME} is not on this machine: set {ACCURATE_MODEL_ENV} to the "
            "directory of a local copy, or put it in the Hugging Face cache"
        )
    return cached


@pytest.fixture
def overflow_in_bfloat16(monkeypatch):
    """Call it with one text's token ids: from then on, that text's embeddings in bfloat16 are
    ``inf`` (an overflow), and every other text's, and every float32 pass, are the model's."""
    import torch

    from uqlm_bert.bertscore._encoder import Encoder

    real = Encoder.embed_packed

    def poison(ids) -> None:
        poisoned = tuple(ids)

        def overflowing(self, batch, normalize=True):
            out = real(self, batch, normalize)
            if self.dtype == torch.bfloat16:
                start = 0
                for text_ids in batch:
                    if tuple(text_ids) == poisoned:
                        out[start : start + len(text_ids)] = float("inf")
                    start += len(text_ids)
            return out

        monkeypatch.setattr(Encoder, "embed_packed", overflowing)

    return poison
