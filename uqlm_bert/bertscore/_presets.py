"""Presets: a model at its measured layer, named by one word (``model_type="accurate"``).

=============  ==========================================  =====  ==========================
preset         model                                       layer  where it comes from
=============  ==========================================  =====  ==========================
``"fast"``     sentence-transformers/all-MiniLM-L6-v2      5      shipped in the package
``"accurate"`` sentence-transformers/all-mpnet-base-v2     11     the Hugging Face cache, or
                                                                  downloaded on first use
=============  ==========================================  =====  ==========================

A preset is a value of ``model_type`` wherever a model is named (``BlackBoxUQ``, the scorers,
``BERTScorer``, the command's ``--model-type``). It selects the model; everything else follows
from the model as for any model: its layer from the known-models table
(:data:`~uqlm_bert.bertscore._known_models.MODEL_LAYERS`, measured by ``benchmarks/eval_layers.py``),
its fixed idf table (shipped for both tokenizers) with ``idf="auto"``, the scorers' dtype.
Explicit settings (``num_layers=...``) still win.

The accurate model (110M parameters, about 440 MB) is not shipped. It is looked up in the
Hugging Face cache under its hub name first, so a copy downloaded once (by a run online, or by
``huggingface-cli download sentence-transformers/all-mpnet-base-v2``) serves every later run,
offline too. Where it is not cached, it is downloaded, unless Hugging Face's offline mode is on
(``HF_HUB_OFFLINE=1``): then, or when the download fails, :class:`ModelUnavailableError` says how
to provide a copy. A local directory holding a copy can also be given as ``model_type`` itself:
named ``all-mpnet-base-v2`` (or a snapshot of the Hugging Face cache), it keeps the preset's
layer.

A name that is a preset always means the preset: a local directory called ``accurate`` is
``model_type="./accurate"``.

Example:
    >>> PRESETS["accurate"].model
    'sentence-transformers/all-mpnet-base-v2'
    >>> from uqlm_bert.bertscore._resolve import resolve_model
    >>> resolve_model("fast")[0]
    'sentence-transformers/all-MiniLM-L6-v2'
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from uqlm_bert._exceptions import ModelUnavailableError
from uqlm_bert.bertscore._known_models import ACCURATE_MODEL_NAME, EMBEDDED_MODEL_NAME, MODEL_LAYERS

__all__ = ["PRESETS", "Preset", "cached_copy", "preset_location"]

# What a copy needs: config, weights, tokenizer (no other framework's weights, no ONNX).
_FILES = (
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
)
_TRUE = {"1", "ON", "YES", "TRUE"}


@dataclass(frozen=True)
class Preset:
    """A named choice of model.

    Attributes:
        name: the word given as ``model_type``.
        model: the model's hub name (a key of the known-models table).
        summary: what it is for, in a phrase.
    """

    name: str
    model: str
    summary: str

    @property
    def layer(self) -> int:
        """The model's measured default layer."""
        return MODEL_LAYERS[self.model]


#: The presets by name.
PRESETS: dict[str, Preset] = {
    "fast": Preset("fast", EMBEDDED_MODEL_NAME, "the embedded 22M-parameter encoder; the default"),
    "accurate": Preset(
        "accurate",
        ACCURATE_MODEL_NAME,
        "a 110M-parameter encoder: better hallucination detection at several times the CPU "
        "time (docs/bertscore.md, Presets)",
    ),
}


def preset_location(name: str) -> tuple[str, str]:
    """``(model name, location)`` of a preset whose model is not the embedded one (the
    resolver finds that one in the installed package): what transformers loads, a directory.

    Raises:
        KeyError: ``name`` is not such a preset.
        ModelUnavailableError: the model is neither cached nor could be downloaded.
    """
    preset = PRESETS[name]
    if preset.model == EMBEDDED_MODEL_NAME:
        raise KeyError(f"{name!r} names the embedded model, which is in the installed package")
    local = cached_copy(preset.model)
    if local is not None:
        return preset.model, local
    if _offline():
        raise ModelUnavailableError(
            _how_to(preset, "it is not in the Hugging Face cache and offline mode is on")
        )
    try:
        from huggingface_hub import snapshot_download

        path = snapshot_download(preset.model, allow_patterns=list(_FILES))
    except Exception as exc:  # noqa: BLE001 - the hub's errors are of several libraries' types
        raise ModelUnavailableError(
            _how_to(preset, f"it is not in the Hugging Face cache and the download failed: {exc}")
        ) from exc
    return preset.model, str(path)


def cached_copy(model: str) -> str | None:
    """The directory of ``model``'s copy in the Hugging Face cache (config, weights and
    tokenizer all present), or None.

    Example:
        >>> cached_copy("no-such-owner/no-such-model") is None
        True
    """
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - a dependency of transformers
        return None
    found = [try_to_load_from_cache(model, f) for f in ("config.json", "model.safetensors")]
    if not all(isinstance(f, str) for f in found):
        return None
    folder = Path(found[0]).parent  # type: ignore[arg-type]
    if not any((folder / f).is_file() for f in ("tokenizer.json", "vocab.txt")):
        return None
    return str(folder)


def _offline() -> bool:
    """Whether Hugging Face's offline mode is on (read now, not at import)."""
    return any(
        os.environ.get(v, "").upper() in _TRUE for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def _how_to(preset: Preset, why: str) -> str:
    folder = preset.model.rsplit("/", 1)[-1]
    return (
        f"model_type={preset.name!r} is {preset.model} (layer {preset.layer}), which is not "
        f"on this machine: {why}. Provide a copy: download it once where the Hugging Face hub "
        f"can be reached (`huggingface-cli download {preset.model}`, or any run of the preset "
        "online), which keeps it in the Hugging Face cache for offline runs "
        "(HF_HUB_OFFLINE=1); or give the directory of a copy (config, tokenizer and weights) "
        f"as model_type: named {folder!r}, it keeps the preset's layer. "
        "model_type='fast' is the embedded model, always available."
    )
