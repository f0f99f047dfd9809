"""Loading models and tokenizers for a settings object, through the one cache.

:func:`load_encoder` is where BERTScore settings end up: it takes the settings object whole (a
:class:`~uqlm_bert.BERTScoreSettings`, or the ``cosine_sim`` scorer's settings), resolves the
model, device and dtype (:mod:`~uqlm_bert.bertscore.resolve`), loads the model once per
``(model, layer, device, dtype)`` (:mod:`~uqlm_bert.bertscore.cache`), truncates it to the layer
(:mod:`~uqlm_bert.bertscore.layer_stack`, where ``num_layers`` is checked against the model)
and pairs it with its tokenizer and length limit.

Example:
    >>> from uqlm_bert.bertscore.settings import BERTScoreSettings
    >>> load_encoder(BERTScoreSettings(num_layers=5, device="cpu")).num_layers
    5
    >>> tok = load_tokenizer(None)
    >>> tok.convert_ids_to_tokens(tok("Hello world")["input_ids"])
    ['[CLS]', 'hello', 'world', '[SEP]']
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from uqlm_bert._warn import warn_user
from uqlm_bert.bertscore.cache import MODELS, TOKENIZERS, clear_model_cache
from uqlm_bert.bertscore.encoder import Encoder
from uqlm_bert.bertscore.layer_stack import config_layers, count_layers, truncate_layers
from uqlm_bert.bertscore.packed import PackedEncoder
from uqlm_bert.bertscore.resolve import (
    default_num_layers,
    resolve_device,
    resolve_dtype,
    resolve_model,
)
from uqlm_bert.bertscore.settings import BERTScoreSettings, ModelSettings
from uqlm_bert.checks import check_int
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

# Above this, a tokenizer's model_max_length is transformers' "unset" sentinel (about 1e30).
_UNSET_MAX_LENGTH = 1_000_000


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


def load_encoder(
    settings: ModelSettings | str | os.PathLike[str] | None = None,
    *args: Any,
    all_layers: bool = False,
    prefix_space: bool | None = None,
    max_length_default: int | None = None,
    **kwargs: Any,
) -> Encoder:
    """An :class:`Encoder` (tokenizer and cached model) for ``settings``.

    Args:
        settings: the settings, as built (and checked) by their entry point: a
            :class:`~uqlm_bert.BERTScoreSettings`, or any object with its ``model_type``,
            ``num_layers``, ``lang``, ``device``, ``dtype``, ``max_length`` and
            ``trust_remote_code``. ``None`` is ``BERTScoreSettings()``. (A model name here,
            with those settings as further arguments, is the older form: deprecated.)
        all_layers: keep every layer (the settings' ``num_layers`` must then be None): what
            sentence embeddings and baseline computation use.
        prefix_space: see :func:`load_tokenizer`.
        max_length_default: the limit when ``max_length`` is None (sentence-transformers'
            ``max_seq_length``, say), if lower than the model's maximum.

    Raises:
        ModelLoadError: the model or tokenizer cannot be loaded.
        ConfigurationError: a setting does not fit the model or this machine (layer out of
            range, max_length too long, no CUDA, ...).

    Example:
        >>> enc = load_encoder(BERTScoreSettings(num_layers=6, device="cpu"))
        >>> [enc.tokenizer.convert_ids_to_tokens(i) for i in enc.tokenize(["Hello world"])]
        [['[CLS]', 'hello', 'world', '[SEP]']]
    """
    settings = _settings(settings, args, kwargs, "load_encoder")
    check_int("max_length_default", max_length_default, 2, none_ok=True)
    loaded = load_model(settings, all_layers=all_layers)
    tokenizer = load_tokenizer(
        loaded.location, trust_remote_code=settings.trust_remote_code, prefix_space=prefix_space
    )
    limit = _max_length(tokenizer, loaded.config, settings.max_length, max_length_default)
    float32 = None
    if loaded.dtype != torch.float32 and dataclasses.is_dataclass(settings):

        def float32() -> LoadedModel:  # the same model in float32, when first needed
            exact = dataclasses.replace(settings, dtype="float32")  # type: ignore[type-var]
            return load_model(exact, all_layers=all_layers)

    return Encoder(loaded, tokenizer, limit, float32)


def load_model(
    settings: ModelSettings | str | os.PathLike[str] | None = None,
    *args: Any,
    all_layers: bool = False,
    **kwargs: Any,
) -> LoadedModel:
    """Load (or reuse) the model of ``settings``, truncated to its layer, on its device and dtype.

    Args:
        settings: see :func:`load_encoder`.
        all_layers: keep every layer (``num_layers`` must then be None).

    Raises:
        ModelLoadError: the model cannot be loaded.
        ConfigurationError: a setting does not fit the model or this machine.
    """
    settings = _settings(settings, args, kwargs, "load_model")
    name, location = resolve_model(settings.model_type, settings.lang)
    dev = resolve_device(settings.device)
    remote = settings.trust_remote_code
    config = _load_config(location, remote)
    dtype = resolve_dtype(settings.dtype, dev, config)
    if all_layers:
        layers = config_layers(config)
    elif settings.num_layers is not None:
        layers = settings.num_layers
    else:
        layers = default_num_layers(name, config_layers(config))
    return MODELS.get(
        (location, layers, str(dev), dtype, remote),
        lambda: _load_model(name, location, config, layers, dev, dtype, remote),
    )


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
        lang: see :func:`~uqlm_bert.bertscore.resolve.resolve_model`.
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
    return TOKENIZERS.get(
        (location, prefix_space, trust_remote_code),
        lambda: _load_tokenizer(location, trust_remote_code, prefix_space),
    )


def load_token_limit(
    settings: ModelSettings | str | os.PathLike[str] | None = None,
    max_length: int | None = None,
    *,
    lang: str = "en",
    trust_remote_code: bool = False,
) -> tuple[Any, int]:
    """The tokenizer and the token limit the engine would use, without loading the weights.

    Args:
        settings: the settings (see :func:`load_encoder`); or a model name, with
            ``max_length``, ``lang`` and ``trust_remote_code`` beside it, which are then checked
            as ``BERTScoreSettings`` checks them.

    Example:
        >>> tokenizer, limit = load_token_limit(BERTScoreSettings(max_length=64))
        >>> limit
        64
    """
    if settings is None or isinstance(settings, (str, os.PathLike)):
        settings = BERTScoreSettings(
            model_type=settings,
            max_length=max_length,
            lang=lang,
            trust_remote_code=trust_remote_code,
        )
    elif max_length is not None or lang != "en" or trust_remote_code:
        raise TypeError("load_token_limit() takes a settings object or the separate settings")
    _, location = resolve_model(settings.model_type, settings.lang)
    tokenizer = load_tokenizer(location, trust_remote_code=settings.trust_remote_code)
    config = _load_config(location, settings.trust_remote_code)
    return tokenizer, _max_length(tokenizer, config, settings.max_length, None)


# -- the older call form --------------------------------------------------------------------------

_OLD_ARGS = ("num_layers", "device", "dtype", "max_length", "trust_remote_code")


def _settings(
    settings: Any, args: tuple[Any, ...], kwargs: dict[str, Any], function: str
) -> ModelSettings:
    """The settings object of a call, also from the older form ``f(model_type, num_layers,
    device, dtype, ...)``, which builds (and checks) a ``BERTScoreSettings`` with a warning."""
    if not args and not kwargs and not isinstance(settings, (str, os.PathLike)):
        return BERTScoreSettings() if settings is None else settings
    positional = _OLD_ARGS[: 3 if function == "load_model" else 5]
    if len(args) > len(positional):
        raise TypeError(f"{function}() takes a settings object and keyword arguments")
    given = dict(zip(positional, args, strict=False))
    unknown = set(kwargs) - {*_OLD_ARGS, "lang"}
    if unknown or given.keys() & kwargs.keys():
        raise TypeError(f"{function}() got unexpected arguments: {sorted(unknown or kwargs)}")
    warn_user(
        f"{function}(model_type, num_layers=..., ...) is deprecated; pass the settings whole: "
        f"{function}(BERTScoreSettings(model_type=..., num_layers=..., ...))",
        DeprecationWarning,
    )
    return BERTScoreSettings(model_type=settings, **given, **kwargs)


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
        num_layers = count_layers(model) or 0
    else:
        truncate_layers(model, num_layers, name)
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
    """The token limit: ``max_length`` (checked against the model's window, the one place it
    can be), else ``default`` or the model's maximum."""
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
