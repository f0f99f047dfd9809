"""Loading models and tokenizers for a settings object, through the one cache.

:func:`load_encoder` is where BERTScore settings end up: it takes the settings object whole (a
:class:`~uqlm_bert.BERTScoreSettings`, or the ``cosine_sim`` scorer's settings), has the
resolver (:mod:`~uqlm_bert.bertscore._resolve`) turn them into the model's name and location and
into its plans (how it runs, how texts reach it), loads the model once per
``(model, layer, device, dtype)`` (:mod:`~uqlm_bert.bertscore._cache`), truncates it to the layer
(:mod:`~uqlm_bert.bertscore._layer_truncation`, where ``num_layers`` is checked against the model)
and pairs it with its tokenizer and those plans.

Example:
    >>> from uqlm_bert.bertscore._settings import BERTScoreSettings
    >>> load_encoder(BERTScoreSettings(num_layers=5, device="cpu")).num_layers
    5
    >>> tok = load_tokenizer(None)
    >>> tok.convert_ids_to_tokens(tok("Hello world")["input_ids"])
    ['[CLS]', 'hello', 'world', '[SEP]']
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from uqlm_bert._checks import check_int
from uqlm_bert._exceptions import ModelLoadError
from uqlm_bert.bertscore._cache import MODELS, TOKENIZERS, clear_model_cache
from uqlm_bert.bertscore._encoder import Encoder, LoadedModel
from uqlm_bert.bertscore._layer_truncation import config_layers, count_layers, truncate_layers
from uqlm_bert.bertscore._packed_forward import PackedEncoder
from uqlm_bert.bertscore._resolve import (
    ComputePlan,
    default_num_layers,
    plan_compute,
    plan_reading,
    resolve_device,
    resolve_dtype,
    resolve_model,
)
from uqlm_bert.bertscore._settings import BERTScoreSettings, ModelSettings

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


def load_encoder(
    settings: ModelSettings | None = None,
    *,
    all_layers: bool = False,
    prefix_space: bool | None = None,
    max_length_default: int | None = None,
) -> Encoder:
    """An :class:`Encoder` (tokenizer, cached model and their plans) for ``settings``.

    Args:
        settings: the settings, as built (and checked) by their entry point: a
            :class:`~uqlm_bert.BERTScoreSettings`, or any object with its ``model_type``,
            ``num_layers``, ``lang``, ``device``, ``dtype``, ``max_length``,
            ``trust_remote_code`` and ``long_texts``. ``None`` is ``BERTScoreSettings()``;
            what is left unset is read as ``BERTScorer``'s defaults.
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
    settings = BERTScoreSettings() if settings is None else settings
    check_int("max_length_default", max_length_default, 2, none_ok=True)
    found = _Found(settings, all_layers)
    compute = plan_compute(settings, found.config)
    tokenizer = load_tokenizer(
        found.location, trust_remote_code=settings.trust_remote_code, prefix_space=prefix_space
    )
    reading = plan_reading(settings, tokenizer, found.config, max_length_default)
    float32 = None
    if compute.dtype != torch.float32:  # the same model in float32, when first needed
        float32 = functools.partial(_cached_model, found, compute.in_float32())
    return Encoder(_cached_model(found, compute), tokenizer, reading, float32)


def load_model(settings: ModelSettings | None = None, *, all_layers: bool = False) -> LoadedModel:
    """Load (or reuse) the model of ``settings``, truncated to its layer, on its device and dtype.

    Args:
        settings: see :func:`load_encoder`.
        all_layers: keep every layer (``num_layers`` must then be None).

    Raises:
        ModelLoadError: the model cannot be loaded.
        ConfigurationError: a setting does not fit the model or this machine.
    """
    settings = BERTScoreSettings() if settings is None else settings
    found = _Found(settings, all_layers)
    return _cached_model(found, plan_compute(settings, found.config))


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
        lang: see :func:`~uqlm_bert.bertscore._resolve.resolve_model`.
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


def load_token_limit(settings: ModelSettings) -> tuple[Any, int]:
    """The tokenizer, and the most tokens of one text the engine scores with ``settings``
    (:attr:`~uqlm_bert.bertscore._resolve.ReadingPlan.token_limit`), without loading the
    weights or choosing a device: what computing idf over the texts of a run needs.

    Example:
        >>> tokenizer, limit = load_token_limit(BERTScoreSettings(max_length=64))
        >>> limit, load_token_limit(BERTScoreSettings(long_texts="window"))[1]
        (64, 32768)
    """
    _, location = resolve_model(settings.model_type, settings.lang)
    tokenizer = load_tokenizer(location, trust_remote_code=settings.trust_remote_code)
    config = _load_config(location, settings.trust_remote_code)
    return tokenizer, plan_reading(settings, tokenizer, config).token_limit


class _Found:
    """A settings object's model, found but not loaded: its name and location, its config and
    the number of layers kept (None: every layer, of a model whose config does not count
    them)."""

    def __init__(self, settings: ModelSettings, all_layers: bool) -> None:
        self.name, self.location = resolve_model(settings.model_type, settings.lang)
        self.trust_remote_code = settings.trust_remote_code
        self.config = _load_config(self.location, self.trust_remote_code)
        if all_layers:
            self.layers = config_layers(self.config)
        elif settings.num_layers is not None:
            self.layers = settings.num_layers
        else:
            self.layers = default_num_layers(self.name, config_layers(self.config))


def _cached_model(found: _Found, compute: ComputePlan) -> LoadedModel:
    """The model ``found`` names, run as ``compute`` says: from the cache, or loaded into it."""
    key = (
        found.location,
        found.layers,
        str(compute.device),
        compute.dtype,
        found.trust_remote_code,
    )
    return MODELS.get(key, lambda: _load_model(found, compute))


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


def _load_model(found: _Found, compute: ComputePlan) -> LoadedModel:
    from transformers import AutoModel

    name, location, config = found.name, found.location, found.config
    common = {"trust_remote_code": found.trust_remote_code, **_local_only(location)}
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
    num_layers = found.layers
    if num_layers is None:  # every layer, of a model whose config does not count them
        num_layers = count_layers(model) or 0
    else:
        truncate_layers(model, num_layers, name)
    model.to(device=compute.device, dtype=compute.dtype)
    for p in model.parameters():
        p.requires_grad_(False)
    logger.debug(
        "loaded %s (layer %d) on %s as %s", location, num_layers, compute.device, compute.dtype
    )
    return LoadedModel(
        name=name,
        location=location,
        model=model,
        config=config,
        num_layers=num_layers,
        compute=compute,
        packed=PackedEncoder.from_model(model, round_rows=compute.round_rows),
    )


def _wants_prefix_space(tokenizer: object) -> bool:
    """RoBERTa and GPT-2 style byte-level BPE tokenizers get a leading space, as in the reference."""
    names = {cls.__name__ for cls in type(tokenizer).__mro__}
    return bool(
        names & {"GPT2Tokenizer", "RobertaTokenizer", "GPT2TokenizerFast", "RobertaTokenizerFast"}
    )


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
